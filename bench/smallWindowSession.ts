// One session of many prompts at a small window (agent.contextWindowTokens 8,192, nothing else set), on the real loop
// and the real OpenAI SDK against a server that counts every prompt with o200k and rejects prompt + answer over the
// window: every prompt completes, no request passes the window, and consecutive requests share their prefix (what a
// provider's prompt cache needs) except where a compaction or a working-set cut rewrote it.
// `node dist/bench/smallWindowSession.js [prompts] [window]` prints its figures.
import { mkdirSync, mkdtempSync, renameSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultConfig } from '../agent/agent.js';
import { ContextLimits } from '../agent/contextBudget.js';
import { createToolRegistry, defaultTools } from '../agent/tools/index.js';
import { isSummaryRequest, sessionReader } from '../integrationTests/providerServer/pager.js';
import { ProviderServer, type Recorded } from '../integrationTests/providerServer/server.js';
import { writeBigLog } from '../integrationTests/recoveryScenarios.js';
import { memoryStore } from '../unitTests/helpers.js';
import { promptOnce } from './longSession.js';
import 'harper-agent-openai';

/** Whether `next` repeats every message of `prev` (the request before it) at its start. */
function extendsPrevious(prev: Recorded, next: Recorded): boolean {
  const a = prev.body.messages as unknown[];
  const b = next.body.messages as unknown[];
  return a.length <= b.length && a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]));
}

export async function smallWindowSession(prompts: number, window: number) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'small-window-'));
  const logs = path.join(root, 'log');
  mkdirSync(logs, { recursive: true });
  writeBigLog(root);
  renameSync(path.join(root, 'big.log'), path.join(logs, 'inv.log'));
  const server = await new ProviderServer().start();
  try {
    server.reset();
    server.tokenLimit = window;
    server.responder = sessionReader('logs', 'inv.log', 3);
    const config = { ...defaultConfig(), provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, model: 'llama-bench', maxTurns: 50, contextWindowTokens: window };
    const { store } = memoryStore();
    const deps = { store, tools: createToolRegistry(defaultTools), scopes: { rootPath: root, logs, components: path.join(root, 'components'), config: path.join(root, 'harperdb-config.yaml') }, config: () => config, limits: new ContextLimits() };
    const s = await store.create({ user: 'bench', provider: 'openai', model: config.model });
    let completed = 0;
    for (let i = 1; i <= prompts; i++) {
      await promptOnce(deps, s.session_id, `Go on reading logs/inv.log (${i}).`);
      completed++;
    }
    const turns = server.requests.filter((r) => !isSummaryRequest(r.neutral));
    // A break: a turn request that does not repeat the one before it. Each is explained by a compaction (a summary
    // call came between them) or by a working-set cut (the older request held a result the newer one holds cut).
    let breaks = 0;
    let atCompaction = 0;
    for (let i = 1; i < turns.length; i++) {
      if (extendsPrevious(turns[i - 1]!, turns[i]!)) continue;
      breaks++;
      const between = server.requests.slice(server.requests.indexOf(turns[i - 1]!) + 1, server.requests.indexOf(turns[i]!));
      if (between.some((r) => isSummaryRequest(r.neutral))) atCompaction++;
    }
    const largest = Math.max(...server.requests.map((r) => r.tokens! + r.maxOut!));
    return { prompts, completed, requests: server.requests.length, summaries: server.requests.length - turns.length, rejected: server.requests.filter((r) => r.rejected).length, largestWithAnswer: largest, window, prefixBreaks: breaks, breaksAtCompaction: atCompaction, breaksAtWorkingSetCuts: breaks - atCompaction, turnRequests: turns.length };
  } finally {
    await server.close();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').slice(-2).join('/'))) {
  const started = Date.now();
  const r = await smallWindowSession(Number(process.argv[2] ?? 300), Number(process.argv[3] ?? 8192));
  console.log(JSON.stringify({ ...r, seconds: (Date.now() - started) / 1000 }));
}

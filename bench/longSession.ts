// One session that lives for many prompts, on the real loop and the real OpenAI SDK against the provider-compatible
// server: what compaction keeps a request to at prompt 10, 100 and 1,000. Used by bench/run.ts; run alone with
// `node dist/bench/longSession.js [prompts]` to print its figures.
import { defaultConfig } from '../agent/agent.js';
import { ContextLimits } from '../agent/contextBudget.js';
import { startRun } from '../agent/loop.js';
import { newRunner } from '../agent/runs.js';
import { createToolRegistry, defaultTools } from '../agent/tools/index.js';
import type { Scopes } from '../agent/tools/scopes.js';
import { isSummaryRequest, sessionReader } from '../integrationTests/providerServer/pager.js';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { memoryStore } from '../unitTests/helpers.js';
import 'harper-agent-openai';

/** One prompt on the real loop, as agent_prompt accepts it (the session marked running with the prompt appended), run to
 * its end; throws unless it completed. */
export async function promptOnce(deps: Parameters<typeof startRun>[0], sessionId: string, text: string): Promise<void> {
  const runner = newRunner(null);
  await deps.store.mutate(sessionId, (row) => {
    row.status = 'running';
    row.runner = runner;
    return [{ role: 'user', content: text }];
  });
  await startRun(deps, sessionId, runner).done;
  const h = (await deps.store.header(sessionId))!;
  if (h.status !== 'completed') throw new Error(`${JSON.stringify(text)} ended ${h.status}: ${h.lastError}`);
}

/** One session at a 160 KB server (no window reported), prompt after prompt, each reading three pages of a 1 MB log,
 * on the real loop and the real OpenAI SDK: the largest request of the ten prompts up to each checkpoint, and what
 * the summary calls cost. The default config (the working set on). */
export async function longSession(scopes: Scopes, prompts: number, checkpoints: number[]) {
  const server = await new ProviderServer().start();
  try {
    server.reset([], 160_000);
    server.responder = sessionReader('logs', 'inv.log', 3);
    const config = { ...defaultConfig(), provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, model: 'bench-long', maxTurns: 20 };
    const { store } = memoryStore();
    const deps = { store, tools: createToolRegistry(defaultTools), scopes, config: () => config, limits: new ContextLimits() };
    const s = await store.create({ user: 'bench', provider: 'openai', model: config.model });
    const at = new Map<number, number>();
    const largest: number[] = [];
    for (let i = 1; i <= prompts; i++) {
      const first = server.requests.length;
      await promptOnce(deps, s.session_id, `Go on reading logs/inv.log (${i}).`);
      largest.push(Math.max(...server.requests.slice(first).filter((r) => !isSummaryRequest(r.neutral)).map((r) => r.bytes)));
      // The ten prompts up to a checkpoint: one prompt's figure depends on where it falls between two compactions.
      if (checkpoints.includes(i)) at.set(i, Math.max(...largest.slice(-10)));
    }
    const summaries = server.requests.filter((r) => isSummaryRequest(r.neutral));
    return { at, requests: server.requests.length, summaries: summaries.length, summaryBytes: summaries.reduce((n, r) => n + r.bytes, 0), rejected: server.requests.filter((r) => r.rejected).length };
  } finally {
    await server.close();
  }
}


// Alone: `node dist/bench/longSession.js [prompts]` on a 1 MB log in a temp scope.
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').slice(-2).join('/'))) {
  const { mkdtempSync, mkdirSync, renameSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { writeBigLog } = await import('../integrationTests/recoveryScenarios.js');
  const root = mkdtempSync(path.join(os.tmpdir(), 'long-session-'));
  const logs = path.join(root, 'log');
  mkdirSync(logs, { recursive: true });
  writeBigLog(root);
  renameSync(path.join(root, 'big.log'), path.join(logs, 'inv.log'));
  const prompts = Number(process.argv[2] ?? 100);
  const started = Date.now();
  const checkpoints = [10, 100, 1000].filter((n) => n <= prompts);
  const r = await longSession({ rootPath: root, logs, components: path.join(root, 'components'), config: path.join(root, 'harperdb-config.yaml') }, prompts, checkpoints);
  console.log(JSON.stringify({ ...r, at: Object.fromEntries(r.at), seconds: (Date.now() - started) / 1000 }));
}

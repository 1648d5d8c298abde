// `npm run bench:turn`: the agent's own time per tool turn on a real Harper 4.7.29 (the built component), with a
// provider that answers at once (the provider-compatible server, zero delay) through the real OpenAI SDK, streamed:
// a 1 MiB log read to its end, three times; then once each through Anthropic's and Bedrock's SDKs; then three times at a
// 160 KB window (where the pre-flight fits a budget and compaction runs). A turn's own time is the gap between two stored tool results (their `at`)
// less the provider's time for the model call between them (the call log's latencyMs): what the agent spends
// building, sizing and sending the request, storing and publishing. Prints the medians and writes the `turn` section
// of BENCHMARKS.md. Last, one session a hundred prompts long (1,000 tool turns at a 160 KB window), streamed and not:
// the own time at its tool turns 10, 100 and 1,000.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSummaryRequest, readerResponder, sessionReader } from '../integrationTests/providerServer/pager.js';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { providerSettings } from '../integrationTests/recoveryScenarios.js';
import { freePort, startHarper, type RunningHarper } from '../scripts/harper.js';
import { replaceSection } from './benchmarksFile.js';
import { op } from './storage.js';

const READS = 3;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function writeLog(file: string, bytes: number): void {
  const lines: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const line = `2026-12-07T01:${String(i % 60).padStart(2, '0')}:00Z [http/${i % 4}] [${i % 53 ? 'info' : 'error'}]: GET /api/records/${(i * 7919) % 100000} ${i % 97} ms\n`;
    lines.push(line);
    size += line.length;
  }
  writeFileSync(file, lines.join('').slice(0, bytes));
}

/** One read to the end: each tool turn's own time (ms), and the provider's. */
async function read(h: RunningHarper, file: string): Promise<{ own: number[]; provider: number[] }> {
  const { session_id } = await op(h, { operation: 'agent_prompt', message: `read logs/${file} to its end` });
  let s: any;
  for (;;) {
    s = await op(h, { operation: 'get_agent_session', session_id });
    if (s.status !== 'running') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (s.status !== 'completed') throw new Error(`the read ended ${s.status}: ${s.lastError}`);
  const calls = (await op(h, { operation: 'list_agent_model_calls', session_id })).calls as { at: number; latencyMs: number }[];
  const tools = (s.messages as { role: string; at: number }[]).filter((m) => m.role === 'tool').map((m) => m.at);
  const own: number[] = [];
  const provider: number[] = [];
  for (let i = 1; i < tools.length; i++) {
    // The model call between two results: the one made after the first.
    const call = calls.find((c) => c.at >= tools[i - 1]! && c.at <= tools[i]!);
    if (!call) continue;
    provider.push(call.latencyMs);
    own.push(tools[i]! - tools[i - 1]! - call.latencyMs);
  }
  return { own, provider };
}

/** Waits until no session is running (list_agent_sessions' status index: cheap, where get_agent_session on a long
 * session would size its whole transcript on every poll and take the agent's CPU from the turns being timed). */
async function settled(h: RunningHarper): Promise<void> {
  for (;;) {
    await new Promise((r) => setTimeout(r, 50));
    if ((await op(h, { operation: 'list_agent_sessions', limit: 1, status: 'running' })).sessions.length === 0) return;
  }
}

/** The own time of each tool turn of a session's stored transcript, by the tool turn's number in the session: the gap
 * between two tool results with one assistant message between them, less the provider time of the call between. */
function ownTimes(messages: { role: string; at: number }[], calls: { at: number; latencyMs: number }[]): Map<number, number> {
  const own = new Map<number, number>();
  let turn = 0;
  let c = 0;
  for (let i = 0; i < messages.length; i++) {
    if (messages[i]!.role !== 'tool') continue;
    turn++;
    const before = messages[i - 2];
    if (messages[i - 1]?.role !== 'assistant' || before?.role !== 'tool') continue;
    while (c < calls.length && calls[c]!.at < before.at) c++;
    const call = calls[c];
    if (call && call.at <= messages[i]!.at) own.set(turn, messages[i]!.at - before.at - call.latencyMs);
  }
  return own;
}

/** One session at a 160 KB window (compaction keeps its requests bounded), prompt after prompt of ten pages each until
 * it has made the last checkpoint's tool turns: the median own time of the twenty ending at each checkpoint (turn 10:
 * its nine). */
async function longSession(h: RunningHarper, server: ProviderServer, stream: boolean, checkpoints: number[]): Promise<Map<number, number>> {
  await op(h, { operation: 'set_agent_config', provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, model: 'bench-long', stream, maxTurns: 500, contextWindowTokens: 40_000 });
  server.reset();
  server.responder = sessionReader('logs', 'turn.log', 10);
  const turns = Math.max(...checkpoints);
  let session_id: string | undefined;
  let s: { status: string; lastError: string | null; messages: { role: string; at: number }[] } | undefined;
  for (let i = 1; ; i++) {
    const answer = await op(h, { operation: 'agent_prompt', message: `Go on reading logs/turn.log (${i}).`, ...(session_id ? { session_id } : {}) });
    session_id = answer.session_id;
    await settled(h);
    // The transcript is read every ten prompts only (a prompt makes about ten tool turns).
    if (i % 10 && i * 10 < turns) continue;
    s = await op(h, { operation: 'get_agent_session', session_id });
    if (s!.status !== 'completed') throw new Error(`the long session ended ${s!.status}: ${s!.lastError}`);
    if (s!.messages.filter((m) => m.role === 'tool').length >= turns) break;
  }
  const calls = ((await op(h, { operation: 'list_agent_model_calls', session_id, limit: 10_000 })).calls as { at: number; latencyMs: number }[]).sort((a, b) => a.at - b.at);
  const own = ownTimes(s!.messages, calls);
  return new Map(checkpoints.map((t) => [t, median(Array.from({ length: 20 }, (_, k) => own.get(t - k)).filter((x): x is number => x !== undefined))]));
}

async function main() {
  const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-bench-turn-'));
  const server = await new ProviderServer().start();
  // Bedrock's SDK reads the AWS chain: test credentials, and no instance metadata service.
  const h = await startHarper({ rootPath, httpPort: await freePort(), opsPort: await freePort(), output: `${rootPath}.out`, env: { AWS_ACCESS_KEY_ID: 'bench', AWS_SECRET_ACCESS_KEY: 'bench', AWS_REGION: 'us-east-1', AWS_EC2_METADATA_DISABLED: 'true' } });
  const rows: string[] = ['| read | tool turns | own time per turn (median) | provider time per turn (median) |', '| --- | --- | --- | --- |'];
  const all: number[] = [];
  const windowed: number[] = [];
  const longRows: string[] = [];
  try {
    writeLog(path.join(rootPath, 'log', 'turn.log'), 1024 * 1024);
    await op(h, { operation: 'set_agent_config', provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, model: 'bench-turn', stream: true, maxTurns: 500 });
    const reader = readerResponder('logs', 'turn.log');
    // `node dist/bench/turnTime.js long`: the long session alone (prints, writes nothing).
    const longOnly = process.argv[2] === 'long';
    for (let r = 1; r <= (longOnly ? 0 : READS); r++) {
      server.reset();
      server.responder = reader;
      const { own, provider } = await read(h, 'turn.log');
      all.push(...own);
      rows.push(`| ${r} | ${own.length} | ${median(own).toFixed(1)} ms | ${median(provider).toFixed(1)} ms |`);
      console.log(rows.at(-1));
    }
    // Through Anthropic's and Bedrock's SDKs, streamed, one read each.
    for (const provider of longOnly ? [] : (['anthropic', 'bedrock'] as const)) {
      await op(h, { operation: 'set_agent_config', ...providerSettings(provider, server), model: `bench-turn-${provider}`, stream: true, maxTurns: 500 });
      server.reset();
      server.responder = reader;
      const { own, provider: theirs } = await read(h, 'turn.log');
      rows.push(`| ${provider} | ${own.length} | ${median(own).toFixed(1)} ms | ${median(theirs).toFixed(1)} ms |`);
      console.log(rows.at(-1));
    }
    await op(h, { operation: 'set_agent_config', provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', model: 'bench-turn' });
    // At a 160 KB window (40,000 tokens): the pre-flight has a budget to fit, and compaction is due now and then
    // (its summary calls answered at once; their turns are not tool turns and are not timed).
    await op(h, { operation: 'set_agent_config', contextWindowTokens: 40_000 });
    for (let r = 1; r <= (longOnly ? 0 : READS); r++) {
      server.reset();
      server.responder = (req) => (isSummaryRequest(req) ? { text: 'Reading logs/turn.log; nothing wrong so far.' } : reader(req));
      const { own, provider } = await read(h, 'turn.log');
      windowed.push(...own);
      rows.push(`| ${r}, 160 KB window | ${own.length} | ${median(own).toFixed(1)} ms | ${median(provider).toFixed(1)} ms |`);
      console.log(rows.at(-1));
    }
    // One long session, streamed and not: its tool turns 10, 100 and 1,000 (prompts of ten pages each).
    const checkpoints = [10, 100, 1000];
    const long: string[] = ['', '| one session at a 160 KB window, own time per tool turn (median of the twenty ending at each) | turn 10 | turn 100 | turn 1,000 |', '| --- | --- | --- | --- |'];
    for (const stream of [true, false]) {
      const at = await longSession(h, server, stream, checkpoints);
      long.push(`| ${stream ? 'streamed' : 'not streamed'} | ${checkpoints.map((t) => `${at.get(t)!.toFixed(1)} ms`).join(' | ')} |`);
      console.log(long.at(-1));
    }
    longRows.push(...long);
  } finally {
    await h.stop();
    await server.close();
    rmSync(rootPath, { recursive: true, force: true });
  }
  if (process.argv[2] === 'long') return;
  rows.push(`| all, no window known | ${all.length} | ${median(all).toFixed(1)} ms | |`, `| all, 160 KB window | ${windowed.length} | ${median(windowed).toFixed(1)} ms | |`, ...longRows);
  console.log(`\n${rows.join('\n')}`);
  replaceSection(path.join(process.cwd(), 'BENCHMARKS.md'), 'turn', ['## The agent\'s own time per tool turn (npm run bench:turn)', '', 'A 1 MiB log read to its end through the real OpenAI SDK, streamed, against a provider that answers at once; own time = the gap between two stored tool results less the call log\'s provider time between them.', '', ...rows].join('\n'));
}

await main();

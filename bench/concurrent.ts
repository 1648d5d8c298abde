// `npm run bench:concurrent`: many sessions at once on one node (a real Harper 4.7.29, the built component, the real
// OpenAI SDK against the provider-compatible server answering each request after 500 ms): one session alone, then 100
// and 400 started together, each reading a three-page log to its end. Prints how long the last of them took against
// one alone, and Harper's resident memory before and after (its process, every thread). Writes the `concurrent`
// section of BENCHMARKS.md.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readerResponder } from '../integrationTests/providerServer/pager.js';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { freePort, startHarper, type RunningHarper } from '../scripts/harper.js';
import { replaceSection } from './benchmarksFile.js';
import { op } from './storage.js';

const DELAY_MS = 500;

/** Harper's resident memory, MB (one process: every worker thread is in it). */
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/**
 * `count` sessions started at once, each reading the log to its end: ms from the first request until the last session's
 * final status was stored (its own `updatedAt`, so the figure does not depend on how often this loop looks). The loop
 * looks every second: listing a thousand sessions with their costs is real work on the same worker the sessions run on,
 * and a bench that polled faster would measure itself.
 */
async function together(h: RunningHarper, count: number): Promise<number> {
  const t0 = Date.now();
  const ids = await Promise.all(Array.from({ length: count }, (_, i) => op(h, { operation: 'agent_prompt', message: `read logs/three.log to its end (${i})` }).then((r) => r.session_id as string)));
  const mine = new Set(ids);
  for (;;) {
    await new Promise((r) => setTimeout(r, count === 1 ? 100 : 1000));
    const running = (await op(h, { operation: 'list_agent_sessions', limit: 1000, status: 'running' })).sessions as { session_id: string }[];
    if (!running.some((s) => mine.has(s.session_id))) break;
  }
  const failed = (await op(h, { operation: 'list_agent_sessions', limit: 1000, status: 'error' })).sessions.length;
  if (failed) throw new Error(`${failed} session(s) ended in error`);
  const done = (await op(h, { operation: 'list_agent_sessions', limit: 1000, status: 'completed' })).sessions as { session_id: string; updatedAt: number }[];
  const ends = done.filter((s) => mine.has(s.session_id)).map((s) => s.updatedAt);
  if (ends.length !== count) throw new Error(`${ends.length} of ${count} sessions completed`);
  return Math.max(...ends) - t0;
}

async function main() {
  const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-bench-many-'));
  const server = await new ProviderServer().start();
  const h = await startHarper({ rootPath, httpPort: await freePort(), opsPort: await freePort(), output: `${rootPath}.out` });
  const rows = ['| sessions at once | until the last completed | against one alone | Harper RSS before → after |', '| --- | --- | --- | --- |'];
  try {
    // Three pages at the default cap (32 KB each).
    const lines: string[] = [];
    for (let i = 0, size = 0; size < 90_000; i++) {
      const line = `2026-12-07T02:00:00Z [http/${i % 4}] [info]: GET /api/records/${i} ${i % 97} ms\n`;
      lines.push(line);
      size += line.length;
    }
    writeFileSync(path.join(rootPath, 'log', 'three.log'), lines.join(''));
    await op(h, { operation: 'set_agent_config', provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, model: 'bench-many', stream: true, requestTimeoutMs: 600_000 });
    server.reset();
    server.responder = readerResponder('logs', 'three.log');
    server.delayMs = DELAY_MS;
    // One alone: the median of three (on this shared 2-core machine one run varies by a few tenths of a second).
    const singles = [await together(h, 1), await together(h, 1), await together(h, 1)].sort((a, b) => a - b);
    const alone = singles[1]!;
    rows.push(`| 1 (median of three: ${singles.map((t) => (t / 1000).toFixed(2)).join(', ')} s) | ${(alone / 1000).toFixed(1)} s | 1.0x | |`);
    console.log(rows.at(-1));
    for (const count of [100, 400]) {
      const before = rssMb(h.pid);
      const took = await together(h, count);
      rows.push(`| ${count} | ${(took / 1000).toFixed(1)} s | ${(took / alone).toFixed(1)}x | ${before.toFixed(0)} → ${rssMb(h.pid).toFixed(0)} MB |`);
      console.log(rows.at(-1));
    }
  } finally {
    await h.stop();
    await server.close();
    rmSync(rootPath, { recursive: true, force: true });
  }
  console.log(`\n${rows.join('\n')}`);
  replaceSection(path.join(process.cwd(), 'BENCHMARKS.md'), 'concurrent', ['## Many sessions at once (npm run bench:concurrent)', '', `One node; each session reads a three-page log to its end through the real OpenAI SDK, streamed; the provider answers each request after ${DELAY_MS} ms.`, '', ...rows].join('\n'));
}

await main();

// `npm run bench:list`: what a page of list_agent_sessions costs with 100 sessions stored and with 100,000, on a real
// Harper 4.7.29 booted by the bench (the built component). Sessions are inserted as rows (the shape agent/session.ts
// writes, owner+time key included), owned by 20 users. Timed through the operations API: a page of 50 newest first
// (the time index), the second page (a cursor), and one user's page (the owner+time index; that user owns every other session, so the page is full at 100 as at 100,000), each the median of 30.
// Prints a table and writes the `listing` section of BENCHMARKS.md.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startHarper, type RunningHarper } from '../scripts/harper.js';
import { replaceSection } from './benchmarksFile.js';
import { op } from './storage.js';

const USERS = 20;
const PAGE = 50;
const RUNS = 30;

/** `count` session rows, oldest first, as the store writes them. */
function rows(from: number, count: number, start: number) {
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    const at = start + i * 1000;
    // Every other session is `main`'s: a full page of one user's at 100 sessions as at 100,000.
    const user = i % 2 === 0 ? 'main' : `user${i % USERS}`;
    const id = `bench-${String(i).padStart(7, '0')}`;
    return {
      session_id: id,
      user,
      status: 'completed',
      provider: 'local',
      model: null,
      title: `investigation ${i}`,
      createdAt: new Date(at),
      updatedAt: new Date(at),
      ownerRecent: `${user}\u001f${String(at).padStart(15, '0')}\u001f${id}`,
      messageCount: 4,
      bytes: 2048,
      pendingApprovals: [],
      node: null,
      runner: null,
      lastError: null,
    };
  });
}

const now = () => Number(process.hrtime.bigint()) / 1e6;
async function medianMs(fn: () => Promise<unknown>): Promise<number> {
  const ts: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t = now();
    await fn();
    ts.push(now() - t);
  }
  return ts.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!;
}

async function pageTimes(h: RunningHarper) {
  const list = (extra: Record<string, unknown> = {}) => op(h, { operation: 'list_agent_sessions', limit: PAGE, ...extra });
  const first = await list();
  if (first.sessions.length !== PAGE) throw new Error(`a page held ${first.sessions.length} sessions`);
  const mine = await list({ user: 'main' });
  if (mine.sessions.length !== PAGE || mine.sessions.some((s: { user: string }) => s.user !== 'main')) throw new Error("a user's page is not 50 of that user's sessions");
  // Warm: the first calls after a boot or an insert pay for compiling and caching, not for the page.
  for (let i = 0; i < RUNS; i++) await Promise.all([list(), list({ cursor: first.nextCursor }), list({ user: 'main' })]);
  return {
    newest: await medianMs(() => list()),
    second: await medianMs(() => list({ cursor: first.nextCursor })),
    user: await medianMs(() => list({ user: 'main' })),
  };
}

async function main() {
  const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-bench-list-'));
  const h = await startHarper({ rootPath, httpPort: await freePort(), opsPort: await freePort(), output: `${rootPath}.out` });
  const start = Date.parse('2026-01-01T00:00:00Z');
  const figures: Record<number, Awaited<ReturnType<typeof pageTimes>>> = {};
  try {
    let stored = 0;
    for (const target of [100, 100_000]) {
      for (; stored < target; stored += Math.min(5000, target - stored)) {
        await op(h, { operation: 'insert', database: 'agent', table: 'AgentSession', records: rows(stored, Math.min(5000, target - stored), start) });
      }
      figures[target] = await pageTimes(h);
      console.log(`${target.toLocaleString('en-US')} sessions: ${JSON.stringify(figures[target])}`);
    }
  } finally {
    await h.stop();
    rmSync(rootPath, { recursive: true, force: true });
  }
  const small = figures[100]!;
  const large = figures[100_000]!;
  const line = (what: string, a: number, b: number) => `| ${what} | ${a.toFixed(2)} ms | ${b.toFixed(2)} ms | ${(b / a).toFixed(2)}x | ${b / a <= 2 ? 'met' : '**missed**'} |`;
  const table = [
    `| page of ${PAGE} | 100 sessions | 100,000 sessions | ratio | within 2x |`,
    '| --- | --- | --- | --- | --- |',
    line('newest first (time index)', small.newest, large.newest),
    line('second page (a cursor)', small.second, large.second),
    line("one user's (owner+time index)", small.user, large.user),
  ];
  console.log(`\n${table.join('\n')}`);
  const body = [
    '## Listing sessions (npm run bench:list)',
    '',
    `list_agent_sessions through the operations API on a real Harper 4.7.29, the median of ${RUNS} calls, sessions inserted as rows, every other one owned by one user (main), the rest by ${USERS} others; every page holds 50.`,
    '',
    ...table,
  ];
  replaceSection(path.join(process.cwd(), 'BENCHMARKS.md'), 'listing', body.join('\n'));
  console.log('\nwrote the listing section of BENCHMARKS.md');
}

await main();

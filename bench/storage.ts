// What a session costs the `agent` database on a real Harper 4.7.29 (the built component, local backend): growth of
// the database file (tables and audit log, which is what replication ships) against the transcript's own size, per
// append, and how long a turn takes early and late in a long run.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startHarper, type RunningHarper } from '../scripts/harper.js';

interface Sizes {
  /** agent.mdb: every table and the audit log. */
  db: number;
  audit: number;
}

/** One operation on the bench's Harper, as its admin; anything but 200 throws. */
export async function op(h: RunningHarper, body: unknown): Promise<any> {
  const auth = 'Basic ' + Buffer.from(`${h.admin.username}:${h.admin.password}`).toString('base64');
  const res = await fetch(h.opsUrl, { method: 'POST', headers: { 'content-type': 'application/json', authorization: auth }, body: JSON.stringify(body) });
  const parsed = await res.json();
  if (res.status !== 200) throw new Error(`${JSON.stringify(body).slice(0, 80)}: ${res.status} ${JSON.stringify(parsed)}`);
  return parsed;
}

async function sizes(h: RunningHarper): Promise<Sizes> {
  const d = await op(h, { operation: 'describe_database', database: 'agent' });
  const any = Object.values(d)[0] as { db_size: number; db_audit_size: number };
  return { db: any.db_size, audit: any.db_audit_size };
}

async function runToEnd(h: RunningHarper, file: string, session?: string): Promise<any> {
  const { session_id } = await op(h, { operation: 'agent_prompt', message: `read logs/${file}`, ...(session ? { session_id: session } : {}) });
  // Polls the row alone: a poll of the whole session would cost the Harper being timed a long transcript's JSON.
  for (;;) {
    const [row] = await op(h, { operation: 'search_by_id', database: 'agent', table: 'AgentSession', ids: [session_id], get_attributes: ['status'] });
    if (row?.status !== 'running') return op(h, { operation: 'get_agent_session', session_id });
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `bytes` of log lines (1 MB unless said). */
function writeLog(dir: string, name: string, bytes = 1_000_000): void {
  const lines: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const line = `2026-12-03T10:${String(i % 60).padStart(2, '0')}:00Z [http/${i % 4}] [${i % 53 ? 'info' : 'error'}]: GET /api/records/${(i * 7919) % 100000} ${i % 97} ms\n`;
    lines.push(line);
    size += line.length;
  }
  writeFileSync(path.join(dir, name), lines.join('').slice(0, bytes));
}

/** Milliseconds from each tool result to the next (one turn: model call, its append, the tool call, its append). */
function turnTimes(messages: { role: string; at: number }[]): number[] {
  const stamps = messages.filter((m) => m.role === 'tool').map((m) => m.at);
  return stamps.slice(1).map((t, i) => t - stamps[i]!);
}

/** The context window of the timed session (agent.contextWindowTokens). */
export const WINDOW_TOKENS = 20_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** The mean of the middle 60%: turn times are whole milliseconds (message stamps) of a few each, too coarse for a
 * median to tell 5 from 6.4; this keeps the resolution and drops the odd slow turn (a compaction, a GC). */
const trimmedMean = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const middle = sorted.slice(Math.floor(sorted.length * 0.2), Math.ceil(sorted.length * 0.8));
  return middle.reduce((sum, x) => sum + x, 0) / middle.length;
};

export interface StorageFigures {
  transcriptBytes: number;
  messages: number;
  dbGrowth: number;
  auditGrowth: number;
  ratio: number;
  auditPerAppend: number;
  turns: number;
  turn10Ms: number;
  turn100Ms: number;
  /** With the working set on, sessions of `workingSetTurns` turns (three prompts): the time of a turn around turns 10,
   * 100 and 1,000. */
  workingSetTurns: number;
  workingSetTurnMs: [number, number, number];
}

export async function storageOnHarper(): Promise<StorageFigures> {
  const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-bench-h-'));
  const h = await startHarper({ rootPath, httpPort: await freePort(), opsPort: await freePort(), output: `${rootPath}.out` });
  try {
    writeLog(path.join(rootPath, 'log'), 'bench-1mb.log');
    // What storing a transcript costs, every page kept whole: the working set off (with it on the transcript shrinks
    // while the audit log keeps every page as written, which says nothing of the storage design).
    await op(h, { operation: 'set_agent_config', workingSetBytes: 0 });
    // 1. A 1 MB log read to its end at the default cap (64 KiB results, 32 KB pages).
    const before = await sizes(h);
    const s = await runToEnd(h, 'bench-1mb.log');
    if (s.status !== 'completed') throw new Error(`the bench session ended ${s.status}: ${s.lastError}`);
    const after = await sizes(h);
    const appends = s.messageCount;
    // 2. The same log at a 6 KiB cap: 3 KB pages, over a hundred turns, to time turn 10 against turn 100.
    await op(h, { operation: 'set_agent_config', maxToolResultBytes: 6144, maxTurns: 500 });
    const long = await runToEnd(h, 'bench-1mb.log');
    if (long.status !== 'completed') throw new Error(`the long bench session ended ${long.status}: ${long.lastError}`);
    const times = turnTimes(long.messages);
    const around = (turn: number) => median(times.slice(turn - 3, turn + 2));
    // 3. A session as it runs for real: the working set on (the default), which cuts an old page before most model
    // calls, and a context window, so compaction keeps the request bounded; a small one (20,000 tokens), so the request
    // is about the same size from turn 10 on and what is timed is the session's length, not the request's. A
    // session reads three 1.1 MB logs, a prompt each, over a thousand turns: turn 10 against turns 100 and 1,000. Three
    // such sessions; each figure is the median of the three (a turn is a few ms on a shared 2-core machine).
    await op(h, { operation: 'set_agent_config', workingSetBytes: null, contextWindowTokens: WINDOW_TOKENS });
    for (const part of ['a', 'b', 'c']) writeLog(path.join(rootPath, 'log'), `bench-${part}.log`, 1_100_000);
    const sessions: number[][] = [];
    for (let run = 0; run < 3; run++) {
      let trimmed: any;
      for (const part of ['a', 'b', 'c']) {
        trimmed = await runToEnd(h, `bench-${part}.log`, trimmed?.session_id);
        if (trimmed.status !== 'completed') throw new Error(`the working-set bench session ended ${trimmed.status}: ${trimmed.lastError}`);
      }
      sessions.push(turnTimes(trimmed.messages));
    }
    // Turns 5-14 for turn 10, 95-104 and 995-1,004.
    const aroundTrimmed = (turn: number) => median(sessions.map((times) => trimmedMean(times.slice(turn - 6, turn + 4))));
    return {
      transcriptBytes: s.bytes,
      messages: s.messageCount,
      dbGrowth: after.db - before.db,
      auditGrowth: after.audit - before.audit,
      ratio: (after.db - before.db) / s.bytes,
      auditPerAppend: (after.audit - before.audit) / appends,
      turns: times.length + 1,
      turn10Ms: around(10),
      turn100Ms: around(100),
      workingSetTurns: sessions[0]!.length + 1,
      workingSetTurnMs: [aroundTrimmed(10), aroundTrimmed(100), aroundTrimmed(1000)],
    };
  } finally {
    await h.stop();
    rmSync(rootPath, { recursive: true, force: true });
    rmSync(`${rootPath}.out`, { force: true });
  }
}

// What each kind of trigger sees on a tick, as a change to the watch's state and whether it fires now. The sources
// (the log file, get_analytics, cluster_status) come in as arguments, and `now` too, so unit tests drive them with a
// fake clock. Cool-downs and the runs-per-hour limit are the watcher's (agent/watches/watcher.ts), not a trigger's.
import { holdsArmorLine } from '../tools/keyMaterial.js';
import { openScoped, type Scopes } from '../tools/scopes.js';
import { LOG_LEVELS, nextDue, type Evidence, type LinePosition, type Trigger, type WatchState } from './watch.js';

/** The most of a log read on one tick: a burst of lines larger than this is read over the next ticks. */
export const MAX_READ_PER_TICK = 8 * 1024 * 1024;
/** The longest line text an evidence line keeps. */
const LINE_TEXT_CHARS = 500;

type LogTrigger = Extract<Trigger, { type: 'log' }>;

const LEVEL = new RegExp(`\\[(${LOG_LEVELS.join('|')})\\]`, 'i');

/** A line test for a log trigger: its level at or above the trigger's (Harper's `[level]` tag), and its pattern. */
export function lineMatcher(t: LogTrigger): (line: string) => boolean {
  const pattern = t.pattern !== undefined ? new RegExp(t.pattern) : undefined;
  const least = t.level ? LOG_LEVELS.indexOf(t.level) : -1;
  return (line) => {
    if (least >= 0) {
      const level = LEVEL.exec(line)?.[1]?.toLowerCase();
      if (!level || LOG_LEVELS.indexOf(level as (typeof LOG_LEVELS)[number]) < least) return false;
    }
    return !pattern || pattern.test(line);
  };
}

/** A line as evidence: cut to a readable length, and never key material (the same check as every tool result). */
function evidenceLine(text: string, line: number, offset: number): LinePosition {
  const shown = holdsArmorLine(Buffer.from(text)) ? '(withheld: this line holds key material)' : text.length > LINE_TEXT_CHARS ? `${text.slice(0, LINE_TEXT_CHARS)}…` : text;
  return { line, offset, text: shown };
}

/**
 * Reads what the log gained since the state's offset (whole lines only: a partial last line waits for the next tick),
 * and adds its matching lines to the burst. A first tick starts at the log's end (lines written before the watch are
 * not news), counting its lines so positions are line numbers a read_file cursor takes. A log that shrank (rotated)
 * is read from its start. Answers the new state.
 */
export async function readLog(scopes: Scopes, t: LogTrigger, state: WatchState, now: number, matches = lineMatcher(t)): Promise<WatchState> {
  const { handle, size } = await openScoped(scopes, 'logs', t.path);
  try {
    let offset = state.offset;
    let line = state.line ?? 1;
    if (offset === undefined || offset > size) {
      const start = offset === undefined ? size : 0;
      line = 1 + (offset === undefined ? await countLines(handle, size) : 0);
      offset = start;
      if (start === size) return { ...state, offset, line };
    }
    const length = Math.min(size - offset, MAX_READ_PER_TICK);
    if (length <= 0) return { ...state, offset, line };
    const buf = Buffer.allocUnsafe(length);
    const { bytesRead } = await handle.read(buf, 0, length, offset);
    const end = buf.lastIndexOf(10, bytesRead - 1);
    if (end < 0) return { ...state, offset, line }; // no whole line yet
    let burst = state.burst ?? null;
    for (let at = 0; at <= end; ) {
      const nl = buf.indexOf(10, at);
      const text = buf.toString('utf8', at, nl);
      if (matches(text)) {
        const position = evidenceLine(text, line, offset + at);
        burst = burst ? { ...burst, last: position, count: burst.count + 1, lastAt: now } : { first: position, last: position, count: 1, startedAt: now, lastAt: now };
      }
      line++;
      at = nl + 1;
    }
    return { ...state, offset: offset + end + 1, line, burst };
  } finally {
    await handle.close();
  }
}

async function countLines(handle: { read(buf: Buffer, o: number, l: number, p: number): Promise<{ bytesRead: number }> }, size: number): Promise<number> {
  const buf = Buffer.allocUnsafe(1024 * 1024);
  let lines = 0;
  for (let position = 0; position < size; ) {
    const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, size - position), position);
    if (bytesRead <= 0) break;
    for (let i = buf.indexOf(10, 0); i >= 0 && i < bytesRead; i = buf.indexOf(10, i + 1)) lines++;
    position += bytesRead;
  }
  return lines;
}

/** Whether a gathered burst is ready: quiet for the debounce, or gathering for the longest wait. */
export function burstReady(t: LogTrigger, state: WatchState, now: number): boolean {
  const b = state.burst;
  return !!b && (now - b.lastAt >= t.debounceSeconds * 1000 || now - b.startedAt >= t.maxWaitSeconds * 1000);
}

export function logEvidence(t: LogTrigger, b: NonNullable<WatchState['burst']>): Evidence {
  const span = b.count === 1 ? `1 line` : `${b.count.toLocaleString('en-US')} lines`;
  return {
    kind: 'log',
    summary: `${span} of logs/${t.path} matched, from line ${b.first.line} (byte ${b.first.offset}) to line ${b.last.line} (byte ${b.last.offset})`,
    log: { path: t.path, count: b.count, first: b.first, last: b.last },
  };
}

/** A get_analytics record's value, from the newest sample that has the attribute (and matches `where`). */
export function newestSample(records: unknown, t: Extract<Trigger, { type: 'metric' }>): { value: number; at: number } | undefined {
  if (!Array.isArray(records)) return undefined;
  let best: { value: number; at: number } | undefined;
  for (const r of records as Record<string, unknown>[]) {
    const value = Number(r?.[t.attribute]);
    const at = Number(r?.time);
    if (!Number.isFinite(value) || !Number.isFinite(at)) continue;
    if (t.where && Object.entries(t.where).some(([k, v]) => r[k] !== v)) continue;
    if (!best || at > best.at) best = { value, at };
  }
  return best;
}

/** A condition that must hold for `forSeconds`: the state's `since` set when it starts holding, cleared when it stops;
 * due once it has held that long. */
export function held(state: WatchState, holds: boolean, forSeconds: number, now: number): { state: WatchState; due: boolean } {
  const since = holds ? (state.since ?? now) : null;
  return { state: { ...state, since }, due: since !== null && now - since >= forSeconds * 1000 };
}

export function metricHolds(t: Extract<Trigger, { type: 'metric' }>, value: number): boolean {
  return t.above !== undefined ? value > t.above : value < t.below!;
}

/** The database connections cluster_status shows down, as "node/database". */
export function downConnections(status: unknown): string[] {
  const connections = (status as { connections?: unknown })?.connections;
  if (!Array.isArray(connections)) return [];
  const down: string[] = [];
  for (const c of connections as Record<string, any>[]) {
    const name = String(c.name ?? c.url ?? 'a node');
    const sockets = Array.isArray(c.database_sockets) ? c.database_sockets : [];
    for (const s of sockets) if (s?.connected === false) down.push(`${name}/${s.database ?? '?'}`);
  }
  return down;
}

/** A schedule: due when its time came (once, however many were missed while Harper was down). */
export function scheduleDue(t: Extract<Trigger, { type: 'schedule' }>, state: WatchState, now: number): { state: WatchState; due: boolean } {
  if (state.nextDue === undefined || state.nextDue === null) return { state: { ...state, nextDue: nextDue(t, now) }, due: false };
  if (now < state.nextDue) return { state, due: false };
  return { state: { ...state, nextDue: nextDue(t, now) }, due: true };
}

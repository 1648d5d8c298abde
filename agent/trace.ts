// What the session store read and wrote, one JSON line per event, when AGENT_TRACE_FILE names a file: the evidence a
// race leaves (which thread read which revision of a row, what it wrote on top of it). Off unless set; `npm run
// stress` sets it on every node it boots and keeps the files of a run that lost or duplicated a prompt.
import { appendFileSync } from 'node:fs';
import { threadId } from 'node:worker_threads';

const file = process.env.AGENT_TRACE_FILE;

/** Is tracing on (so a caller can skip building an event)? */
export const tracing = !!file;

export function trace(event: Record<string, unknown>): void {
  if (!file) return;
  try {
    appendFileSync(file, JSON.stringify({ t: performance.timeOrigin + performance.now(), node: process.env.REPLICATION_HOSTNAME ?? null, thread: threadId, ...event }) + '\n');
  } catch {
    // a trace never breaks what it traces
  }
}

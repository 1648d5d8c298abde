// A scripted recall set with known answers: ten notes an operator might leave, each with a prompt that should
// recall it (worded differently, as a person asks), among 990 notes about other things that share the vocabulary.
// The recall test and bench/recall.ts read it.
import { Memory, type MemoryTable } from '../agent/memory/memory.js';
import { MemoryTable as Table } from './helpers.js';

export const KNOWN: { note: string; prompt: string; scope?: { kind: 'component' | 'log' | 'table' | 'database'; name: string } }[] = [
  { note: 'Component logspam logs queue depth warnings every minute; they are harmless.', prompt: 'logspam is warning about queue depth again, should I worry?', scope: { kind: 'component', name: 'logspam' } },
  { note: 'The nightly import job (component bulkloader) spikes CPU to 100% around 02:00 UTC; that is expected.', prompt: 'bulkloader CPU spike at 02:00, is that normal?' },
  { note: 'To restart a stuck replication to node eu-west-2, run restart_service with service replication on that node.', prompt: 'replication to eu-west-2 seems stuck, how do we restart it?' },
  { note: 'Table data.Orders grows 2 GB a day in the holiday season; disk alerts on the /data volume are expected in December.', prompt: 'disk alert on the /data volume, Orders table growing fast', scope: { kind: 'table', name: 'data.Orders' } },
  { note: 'The payments component calls Stripe with a 10 s timeout; ETIMEDOUT stripe errors come from their outages, not ours.', prompt: 'lots of ETIMEDOUT stripe errors in the payments logs' },
  { note: 'This instance runs 4 worker threads on purpose; do not raise threads.count, memory is tight.', prompt: 'should we raise the threads count for more throughput?' },
  { note: 'The geoip component downloads its database weekly on Sunday; 404s from maxmind on other days mean the license key expired.', prompt: 'geoip is getting 404 from maxmind' },
  { note: "Authentication failures from user 'monitor' are the uptime checker with an old password; ignore them.", prompt: 'many authentication failures for user monitor in the log' },
  { note: 'The audit log of database analytics is off on purpose, to save space.', prompt: 'why is the audit log off on the analytics database?', scope: { kind: 'database', name: 'analytics' } },
  { note: 'MQTT clients from the factory floor reconnect every 30 minutes because of their firewall; reconnect storms at :00 and :30 are normal.', prompt: 'mqtt reconnect storm at half past the hour' },
];

const WORDS = ['cache', 'request', 'latency', 'table', 'restart', 'errors', 'log', 'warning', 'node', 'disk', 'memory', 'timeout', 'index', 'query', 'schema', 'deploy', 'session', 'token', 'retry', 'backup', 'export', 'queue', 'worker', 'thread', 'cpu', 'certificate', 'proxy', 'upstream', 'webhook', 'batch'];
const VERBS = ['grows', 'fails', 'spikes', 'is slow', 'is expected', 'is harmless', 'needs a restart', 'is rotated', 'is rebuilt', 'is paged'];

/** 990 notes about other things, from a fixed seed: the same set on every run. */
export function fillerNotes(count = 990): string[] {
  let seed = 42;
  const next = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), Math.floor((seed / 2 ** 31) * n));
  return Array.from({ length: count }, (_, i) => {
    const words = Array.from({ length: 4 }, () => WORDS[next(WORDS.length)]);
    return `Component svc-${i} ${words[0]} ${words[1]} ${VERBS[next(VERBS.length)]} when the ${words[2]} ${words[3]} ${VERBS[next(VERBS.length)]}.`;
  });
}

/** A memory over in-memory tables holding the known notes among the filler, and the known notes' ids in order. */
export async function scriptedMemory(): Promise<{ memory: Memory; ids: string[] }> {
  const notes = new Table();
  const runbooks = new Table();
  const memory = new Memory(() => notes as unknown as MemoryTable, () => runbooks as unknown as MemoryTable);
  const filler = fillerNotes();
  const ids: string[] = [];
  for (let i = 0; i < filler.length; i++) {
    await memory.addNote({ text: filler[i]!, user: 'ops' });
    if (i % 99 === 0 && ids.length < KNOWN.length) {
      const k = KNOWN[ids.length]!;
      ids.push((await memory.addNote({ text: k.note, scope: k.scope ?? null, user: 'ops' })).note_id);
    }
  }
  return { memory, ids };
}

// Where a read_file page's time goes, against the bare read of the same bytes (open, pread, decode, close): medians
// near the start and the end of a big log, and a V8 CPU profile (node:inspector, this process) of many pages with its
// top functions by self time. `node dist/bench/readProfile.js <file>` prints it alone; bench/run.ts puts it in
// BENCHMARKS.md.
import { closeSync, existsSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cpuProfileOf, topBySelfTime } from '../agent/threadProbe.js';
import { readFile } from '../agent/tools/fsTools.js';
import type { ToolContext } from '../agent/tools/types.js';
import { defaultConfig } from '../agent/agent.js';
import { lineStartAfter, writeLogFile } from './files.js';

const now = () => Number(process.hrtime.bigint()) / 1e6;
async function timed(fn: () => unknown): Promise<number> {
  const t = now();
  await fn();
  return now() - t;
}
const middle = (ts: number[]) => [...ts].sort((a, b) => a - b)[Math.floor(ts.length / 2)]!;

/** What the page served: open, one pread of its bytes, decode, close. The floor read_file is measured against. Into a
 * buffer allocated once, as read_file reads into reused ones (a fresh 32 KB buffer a call brought garbage collections
 * that made the bare read slower than the page). */
const bareBuffer = Buffer.allocUnsafe(1024 * 1024);
function bareRead(file: string, offset: number, length: number): string {
  const fd = openSync(file, 'r');
  try {
    const buf = bareBuffer.subarray(0, length);
    const n = readSync(fd, buf, 0, length, offset);
    return buf.toString('utf8', 0, n);
  } finally {
    closeSync(fd);
  }
}

export interface ReadProfile {
  /** Near the start and near the end: read_file's median and the bare read's, in ms. */
  start: { pageMs: number; bareMs: number; bytes: number };
  end: { pageMs: number; bareMs: number; bytes: number };
  /** The profile's top functions, as lines. */
  top: string[];
}

/** Profiles read_file pages of `file` (inside `scopes.logs`) at the default cap. */
export async function readProfile(scopes: ToolContext['scopes'], file: string, runs = 401): Promise<ReadProfile> {
  const ctx: ToolContext = { scopes, maxResultBytes: defaultConfig().maxToolResultBytes, signal: new AbortController().signal };
  const relative = path.relative(scopes.logs, file);
  const size = statSync(file).size;
  const measure = async (near: number) => {
    const offset = lineStartAfter(file, near);
    const args = { root: 'logs', path: relative, startLine: 2, offset };
    const page = await readFile(args, ctx);
    const bytes = Buffer.byteLength(page.content);
    for (let i = 0; i < 50; i++) await readFile(args, ctx); // warm
    // Turn about, so both meet the page cache as it is at that moment.
    const pageTimes: number[] = [];
    const bareTimes: number[] = [];
    for (let i = 0; i < runs; i++) {
      pageTimes.push(await timed(() => readFile(args, ctx)));
      bareTimes.push(await timed(() => bareRead(file, offset, bytes)));
    }
    return { pageMs: middle(pageTimes), bareMs: middle(bareTimes), bytes, args };
  };
  const start = await measure(4096);
  const end = await measure(size - 4 * 1024 * 1024);
  const profile = await cpuProfileOf(async () => {
    for (let i = 0; i < 3000; i++) await readFile(i % 2 ? start.args : end.args, ctx);
  }, 50);
  const { busyMs, top } = topBySelfTime(profile, 12);
  return {
    start: { pageMs: start.pageMs, bareMs: start.bareMs, bytes: start.bytes },
    end: { pageMs: end.pageMs, bareMs: end.bareMs, bytes: end.bytes },
    top: top.map((t) => `${t.percent.toFixed(1).padStart(5)}% ${t.function} (${t.url ? `${path.basename(t.url)}:${t.line}` : 'native'})`).concat(`(of ${busyMs} ms busy over 3,000 pages)`),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // `node dist/bench/readProfile.js [file]`: a 1 GiB log is generated when none is named.
  const file = path.resolve(process.argv[2] ?? path.join(os.tmpdir(), 'harper-agent-read-profile', 'log', 'big.log'));
  if (!process.argv[2]) {
    mkdirSync(path.dirname(file), { recursive: true });
    if (!existsSync(file)) writeLogFile(file, 1024 ** 3);
  }
  const logs = path.dirname(file);
  const root = path.dirname(logs);
  const r = await readProfile({ rootPath: root, logs, components: path.join(root, 'components'), config: path.join(root, 'harperdb-config.yaml') }, file);
  const us = (ms: number) => `${(ms * 1000).toFixed(0)} µs`;
  console.log(`start: read_file ${us(r.start.pageMs)}, bare ${us(r.start.bareMs)} (${(r.start.pageMs / r.start.bareMs).toFixed(1)}x, ${r.start.bytes} bytes)`);
  console.log(`end:   read_file ${us(r.end.pageMs)}, bare ${us(r.end.bareMs)} (${(r.end.pageMs / r.end.bareMs).toFixed(1)}x, ${r.end.bytes} bytes)`);
  console.log(r.top.join('\n'));
}

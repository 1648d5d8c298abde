// grep_files: its schema, handler and result shape. The search runs in a worker with a time limit.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { GrepJob, GrepResult } from './grepSearch.js';
import { pageBudget } from './paging.js';
import { resolveScoped, SCOPE_NAMES, type Scopes } from './scopes.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

export const MAX_PATTERN_LENGTH = 1000;
export const GREP_TIME_LIMIT_MS = 10_000;

export interface GrepFilesResult extends GrepResult {
  path: string;
  pattern: string;
}

async function keyDirs(scopes: Scopes): Promise<string[]> {
  const out: string[] = [];
  for (const name of ['keys', 'ssh']) {
    const lexical = path.resolve(scopes.rootPath, name);
    out.push(lexical, await fs.realpath(lexical).catch(() => lexical));
  }
  return out;
}

function runWorker(job: GrepJob, signal: AbortSignal, timeLimitMs: number): Promise<GrepResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./grepWorker.js', import.meta.url), { workerData: job });
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      void worker.terminate();
      fn();
    };
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(new ToolError(`grep_files stopped after ${timeLimitMs / 1000} s: simplify the pattern (it may backtrack) or search a narrower path`))
        ),
      timeLimitMs
    );
    const onAbort = () => finish(() => reject(new DOMException('grep_files was cancelled', 'AbortError')));
    signal.addEventListener('abort', onAbort);
    worker.once('message', (msg: { ok: boolean; result?: GrepResult; error?: string }) =>
      finish(() => (msg.ok ? resolve(msg.result!) : reject(new ToolError(`grep_files failed: ${msg.error}`))))
    );
    worker.once('error', (error) => finish(() => reject(error)));
    worker.once('exit', (code) => finish(() => reject(new Error(`grep worker exited with code ${code}`))));
  });
}

export async function grepFiles(args: Record<string, unknown>, ctx: ToolContext, timeLimitMs = GREP_TIME_LIMIT_MS): Promise<GrepFilesResult> {
  const root = args.root as string;
  const pattern = args.pattern as string;
  const flags = args.ignoreCase ? 'i' : '';
  try {
    new RegExp(pattern, flags);
  } catch (error) {
    throw new ToolError(`invalid pattern: ${(error as Error).message}`);
  }
  const resolved = await resolveScoped(ctx.scopes, root, args.path ?? '');
  const n = 9_999_999; // files searched and skipped: more than any tree holds
  const skeleton = { path: resolved.display, pattern, matches: [], truncated: false, filesSearched: n, skippedFiles: [], skippedCount: n };
  const budget = pageBudget(ctx.maxResultBytes, skeleton, resolved.display);
  const job: GrepJob = {
    start: resolved.real,
    display: resolved.display,
    keyDirs: await keyDirs(ctx.scopes),
    pattern,
    flags,
    maxMatches: (args.maxMatches as number | undefined) ?? 200,
    budget,
  };
  const result = await runWorker(job, ctx.signal, timeLimitMs);
  return { path: resolved.display, pattern, ...result };
}

export const grepFilesTool: Tool = {
  name: 'grep_files',
  core: true,
  brief: 'Search files under a path for a JavaScript regular expression; truncated: true means more matched (narrow it). Then read_file startLine reads around a match.',
  description:
    'Search files under a path (a file or a directory, default the scope root) for a JavaScript regular expression, ' +
    'line by line. Returns matches with path, line number and text, as many as fit one page; truncated: true means ' +
    'more matched (narrow the pattern or the path). skippedFiles lists files not searched (binary, unreadable, key ' +
    'material). Then read around a match with read_file startLine.',
  parameters: {
    type: 'object',
    properties: {
      root: { type: 'string', enum: SCOPE_NAMES },
      path: { type: 'string', maxLength: 4096 },
      pattern: { type: 'string', minLength: 1, maxLength: MAX_PATTERN_LENGTH },
      ignoreCase: { type: 'boolean' },
      maxMatches: { type: 'integer', minimum: 1, maximum: 10000 },
    },
    required: ['root', 'pattern'],
    additionalProperties: false,
  },
  advice: 'use a more specific pattern or a narrower path',
  handler: (args, ctx) => grepFiles(args, ctx),
};

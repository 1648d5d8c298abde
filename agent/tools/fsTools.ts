// The file tools: read_file, tail_file, list_dir, write_file (grep_files is in grepFiles.ts). Each is its schema,
// its handler and its result shape. Pages are sized by paging.ts and checked for key material by keyMaterial.ts.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterLastEndLine, firstArmorLineStart, KeyMaterialError, LOOK_BACK_BYTES, refuseKeyMaterial, resumeAfterKey } from './keyMaterial.js';
import { costModel, cutToEscaped, escapedCost, escapedLength, isValidUtf8, pageBudget, slicePage, type CostModel } from './paging.js';
import { withScratch } from './scratch.js';
import { openScoped, resolveScoped, SCOPE_NAMES, type CheckedFile, type OpenedFile } from './scopes.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

const rootParam = {
  type: 'string',
  enum: SCOPE_NAMES,
  description: 'components (Harper components root, writable), logs (Harper log directory) or config (Harper config file)',
};
const pathParam = { type: 'string', maxLength: 4096, description: 'Path relative to the scope root, "/"-separated.' };

// ---------------------------------------------------------------------------------------------------------------
// read_file

export interface ReadFileResult {
  path: string;
  size: number;
  offset: number;
  startLine: number;
  endLine: number;
  content: string;
  nextLine?: number;
  nextOffset?: number;
  totalLines?: number;
  lineTruncated?: true;
  invalidUtf8?: true;
}

/** Byte offset where line `startLine` (1-based) begins, streaming from the start: what the byte cursor saves. */
async function findLineStart(handle: CheckedFile, size: number, startLine: number, display: string): Promise<number> {
  if (startLine === 1) return 0;
  let seen = 0;
  const found = await withScratch(1 << 20, async (chunk) => {
    for (let position = 0; position < size; ) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      const data = chunk.subarray(0, bytesRead);
      for (let i = data.indexOf(10); i !== -1; i = data.indexOf(10, i + 1)) {
        if (++seen === startLine - 1 && position + i + 1 < size) return position + i + 1;
      }
      position += bytesRead;
    }
    return -1;
  });
  if (found !== -1) return found;
  const total = size === 0 ? 0 : seen + (await lastByte(handle, size) === 10 ? 0 : 1);
  throw new ToolError(`startLine ${startLine} is past the end of ${display} (${total} lines)`);
}

async function lastByte(handle: CheckedFile, size: number): Promise<number> {
  const b = Buffer.alloc(1);
  await handle.read(b, 0, 1, size - 1);
  return b[0]!;
}

/** Fills `buf` from `position` (less at the end of the file); returns the part filled. */
async function readChunk(handle: CheckedFile, position: number, buf: Buffer): Promise<Buffer> {
  const length = buf.length;
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buf, filled, length - filled, position + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled === length ? buf : buf.subarray(0, filled);
}

/** The widest a read_file result's fields can be, text aside: offsets stay within size, a page holds fewer lines
 * than the half cap has bytes, and totalLines never appears with nextLine and nextOffset. The invalidUtf8 flag is
 * paid for only by a page that needs it (INVALID_UTF8_FIELD). */
function readSkeleton(display: string, size: number, offset: number, startLine: number, maxResultBytes: number): Record<string, unknown> {
  const line = startLine + Math.min(size - offset, Math.floor(maxResultBytes / 2));
  return { path: display, size, offset: size, startLine: line, endLine: line, content: '', nextLine: line, nextOffset: size, lineTruncated: true };
}
const INVALID_UTF8_FIELD = Buffer.byteLength(',"invalidUtf8":true');

/** Bytes a page may read: its text cannot be shorter escaped than raw, plus 4 to see past a cut character. */
const readLength = (budget: number) => budget + 4;

export interface ReadOptions {
  /** The key look-back (on by default; the bench switches it off to measure its cost). */
  lookBack?: boolean;
}

export async function readFile(args: Record<string, unknown>, ctx: ToolContext, options: ReadOptions = {}): Promise<ReadFileResult> {
  return readPage(await openScoped(ctx.scopes, args.root, args.path), args, ctx, options);
}

/** One page of an open, checked file (startLine, lineCount, offset from `args`), which it closes: read_file's paging,
 * for any tool that serves a file it resolved itself (harper_best_practice). */
export async function readPage(file: OpenedFile, args: Record<string, unknown>, ctx: ToolContext, options: ReadOptions = {}): Promise<ReadFileResult> {
  const { handle, size, display } = file;
  try {
    pageBudget(ctx.maxResultBytes, readSkeleton(display, size, 0, 1, ctx.maxResultBytes), display);
    const startLine = (args.startLine as number | undefined) ?? 1;
    const maxLines = (args.lineCount as number | undefined) ?? Number.POSITIVE_INFINITY;
    let offset: number;
    if (args.offset !== undefined) {
      offset = args.offset as number;
      if (args.startLine === undefined) throw new ToolError('offset needs startLine: pass back both nextLine and nextOffset');
      if (offset > size || (offset === size && size > 0)) {
        throw new ToolError(`offset ${offset} is past the end of ${display} (${size} bytes)`);
      }
      if (offset > 0 && offset < size) {
        const b = await readChunk(handle, offset, Buffer.alloc(1));
        if ((b[0]! & 0xc0) === 0x80) throw new ToolError(`offset ${offset} is inside a UTF-8 character: pass an offset from nextOffset`);
      }
    } else {
      offset = await findLineStart(handle, size, startLine, display);
    }
    const budget = pageBudget(ctx.maxResultBytes, readSkeleton(display, size, offset, startLine, ctx.maxResultBytes), display);
    // One read holds the key look-back and the page.
    const from = options.lookBack === false ? offset : Math.max(0, offset - LOOK_BACK_BYTES);
    return await withScratch(offset - from + Math.min(readLength(budget), size - offset), async (scratch) => {
      const region = await readChunk(handle, from, scratch);
      const buf = region.subarray(offset - from);
      const atEof = offset + buf.length >= size;
      let model: CostModel = costModel(buf, true);
      let slice = slicePage(buf, atEof, budget, maxLines, model);
      let page = buf.subarray(0, slice.end);
      let content = page.toString('utf8');
      const valid = Buffer.byteLength(content) === page.length; // decoded once: the check and the result share it
      if (!valid) {
        model = costModel(buf, false);
        slice = slicePage(buf, atEof, budget - INVALID_UTF8_FIELD, maxLines, model);
        page = buf.subarray(0, slice.end);
        content = page.toString('utf8');
      }
      // A page that runs into a key stops before the key's first line, so the text before a key is still served.
      const armorAt = slice.lineTruncated ? -1 : firstArmorLineStart(page);
      if (armorAt > 0) {
        page = page.subarray(0, armorAt);
        content = page.toString('utf8');
        slice = { end: armorAt, lines: countLines(page), lineTruncated: false };
      }
      try {
        refuseKeyMaterial(display, offset, page, region, from);
      } catch (error) {
        if (!(error instanceof KeyMaterialError)) throw error;
        throw new KeyMaterialError(error.message + '.' + (await resumeAfterKey(handle, offset, startLine, size)));
      }
      const endLine = slice.lines === 0 ? startLine - 1 : startLine + slice.lines - 1;
      const nextOffset = offset + slice.end;
      const result: ReadFileResult = { path: display, size, offset, startLine, endLine, content };
      if (nextOffset < size) {
        result.nextLine = slice.lineTruncated || (slice.end > 0 && page[page.length - 1] !== 10) ? endLine : endLine + 1;
        result.nextOffset = nextOffset;
      } else {
        result.totalLines = endLine;
      }
      if (slice.lineTruncated) result.lineTruncated = true;
      if (!valid) result.invalidUtf8 = true;
      return result;
    });
  } finally {
    await handle.close();
  }
}

function countLines(page: Buffer): number {
  let n = 0;
  for (let i = page.indexOf(10); i !== -1; i = page.indexOf(10, i + 1)) n++;
  return n;
}

const readFileTool: Tool = {
  name: 'read_file',
  core: true,
  brief: 'Read a text file a page at a time, whole lines from startLine (default 1). While it continues, pass the result\'s nextLine and nextOffset back as startLine and offset.',
  description:
    'Read a text file a page at a time. Returns whole lines from startLine (1-based) that fit one page (about half of ' +
    'agent.maxToolResultBytes), with size, offset, startLine and endLine. While the file continues the result has ' +
    'nextLine and nextOffset: pass them back as startLine and offset to read the next page without rescanning. A line ' +
    'longer than a page comes back in parts flagged lineTruncated, continued the same way. totalLines appears once a ' +
    'page reaches the end. Use lineCount to ask for fewer lines, tail_file for the end of a log, grep_files to find lines.',
  parameters: {
    type: 'object',
    properties: {
      root: rootParam,
      path: pathParam,
      startLine: { type: 'integer', minimum: 1, description: 'First line to return, 1-based (default 1).' },
      lineCount: { type: 'integer', minimum: 1, description: 'At most this many lines.' },
      offset: { type: 'integer', minimum: 0, description: 'Byte offset of startLine, from a previous nextOffset.' },
    },
    required: ['root', 'path'],
    additionalProperties: false,
  },
  advice: 'pass a smaller lineCount, or keep paging with nextLine and nextOffset',
  handler: (args, ctx) => readFile(args, ctx),
};

// ---------------------------------------------------------------------------------------------------------------
// tail_file

export interface TailFileResult {
  path: string;
  size: number;
  offset: number;
  lines: number;
  content: string;
  truncated: boolean;
  lineTruncated?: true;
}

export async function tailFile(args: Record<string, unknown>, ctx: ToolContext, options: ReadOptions = {}): Promise<TailFileResult> {
  const want = (args.lines as number | undefined) ?? 50;
  const { handle, size, display } = await openScoped(ctx.scopes, args.root, args.path);
  try {
    const skeleton = { path: display, size, offset: size, lines: want, content: '', truncated: false, lineTruncated: true };
    const budget = pageBudget(ctx.maxResultBytes, skeleton, display);
    const start = Math.max(0, size - readLength(budget));
    const from = options.lookBack === false ? start : Math.max(0, start - LOOK_BACK_BYTES);
    return await withScratch(size - from, async (scratch) => {
      const region = await readChunk(handle, from, scratch);
      const buf = region.subarray(start - from);
      const model = costModel(buf, isValidUtf8(buf));
      let pos = buf.length;
      let used = 0;
      let count = 0;
      while (count < want && pos > 0) {
        const nl = pos - 2 >= 0 ? buf.lastIndexOf(10, pos - 2) : -1;
        if (nl === -1 && start > 0) break; // the line begins before what was read: it cannot fit
        const lineStart = nl + 1;
        const cost = escapedCost(buf, lineStart, pos, model);
        if (used + cost > budget) break;
        used += cost;
        pos = lineStart;
        count++;
      }
      let lineTruncated = false;
      if (count === 0 && buf.length > 0 && want > 0) {
        // The last line is longer than a page: its end, starting on a character boundary.
        let from = buf.length;
        while (from > 0 && used + model.table[buf[from - 1]!]! <= budget) used += model.table[buf[--from]!]!;
        while (from < buf.length && (buf[from]! & 0xc0) === 0x80) from++;
        pos = from;
        count = 1;
        lineTruncated = true;
      }
      // A tail that holds a key's END line starts after it (a tail ending inside a key is refused below).
      const afterKey = afterLastEndLine(buf.subarray(pos));
      if (afterKey !== -1 && afterKey < buf.length - pos) {
        const skipped = buf.subarray(pos, pos + afterKey);
        count = Math.max(1, count - countLines(skipped));
        pos += afterKey;
      }
      const window = buf.subarray(pos);
      refuseKeyMaterial(display, start + pos, window, region, from);
      const result: TailFileResult = {
        path: display,
        size,
        offset: start + pos,
        lines: count,
        content: window.toString('utf8'),
        truncated: start + pos > 0 && count < want,
      };
      if (lineTruncated) result.lineTruncated = true;
      return result;
    });
  } finally {
    await handle.close();
  }
}

const tailFileTool: Tool = {
  name: 'tail_file',
  core: true,
  description:
    'Read the last lines of a file (default 50), as many as fit one page, reading only the end of the file. ' +
    'truncated: true means fewer lines than asked fit; offset is where the returned text starts. Use read_file to page ' +
    'from a line, grep_files to find lines.',
  parameters: {
    type: 'object',
    properties: {
      root: rootParam,
      path: pathParam,
      lines: { type: 'integer', minimum: 1, maximum: 100000, description: 'How many lines from the end (default 50).' },
    },
    required: ['root', 'path'],
    additionalProperties: false,
  },
  advice: 'ask for fewer lines',
  handler: (args, ctx) => tailFile(args, ctx),
};

// ---------------------------------------------------------------------------------------------------------------
// list_dir

export interface DirEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size?: number;
  nameTruncated?: true;
}

export interface ListDirResult {
  path: string;
  offset: number;
  total: number;
  entries: DirEntry[];
  nextOffset?: number;
}

export async function listDir(args: Record<string, unknown>, ctx: ToolContext): Promise<ListDirResult> {
  const offset = (args.offset as number | undefined) ?? 0;
  const resolved = await resolveScoped(ctx.scopes, args.root, args.path ?? '');
  if (!resolved.stats.isDirectory()) throw new ToolError(`${resolved.display} is not a directory`);
  const names = (await fs.readdir(resolved.real)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const total = names.length;
  const budget = pageBudget(ctx.maxResultBytes, { path: resolved.display, offset: total, total, entries: [], nextOffset: total }, resolved.display);
  if (offset > names.length) throw new ToolError(`offset ${offset} is past the end of ${resolved.display} (${names.length} entries)`);
  const entries: DirEntry[] = [];
  let used = 0;
  let next = offset;
  for (; next < names.length; next++) {
    const name = names[next]!;
    const stats = await fs.lstat(path.join(resolved.real, name)).catch(() => undefined);
    const entry: DirEntry = {
      name,
      type: !stats ? 'other' : stats.isSymbolicLink() ? 'symlink' : stats.isDirectory() ? 'dir' : stats.isFile() ? 'file' : 'other',
      size: stats?.isFile() ? stats.size : undefined,
    };
    let cost = Buffer.byteLength(JSON.stringify(entry)) + 1;
    if (used + cost > budget) {
      if (entries.length > 0) break;
      // A name too long for a page on its own (only escaping makes one): cut it, and move the cursor past it.
      const flag = Buffer.byteLength(',"nameTruncated":true');
      entry.name = cutToEscaped(name, budget - (cost - escapedLength(name)) - flag);
      entry.nameTruncated = true;
      cost = Buffer.byteLength(JSON.stringify(entry)) + 1;
    }
    used += cost;
    entries.push(entry);
  }
  const result: ListDirResult = { path: resolved.display, offset, total, entries };
  if (next < names.length) result.nextOffset = next;
  return result;
}

const listDirTool: Tool = {
  name: 'list_dir',
  core: true,
  brief: 'List a directory a page at a time; while more remain, pass nextOffset back as offset.',
  description:
    'List a directory, sorted by name, with each entry\'s type and size, one page at a time. total is the number of ' +
    'entries; while more remain the result has nextOffset: pass it back as offset for the next page. A name too long ' +
    'for a page comes back cut and flagged nameTruncated.',
  parameters: {
    type: 'object',
    properties: {
      root: rootParam,
      path: { ...pathParam, description: 'Directory relative to the scope root (default: the root itself).' },
      offset: { type: 'integer', minimum: 0, description: 'Index of the first entry, from a previous nextOffset.' },
    },
    required: ['root'],
    additionalProperties: false,
  },
  advice: 'page with offset',
  handler: (args, ctx) => listDir(args, ctx),
};

// ---------------------------------------------------------------------------------------------------------------
// write_file

export const MAX_WRITE_BYTES = 1024 * 1024;

export async function writeFile(args: Record<string, unknown>, ctx: ToolContext): Promise<{ path: string; bytes: number; created: boolean }> {
  const content = args.content as string;
  const bytes = Buffer.byteLength(content);
  if (bytes > MAX_WRITE_BYTES) throw new ToolError(`content is ${bytes} bytes; write_file writes at most ${MAX_WRITE_BYTES} bytes`);
  const resolved = await resolveScoped(ctx.scopes, args.root, args.path, { write: true, mayNotExist: true });
  if (resolved.exists && !resolved.stats.isFile()) throw new ToolError(`${resolved.display} is not a regular file`);
  if (!args.path || resolved.display.endsWith('/')) throw new ToolError('path must name a file');
  // Each folder in the components scope is loaded as a component at Harper's next boot: a new one holding a note would
  // fail to load there. Writes go into a component that exists.
  const top = path.relative(ctx.scopes.components, resolved.real).split(path.sep)[0]!;
  if (path.dirname(resolved.real) !== ctx.scopes.components && !(await fs.stat(path.join(ctx.scopes.components, top)).catch(() => null))?.isDirectory()) {
    throw new ToolError(`components/${top} does not exist: write_file writes inside an existing component's folder (Harper loads every folder in components as a component at its next boot, and a new one that is not a component fails there)`);
  }
  await fs.mkdir(path.dirname(resolved.real), { recursive: true });
  // Atomic: a reader sees the old file or the new one, never half of it.
  const temp = path.join(path.dirname(resolved.real), `.${path.basename(resolved.real)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await fs.writeFile(temp, content, { flag: 'wx', mode: resolved.exists ? resolved.stats.mode & 0o777 : 0o644 });
    await fs.rename(temp, resolved.real);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
  return { path: resolved.display, bytes, created: !resolved.exists };
}

const writeFileTool: Tool = {
  name: 'write_file',
  description:
    `Write a whole file under the components scope (the only writable one), atomically, at most ${MAX_WRITE_BYTES} bytes. ` +
    'It needs the operator\'s approval unless agent.autoApprove is on. Read the whole file first (every page) when ' +
    'changing an existing one: what you write replaces it.',
  parameters: {
    type: 'object',
    properties: {
      root: { type: 'string', enum: ['components'] },
      path: pathParam,
      content: { type: 'string', description: 'The whole new content.' },
    },
    required: ['root', 'path', 'content'],
    additionalProperties: false,
  },
  destructive: true,
  handler: (args, ctx) => writeFile(args, ctx),
};

export const fsTools: Tool[] = [readFileTool, tailFileTool, listDirTool, writeFileTool];

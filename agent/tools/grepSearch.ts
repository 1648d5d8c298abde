// The search behind grep_files: walks a tree, matches line by line within a budget, skips what it must not
// search. It runs in a worker thread (grepWorker.ts) so a pathological pattern can be stopped.
import { closeSync, openSync, readSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { holdsArmorLine } from './keyMaterial.js';
import { cutToEscaped, escapedLength } from './paging.js';
import { isKeyFileName } from './scopes.js';

export interface GrepJob {
  /** Real path of the file or directory to search. */
  start: string;
  /** How `start` is shown: `<scope>/<relative>`. */
  display: string;
  /** Real and lexical paths of Harper's key directories: pruned, never searched. */
  keyDirs: string[];
  pattern: string;
  flags: string;
  maxMatches: number;
  budget: number;
}

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

export interface GrepResult {
  matches: GrepMatch[];
  truncated: boolean;
  filesSearched: number;
  skippedFiles: { path: string; reason: string }[];
  skippedCount: number;
}

const MATCH_TEXT_BYTES = 400;
const CHUNK = 4 << 20;

/** Counts newlines in buf[from, to). */
function newlines(buf: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = buf.indexOf(10, from); i !== -1 && i < to; i = buf.indexOf(10, i + 1)) n++;
  return n;
}

export async function grepSearch(job: GrepJob): Promise<GrepResult> {
  const re = new RegExp(job.pattern, job.flags.includes('g') ? job.flags : `${job.flags}gm`);
  // A pattern with no regex syntax is searched for as bytes, natively, without decoding the file (as grep does).
  const literal = !/[\\^$.|?*+()[\]{}]/.test(job.pattern) && !job.flags.includes('i') ? Buffer.from(job.pattern) : null;
  const result: GrepResult = { matches: [], truncated: false, filesSearched: 0, skippedFiles: [], skippedCount: 0 };
  const matchBudget = Math.floor((job.budget * 3) / 4);
  let skipBudget = job.budget - matchBudget;
  let used = 0;
  const skip = (display: string, reason: string) => {
    result.skippedCount++;
    const cost = Buffer.byteLength(JSON.stringify({ path: display, reason })) + 1;
    if (cost <= skipBudget) {
      skipBudget -= cost;
      result.skippedFiles.push({ path: display, reason });
    }
  };
  const buf = Buffer.allocUnsafe(CHUNK); // one read buffer for the whole search: a fresh one per file costs page faults
  const isKeyDir = (p: string) => job.keyDirs.some((d) => p === d || p.startsWith(d + path.sep));

  async function searchFile(real: string, display: string): Promise<boolean> {
    let fd: number;
    try {
      fd = openSync(real, 'r'); // a worker thread: synchronous reads block nobody
    } catch (error) {
      skip(display, `unreadable (${(error as NodeJS.ErrnoException).code})`);
      return true;
    }
    const found: GrepMatch[] = [];
    let foundCost = 0;
    let full = false;
    let lineNo = 1;
    /** Records the match on line `line`; false once the budget or maxMatches is reached. */
    const record = (line: string): boolean => {
      line = line.replace(/\r$/, '');
      const shown = escapedLength(line) > MATCH_TEXT_BYTES ? `${cutToEscaped(line, MATCH_TEXT_BYTES - 3)}…` : line;
      const match = { path: display, line: lineNo, text: shown };
      const cost = Buffer.byteLength(JSON.stringify(match)) + 1;
      if (used + foundCost + cost > matchBudget || result.matches.length + found.length >= job.maxMatches) return false;
      found.push(match);
      foundCost += cost;
      return true;
    };
    const searchBytes = (data: Buffer) => {
      let counted = 0;
      for (let hit = data.indexOf(literal!); hit !== -1; ) {
        const lineStart = hit === 0 ? 0 : data.lastIndexOf(10, hit - 1) + 1; // a negative offset would count from the end
        let lineEnd = data.indexOf(10, hit);
        if (lineEnd === -1) lineEnd = data.length;
        lineNo += newlines(data, counted, lineStart);
        counted = lineStart;
        if (!record(data.toString('utf8', lineStart, lineEnd))) return (full = true);
        hit = lineEnd + 1 < data.length ? data.indexOf(literal!, lineEnd + 1) : -1;
      }
      lineNo += newlines(data, counted, data.length);
    };
    const searchText = (data: Buffer) => {
      const text = data.toString('utf8');
      re.lastIndex = 0;
      let counted = 0;
      for (let m = re.exec(text); m; m = re.exec(text)) {
        const lineStart = m.index === 0 ? 0 : text.lastIndexOf('\n', m.index - 1) + 1;
        let lineEnd = text.indexOf('\n', m.index);
        if (lineEnd === -1) lineEnd = text.length;
        for (let i = text.indexOf('\n', counted); i !== -1 && i < lineStart; i = text.indexOf('\n', i + 1)) lineNo++;
        counted = lineStart;
        if (!record(text.slice(lineStart, lineEnd))) return (full = true);
        re.lastIndex = lineEnd + 1;
      }
      for (let i = text.indexOf('\n', counted); i !== -1; i = text.indexOf('\n', i + 1)) lineNo++;
    };
    try {
      let carry = Buffer.alloc(0);
      let position = 0;
      let first = true;
      for (;;) {
        const bytesRead = readSync(fd, buf, 0, CHUNK, position);
        position += bytesRead;
        const eof = bytesRead === 0;
        let data = carry.length ? Buffer.concat([carry, buf.subarray(0, bytesRead)]) : buf.subarray(0, bytesRead);
        if (first) {
          first = false;
          if (data.subarray(0, 8192).includes(0)) {
            skip(display, 'binary');
            return true;
          }
        }
        if (holdsArmorLine(data)) {
          skip(display, 'key material');
          return true;
        }
        const cut = eof ? data.length : data.lastIndexOf(10) + 1;
        carry = Buffer.from(data.subarray(cut));
        data = data.subarray(0, cut);
        // Once full, the rest of the file is still read: its matches count only if it holds no key material.
        if (data.length > 0 && !full) (literal ? searchBytes : searchText)(data);
        if (eof) break;
      }
    } finally {
      closeSync(fd);
    }
    // A file's matches count only once the whole file is known to hold no key material.
    result.filesSearched++;
    result.matches.push(...found);
    used += foundCost;
    if (full) result.truncated = true;
    return !full;
  }

  async function walk(real: string, display: string): Promise<boolean> {
    const stats = await fs.lstat(real).catch(() => undefined);
    if (!stats) {
      skip(display, 'unreadable');
      return true;
    }
    if (stats.isSymbolicLink()) {
      skip(display, 'symlink (not followed)');
      return true;
    }
    if (stats.isDirectory()) {
      if (isKeyDir(real)) {
        skip(display, 'key directory');
        return true;
      }
      const names = (await fs.readdir(real).catch(() => null))?.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      if (!names) {
        skip(display, 'unreadable directory');
        return true;
      }
      for (const name of names) {
        if (!(await walk(path.join(real, name), display.endsWith('/') ? display + name : `${display}/${name}`))) return false;
      }
      return true;
    }
    if (!stats.isFile()) return true;
    if (isKeyFileName(path.basename(real))) {
      skip(display, 'key material');
      return true;
    }
    return searchFile(real, display);
  }

  await walk(job.start, job.display);
  return result;
}

// Page budgets: each page's text, measured JSON-escaped, is at most half of agent.maxToolResultBytes less what
// the result's other fields need, so the loop's cap never cuts a page and its cursor always survives.
import { ToolError } from './types.js';

/** Enough for one list_dir entry with a 255-byte name. */
export const MIN_PAGE_BYTES = 320;

/** Bytes each byte costs once JSON.stringify has escaped it (UTF-8 bytes >= 0x80 are kept as they are). */
const COST = new Uint8Array(256).fill(1);
for (let b = 0; b < 0x20; b++) COST[b] = 6; // \u00XX
for (const b of [0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x22, 0x5c]) COST[b] = 2; // \b \t \n \f \r \" \\
/** For bytes that are not valid UTF-8: each may decode to U+FFFD, 3 bytes. */
const COST_UNSURE = Uint8Array.from(COST, (c, b) => (b >= 0x80 ? 3 : c));
/** Bytes whose cost is not 1, other than \n (every line has one): each is looked for with a native search, which
 * on a page of text is several times faster than a regular expression over it. */
const NEEDS_ESCAPE = [0x22, 0x5c, 0x09, 0x0d, ...Array.from({ length: 0x20 }, (_, b) => b).filter((b) => b !== 0x0a && b !== 0x09 && b !== 0x0d)];

export interface CostModel {
  table: Uint8Array;
  /** The buffer holds nothing but 1-byte-cost bytes and \n: a line's cost is its length plus its newline. */
  plain: boolean;
}

export function costModel(buf: Buffer, validUtf8: boolean): CostModel {
  const table = validUtf8 ? COST : COST_UNSURE;
  const plain = validUtf8 && NEEDS_ESCAPE.every((b) => buf.indexOf(b) === -1);
  return { table, plain };
}

export function escapedCost(buf: Buffer, start: number, end: number, model: CostModel): number {
  if (model.plain) {
    let cost = end - start;
    for (let i = buf.indexOf(10, start); i !== -1 && i < end; i = buf.indexOf(10, i + 1)) cost++;
    return cost;
  }
  let cost = 0;
  const table = model.table;
  for (let i = start; i < end; i++) cost += table[buf[i]!]!;
  return cost;
}

/** JSON-escaped size of a string, as JSON.stringify writes it without the quotes. */
export function escapedLength(text: string): number {
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}

/** Is every byte of `buf` part of valid UTF-8? */
export function isValidUtf8(buf: Buffer): boolean {
  return Buffer.byteLength(buf.toString('utf8')) === buf.length;
}

/**
 * The text budget of a page: half the cap, less the result's other fields (a skeleton with the widest values
 * they can take and empty text). Throws the explicit error when that leaves less than a minimum page.
 */
export function pageBudget(maxResultBytes: number, skeleton: Record<string, unknown>, display: string): number {
  const overhead = Buffer.byteLength(JSON.stringify(skeleton));
  const budget = Math.floor(maxResultBytes / 2) - overhead;
  if (budget < MIN_PAGE_BYTES) {
    throw new ToolError(
      `agent.maxToolResultBytes (${maxResultBytes}) leaves no room for a page of ${display}: its path and fields need ` +
        `${overhead} of the ${Math.floor(maxResultBytes / 2)} bytes a page may use. Raise agent.maxToolResultBytes ` +
        `(set_agent_config) or use a shorter path.`
    );
  }
  return budget;
}

/** Where a page cut inside a line must end so it does not split a UTF-8 character. */
export function utf8Boundary(buf: Buffer, end: number, floor: number): number {
  while (end > floor && end < buf.length && (buf[end]! & 0xc0) === 0x80) end--;
  return end;
}

export interface Slice {
  /** Bytes of `buf` the page takes. */
  end: number;
  /** Lines the page holds (a part of a line counts as one). */
  lines: number;
  /** The page is part of one line longer than a page. */
  lineTruncated: boolean;
}

/**
 * Whole lines from the start of `buf`, as many as fit `budget` escaped bytes and `maxLines`; when the first line
 * does not fit, as much of it as fits. `atEof`: `buf` reaches the end of the file, so a last line with no
 * newline is whole.
 */
export function slicePage(buf: Buffer, atEof: boolean, budget: number, maxLines: number, model: CostModel): Slice {
  let pos = 0;
  let used = 0;
  let lines = 0;
  while (lines < maxLines && pos < buf.length) {
    const nl = buf.indexOf(10, pos);
    if (nl === -1 && !atEof) break;
    const lineEnd = nl === -1 ? buf.length : nl + 1;
    // Plain text: a line costs its bytes and one more for its newline.
    const cost = model.plain ? lineEnd - pos + (nl === -1 ? 0 : 1) : escapedCost(buf, pos, lineEnd, model);
    if (used + cost > budget) break;
    used += cost;
    pos = lineEnd;
    lines++;
  }
  if (lines > 0 || pos >= buf.length || maxLines < 1) return { end: pos, lines, lineTruncated: false };
  // The first line is longer than a page: as much of it as fits, cut on a character boundary.
  let end = 0;
  const table = model.table;
  while (end < buf.length && used + table[buf[end]!]! <= budget) used += table[buf[end++]!]!;
  end = utf8Boundary(buf, end, 0);
  return { end, lines: 1, lineTruncated: true };
}

/** The longest prefix of `text`, by whole code points, whose escaped length is at most `room`. */
export function cutToEscaped(text: string, room: number): string {
  let used = 0;
  let out = '';
  for (const ch of text) {
    const cost = escapedLength(ch);
    if (used + cost > room) break;
    used += cost;
    out += ch;
  }
  return out;
}

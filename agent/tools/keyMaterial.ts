// Key material is never served: a page, tail window or grep match that holds a PEM private-key armor line is
// refused, and so is a window that falls inside a key (found by looking back before it). See DESIGN.md.
import type { CheckedFile } from './scopes.js';
import { withScratch } from './scratch.js';
import { ToolError } from './types.js';

/** BEGIN/END lines of PKCS#8 (plain and encrypted), RSA, EC, DSA, OpenSSH and PGP private keys. */
const ARMOR = /-----(BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/g;
/** Longer than any PEM private key (a FrodoKEM-1344 key is about 57 KB of PEM). */
export const LOOK_BACK_BYTES = 128 * 1024;
/** A key-body line: base64 only, at most 80 characters (PEM wraps at 64, OpenSSH at 70), indented or not
 * (a key embedded in YAML), CR allowed. A longer line (a minified bundle) is not key body. */
const BODY_LINE = /^[ \t]*[A-Za-z0-9+/=]{1,80}[ \t]*\r?$/;
const LONGEST_ARMOR_LINE = 64;
/** How far past a refused window read_file looks for the key's END line, to say where to resume. */
const RESUME_SEARCH_BYTES = 1024 * 1024;

export class KeyMaterialError extends ToolError {}

interface Armor {
  kind: 'BEGIN' | 'END';
  /** Where the match starts, and where the line holding it starts. */
  index: number;
  lineStart: number;
  end: number;
}

function armorLines(text: string): Armor[] {
  const out: Armor[] = [];
  ARMOR.lastIndex = 0;
  for (let m = ARMOR.exec(text); m; m = ARMOR.exec(text)) {
    out.push({ kind: m[1] as Armor['kind'], index: m.index, lineStart: text.lastIndexOf('\n', m.index - 1) + 1, end: m.index + m[0].length });
  }
  return out;
}

/** Every armor line names "PRIVATE KEY": a native search rules most buffers out before any decoding. */
const MARK = Buffer.from('PRIVATE KEY');

export function holdsArmorLine(bytes: Buffer): boolean {
  if (bytes.indexOf(MARK) === -1) return false;
  ARMOR.lastIndex = 0;
  return ARMOR.test(bytes.toString('latin1', 0, bytes.length));
}

/** Are the lines of bytes[0, end) all key body? Checked from the end, so ordinary text stops it at once. */
function onlyKeyBody(bytes: Buffer, end: number): boolean {
  let lineEnd = end > 0 && bytes[end - 1] === 10 ? end - 1 : end;
  if (lineEnd <= 0) return false;
  while (lineEnd > 0) {
    const nl = lineEnd > 0 ? bytes.lastIndexOf(10, lineEnd - 1) : -1;
    if (!BODY_LINE.test(bytes.toString('latin1', nl + 1, lineEnd))) return false;
    if (nl === -1) return true;
    lineEnd = nl;
  }
  return true;
}

/** Byte index where the line holding the first armor line of `bytes` starts, or -1. */
export function firstArmorLineStart(bytes: Buffer): number {
  if (bytes.indexOf(MARK) === -1) return -1;
  const [first] = armorLines(bytes.toString('latin1', 0, bytes.length));
  return first ? first.lineStart : -1;
}

/** Byte index just after the line holding the last armor line of `bytes`, if that line is an END; else -1. */
export function afterLastEndLine(bytes: Buffer): number {
  if (bytes.indexOf(MARK) === -1) return -1;
  const all = armorLines(bytes.toString('latin1', 0, bytes.length));
  const last = all[all.length - 1];
  if (!last || last.kind !== 'END') return -1;
  const nl = bytes.indexOf(10, last.end);
  return nl === -1 ? bytes.length : nl + 1;
}

/** Is `before` (the bytes just before a window, and a little past its start) inside a private key: an unclosed
 * BEGIN, or nothing but key body with no armor line and no start of file in sight? */
export function insideKey(before: Buffer, armorMayBeginUntil: number, reachesFileStart: boolean): 'begin' | 'body' | false {
  let last: Armor['kind'] | undefined;
  if (before.indexOf(MARK) !== -1) {
    for (const a of armorLines(before.toString('latin1'))) {
      if (a.index >= armorMayBeginUntil) break; // only armor lines that begin before the window count
      last = a.kind;
    }
  }
  if (last === 'BEGIN') return 'begin';
  if (last === 'END' || reachesFileStart) return false;
  return onlyKeyBody(before, armorMayBeginUntil) ? 'body' : false;
}

/**
 * Refuses the window [start, start + window.length) of a file when it holds an armor line or falls inside a key.
 * `before` holds the file's bytes from `beforeFrom` (at most LOOK_BACK_BYTES before `start`) up to at least `start`,
 * read with the window in one read; pass an empty buffer to skip the look-back (the bench measures its cost).
 */
export function refuseKeyMaterial(display: string, start: number, window: Buffer, before: Buffer, beforeFrom: number): void {
  if (holdsArmorLine(window)) throw new KeyMaterialError(`${display}: this part of the file holds a PEM private key and is never served`);
  if (start === 0 || before.length === 0) return;
  const span = before.subarray(0, Math.min(before.length, start - beforeFrom + LONGEST_ARMOR_LINE));
  const verdict = insideKey(span, start - beforeFrom, beforeFrom === 0);
  if (verdict === 'begin') throw new KeyMaterialError(`${display}: this part of the file is inside a PEM private key and is never served`);
  if (verdict === 'body') {
    throw new KeyMaterialError(
      `${display}: this part of the file may be inside a PEM private key (the ${LOOK_BACK_BYTES / 1024} KiB before it are nothing but key-body lines), so it is not served`
    );
  }
}

/** Where paging can go on after a refused window: the line after the key's END line, as read_file cursors. */
export async function resumeAfterKey(handle: CheckedFile, offset: number, startLine: number, size: number): Promise<string> {
  const text = await withScratch(Math.min(RESUME_SEARCH_BYTES, size - offset), async (buf) => {
    const { bytesRead } = await handle.read(buf, 0, buf.length, offset);
    return buf.toString('latin1', 0, bytesRead);
  });
  const end = armorLines(text).find((a) => a.kind === 'END');
  if (!end) return ' No END line follows within 1 MiB: skip ahead with a larger startLine, or use grep_files.';
  const nl = text.indexOf('\n', end.end);
  if (nl === -1 || offset + nl + 1 >= size) return ' The key runs to the end of the file.';
  let lines = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i <= nl; i = text.indexOf('\n', i + 1)) lines++;
  return ` Continue after it with startLine ${startLine + lines} and offset ${offset + nl + 1}.`;
}

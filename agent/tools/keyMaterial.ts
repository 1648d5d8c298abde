// Key material is never served: a page, tail window or grep match that holds a PEM private-key armor line is
// refused, and so is a window that falls inside a key (found by looking back before it). See DESIGN.md.
import type { FileHandle } from 'node:fs/promises';
import { ToolError } from './types.js';

/** BEGIN/END lines of PKCS#8 (plain and encrypted), RSA, EC, DSA, OpenSSH and PGP private keys. */
const ARMOR = /-----(BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/g;
/** Longer than any PEM private key (a FrodoKEM-1344 key is about 57 KB of PEM). */
export const LOOK_BACK_BYTES = 128 * 1024;
/** A key-body line: base64 only, at most 80 characters (PEM wraps at 64, OpenSSH at 70), indented or not
 * (a key embedded in YAML), CR allowed. A longer line (a minified bundle) is not key body. */
const BODY_LINE = /^[ \t]*[A-Za-z0-9+/=]{1,80}[ \t]*\r?$/;
const LONGEST_ARMOR_LINE = 64;

export function holdsArmorLine(bytes: Buffer): boolean {
  ARMOR.lastIndex = 0;
  return ARMOR.test(bytes.toString('latin1', 0, bytes.length));
}

/** Is `before` (the bytes just before a window) inside a private key: an unclosed BEGIN, or nothing but key body? */
export function insideKey(before: string, armorMayBeginUntil: number, reachesFileStart: boolean): 'begin' | 'body' | false {
  let last: string | undefined;
  ARMOR.lastIndex = 0;
  for (let m = ARMOR.exec(before); m; m = ARMOR.exec(before)) {
    if (m.index >= armorMayBeginUntil) break; // only armor lines that begin before the window count
    last = m[1];
  }
  if (last === 'BEGIN') return 'begin';
  if (last === 'END' || reachesFileStart) return false;
  const span = before.slice(0, armorMayBeginUntil);
  const lines = span.split('\n');
  if (span.endsWith('\n')) lines.pop();
  if (lines.length === 0) return false;
  return lines.every((line) => BODY_LINE.test(line)) ? 'body' : false;
}

/**
 * Refuses the window [start, end) of a file when it holds an armor line or falls inside a key.
 * `window` is the window's bytes, already read.
 */
export async function refuseKeyMaterial(
  handle: FileHandle,
  display: string,
  start: number,
  window: Buffer,
  lookBack = true
): Promise<void> {
  if (holdsArmorLine(window)) throw new ToolError(`${display}: this part of the file holds a PEM private key and is never served`);
  if (!lookBack || start === 0) return;
  const from = Math.max(0, start - LOOK_BACK_BYTES);
  const length = start - from + LONGEST_ARMOR_LINE;
  const buf = Buffer.allocUnsafe(length);
  const { bytesRead } = await handle.read(buf, 0, length, from);
  const verdict = insideKey(buf.toString('latin1', 0, bytesRead), start - from, from === 0);
  if (verdict === 'begin') throw new ToolError(`${display}: this part of the file is inside a PEM private key and is never served`);
  if (verdict === 'body') {
    throw new ToolError(
      `${display}: this part of the file may be inside a PEM private key (the ${LOOK_BACK_BYTES / 1024} KiB before it are nothing but key-body lines), so it is not served`
    );
  }
}

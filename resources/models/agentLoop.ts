// What a tool result becomes in the transcript: the serializer, its UTF-8-exact cut, and errorInfo.
// Every observation the loop stores passes serializeToolResult (agent/observation.ts capObservation).

export const DEFAULT_ADVICE =
  'narrow the request: use the paging arguments (startLine/offset/lineCount), a smaller range, or a more specific pattern';

/** Turns anything thrown into a readable message, never "[object Object]". */
export function errorInfo(error: unknown): string {
  if (error instanceof Error) return error.message || error.name || 'Error';
  if (typeof error === 'string') return error || 'unknown error';
  if (error === null || error === undefined) return 'unknown error';
  if (typeof error === 'object') {
    const message = (error as { message?: unknown }).message;
    if (typeof message === 'string' && message) return message;
    try {
      const json = JSON.stringify(error);
      if (json && json !== '{}') return json;
    } catch {
      // fall through to String()
    }
  }
  let text = '';
  try {
    text = String(error);
  } catch {
    // an object with no prototype has no toString
  }
  return !text || text === '[object Object]' ? 'unknown error' : text;
}

/** The largest prefix of `buf` no longer than `maxBytes` that ends on a UTF-8 character boundary. */
export function utf8PrefixLength(buf: Uint8Array, maxBytes: number): number {
  if (maxBytes >= buf.length) return buf.length;
  let end = Math.max(0, maxBytes);
  // Back up over continuation bytes (10xxxxxx) so the byte at `end` starts a character.
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return end;
}

/** Cuts `text` to a head plus a marker naming its full size, the whole at most `maxBytes` UTF-8 bytes. */
export function truncateWithMarker(
  text: string,
  maxBytes: number,
  advice: string = DEFAULT_ADVICE,
  reason = 'truncated'
): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text; // measures without encoding: the common case
  const buf = Buffer.from(text, 'utf8');
  const marker = `…[${reason}; full result is ${buf.length} bytes. Ask for less: ${advice}]`;
  const markerBuf = Buffer.from(marker, 'utf8');
  if (markerBuf.length >= maxBytes) {
    return markerBuf.subarray(0, utf8PrefixLength(markerBuf, maxBytes)).toString('utf8');
  }
  const head = buf.subarray(0, utf8PrefixLength(buf, maxBytes - markerBuf.length)).toString('utf8');
  return head + marker;
}

/** A tool result as text, before any cut: JSON, strings as they are. */
export function toolResultText(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (error) {
    // e.g. Harper's BigInt.prototype.toJSON throws a plain { message }: the model gets that message.
    return JSON.stringify({ error: errorInfo(error) });
  }
}

/** The text the transcript stores for a tool result, at most `maxBytes` UTF-8 bytes. */
export function serializeToolResult(value: unknown, maxBytes: number, advice?: string): string {
  return truncateWithMarker(toolResultText(value), maxBytes, advice);
}

/** Strings longer than this move to the end of a result before a head cut: they are the page, not its cursor. */
const LONG_FIELD_BYTES = 256;

/**
 * A JSON object result with its short fields (cursors, sizes, paths) first and its long strings (a page's content)
 * last, so a head cut keeps every cursor readable; anything else as it is. Key order is all that changes.
 */
export function cursorFirst(text: string): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return text;
  const entries = Object.entries(value as Record<string, unknown>);
  const long = (v: unknown) => typeof v === 'string' ? Buffer.byteLength(v) > LONG_FIELD_BYTES : typeof v === 'object' && v !== null && Buffer.byteLength(JSON.stringify(v)) > LONG_FIELD_BYTES;
  return JSON.stringify(Object.fromEntries([...entries.filter(([, v]) => !long(v)), ...entries.filter(([, v]) => long(v))]));
}

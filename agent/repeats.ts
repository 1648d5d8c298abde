// A model going round in circles: the same tool call with the same arguments again and again, or two calls in turn,
// within one prompt's turn. Told once (in the result of the call that makes it REPEAT_NOTICE times), the run ends at
// REPEAT_STOP with a lastError that says so. Paging is never a repeat: each page's call carries a new cursor.
import type { ToolCall } from '../resources/models/types.js';
import type { StoredMessage } from './compaction.js';

/** The call that makes it this many times is answered with a notice beside its result. */
export const REPEAT_NOTICE = 3;
/** The call that would make it this many times is not run: the run ends. */
export const REPEAT_STOP = 6;

/** A call's identity: its name and its arguments with keys in order. */
export function callKey(call: Pick<ToolCall, 'name' | 'arguments'>): string {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sorted(x)])) : v;
  return `${call.name} ${JSON.stringify(sorted(call.arguments))}`;
}

/** How many times in a row the newest key repeats: itself (A A A), or the pair it ends (A B A B counts each pair once). */
export function repeats(keys: readonly string[]): number {
  const n = keys.length;
  if (n === 0) return 0;
  let same = 1;
  while (same < n && keys[n - 1 - same] === keys[n - 1]) same++;
  let alternating = 1;
  while (alternating + 1 < n && keys[n - 2 - alternating] === keys[n - alternating] && keys[n - 1] !== keys[n - 2]) alternating++;
  return Math.max(same, Math.floor((alternating + 1) / 2));
}

/** The tool calls made since the newest prompt, through `call` (in order), as keys. */
export function callsThisTurn(messages: readonly StoredMessage[], call: ToolCall): string[] {
  let start = messages.length;
  while (start > 0 && messages[start - 1]!.role !== 'user') start--;
  const keys: string[] = [];
  for (const m of messages.slice(start)) {
    if (m.role !== 'assistant') continue;
    for (const c of m.toolCalls ?? []) {
      keys.push(callKey(c));
      if (c.id === call.id) return keys;
    }
  }
  return keys;
}

/** The notice the model reads beside the result of a repeated call. */
export function repeatNotice(call: ToolCall, times: number): string {
  return `You have now made this same ${call.name} call ${times} times in a row with the same arguments (or in turn with one other call), and the results do not change. Do something different: use what the results already say, change the arguments (a cursor, a pattern, a path), or answer with what you know. The run is stopped if the repeats go on.`;
}

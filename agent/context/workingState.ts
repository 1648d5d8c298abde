// The thread of an investigation, kept through every compaction: the operator's prompts word for word, where each
// paged read stands (the call that reads its next page), and the model's own notes and answers. It is rebuilt from the
// stored transcript at each compaction (the originals stay stored), so nothing depends on an earlier summary having
// kept it, and it goes into the compaction record after the summary: whatever the summary loses (a model's summary
// that drifts, a digest cut to its budget), the model still has the question, what it concluded and where it was.
// Pure functions; agent/compaction.ts places the block, agent/turn.ts stores the record.
import type { Message, ToolCall } from '../../resources/models/types.js';
import type { StoredMessage } from '../compaction.js';

/** A result's cursor fields and the argument each is passed back as. */
const CURSORS = [
  ['nextLine', 'startLine'],
  ['nextOffset', 'offset'],
  ['nextStart', 'start'],
] as const;
const CURSOR_ARGS = new Set<string>(CURSORS.map(([, arg]) => arg));

/** A paged read in progress or finished: the call that reads its next page, or how it ended. */
export interface ReadInProgress {
  tool: string;
  /** The call's arguments without its cursor: what names the thing read. */
  target: Record<string, unknown>;
  /** The arguments of the next page's call (target and cursor), or null once the read reached its end. */
  next: Record<string, unknown> | null;
  /** What the last page said of the whole, where it said: totalLines. */
  totalLines?: number;
  endLine?: number;
}

const field = (content: string, name: string): number | undefined => {
  const m = new RegExp(`"${name}":(\\d+)`).exec(content);
  return m ? Number(m[1]) : undefined;
};

/** Each paged read of the transcript up to `upTo`, by the newest page of each target (oldest first). A page cut to its
 * head still has its cursor: results are stored with their short fields first. */
export function readsInProgress(messages: readonly StoredMessage[], upTo = messages.length): ReadInProgress[] {
  const calls = new Map<string, ToolCall>();
  const reads = new Map<string, ReadInProgress>();
  for (let i = 0; i < upTo; i++) {
    const m = messages[i]!;
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) calls.set(c.id, c);
    if (m.role !== 'tool' || m.isError) continue;
    const call = calls.get(m.toolCallId);
    if (!call) continue;
    const cursor: Record<string, number> = {};
    for (const [from, to] of CURSORS) {
      const value = field(m.content, from);
      if (value !== undefined) cursor[to] = value;
    }
    const totalLines = field(m.content, 'totalLines');
    const paged = Object.keys(cursor).length > 0 || totalLines !== undefined || Object.keys(call.arguments).some((k) => CURSOR_ARGS.has(k));
    if (!paged) continue;
    const target = Object.fromEntries(Object.entries(call.arguments).filter(([k]) => !CURSOR_ARGS.has(k)));
    const key = `${call.name} ${JSON.stringify(target)}`;
    reads.delete(key); // the newest page of a target decides, and moves it last
    const read: ReadInProgress = { tool: call.name, target, next: Object.keys(cursor).length ? { ...target, ...cursor } : null };
    if (totalLines !== undefined) read.totalLines = totalLines;
    const endLine = field(m.content, 'endLine');
    if (endLine !== undefined) read.endLine = endLine;
    reads.set(key, read);
  }
  return [...reads.values()];
}

/** The operator's prompts up to `upTo`, word for word (a prompt's stored text; its time goes with it). */
export function operatorPrompts(messages: readonly StoredMessage[], upTo = messages.length): { text: string; at?: number }[] {
  return messages.slice(0, upTo).flatMap((m) => (m.role === 'user' ? [{ text: m.content, ...(m.at ? { at: m.at } : {}) }] : []));
}

/** The model's own words up to `upTo`: each answer and each note it wrote beside its tool calls. */
export function modelNotes(messages: readonly StoredMessage[], upTo = messages.length): { text: string; answer: boolean }[] {
  return messages.slice(0, upTo).flatMap((m) => (m.role === 'assistant' && m.content.trim() ? [{ text: m.content.trim(), answer: !(m as Extract<Message, { role: 'assistant' }>).toolCalls?.length }] : []));
}

/**
 * Lines that fit `budgetBytes`, taken from both ends toward the middle (the first and the newest always, as long as
 * each fits alone), with what was left out said where it was: the start of a thread and where it stands matter most.
 */
export function middleOut(lines: readonly string[], budgetBytes: number, what: string): string[] {
  const size = (l: string) => Buffer.byteLength(l) + 1;
  let used = 0;
  const head: string[] = [];
  const tail: string[] = [];
  let i = 0;
  let j = lines.length - 1;
  for (let fromHead = true; i <= j; fromHead = !fromHead) {
    const line = fromHead ? lines[i]! : lines[j]!;
    if (used + size(line) > budgetBytes) break;
    used += size(line);
    if (fromHead) head.push(lines[i++]!);
    else tail.unshift(lines[j--]!);
  }
  const left = j - i + 1;
  return left > 0 ? [...head, `(${left} ${what} left out here to fit)`, ...tail] : [...head, ...tail];
}

const clip = (text: string, bytes: number) => {
  const b = Buffer.from(text);
  return b.length <= bytes ? text : `${b.subarray(0, bytes).toString('utf8').replace(/\uFFFD$/, '')}… (${b.length.toLocaleString('en-US')} bytes, clipped)`;
};

export const WORKING_STATE_HEADING = '=== Working state (rebuilt at every compaction from the whole session) ===';

/** The block as the model reads it, within `budgetBytes`: the prompts get 40% of it, the reads 20%, the notes the rest. */
export function workingStateBlock(messages: readonly StoredMessage[], upTo: number, budgetBytes: number): string {
  const prompts = operatorPrompts(messages, upTo).map((p, n) => `${n + 1}. ${p.at ? `[${new Date(p.at).toISOString().slice(0, 19)}Z] ` : ''}${clip(p.text, Math.floor(budgetBytes * 0.2))}`);
  const reads = readsInProgress(messages, upTo).map((r) =>
    r.next
      ? `- ${r.tool} ${JSON.stringify(r.next)}${r.endLine ? ` reads on after line ${r.endLine}` : ''}`
      : `- ${r.tool} ${JSON.stringify(r.target)} was read to its end${r.totalLines !== undefined ? ` (${r.totalLines} lines)` : ''}`
  );
  const notes = modelNotes(messages, upTo).map((n) => `- ${n.answer ? 'answer' : 'note'}: ${clip(n.text.replace(/\s+/g, ' '), 1000)}`);
  const sections: string[] = [WORKING_STATE_HEADING];
  if (prompts.length) sections.push("The operator's prompts, word for word, oldest first:", ...middleOut(prompts, Math.floor(budgetBytes * 0.4), 'prompt(s)'));
  if (reads.length) sections.push('Paged reads, each with the call that reads its next page (go on from there; do not start again):', ...middleOut(reads, Math.floor(budgetBytes * 0.2), 'read(s)'));
  if (notes.length) sections.push('Your own notes and answers, oldest first:', ...middleOut(notes, Math.floor(budgetBytes * 0.4), 'note(s)'));
  return sections.length > 1 ? sections.join('\n') : '';
}

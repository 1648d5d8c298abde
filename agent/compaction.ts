// Compaction: a session never dies of its length. When a request would pass agent.compactAtPercent of the context
// budget, the older part of what the model sees is replaced by one summary, stored in the transcript as a
// `compaction` record (the originals stay stored). What a request carries is derived from the stored transcript alone
// (`requestMessages`): the newest record's summary, then every message from its `keepFrom` on. This module is pure:
// where to cut, what the summary call reads, the digest that stands in when no model summary can be had, and the
// record's text; agent/turn.ts makes the call and writes the record through the locked mutator.
import { cursorFirst, truncateWithMarker } from '../resources/models/agentLoop.js';
import { CURRENT_PROMPT_HEADING } from '../resources/models/backendHelpers.js';
import type { Message } from '../resources/models/types.js';
import { middleOut, WORKING_STATE_HEADING, workingStateBlock } from './context/workingState.js';

export interface CompactionRecord {
  role: 'compaction';
  /** The summary exactly as the model sees it: the first message of every request from here on. */
  content: string;
  /** Stored messages from #keepFrom on stay whole; the summary stands for every message before it. */
  keepFrom: number;
  compactedBy: 'model' | 'digest';
  /** Why the digest stands in (the summary call's failure), or how the model's summary was made. */
  detail?: string;
  at?: number;
}

/** A transcript record: a message the model sees, or a compaction. */
export type StoredMessage = Message | CompactionRecord;

export const isCompaction = (m: StoredMessage): m is CompactionRecord => m.role === 'compaction';

/** The newest compaction record's index, or -1. */
export function newestCompaction(messages: readonly StoredMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'compaction') return i;
  return -1;
}

/** The first stored message the model still sees whole: the newest compaction's keepFrom, or 0. */
export function viewStart(messages: readonly StoredMessage[]): number {
  const c = newestCompaction(messages);
  return c < 0 ? 0 : (messages[c] as CompactionRecord).keepFrom;
}

/** Sent after a summary when the kept messages begin with a prompt, so roles alternate as every provider wants. */
export const BRIDGE = 'Understood. I will continue from this summary; the messages after it follow as they were.';

/** What a request carries, from the stored transcript alone: the newest summary, then the messages it kept whole. */
export function requestMessages(messages: readonly StoredMessage[]): Message[] {
  const c = newestCompaction(messages);
  const tail = messages.slice(viewStart(messages)).filter((m): m is Message => !isCompaction(m));
  if (c < 0) return tail;
  const head: Message[] = [{ role: 'user', content: messages[c]!.content }];
  if (tail.length === 0 || tail[0]!.role === 'user') head.push({ role: 'assistant', content: BRIDGE });
  return [...head, ...tail];
}

// ------------------------------------------------------------------------------------------------------------
// Where to cut

export interface CompactionPlan {
  /** The first stored message newly covered (the previous compaction's keepFrom, or 0). */
  from: number;
  /** The first stored message kept whole; the summary stands for everything before it. */
  keepFrom: number;
  /** The summary being folded in, when there is one. */
  previous?: CompactionRecord;
  /** When the cut falls inside the turn of the prompt being answered: that prompt, restated whole after the summary. */
  currentPrompt?: { index: number; content: string };
}

const storedBytes = (m: StoredMessage) => Buffer.byteLength(JSON.stringify(m));

/**
 * Where to cut, so the newest turns stay whole: the earliest earlier prompt whose kept messages fit `keepBytes` (JSON
 * bytes); else the prompt being answered, whole, if its turn fits twice that (all the room there is: it is kept whole
 * whenever the window allows); else, inside its turn, the earliest model turn (an assistant message and its results)
 * that fits `keepBytes`, the prompt restated; the newest model turn always stays. `all` (on demand, between runs)
 * covers every message. null: nothing new to cover.
 */
export function planCompaction(messages: readonly StoredMessage[], keepBytes: number, all = false): CompactionPlan | null {
  const from = viewStart(messages);
  const c = newestCompaction(messages);
  const previous = c >= 0 ? (messages[c] as CompactionRecord) : undefined;
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0 && lastUser < 0; i--) if (messages[i]!.role === 'user') lastUser = i;
  let keepFrom = messages.length;
  if (!all) {
    const boundaries: number[] = [];
    for (let i = from; i < messages.length; i++) {
      const m = messages[i]!;
      if (m.role === 'user' || (m.role === 'assistant' && i > lastUser)) boundaries.push(i);
    }
    if (boundaries.length === 0) return null;
    keepFrom = boundaries.at(-1)!;
    let tail = 0;
    const suffix = new Map<number, number>();
    for (let i = messages.length - 1; i >= from; i--) {
      if (!isCompaction(messages[i]!)) tail += storedBytes(messages[i]!);
      suffix.set(i, tail);
    }
    const fits = boundaries.find((b) => b < lastUser && suffix.get(b)! <= keepBytes) ?? (lastUser >= from && suffix.get(lastUser)! <= 2 * keepBytes ? lastUser : boundaries.find((b) => b > lastUser && suffix.get(b)! <= keepBytes));
    if (fits !== undefined && fits < keepFrom) keepFrom = fits;
  }
  const plan: CompactionPlan = { from, keepFrom, ...(previous ? { previous } : {}) };
  // Cut inside a turn: the model must still see what it is answering, so the prompt is restated whole.
  if (!all && lastUser >= 0 && lastUser < keepFrom && messages[keepFrom]?.role === 'assistant') {
    plan.currentPrompt = { index: lastUser, content: (messages[lastUser] as Extract<Message, { role: 'user' }>).content };
  }
  // Worth a summary only if it covers something besides a prompt it would restate.
  const covered = messages.slice(from, keepFrom).filter((m, i) => !isCompaction(m) && from + i !== plan.currentPrompt?.index).length;
  return covered === 0 ? null : plan;
}

/** A record's summary alone: without its heading, its working state and the prompt it restated (each rebuilt at the
 * next compaction). */
export function summaryText(record: CompactionRecord): string {
  let body = record.content;
  for (const marker of [`\n\n${WORKING_STATE_HEADING}`, `\n\n${CURRENT_PROMPT_HEADING}`]) {
    const at = body.indexOf(marker);
    if (at >= 0) body = body.slice(0, at);
  }
  return body.startsWith('[') ? body.slice(body.indexOf('\n') + 1) : body;
}

// ------------------------------------------------------------------------------------------------------------
// What the summary call reads

/** The longest text one message contributes to a summary call: a prompt or answer, and a tool result's head. */
const MESSAGE_BLOCK_BYTES = 4096;
const RESULT_BLOCK_BYTES = 2048;

const clipBlock = (text: string, bytes: number) => truncateWithMarker(text, bytes, 'see the stored transcript', 'clipped for the summary');

/** The messages a plan covers, as text blocks the summary call reads (one per message, the earlier summary first). */
export function segmentBlocks(messages: readonly StoredMessage[], plan: CompactionPlan): string[] {
  const blocks: string[] = [];
  if (plan.previous) blocks.push(`[summary so far, standing for messages #0-#${plan.from - 1}]\n${summaryText(plan.previous)}`);
  for (let i = plan.from; i < plan.keepFrom; i++) {
    const m = messages[i]!;
    if (m.role === 'user') blocks.push(`[#${i} operator]\n${clipBlock(m.content, MESSAGE_BLOCK_BYTES)}`);
    else if (m.role === 'assistant') {
      const calls = (m.toolCalls ?? []).map((t) => `\n-> ${t.name} ${JSON.stringify(t.arguments)}`).join('');
      blocks.push(`[#${i} assistant]\n${clipBlock(m.content, MESSAGE_BLOCK_BYTES)}${calls}`);
    } else if (m.role === 'tool') {
      const size = Buffer.byteLength(m.content);
      blocks.push(`[#${i} ${m.name} result, ${size} bytes${m.isError ? ', an error' : ''}${m.cut ? `, cut (${m.cut})` : ''}]\n${clipBlock(cursorFirst(m.content), RESULT_BLOCK_BYTES)}`);
    }
  }
  return blocks;
}

/** Blocks gathered into parts of at most `partBytes` each (a block is never split; one larger than a part is clipped). */
export function splitParts(blocks: readonly string[], partBytes: number): string[] {
  const parts: string[] = [];
  let current = '';
  for (const block of blocks) {
    const b = Buffer.byteLength(block) > partBytes ? clipBlock(block, partBytes) : block;
    if (current && Buffer.byteLength(current) + 2 + Buffer.byteLength(b) > partBytes) {
      parts.push(current);
      current = '';
    }
    current = current ? `${current}\n\n${b}` : b;
  }
  if (current) parts.push(current);
  return parts;
}

export const COMPACTION_SYSTEM = `You compact the transcript of an investigation of a Harper database instance, so the assistant can go on
from your summary once the older messages are gone. Write plain text, no tool calls. Keep what an investigation must
not lose:
- the operator's questions, in their words;
- findings, each with its evidence (file and line numbers, values, record ids, error texts quoted briefly);
- files and logs read, with how far (path, the last startLine/offset reached, nextLine/nextOffset to go on from);
- what was ruled out, and why;
- open leads and the next steps planned;
- actions waiting for the operator's approval, and any the operator denied.
The operator's prompts, the cursors of the reads and the assistant's own notes are kept beside your summary word for
word: spend your words on the findings, the evidence and what was ruled out.
Drop pleasantries and repeated tool output. Be as short as those allow.`;

/** The summary call's one message: the part to summarize, after the summary of the parts before it; `focus` is what
 * the operator asked the summary to keep (compact_agent_session's instructions). */
export function summaryPrompt(part: string, soFar: string | undefined, maxWords: number, focus?: string): string {
  const keep = focus ? `The operator asks that the summary keep this in focus: ${focus}\n\n` : '';
  const intro = keep + (soFar
    ? `Here is your summary of the conversation so far, then the messages that followed. Write one summary of both, at most ${maxWords} words.\n\n=== Summary so far ===\n${soFar}\n\n=== Messages that followed ===\n`
    : `Summarize these messages of the conversation, at most ${maxWords} words.\n\n=== Messages ===\n`);
  return intro + part;
}

// ------------------------------------------------------------------------------------------------------------
// The digest: what stands in when the model cannot write the summary

const flat = (text: string, chars: number) => {
  const f = text.replace(/\s+/g, ' ').trim();
  return f.length > chars ? `${f.slice(0, chars - 1)}…` : f;
};

/** A tool result's cursor, as read_file and its kin answer it (whatever survived a cut at the head). */
function cursorOf(content: string): string {
  const fields: string[] = [];
  for (const key of ['path', 'startLine', 'endLine', 'nextLine', 'nextOffset', 'totalLines', 'nextStart']) {
    const m = new RegExp(`"${key}":("[^"]{0,200}"|\\d+)`).exec(content);
    if (m) fields.push(`${key} ${m[1]}`);
  }
  const error = /^\{"error":"([^"]{0,200})/.exec(content);
  if (error) fields.push(`error: ${error[1]}`);
  return fields.join(', ');
}

const DIGEST_HEADING = 'Digest (deterministic, written without the model):';
const LEFT_OUT = /^\(\d+ \S+ left out here to fit\)$/;

/**
 * A deterministic summary of the tool calls a plan covers: each call with its arguments, its result's size and cursor,
 * oldest first, after the earlier digest's lines or the earlier summary. The prompts and the model's own words are in
 * the working state beside it. Cut to `budgetBytes` from the middle (the start of the investigation and where it
 * stands stay; what was left out is said where it was). It cannot fail.
 */
export function digest(messages: readonly StoredMessage[], plan: CompactionPlan, budgetBytes: number): string {
  const lines: string[] = [];
  if (plan.previous) {
    // An earlier digest's lines go on as they are; an earlier model summary is one entry.
    const body = summaryText(plan.previous);
    if (body.startsWith(`${DIGEST_HEADING}\n`)) lines.push(...body.slice(DIGEST_HEADING.length + 1).split('\n').filter((l) => l && !LEFT_OUT.test(l)));
    else lines.push(`- earlier summary: ${flat(body, Math.floor(budgetBytes / 2))}`);
  }
  const results = new Map<string, Extract<Message, { role: 'tool' }>>();
  for (let i = plan.from; i < plan.keepFrom; i++) {
    const m = messages[i]!;
    if (m.role === 'tool') results.set(m.toolCallId, m);
  }
  for (let i = plan.from; i < plan.keepFrom; i++) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    for (const call of m.toolCalls ?? []) {
      const r = results.get(call.id);
      const result = r ? ` -> ${Buffer.byteLength(r.content).toLocaleString('en-US')} bytes${r.isError ? ' (error)' : ''}${r.cut ? ` (cut: ${r.cut})` : ''}${cursorOf(r.content) ? `; ${cursorOf(r.content)}` : ''}` : ' -> no result';
      lines.push(`- ${call.name} ${flat(JSON.stringify(call.arguments), 300)}${result}`);
    }
  }
  const out = [DIGEST_HEADING, ...middleOut(lines, budgetBytes - Buffer.byteLength(DIGEST_HEADING) - 64, 'line(s)')].join('\n');
  return Buffer.byteLength(out) > budgetBytes ? clipBlock(out, budgetBytes) : out;
}

// ------------------------------------------------------------------------------------------------------------
// The record

/** The record's text, as the model sees it: what it stands for, the summary, the working state (the prompts word for
 * word, the reads in progress, the model's notes: rebuilt from the whole transcript before `keepFrom`), and the prompt
 * being answered when the cut fell inside its turn. No message numbers: the model never sees them. */
export function compactionContent(messages: readonly StoredMessage[], plan: CompactionPlan, summary: string, by: 'model' | 'digest', stateBytes: number): string {
  const covered = messages.slice(0, plan.keepFrom).filter((m) => !isCompaction(m)).length;
  const heading = `[Summary of the earlier part of this session (${covered} messages), ${by === 'model' ? 'written by the model' : 'a digest written without the model'}. The messages after it follow whole.]`;
  const state = workingStateBlock(messages, plan.keepFrom, stateBytes);
  const prompt = plan.currentPrompt ? `\n\n${CURRENT_PROMPT_HEADING}:\n${plan.currentPrompt.content}` : '';
  return `${heading}\n${summary.trim()}${state ? `\n\n${state}` : ''}${prompt}`;
}

/** How the operator reads a record: which messages the summary replaces, for the page, `show` and the CLI. */
export function compactionBoundary(record: Pick<CompactionRecord, 'keepFrom' | 'compactedBy' | 'detail'>): string {
  const who = record.compactedBy === 'model' ? 'a summary the model wrote' : 'a deterministic digest';
  return `the model sees ${who} below instead of messages #0-#${record.keepFrom - 1}${record.detail ? ` (${record.detail})` : ''}`;
}

// ------------------------------------------------------------------------------------------------------------
// Sizes

export interface CompactionSizes {
  /** A request over this many tokens is compacted first. */
  threshold: number;
  /** The summary's tokens at most (the summary call's maxTokens). */
  summaryTokens: number;
  /** The kept messages' JSON bytes at most. */
  keepBytes: number;
  /** The digest's bytes at most. */
  digestBytes: number;
  /** The working state's bytes at most (the prompts, the reads in progress, the model's notes). */
  stateBytes: number;
  /** A summary call's part, in bytes of text. */
  partBytes: number;
}

/**
 * The sizes for a budget of `budgetTokens`: compaction starts at `percent` of it; the summary gets a twelfth of the
 * budget (128 to 4,096 tokens), and the working state as much again; the kept messages half of what is left under the
 * threshold once the fixed part (system prompt, tool list), the summary and the working state are counted, so a request has as much room to grow again; a summary call's part is
 * half the budget. `bytesPerToken` is the request's own ratio, so sizes in bytes follow the estimate.
 */
export function compactionSizes(budgetTokens: number, percent: number, fixedTokens: number, bytesPerToken: number): CompactionSizes {
  const threshold = Math.floor((budgetTokens * percent) / 100);
  const summaryTokens = Math.max(128, Math.min(4096, Math.floor(budgetTokens / 12)));
  const keepTokens = Math.max(0, Math.floor((threshold - fixedTokens - 2 * summaryTokens) / 2));
  return {
    threshold,
    summaryTokens,
    keepBytes: Math.floor(keepTokens * bytesPerToken),
    digestBytes: Math.floor(summaryTokens * Math.min(bytesPerToken, 3)),
    stateBytes: Math.floor(summaryTokens * Math.min(bytesPerToken, 3)),
    partBytes: Math.max(4096, Math.floor(((budgetTokens / 2) - summaryTokens - 1024) * Math.min(bytesPerToken, 2.5))),
  };
}

// The session store: owns the AgentSession table. Every change to a session runs through `mutate`, which holds
// the session's lock across read, change and whole-row put, so concurrent writers never lose a message.
import { randomUUID } from 'node:crypto';
import { cursorFirst, truncateWithMarker } from '../resources/models/agentLoop.js';
import type { Message, ToolCall } from '../resources/models/types.js';
import { viewStart, type StoredMessage } from './compaction.js';
import { trace, tracing } from './trace.js';
import { shareOfBytes, TranscriptCache, type KeyedMessage } from './transcriptCache.js';

export type SessionStatus = 'idle' | 'running' | 'awaiting_approval' | 'completed' | 'aborted' | 'error';

export interface PendingApproval {
  approval_id: string;
  toolCallId: string;
  name: string;
  arguments: ToolCall['arguments'];
  createdAt: number;
}

/** A session's row: everything but the transcript, which lives in AgentMessage, one record per message. */
export interface SessionHeader {
  session_id: string;
  user: string | null;
  status: SessionStatus;
  pendingApprovals: PendingApproval[];
  /** Tools approved for the rest of the session (approve_agent_action with forSession): they no longer pause. */
  approvedTools?: string[];
  provider: string;
  model: string | null;
  createdAt: number;
  updatedAt: number;
  lastError: string | null;
  /** `node:pid:threadId:uuid` of the run in progress, so a run cut off by a restart can be told from a live one. */
  runner: string | null;
  /** The Harper node that owns the session: the only node that runs it and writes its transcript. */
  node: string | null;
  messageCount: number;
  /** UTF-8 bytes of the transcript as JSON (what the whole-row store used to hold). */
  bytes: number;
  /** The session's first prompt, clipped: what an operator scanning the table (Studio, lists) reads first. */
  title: string | null;
}

export interface Session extends SessionHeader {
  /** The transcript: every message ever stored, compaction records among them (compaction.ts requestMessages derives
   * what the model sees). */
  messages: StoredMessage[];
  /** Messages the row counts that this node does not hold yet (replication behind: seen on a node restarted after a
   * SIGKILL, 7 messages short for a minute with its sockets connected). Absent when none. */
  behind?: number;
}

/** The part of a Harper table the store uses (the real `databases.agent.AgentSession`/`AgentMessage`, or a map in
 * unit tests). */
export interface SessionTable {
  get(id: string): unknown;
  /** `context`: a transaction's (SessionTables.together), whose writes are committed with it. */
  put(id: string, record: Record<string, unknown>, context?: object): unknown;
  delete?(id: string): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
  subscribe?(query: Record<string, unknown>): unknown;
}

/** A run's write after it stopped owning the session (cancelled, or replaced): nothing is written. */
export class RunSupersededError extends Error {
  constructor(id: string) {
    super(`the run on session ${id} no longer owns it (cancelled or ended)`);
  }
}

/** Writes made by a run pass its runner token: they are refused once the session is no longer that run's. */
export interface RunGuard {
  runner: string;
}

export class SessionNotFoundError extends Error {
  readonly status = 404;
  constructor(id: string) {
    super(`session ${JSON.stringify(id)} not found`);
  }
}

/** The context-window shrink and the working set: results over this are cut to a head of the same size. */
export const SHRINK_THRESHOLD_BYTES = 2048;
export const SHRINK_REASON = 'cut to 2 KiB after the model rejected the conversation as longer than its context window';
export const SHRINK_ADVICE =
  'read less at a time (a smaller lineCount, tail_file with fewer lines, a narrower grep pattern or path)';
export const WORKING_SET_REASON = 'cut to 2 KiB: older than the working set (agent.workingSetBytes) of newest results kept whole';
export const WORKING_SET_ADVICE = 'if you need this page again, read it again from its cursor above (path, offset, startLine)';

/** A tool result cut to a head (2 KiB, or less in a small window: agent/context/window.ts), its cursor fields first
 * so they survive the cut. */
export function cutToHead(content: string, reason: string, advice: string, headBytes = SHRINK_THRESHOLD_BYTES): string {
  return truncateWithMarker(cursorFirst(content), headBytes, advice, reason);
}

/** The reason a cut names, with its head's size ("2 KiB" as always, else the bytes). */
function headReason(reason: string, headBytes: number): string {
  return headBytes === SHRINK_THRESHOLD_BYTES ? reason : reason.replace('2 KiB', `${headBytes} bytes`);
}

/** A tool result cut to its head for `reason`: what the store writes, and what preview_agent_request shows. */
export function cutMessage(m: Extract<Message, { role: 'tool' }>, reason: 'context' | 'workingSet', headBytes = SHRINK_THRESHOLD_BYTES): StoredMessage {
  const [text, advice] = reason === 'context' ? [SHRINK_REASON, SHRINK_ADVICE] : [WORKING_SET_REASON, WORKING_SET_ADVICE];
  return plainMessage({ ...m, content: cutToHead(m.content, headReason(text, headBytes), advice, headBytes), cut: reason });
}

/** Once the working set overflows, it is cut down to this share of agent.workingSetBytes (the low-water mark). */
export const WORKING_SET_LOW_WATER = 0.5;

/**
 * The working set: which tool results (indices into `messages`) to cut to their 2 KiB heads before the next model call.
 * Only results the model sees whole count (over 2 KiB: a head, or a small result, cannot be cut further). Nothing is
 * cut while they fit in `budgetBytes`; once they do not, newest first, results stay whole while they fit in half of it
 * (WORKING_SET_LOW_WATER) and every older one is cut. In batches, because a cut changes the request where the cut
 * result sits and a provider's prompt cache then bills everything after it again: each cut clears at least half the
 * budget, and the next pages are appended with nothing older changing. The request as a whole is bounded by compaction.
 * The newest result always stays whole; one cut by the cap counts as whole (it can be cut to its head).
 */
function lastToolIndex(messages: readonly StoredMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.role === 'tool') return i;
  return -1;
}

export function workingSetCuts(messages: readonly StoredMessage[], budgetBytes: number, headBytes = SHRINK_THRESHOLD_BYTES): number[] {
  // Only what the model sees counts: results a compaction summarized are in no request.
  const from = viewStart(messages);
  const whole = messages.flatMap((m, i) => (m.role === 'tool' && i >= from && Buffer.byteLength(m.content) > headBytes ? [{ i, bytes: Buffer.byteLength(m.content) }] : []));
  const newestTool = lastToolIndex(messages);
  if (whole.reduce((sum, t) => sum + t.bytes, 0) <= budgetBytes) return [];
  const low = Math.floor(budgetBytes * WORKING_SET_LOW_WATER);
  let kept = 0;
  const cuts: number[] = [];
  for (let k = whole.length - 1; k >= 0; k--) {
    const t = whole[k]!;
    // Once one result is cut, every older one is cut too: the newest stay whole, not the smallest.
    if (cuts.length === 0 && (t.i === newestTool || kept + t.bytes <= low)) kept += t.bytes;
    else cuts.push(t.i);
  }
  return cuts.reverse();
}

/** A message as plain data. Harper's nested objects carry their fields as inherited getters, which a spread (and
 * Object.entries: the working state read `read_file {}` from them) drops, so each field is copied by name, and
 * tool-call arguments through their JSON (a record's toJSON gives its fields). */
export function plainMessage(m: Record<string, any>): StoredMessage {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.toolCalls) out.toolCalls = Array.from(m.toolCalls as Record<string, any>[], (c) => ({ id: c.id, name: c.name, arguments: plainArguments(c.arguments) }));
  for (const key of ['toolCallId', 'name', 'isError', 'cut', 'keepFrom', 'compactedBy', 'detail', 'followup', 'recall'] as const) if (m[key] !== undefined && m[key] !== null) out[key] = m[key];
  if (m.at !== undefined && m.at !== null) out.at = millis(m.at);
  return out as unknown as StoredMessage;
}

function plainArguments(args: unknown): Record<string, unknown> {
  if (!args || typeof args !== 'object') return (args ?? {}) as Record<string, unknown>;
  return Object.getPrototypeOf(args) === Object.prototype || Object.getPrototypeOf(args) === null ? (args as Record<string, unknown>) : JSON.parse(JSON.stringify(args));
}

/** A time as epoch milliseconds, from a record's Date (or its JSON text), or a number (rows stored before the Date
 * fields). */
function millis(value: unknown): number {
  return value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number(value ?? 0);
}

/** The longest title kept from a first prompt. */
export const TITLE_CHARS = 120;

function titleOf(prompt: string): string {
  const flat = prompt.replace(/\s+/g, ' ').trim();
  return flat.length > TITLE_CHARS ? `${flat.slice(0, TITLE_CHARS - 1)}…` : flat;
}

/** The header as the row is stored: times as Harper Date fields, so Studio and REST show them as dates, and the
 * owner+time key a user's list reads (ownerRecent). */
function toRow(header: SessionHeader, revision: string): Record<string, unknown> {
  return { ...header, createdAt: new Date(header.createdAt), updatedAt: new Date(header.updatedAt), ownerRecent: ownerRecent(header.user, header.updatedAt, header.session_id), revision };
}

// ownerRecent: owner, time and id in one indexed string, so one user's sessions newest first are a range of one index
// read backwards (Harper indexes one attribute at a time). The time is fixed-width so the text sorts as the number.
const SEP = '\u001f';
const ownerRecent = (user: string | null, at: number, id: string) => `${user ?? ''}${SEP}${String(Math.max(0, at)).padStart(15, '0')}${SEP}${id}`;

/** Where a page of a list starts: after the last session of the previous page (its time and id). */
export interface ListCursor {
  at: number;
  id: string;
}

/** Newest first; ties (one millisecond) by id, descending, the order the owner+time index reads in. */
const newestFirst = (a: SessionHeader, b: SessionHeader) => b.updatedAt - a.updatedAt || (a.session_id < b.session_id ? 1 : a.session_id > b.session_id ? -1 : 0);
const before = (s: SessionHeader, cursor: ListCursor | undefined) => !cursor || s.updatedAt < cursor.at || (s.updatedAt === cursor.at && s.session_id < cursor.id);

/** A row's revision: which write it is (agent/transcriptCache.ts); absent on rows written before it existed. */
const revisionOf = (row: Record<string, unknown> | undefined) => (typeof row?.revision === 'string' ? row.revision : undefined);

function plainApproval(p: Record<string, any>): PendingApproval {
  return { approval_id: p.approval_id, toolCallId: p.toolCallId, name: p.name, arguments: p.arguments, createdAt: p.createdAt };
}

/** A message's share of `bytes`: its JSON as stored. */
function jsonBytes(m: StoredMessage): number {
  return Buffer.byteLength(JSON.stringify(m));
}

/** A row (or a table event's value) as a plain header. */
/** A deleted session's row until its delete finishes (agent/lifecycle.ts): every read treats it as gone. */
export const DELETING = 'deleting';

export function toHeader(record: unknown): SessionHeader | undefined {
  if (!record) return undefined;
  const r = record as Record<string, unknown>;
  if (r.status === DELETING) return undefined;
  const legacy = legacyMessages(r);
  return {
    session_id: String(r.session_id),
    user: (r.user as string) ?? null,
    status: (r.status as SessionStatus) ?? 'idle',
    pendingApprovals: Array.isArray(r.pendingApprovals) ? Array.from(r.pendingApprovals as Record<string, any>[], plainApproval) : [],
    ...(Array.isArray(r.approvedTools) && r.approvedTools.length ? { approvedTools: Array.from(r.approvedTools as string[], String) } : {}),
    provider: String(r.provider ?? 'local'),
    model: (r.model as string) ?? null,
    createdAt: millis(r.createdAt),
    updatedAt: millis(r.updatedAt),
    lastError: (r.lastError as string) ?? null,
    runner: (r.runner as string) ?? null,
    node: (r.node as string) ?? null,
    messageCount: legacy ? legacy.length : Number(r.messageCount ?? 0),
    bytes: legacy ? Buffer.byteLength(JSON.stringify(legacy)) : Number(r.bytes ?? 2),
    title: (r.title as string) ?? (legacy ? firstPrompt(legacy) : null),
  };
}

/** A row written before transcripts moved to AgentMessage keeps its messages in the row; the next write moves them. */
function legacyMessages(r: Record<string, unknown>): StoredMessage[] | undefined {
  return Array.isArray(r.messages) ? Array.from(r.messages as Record<string, any>[], plainMessage) : undefined;
}

function firstPrompt(messages: StoredMessage[]): string | null {
  const prompt = messages.find((m) => m.role === 'user');
  return prompt ? titleOf(prompt.content) : null;
}

export function sessionBytes(session: Session): number {
  return Buffer.byteLength(JSON.stringify(session.messages));
}

/** A message's size as the operator sees it: its content's UTF-8 bytes (what the cap limits), plus its tool calls. */
export function messageBytes(m: StoredMessage): number {
  const calls = m.role === 'assistant' && m.toolCalls?.length ? Buffer.byteLength(JSON.stringify(m.toolCalls)) : 0;
  return Buffer.byteLength(m.content) + calls;
}

/** A session without its transcript: what lists show. */
export function sessionSummary(s: SessionHeader) {
  const { pendingApprovals, ...rest } = s;
  const { messages: _transcript, ...header } = rest as SessionHeader & { messages?: unknown };
  return { ...header, pendingApprovals: pendingApprovals.length };
}

/** AgentMessage's key: session, then a zero-padded sequence (so keys sort in transcript order), then the writer's tag.
 * The tag keeps two writers that picked the same sequence (two threads accepting a prompt at once) from overwriting
 * each other: both messages are kept, in tag order. */
export function messageKey(sessionId: string, seq: number, tag: string): string {
  return `${sessionId}/${String(seq).padStart(8, '0')}/${tag}`;
}

/** A change to a session's row; the messages it returns are appended to the transcript in the same locked write. */
export type HeaderChange = (session: SessionHeader) => StoredMessage[] | void | Promise<StoredMessage[] | void>;

export interface SessionTables {
  sessions: () => SessionTable;
  messages: () => SessionTable;
  /** This Harper node's name: new sessions belong to it. */
  node?: string;
  /** A lock every worker thread of this process sees (Harper's LMDB store's), so one thread's change to a session is
   * never interleaved with another's; absent (unit tests), the lock is this thread's alone. */
  threadLock?: () => ThreadLock | undefined;
  /** Runs `work` in one transaction of the agent database: the puts it makes with `context` are committed together,
   * seen by readers all at once, in one commit instead of one each. Absent (unit tests), each put stands alone. */
  together?: <T>(writes: { table: SessionTable; id: string }[], work: (context: object) => Promise<T>) => Promise<T>;
  log?: (message: string) => void;
}

/** lmdb-js's lock table (`store.tryLock`/`unlock`), shared by every thread that opened the database. */
export interface ThreadLock {
  /** True if taken; else false, and `released` is called once its holder unlocks. */
  tryLock(key: string, released: () => void): boolean;
  unlock(key: string): unknown;
  /** Drops this thread's read snapshot so the next read sees what the lock's previous holder wrote. lmdb-js keeps one
   * read transaction per thread until its next macrotask; a lock handed over within that task would otherwise read the
   * row as it was before the other thread's change (two prompts accepted at once, seen once in 96 races). */
  refresh?(): void;
}

/** How long a change waits for another thread's lock before it goes ahead without it (a thread that died holding it
 * must not stop the session for good); a change holds it for milliseconds. */
export const THREAD_LOCK_WAIT_MS = 10_000;

/** Takes `key` in `lock`, waiting for its holder; false if it was not free within `waitMs`. */
export async function takeThreadLock(lock: ThreadLock, key: string, waitMs = THREAD_LOCK_WAIT_MS): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    let wake!: () => void;
    const released = new Promise<void>((resolve) => (wake = resolve));
    if (lock.tryLock(key, wake)) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    // The release callback, or a short poll in case a release raced the attempt.
    await Promise.race([released, new Promise((resolve) => setTimeout(resolve, Math.min(left, 50)))]);
  }
}

export class SessionStore {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** This store's (this thread's) tag in message keys. */
  private readonly tag = randomUUID().slice(0, 8);
  /** This thread's copies of recent transcripts: a read takes only the records written since (agent/transcriptCache.ts). */
  private readonly transcripts = new TranscriptCache();
  private writes = 0;
  readonly node: string | null;

  constructor(private readonly tables: SessionTables) {
    this.node = tables.node ?? null;
  }

  /**
   * A new session: its row, with `start`'s edits and the messages it returns (a prompt accepted with the session) in
   * the same write, as `mutate` would add them.
   */
  async create(fields: { user: string | null; provider: string; model: string | null; session_id?: string }, start?: HeaderChange): Promise<Session> {
    const now = Date.now();
    const header: SessionHeader = {
      session_id: fields.session_id ?? randomUUID(),
      user: fields.user,
      status: 'idle',
      pendingApprovals: [],
      provider: fields.provider,
      model: fields.model,
      createdAt: now,
      updatedAt: now,
      lastError: null,
      runner: null,
      node: this.node,
      messageCount: 0,
      bytes: 2,
      title: null,
    };
    const id = header.session_id;
    return this.withLock(id, async (exclusive) => {
      if (await this.tables.sessions().get(id)) throw new Error(`session ${id} already exists`);
      const keyed = this.keyAdded(id, header, (await start?.(header)) ?? [], now);
      const revision = this.nextRevision();
      await this.writeChange(id, keyed, toRow(header, revision), false);
      if (tracing) trace({ op: 'create', id, exclusive, wrote: { revision, status: header.status, count: header.messageCount, runner: header.runner?.slice(-8) ?? null } });
      if (exclusive) this.transcripts.remember(id, revision, header, keyed);
      return { ...header, messages: keyed.map((k) => k.message) };
    });
  }

  /** Keys `added` after the header's messages and moves its count, bytes, time and title with them. */
  private keyAdded(id: string, header: SessionHeader, added: StoredMessage[], at: number): KeyedMessage[] {
    let seq = header.messageCount;
    const keyed: KeyedMessage[] = [];
    for (const m of added) {
      const stored = plainMessage({ ...m, at: m.at ?? at });
      header.bytes += shareOfBytes(stored, seq);
      keyed.push({ key: messageKey(id, seq, this.tag), seq, message: stored });
      seq++;
    }
    header.messageCount = seq;
    header.updatedAt = at;
    header.title ??= firstPrompt(added);
    return keyed;
  }

  /** The session's row only: what lists, guards and the live views' headers need. */
  async header(id: string): Promise<SessionHeader | undefined> {
    this.readFresh();
    return toHeader(await this.tables.sessions().get(id));
  }

  /** The session with its transcript, in order. */
  async get(id: string): Promise<Session | undefined> {
    this.readFresh();
    const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
    const header = toHeader(row);
    if (!header) return undefined;
    // Only the messages the row counts (keyedMessages): a read between a change's records and its row (on another
    // thread) would otherwise see a new prompt beside the old status.
    const messages = legacyMessages(row!) ?? (await this.keyedMessages(id, row!, header)).map((k) => k.message);
    if (tracing) trace({ op: 'get', id, read: rowTrace(row), n: messages.length, prompts: promptsOf(messages) });
    const session: Session = { ...header, messageCount: messages.length, messages };
    if (messages.length < header.messageCount) session.behind = header.messageCount - messages.length;
    return session;
  }

  /** Calls `onChange` with the row after every write to it, from any thread or node, until the returned close. */
  async watch(id: string, onChange: (header: SessionHeader) => void): Promise<() => void> {
    const table = this.tables.sessions();
    if (!table.subscribe) return () => undefined;
    const queue = (await table.subscribe({ id, omitCurrent: true })) as { on(e: 'data', l: (event: { value?: unknown }) => void): unknown; emit(e: 'close'): unknown };
    queue.on('data', (event) => {
      const header = event.value ? toHeader(event.value) : undefined;
      if (header) onChange(header);
      else if (!event.value) void this.header(id).then((h) => h && onChange(h));
    });
    return () => void queue.emit('close');
  }

  /**
   * One page of sessions newest first: at most `limit` that `keep` accepts, after `cursor`, and whether more follow.
   * With `owner` it reads that owner's range of the owner+time index, else the time index, backwards, and stops once
   * the page is full: a page reads its own rows (and those `keep` refuses), never the whole table.
   */
  async page(limit: number, query: { owner?: string | null; cursor?: ListCursor; keep?: (s: SessionHeader) => boolean } = {}): Promise<{ sessions: SessionHeader[]; more: boolean }> {
    this.readFresh();
    const { owner, cursor, keep = () => true } = query;
    const search =
      owner !== undefined
        ? {
            conditions: [{ attribute: 'ownerRecent', comparator: 'between', value: [`${owner ?? ''}${SEP}`, cursor ? ownerRecent(owner, cursor.at, cursor.id) : `${owner ?? ''}${SEP}~`] }],
            sort: { attribute: 'ownerRecent', descending: true },
          }
        : {
            conditions: [cursor ? { attribute: 'updatedAt', comparator: 'less_than_equal', value: new Date(cursor.at) } : { attribute: 'updatedAt', comparator: 'greater_than_equal', value: new Date(0) }],
            sort: { attribute: 'updatedAt', descending: true },
          };
    const found: SessionHeader[] = [];
    for await (const record of this.tables.sessions().search(search)) {
      const s = toHeader(record);
      if (!s || !before(s, cursor) || (owner !== undefined && s.user !== owner) || !keep(s)) continue;
      // Past a full page, only the rows of the last one's millisecond: the time index orders a tie by key, not as the
      // cursor does.
      if (found.length > limit && s.updatedAt < found[limit]!.updatedAt) break;
      found.push(s);
    }
    found.sort(newestFirst);
    return { sessions: found.slice(0, limit), more: found.length > limit };
  }

  /** Sessions whose id starts with `prefix` (in id order, from the primary key), those `keep` accepts, at most `limit`. */
  async byPrefix(prefix: string, limit: number, keep: (s: SessionHeader) => boolean = () => true): Promise<SessionHeader[]> {
    this.readFresh();
    const out: SessionHeader[] = [];
    for await (const record of this.tables.sessions().search({ conditions: [{ attribute: 'session_id', comparator: 'starts_with', value: prefix }] })) {
      const s = toHeader(record);
      if (s && s.session_id.startsWith(prefix) && keep(s)) out.push(s);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Sessions newest first (ties by id), those `keep` accepts, at most `limit`: a scan, for the boot's checks. */
  async list(limit: number, keep: (s: SessionHeader) => boolean = () => true): Promise<SessionHeader[]> {
    this.readFresh();
    const all: SessionHeader[] = [];
    for await (const record of this.tables.sessions().search({ conditions: [] })) {
      const s = toHeader(record);
      if (s && keep(s)) all.push(s);
    }
    return all.sort(newestFirst).slice(0, limit);
  }

  /**
   * The locked mutator: reads the row, lets `change` edit a copy (or throw to abort with nothing written), puts each
   * message it returns as a record of its own, then the row, then `afterWrite` (still holding the lock). Calls on one
   * session run one at a time, in order. An append costs one message and the row, never the transcript.
   */
  async mutate(id: string, change: HeaderChange, guard?: RunGuard, afterWrite?: (header: SessionHeader) => Promise<unknown>): Promise<SessionHeader> {
    return this.withLock(id, async (exclusive) => {
      const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
      const header = toHeader(row);
      if (!header) throw new SessionNotFoundError(id);
      if (guard && (header.status !== 'running' || header.runner !== guard.runner)) throw new RunSupersededError(id);
      // A change made without the lock across threads may race another writer's: it extends no copy.
      const copy = exclusive ? this.transcripts.holds(id, revisionOf(row)) : undefined;
      this.transcripts.forget(id); // until the change is written whole
      let added: StoredMessage[];
      try {
        added = (await change(header)) ?? [];
      } catch (error) {
        if (tracing) trace({ op: 'mutate', id, exclusive, read: rowTrace(row), refused: String((error as Error)?.message ?? error).slice(0, 80) });
        throw error;
      }
      // A row from before AgentMessage: its transcript moves out first.
      if (legacyMessages(row!)) await this.moveLegacyTranscript(id, row!, header);
      const keyed = this.keyAdded(id, header, added, Date.now());
      const revision = this.nextRevision();
      const putAt = tracing ? performance.timeOrigin + performance.now() : 0;
      await this.writeChange(id, keyed, toRow(header, revision), false);
      if (tracing) await this.traceReadBack(id, revision, putAt);
      if (tracing) trace({ op: 'mutate', id, exclusive, read: rowTrace(row), wrote: { revision, status: header.status, count: header.messageCount, runner: header.runner?.slice(-8) ?? null }, keys: keyed.map((k) => `${k.key.slice(id.length + 1)} ${k.message.role}${k.message.role === 'user' ? ` ${k.message.content.slice(0, 40)}` : ''}`) });
      if (copy) this.transcripts.remember(id, revision, header, keyed.length ? [...copy, ...keyed] : copy);
      await afterWrite?.(header);
      return header;
    });
  }

  private putMessage(id: string, seq: number, m: StoredMessage, key = messageKey(id, seq, this.tag), context?: object) {
    return this.tables.messages().put(key, { id: key, session_id: id, seq, ...m, ...(m.at !== undefined ? { at: new Date(m.at) } : {}) }, context);
  }

  /** A change's message records, then its row. In one transaction where the tables have them: one commit, and no reader
   * sees the row before its records. Without, the records are put first and the row once they are in (a reader
   * ignores records past the row's count). `rewritten`: the records exist already (a cut), so the transaction's stamp
   * must follow theirs too; a new record's key (its sequence and this thread's tag) was never written. */
  private async writeChange(id: string, keyed: readonly KeyedMessage[], row: Record<string, unknown>, rewritten: boolean): Promise<void> {
    const { together } = this.tables;
    if (together) {
      const messages = this.tables.messages();
      const sessions = this.tables.sessions();
      await together([...(rewritten ? keyed.map((k) => ({ table: messages, id: k.key })) : []), { table: sessions, id }], async (context) => {
        await Promise.all(keyed.map((k) => this.putMessage(id, k.seq, k.message, k.key, context)));
        await sessions.put(id, row, context);
      });
      return;
    }
    await Promise.all(keyed.map((k) => this.putMessage(id, k.seq, k.message, k.key)));
    await this.tables.sessions().put(id, row);
  }

  append(id: string, messages: StoredMessage[], guard?: RunGuard): Promise<SessionHeader> {
    return this.mutate(id, () => messages, guard);
  }

  setStatus(id: string, status: SessionStatus, lastError: string | null = null, guard?: RunGuard): Promise<SessionHeader> {
    return this.mutate(
      id,
      (s) => {
        s.status = status;
        s.lastError = lastError;
        if (status !== 'running') s.runner = null;
      },
      guard
    );
  }

  /**
   * Cuts every tool result over 2 KiB in the newest group of tool results that has one to a 2 KiB head, rewriting
   * just those message records. Cut results are at most 2 KiB, so they are never picked again: calling it again
   * reaches an older group. Returns how many results were cut (0: nothing left to cut).
   */
  shrinkNewestToolResults(id: string, guard?: RunGuard, headBytes = SHRINK_THRESHOLD_BYTES): Promise<number> {
    return this.cutResults(id, guard, 'context', headBytes, (messages) => {
      const from = viewStart(messages);
      const groups = toolResultGroups(messages).filter((g) => g[0]! >= from);
      for (let g = groups.length - 1; g >= 0; g--) {
        const picked = groups[g]!.filter((i) => messages[i]!.role === 'tool' && Buffer.byteLength(messages[i]!.content) > headBytes);
        if (picked.length) return picked;
      }
      return [];
    });
  }

  /** Cuts the tool results older than the working set (`workingSetCuts`) to 2 KiB heads. Returns how many. */
  trimToWorkingSet(id: string, budgetBytes: number, guard?: RunGuard, headBytes = SHRINK_THRESHOLD_BYTES): Promise<number> {
    return this.cutResults(id, guard, 'workingSet', headBytes, (messages) => workingSetCuts(messages, budgetBytes, headBytes));
  }

  /** The one path that cuts stored results: under the session's lock, the picked messages' records are rewritten
   * with a 2 KiB head and their cut reason; the row's bytes follow. */
  private async cutResults(id: string, guard: RunGuard | undefined, reason: 'context' | 'workingSet', headBytes: number, pick: (messages: StoredMessage[]) => number[]): Promise<number> {
    return this.withLock(id, async (exclusive) => {
      const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
      const header = toHeader(row);
      if (!header) throw new SessionNotFoundError(id);
      if (guard && (header.status !== 'running' || header.runner !== guard.runner)) throw new RunSupersededError(id);
      if (legacyMessages(row!)) await this.moveLegacyTranscript(id, row!, header);
      const keyed = (await this.keyedMessages(id, row!, header)).slice();
      const messages = keyed.map((k) => k.message);
      const picked = pick(messages);
      if (picked.length === 0) return 0;
      this.transcripts.forget(id); // until the cuts are written whole
      const cut = picked.map((index) => {
        const m = messages[index] as Extract<Message, { role: 'tool' }>;
        const stored = cutMessage(m, reason, headBytes);
        header.bytes += jsonBytes(stored) - jsonBytes(m);
        return (keyed[index] = { ...keyed[index]!, message: stored });
      });
      header.updatedAt = Date.now();
      const revision = this.nextRevision();
      await this.writeChange(id, cut, toRow(header, revision), true);
      if (exclusive) this.transcripts.remember(id, revision, header, keyed);
      return picked.length;
    });
  }

  /** The session's message records in order, those the row counts (a change puts its records before the row, so a
   * read in between must not see them): this thread's copy when the row agrees with it, caught up with the records
   * written since when the row only grew, else read whole. */
  private async keyedMessages(id: string, row: Record<string, unknown>, header: SessionHeader): Promise<KeyedMessage[]> {
    const counted = (keyed: KeyedMessage[]) => keyed.filter((k) => k.seq < header.messageCount);
    const revision = revisionOf(row);
    const copy = this.transcripts.lookup(id, revision, header);
    if (copy?.state === 'current') return traced(id, 'copy', copy.keyed);
    if (copy?.state === 'behind') {
      const caughtUp = this.transcripts.catchUp(id, revision, header, counted(await this.readKeyedMessages(id, copy.count)));
      if (caughtUp) return traced(id, `caught up from ${copy.count}`, caughtUp);
    }
    const read = await this.readKeyedMessages(id);
    const keyed = counted(read);
    if (tracing) trace({ op: 'read', id, how: 'whole', records: read.length, counted: keyed.length });
    this.transcripts.remember(id, revision, header, keyed);
    return keyed;
  }

  /** Reads the row back after a write: a write Harper dropped (another write holds the row) is traced. */
  private async traceReadBack(id: string, revision: string, putAt: number) {
    this.readFresh();
    const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
    trace({ op: revisionOf(row) === revision ? 'stored' : 'dropped', id, wrote: revision, putAt, holds: rowTrace(row) });
  }

  /** A tag for the next write of a row: this thread's, and a count. */
  private nextRevision(): string {
    return `${this.tag}.${++this.writes}`;
  }

  /** The session's message records from sequence `from` on: by the session index for all of them, else by a range of
   * keys (session/sequence/writer), which reads only those records. */
  private async readKeyedMessages(id: string, from = 0): Promise<KeyedMessage[]> {
    const records: KeyedMessage[] = [];
    const condition = from === 0 ? { attribute: 'session_id', comparator: 'equals', value: id } : { attribute: 'id', comparator: 'between', value: [messageKey(id, from, ''), `${id}/\uffff`] };
    for await (const record of this.tables.messages().search({ conditions: [condition] })) {
      const r = record as Record<string, any>;
      if (r.session_id !== id) continue; // a range of keys could reach another session whose id starts with this one's
      records.push({ key: String(r.id), seq: Number(r.seq), message: plainMessage(r) });
    }
    return records.sort((a, b) => a.seq - b.seq || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Moves a row's transcript from before AgentMessage into message records (under the session's lock). */
  private async moveLegacyTranscript(id: string, row: Record<string, unknown>, header: SessionHeader) {
    const legacy = legacyMessages(row)!;
    await Promise.all(legacy.map((m, seq) => this.putMessage(id, seq, m)));
    header.messageCount = legacy.length;
    await this.tables.sessions().put(id, toRow(header, this.nextRevision()));
  }

  /**
   * The first half of a delete: under the session's lock, `refuse` may throw (a running session), else the row becomes
   * a tombstone (status `deleting`) that every read treats as gone. `purge` removes the rest; a crash in between leaves
   * the tombstone for `deleting()` to find at the next boot.
   */
  async markDeleting(id: string, refuse: (header: SessionHeader) => void = () => undefined): Promise<SessionHeader> {
    return this.withLock(id, async () => {
      const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
      const header = toHeader(row);
      if (!header) throw new SessionNotFoundError(id);
      refuse(header);
      this.transcripts.forget(id);
      await this.tables.sessions().put(id, { ...toRow(header, this.nextRevision()), status: DELETING, updatedAt: new Date() });
      return header;
    });
  }

  /** The second half of a delete: the session's message records, then its row. Answers how many messages went. */
  async purge(id: string): Promise<number> {
    this.transcripts.forget(id);
    const messages = this.tables.messages();
    const keys: string[] = [];
    for await (const record of messages.search({ conditions: [{ attribute: 'session_id', comparator: 'equals', value: id }] })) keys.push(String((record as { id: unknown }).id));
    for (const key of keys) await messages.delete!(key);
    await this.tables.sessions().delete!(id);
    return keys.length;
  }

  /** Gives this node's rows stored before the owner+time index their key (their times unchanged), so lists show them;
   * answers how many. A scan, run once at boot. */
  async indexOlderRows(): Promise<number> {
    const ids: string[] = [];
    for await (const record of this.tables.sessions().search({ conditions: [] })) {
      const r = record as Record<string, unknown>;
      if (typeof r.ownerRecent !== 'string' && r.status !== DELETING && ((r.node as string | null) ?? this.node) === this.node) ids.push(String(r.session_id));
    }
    let indexed = 0;
    for (const id of ids) {
      await this.withLock(id, async () => {
        const row = (await this.tables.sessions().get(id)) as Record<string, unknown> | undefined;
        const header = toHeader(row);
        if (!header || typeof row!.ownerRecent === 'string') return;
        this.transcripts.forget(id);
        await this.tables.sessions().put(id, { ...row, ...toRow(header, this.nextRevision()) });
        indexed++;
      });
    }
    return indexed;
  }

  /** Sessions whose delete began and did not finish (the process died in between). */
  async deleting(): Promise<string[]> {
    const ids: string[] = [];
    // A scan: status is not indexed on AgentSession, and tombstones are rare.
    for await (const record of this.tables.sessions().search({ conditions: [] })) {
      const r = record as { session_id: unknown; status?: unknown };
      if (r.status === DELETING) ids.push(String(r.session_id));
    }
    return ids;
  }

  /** A session's messages in order, one at a time (an export): never the whole transcript at once. Only the ones the
   * row counts, as `get`. */
  async *messages(id: string, count: number): AsyncGenerator<StoredMessage & { seq: number }> {
    let next = 0;
    for await (const record of this.tables.messages().search({ conditions: [{ attribute: 'session_id', comparator: 'equals', value: id }] })) {
      const r = record as Record<string, any>;
      const seq = Number(r.seq);
      if (seq >= count) continue;
      // Records come in key order (session/sequence/writer): sequence order, both writers of one sequence kept.
      if (seq < next - 1) throw new Error(`message records of ${id} out of order at #${seq}`);
      next = seq + 1;
      yield { ...plainMessage(r), seq };
    }
  }

  /** Runs `task` holding the session's lock without changing the session (a change to a row that must not race the
   * session's own changes: cancelling a follow-up that might be firing). */
  underLock<T>(id: string, task: () => Promise<T>): Promise<T> {
    return this.withLock(id, task);
  }

  /** Runs `task` holding the session's lock; `exclusive`: the lock across threads was held (no other writer can have
   * changed the session meanwhile), which is what lets a change extend this thread's copy of the transcript. */
  private withLock<T>(id: string, task: (exclusive: boolean) => Promise<T>): Promise<T> {
    const previous = this.locks.get(id) ?? Promise.resolve();
    const locked = () => this.acrossThreads(id, task);
    const run = previous.then(locked, locked);
    const tail = run.catch(() => undefined);
    this.locks.set(id, tail);
    void tail.then(() => {
      if (this.locks.get(id) === tail) this.locks.delete(id);
    });
    return run;
  }

  /** Drops this thread's read snapshot, so a read sees every change committed before it. lmdb-js keeps one snapshot
   * per thread until the thread's next timer turn, which a busy thread reaches late: under load a prompt that another
   * thread had accepted (200) was missing from the next get_agent_session. */
  private readFresh(): void {
    this.tables.threadLock?.()?.refresh?.();
  }

  /** Runs `task` holding the session's lock across worker threads (after this thread's own turn came). */
  private async acrossThreads<T>(id: string, task: (exclusive: boolean) => Promise<T>): Promise<T> {
    const lock = this.tables.threadLock?.();
    if (!lock) return task(false);
    const key = `harper-agent:session:${id}`;
    const asked = performance.now();
    const held = await takeThreadLock(lock, key);
    const waited = performance.now() - asked;
    if (!held) this.tables.log?.(`harper-agent: session ${id}: another thread held its lock over ${THREAD_LOCK_WAIT_MS} ms; writing without it`);
    lock.refresh?.();
    try {
      return await task(held);
    } finally {
      if (held) lock.unlock(key);
      if (tracing && (waited > 500 || !held)) trace({ op: 'lock', id, held, waited: Math.round(waited), for: Math.round(performance.now() - asked - waited) });
    }
  }
}

/** Indexes of tool messages, grouped by the run of consecutive tool messages that answer one assistant turn. */
export function toolResultGroups(messages: readonly StoredMessage[]): number[][] {
  const groups: number[][] = [];
  let current: number[] | null = null;
  messages.forEach((m, i) => {
    if (m.role === 'tool') {
      if (!current) groups.push((current = []));
      current.push(i);
    } else current = null;
  });
  return groups;
}

/** A row as a trace shows it: which write it is and what it says. */
function rowTrace(row: Record<string, unknown> | undefined) {
  if (!row) return null;
  const version = typeof (row as { getUpdatedTime?: () => number }).getUpdatedTime === 'function' ? (row as { getUpdatedTime: () => number }).getUpdatedTime() : undefined;
  return { revision: revisionOf(row) ?? null, status: row.status, count: row.messageCount, runner: typeof row.runner === 'string' ? row.runner.slice(-8) : null, version };
}

const promptsOf = (messages: readonly StoredMessage[]) => messages.flatMap((m) => (m.role === 'user' ? [m.content.slice(0, 40)] : []));

function traced(id: string, how: string, keyed: KeyedMessage[]): KeyedMessage[] {
  if (tracing) trace({ op: 'read', id, how, records: keyed.length });
  return keyed;
}

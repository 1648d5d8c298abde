// Live views of sessions for the admin page and the CLI: Harper's real-time events on the AgentSession table (from
// every worker thread and node; every transcript write also writes the row) turned into server-sent events that
// carry only what changed since the follower's last event.
import { Readable } from 'node:stream';
import type { StreamEvent, ToolCall } from '../resources/models/types.js';
import { compactionBoundary, type StoredMessage } from './compaction.js';
import { messageBytes, sessionSummary, toHeader, type Session, type SessionStore } from './session.js';

/** A transcript message as followers get it: its place, its size, and whether (and why) it was cut. */
export interface MessageView {
  index: number;
  role: StoredMessage['role'];
  content: string;
  bytes: number;
  /** A compaction record: the summary the model sees instead of messages #0 to #keepFrom-1, who wrote it, and the
   * boundary as an operator reads it. */
  keepFrom?: number;
  compactedBy?: 'model' | 'digest';
  detail?: string;
  boundary?: string;
  name?: string;
  toolCallId?: string;
  toolCalls?: { id: string; name: string; arguments: Record<string, unknown> }[];
  isError?: boolean;
  cut?: 'cap' | 'context' | 'workingSet';
  /** A prompt that was a scheduled follow-up: its id. */
  followup?: string;
  /** What the agent's memory recalled for a prompt (sent to the model after it). */
  recall?: string;
  at?: number;
}

/** Why a stored result was cut, as the CLI and an export say it. */
export const CUT_NOTES = { cap: 'cut: cap (agent.maxToolResultBytes)', context: 'cut: context window', workingSet: 'cut: working set (agent.workingSetBytes)' } as const;

export function messageView(m: StoredMessage, index: number): MessageView {
  const view: MessageView = { index, role: m.role, content: m.content, bytes: messageBytes(m) };
  if (m.at !== undefined) view.at = m.at;
  if (m.role === 'compaction') {
    Object.assign(view, { keepFrom: m.keepFrom, compactedBy: m.compactedBy, boundary: compactionBoundary(m) });
    if (m.detail) view.detail = m.detail;
  }
  if (m.role === 'assistant' && m.toolCalls?.length) view.toolCalls = m.toolCalls;
  if (m.role === 'user' && m.followup) view.followup = m.followup;
  if (m.role === 'user' && m.recall) view.recall = m.recall;
  if (m.role === 'tool') {
    view.name = m.name;
    view.toolCallId = m.toolCallId;
    if (m.isError) view.isError = true;
    if (m.cut) view.cut = m.cut;
  }
  return view;
}

/** The session's fields without its transcript, pending approvals in full (a follower shows their arguments). */
export function sessionHeader(s: Session) {
  return { ...sessionSummary(s), pendingApprovals: s.pendingApprovals };
}

export interface SessionDelta {
  session: ReturnType<typeof sessionHeader>;
  /** New messages, and earlier ones that changed in place (a context-window shrink rewrites old tool results). */
  messages: MessageView[];
}

/** What one follower has been sent of one session, from message `from` on; `delta` says what is new since. */
export class TranscriptCursor {
  private readonly sent: string[] = [];
  private lastHeader = '';

  constructor(private readonly from = 0) {}

  delta(s: Session): SessionDelta | null {
    const messages: MessageView[] = [];
    for (let i = this.from; i < s.messages.length; i++) {
      const m = s.messages[i]!;
      const signature = `${m.role}:${messageBytes(m)}:${m.role === 'tool' ? (m.cut ?? '') : ''}`;
      if (this.sent[i] === signature) continue;
      this.sent[i] = signature;
      messages.push(messageView(m, i));
    }
    const session = sessionHeader(s);
    const { updatedAt: _changesOnEveryWrite, ...compared } = session;
    const header = JSON.stringify(compared);
    if (messages.length === 0 && header === this.lastHeader) return null;
    this.lastHeader = header;
    return { session, messages };
  }
}

/**
 * What a streaming model call shows followers before its message is stored: text as the model writes it, each tool
 * call once whole, and the end (a failed call's partial text is dropped: the message it was becoming never comes).
 * `index` is the transcript position the message will take; `call` tells one model call's pieces from another's; `at`
 * is how much of the call's text (in UTF-16 units, as JavaScript counts) came before this piece: live events are
 * published, never kept, so a follower that subscribed after the first piece sees `at` > 0 and knows it missed the
 * start (the CLI and the page then wait for the stored message instead of showing half an answer).
 */
export type LiveEvent =
  | { kind: 'text'; call: string; index: number; at: number; text: string }
  | { kind: 'toolCall'; call: string; index: number; toolCall: ToolCall }
  | { kind: 'end'; call: string; index: number; failed: boolean };

/** How often streamed text is published: each publish is a write to Harper's audit log, so pieces are gathered. */
export const LIVE_TEXT_EVERY_MS = 100;

/**
 * Publishes one model call's stream to its session's followers through `publish` (Harper's table publish, which
 * reaches subscribers on every worker thread). Nothing goes out during the call's first LIVE_TEXT_EVERY_MS: a call
 * that is over by then has its message stored at once, so followers lose nothing, and each publish is a write (under
 * load, most of a fast provider's calls end inside it). From then on: text gathered for up to LIVE_TEXT_EVERY_MS, a
 * tool call at once (after the text before it), then the end. Nothing of it is stored in the transcript.
 */
export class LiveWriter {
  private pending = '';
  /** Tool calls that came during the first window, with how much of `pending` came before each. */
  private held: { at: number; call: ToolCall }[] = [];
  /** Text already published for this call. */
  private sent = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The first window is over: pieces go out as they come. */
  private live = false;
  private closed = false;

  constructor(
    private readonly publish: (event: LiveEvent) => void,
    private readonly call: string,
    private readonly index: number
  ) {}

  readonly onEvent = (event: StreamEvent): void => {
    if (this.closed) return;
    if (!this.live) {
      if (event.type === 'text') this.pending += event.text;
      else this.held.push({ at: this.pending.length, call: event.call });
      this.timer ??= setTimeout(() => this.goLive(), LIVE_TEXT_EVERY_MS);
      return;
    }
    if (event.type === 'text') {
      this.pending += event.text;
      this.timer ??= setTimeout(() => this.flush(), LIVE_TEXT_EVERY_MS);
      return;
    }
    this.flush();
    this.toolCall(event.call);
  };

  /** The first window is over: what it gathered goes out in the order it came. */
  private goLive(): void {
    this.timer = undefined;
    this.live = true;
    const text = this.pending;
    let from = 0;
    for (const { at, call } of this.held) {
      this.pending = text.slice(from, at);
      this.flush();
      from = at;
      this.toolCall(call);
    }
    this.held = [];
    this.pending = text.slice(from);
    this.flush();
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.pending) return;
    const text = this.pending;
    this.pending = '';
    this.send({ kind: 'text', call: this.call, index: this.index, at: this.sent, text });
    this.sent += text.length;
  }

  private toolCall(call: ToolCall): void {
    this.send({ kind: 'toolCall', call: this.call, index: this.index, toolCall: call });
  }

  private send(event: LiveEvent): void {
    try {
      this.publish(event);
    } catch {
      // A follower's view is not worth failing a run over.
    }
  }

  /** The call is over. Inside the first window nothing was published, and nothing is: the stored message (or, for a
   * failed call, nothing) is what followers see. Later, a failed call's gathered text is dropped and it ends failed; a
   * finished one's text is sent before the end, and one that published no text sends no end (followers use the end to
   * close a call's text or to mark it failed). */
  close(failed: boolean): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.live) return;
    if (failed) this.pending = '';
    else this.flush();
    if (!failed && this.sent === 0) return;
    this.send({ kind: 'end', call: this.call, index: this.index, failed });
  }
}

/** A table event as Harper's subscription queue emits it. */
interface TableEvent {
  id?: unknown;
  type?: string;
  value?: unknown;
}

/** Harper's subscription queue (an IterableEventQueue): `data` per event; emitting `close` ends the subscription. */
export interface SubscriptionQueue {
  on(event: 'data', listener: (event: TableEvent) => void): unknown;
  emit(event: 'close'): unknown;
}

export interface SubscribableTable {
  subscribe(query: Record<string, unknown>): Promise<SubscriptionQueue> | SubscriptionQueue;
}

const HEARTBEAT_MS = 15_000;
/** How long a browser waits before it reconnects an ended stream (the SSE `retry` field). */
const RECONNECT_MS = 1_000;

/** How to end each open stream. */
const openStreams = new Set<() => void>();
let shuttingDown = false;

/**
 * Ends every open event stream, and every later one at once. Harper restarts a worker thread (a component deployed
 * or changed) only once its connections end, an event stream never ends by itself, and a follower's reconnect can
 * still reach the old thread; followers keep retrying until the new thread answers.
 */
export function endEventStreams(): number {
  shuttingDown = true;
  const n = openStreams.size;
  for (const end of [...openStreams]) end();
  return n;
}

/**
 * A text/event-stream body. `open` starts the source and returns how to stop it; the stream stops it when the
 * response closes (Harper destroys a piped body when its client goes away) and sends a comment line every 15 s so
 * proxies keep the connection.
 */
export function eventStream(open: (send: (event: string, data: unknown) => void) => Promise<() => void>): Readable {
  let stop: (() => void) | undefined;
  let closed = false;
  const heartbeat = setInterval(() => stream.push(': keep-alive\n\n'), HEARTBEAT_MS);
  const finish = () => {
    if (closed) return;
    closed = true;
    openStreams.delete(end);
    clearInterval(heartbeat);
    stop?.();
  };
  const end = () => {
    finish();
    stream.push(null);
  };
  const stream = new Readable({
    read() {},
    destroy(error, callback) {
      finish();
      callback(error);
    },
  });
  openStreams.add(end);
  stream.push(`retry: ${RECONNECT_MS}\n\n`);
  if (shuttingDown) {
    end();
    return stream;
  }
  const send = (event: string, data: unknown) => {
    if (!closed) stream.push(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  open(send).then(
    (close) => {
      if (closed) close();
      else stop = close;
    },
    (error) => {
      send('failure', { error: String(error?.message ?? error) });
      stream.destroy();
    }
  );
  return stream;
}

/**
 * One session, live: a `session` event with its header and messages from `from` on, then one for each write that
 * changed what a follower sees. Subscribes before reading, so no write falls between the read and the first event.
 */
export function followSession(table: SubscribableTable, store: SessionStore, id: string, from: number, live?: SubscribableTable): Readable {
  return eventStream(async (send) => {
    const cursor = new TranscriptCursor(from);
    // A streaming call's pieces, as `live` events (published, never stored: see LiveWriter).
    const liveQueue = await live?.subscribe({ id, omitCurrent: true });
    liveQueue?.on('data', (event) => {
      if (event.value && typeof event.value === 'object') send('live', event.value);
    });
    const queue = await table.subscribe({ id, omitCurrent: true });
    const show = (s: Session | undefined) => {
      const delta = s && cursor.delta(s);
      if (delta) send('session', delta);
    };
    // Each event on the row means the row or its transcript changed: read the session again, one read at a time so
    // an older read never lands after a newer one.
    let reads = Promise.resolve();
    const refresh = () => (reads = reads.then(() => store.get(id).then(show, () => undefined)));
    queue.on('data', (event) => {
      if (event.type === 'delete') send('deleted', { session_id: id });
      else void refresh();
    });
    await refresh();
    return () => {
      queue.emit('close');
      liveQueue?.emit('close');
    };
  });
}

/** Every session (or `owner`'s only), live: a `sessions` event with the newest `limit` summaries, then a `session`
 * event per write. */
export function followSessionList(table: SubscribableTable, store: SessionStore, limit: number, owner?: string | null): Readable {
  const sees = (user: string | null) => owner === undefined || user === owner;
  return eventStream(async (send) => {
    // Only sessions the follower sees (agent/access.ts): a delete is sent for one it was shown.
    const shown = new Set<string>();
    const queue = await table.subscribe({ isCollection: true, omitCurrent: true });
    queue.on('data', (event) => {
      const s = event.type === 'delete' ? undefined : toHeader(event.value);
      if (s && sees(s.user)) {
        shown.add(s.session_id);
        send('session', sessionSummary(s));
      } else if (!s && event.id !== undefined && shown.delete(String(event.id))) send('deleted', { session_id: String(event.id) });
    });
    const first = (await store.page(limit, { owner })).sessions.map(sessionSummary);
    for (const s of first) shown.add(s.session_id);
    send('sessions', first);
    return () => queue.emit('close');
  });
}

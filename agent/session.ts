// The session store: owns the AgentSession table. Every change to a session runs through `mutate`, which holds
// the session's lock across read, change and whole-row put, so concurrent writers never lose a message.
import { randomUUID } from 'node:crypto';
import { truncateWithMarker } from '../resources/models/agentLoop.js';
import type { Message, ToolCall } from '../resources/models/types.js';

export type SessionStatus = 'idle' | 'running' | 'awaiting_approval' | 'completed' | 'aborted' | 'error';

export interface PendingApproval {
  approval_id: string;
  toolCallId: string;
  name: string;
  arguments: ToolCall['arguments'];
  createdAt: number;
}

export interface Session {
  session_id: string;
  user: string | null;
  status: SessionStatus;
  messages: Message[];
  pendingApprovals: PendingApproval[];
  provider: string;
  model: string | null;
  createdAt: number;
  updatedAt: number;
  lastError: string | null;
  /** `pid:threadId` of the run in progress, so a run cut off by a restart can be told from a live one. */
  runner: string | null;
}

/** The part of a Harper table the store uses (the real `databases.agent.AgentSession`, or a map in unit tests). */
export interface SessionTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
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

/** The context-window shrink: results over this are cut to a head of the same size. */
export const SHRINK_THRESHOLD_BYTES = 2048;
export const SHRINK_REASON = 'cut to 2 KiB after the model rejected the conversation as longer than its context window';
export const SHRINK_ADVICE =
  'read less at a time (a smaller lineCount, tail_file with fewer lines, a narrower grep pattern or path)';

/** A message as plain data. Harper's nested objects carry their fields as inherited getters, which a spread drops,
 * so each field is copied by name; tool-call arguments are read-only and kept as they are. */
function plainMessage(m: Record<string, any>): Message {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.toolCalls) out.toolCalls = Array.from(m.toolCalls as Record<string, any>[], (c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
  for (const key of ['toolCallId', 'name', 'isError', 'cut', 'at'] as const) if (m[key] !== undefined) out[key] = m[key];
  return out as unknown as Message;
}

function plainApproval(p: Record<string, any>): PendingApproval {
  return { approval_id: p.approval_id, toolCallId: p.toolCallId, name: p.name, arguments: p.arguments, createdAt: p.createdAt };
}

/** A row (or a table event's value) as a plain Session. */
export function toSession(record: unknown): Session | undefined {
  if (!record) return undefined;
  const r = record as Record<string, unknown>;
  // Copy the row into plain data the loop can change freely (a Harper record exposes its fields as getters).
  return {
    session_id: String(r.session_id),
    user: (r.user as string) ?? null,
    status: (r.status as SessionStatus) ?? 'idle',
    messages: Array.isArray(r.messages) ? Array.from(r.messages as Record<string, any>[], plainMessage) : [],
    pendingApprovals: Array.isArray(r.pendingApprovals) ? Array.from(r.pendingApprovals as Record<string, any>[], plainApproval) : [],
    provider: String(r.provider ?? 'local'),
    model: (r.model as string) ?? null,
    createdAt: Number(r.createdAt ?? 0),
    updatedAt: Number(r.updatedAt ?? 0),
    lastError: (r.lastError as string) ?? null,
    runner: (r.runner as string) ?? null,
  };
}

export function sessionBytes(session: Session): number {
  return Buffer.byteLength(JSON.stringify(session.messages));
}

/** A message's size as the operator sees it: its content's UTF-8 bytes (what the cap limits), plus its tool calls. */
export function messageBytes(m: Message): number {
  const calls = m.role === 'assistant' && m.toolCalls?.length ? Buffer.byteLength(JSON.stringify(m.toolCalls)) : 0;
  return Buffer.byteLength(m.content) + calls;
}

/** A session without its transcript: what lists show. */
export function sessionSummary(s: Session) {
  const { messages, pendingApprovals, ...rest } = s;
  return { ...rest, messageCount: messages.length, bytes: sessionBytes(s), pendingApprovals: pendingApprovals.length };
}

export class SessionStore {
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(private readonly table: () => SessionTable) {}

  async create(fields: { user: string | null; provider: string; model: string | null; session_id?: string }): Promise<Session> {
    const now = Date.now();
    const session: Session = {
      session_id: fields.session_id ?? randomUUID(),
      user: fields.user,
      status: 'idle',
      messages: [],
      pendingApprovals: [],
      provider: fields.provider,
      model: fields.model,
      createdAt: now,
      updatedAt: now,
      lastError: null,
      runner: null,
    };
    return this.withLock(session.session_id, async () => {
      if (await this.table().get(session.session_id)) throw new Error(`session ${session.session_id} already exists`);
      await this.table().put(session.session_id, { ...session });
      return session;
    });
  }

  async get(id: string): Promise<Session | undefined> {
    return toSession(await this.table().get(id));
  }

  async list(limit: number): Promise<Session[]> {
    const all: Session[] = [];
    for await (const record of this.table().search({ conditions: [] })) {
      const s = toSession(record);
      if (s) all.push(s);
    }
    return all.sort((a, b) => b.updatedAt - a.updatedAt).slice(0, limit);
  }

  /**
   * The locked mutator: reads the row, lets `change` edit a copy (or throw to abort with nothing written),
   * then puts the whole row. Calls on one session run one at a time, in order.
   */
  async mutate(id: string, change: (session: Session) => void | Promise<void>, guard?: RunGuard): Promise<Session> {
    return this.withLock(id, async () => {
      const session = toSession(await this.table().get(id));
      if (!session) throw new SessionNotFoundError(id);
      if (guard && (session.status !== 'running' || session.runner !== guard.runner)) throw new RunSupersededError(id);
      await change(session);
      session.updatedAt = Date.now();
      await this.table().put(id, { ...session });
      return session;
    });
  }

  append(id: string, messages: Message[], guard?: RunGuard): Promise<Session> {
    const at = Date.now();
    return this.mutate(
      id,
      (s) => {
        s.messages.push(...messages.map((m) => ({ ...m, at: m.at ?? at })));
      },
      guard
    );
  }

  setStatus(id: string, status: SessionStatus, lastError: string | null = null, guard?: RunGuard): Promise<Session> {
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
   * Cuts every tool result over 2 KiB in the newest group of tool results that has one to a 2 KiB head.
   * Cut results are at most 2 KiB, so they are never picked again: calling it again reaches an older group.
   * Returns how many results were cut (0: nothing left to cut).
   */
  async shrinkNewestToolResults(id: string, guard?: RunGuard): Promise<number> {
    let cut = 0;
    await this.mutate(id, (s) => {
      const groups = toolResultGroups(s.messages);
      for (let g = groups.length - 1; g >= 0 && cut === 0; g--) {
        for (const index of groups[g]!) {
          const m = s.messages[index]!;
          if (m.role !== 'tool' || Buffer.byteLength(m.content) <= SHRINK_THRESHOLD_BYTES) continue;
          s.messages[index] = {
            ...m,
            content: truncateWithMarker(m.content, SHRINK_THRESHOLD_BYTES, SHRINK_ADVICE, SHRINK_REASON),
            cut: 'context',
          };
          cut++;
        }
      }
      if (cut === 0) throw new NothingToShrink();
    }, guard).catch((error) => {
      if (!(error instanceof NothingToShrink)) throw error;
    });
    return cut;
  }

  private withLock<T>(id: string, task: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(id) ?? Promise.resolve();
    const run = previous.then(task, task);
    const tail = run.catch(() => undefined);
    this.locks.set(id, tail);
    void tail.then(() => {
      if (this.locks.get(id) === tail) this.locks.delete(id);
    });
    return run;
  }
}

class NothingToShrink extends Error {}

/** Indexes of tool messages, grouped by the run of consecutive tool messages that answer one assistant turn. */
export function toolResultGroups(messages: readonly Message[]): number[][] {
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

// Follow-ups: a message the model (schedule_followup) asks to have sent back to its session later. Each is a row in
// AgentFollowup, so it outlives a restart; the node that owns the session fires it (every worker thread of that node
// arms a timer, and the session's lock decides: the first to take it marks the row fired, the rest find it fired). A
// follow-up due while Harper was down fires at boot. Firing itself (appending the message, starting the run) is the
// loop's (`fireFollowup`); this module owns the rows, the bounds and the timers.
import { randomUUID } from 'node:crypto';

export type FollowupStatus = 'pending' | 'fired' | 'cancelled';

export interface Followup {
  followup_id: string;
  session_id: string;
  /** The node that owns the session: the only one that fires it. */
  node: string | null;
  message: string;
  dueAt: number;
  createdAt: number;
  status: FollowupStatus;
  firedAt?: number;
  cancelledAt?: number;
  /** Why it was cancelled: cancel_agent_followup, cancel_agent_run, or the session being gone. */
  cancelReason?: string;
}

export interface FollowupTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
  delete?(id: string): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
}

export interface FollowupLimits {
  followupMinSeconds: number;
  followupMaxSeconds: number;
  maxFollowups: number;
}

/** What firing found: fired (a run started), busy (the session is running or awaiting approval: try again), or done
 * (it was fired or cancelled already, or the session is gone). */
export type FireOutcome = 'fired' | 'busy' | 'done';

/** How long a follow-up whose session is busy waits before it tries again. */
export const BUSY_RETRY_MS = 2000;
/** setTimeout's longest delay; a later follow-up is re-armed when it wakes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class FollowupError extends Error {}

const millis = (v: unknown): number | undefined => (v === undefined || v === null ? undefined : v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : Number(v));

export function toFollowup(row: unknown): Followup | undefined {
  if (!row) return undefined;
  const r = row as Record<string, unknown>;
  const f: Followup = {
    followup_id: String(r.followup_id),
    session_id: String(r.session_id),
    node: (r.node as string | null | undefined) ?? null,
    message: String(r.message ?? ''),
    dueAt: millis(r.dueAt)!,
    createdAt: millis(r.createdAt)!,
    status: r.status as FollowupStatus,
  };
  if (r.firedAt != null) f.firedAt = millis(r.firedAt);
  if (r.cancelledAt != null) f.cancelledAt = millis(r.cancelledAt);
  if (r.cancelReason != null) f.cancelReason = String(r.cancelReason);
  return f;
}

function toRow(f: Followup): Record<string, unknown> {
  const row: Record<string, unknown> = { ...f, dueAt: new Date(f.dueAt), createdAt: new Date(f.createdAt) };
  if (f.firedAt !== undefined) row.firedAt = new Date(f.firedAt);
  if (f.cancelledAt !== undefined) row.cancelledAt = new Date(f.cancelledAt);
  return row;
}

/** When a follow-up asked for with `delaySeconds` or `at` (ISO time) is due, within the limits; else why not. */
export function dueTime(args: { delaySeconds?: unknown; at?: unknown }, limits: FollowupLimits, now = Date.now()): number {
  const range = `${limits.followupMinSeconds} s to ${limits.followupMaxSeconds} s ahead (agent.followupMinSeconds, agent.followupMaxSeconds)`;
  if ((args.delaySeconds === undefined) === (args.at === undefined)) throw new FollowupError(`pass exactly one of delaySeconds or at (an ISO 8601 time), ${range}`);
  let due: number;
  if (args.at !== undefined) {
    due = typeof args.at === 'string' && /^\d{4}-\d\d-\d\dT/.test(args.at) ? Date.parse(args.at) : NaN;
    if (Number.isNaN(due)) throw new FollowupError(`at must be an ISO 8601 time such as ${new Date(now + 3600_000).toISOString()}`);
  } else {
    const delay = args.delaySeconds;
    if (typeof delay !== 'number' || !Number.isFinite(delay)) throw new FollowupError(`delaySeconds must be a number of seconds, ${range}`);
    due = now + Math.round(delay * 1000);
  }
  const seconds = (due - now) / 1000;
  if (seconds < limits.followupMinSeconds || seconds > limits.followupMaxSeconds) {
    throw new FollowupError(`a follow-up must be due ${range}; this one would be ${Math.round(seconds)} s ahead`);
  }
  return due;
}

export class Followups {
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  /** Fires a due follow-up (set by boot: the loop's fireFollowup with its deps). */
  onDue?: (f: Followup) => Promise<FireOutcome>;

  constructor(
    private readonly table: () => FollowupTable | undefined,
    readonly node: string | null,
    private readonly log: (message: string) => void = () => undefined
  ) {}

  private rows(): FollowupTable {
    const t = this.table();
    if (!t) throw new Error('the agent.AgentFollowup table is not there yet');
    return t;
  }

  async get(id: string): Promise<Followup | undefined> {
    return toFollowup(await this.rows().get(id));
  }

  async list(filter: { session_id?: string; status?: FollowupStatus } = {}): Promise<Followup[]> {
    const conditions = [];
    if (filter.session_id) conditions.push({ attribute: 'session_id', comparator: 'equals', value: filter.session_id });
    if (filter.status) conditions.push({ attribute: 'status', comparator: 'equals', value: filter.status });
    const out: Followup[] = [];
    for await (const row of this.rows().search({ conditions })) out.push(toFollowup(row)!);
    return out.sort((a, b) => a.dueAt - b.dueAt || a.createdAt - b.createdAt);
  }

  /** Stores a follow-up for a session this node owns and arms it; refused over the per-session limit. */
  async schedule(sessionId: string, owner: string | null, message: string, dueAt: number, limits: FollowupLimits): Promise<Followup> {
    const pending = await this.list({ session_id: sessionId, status: 'pending' });
    if (pending.length >= limits.maxFollowups) {
      throw new FollowupError(
        `this session already has ${pending.length} pending follow-up${pending.length === 1 ? '' : 's'} (agent.maxFollowups is ${limits.maxFollowups}): ` +
          `the next is due ${new Date(pending[0]!.dueAt).toISOString()}`
      );
    }
    const f: Followup = { followup_id: randomUUID(), session_id: sessionId, node: owner, message, dueAt, createdAt: Date.now(), status: 'pending' };
    await this.rows().put(f.followup_id, toRow(f));
    this.arm(f);
    return f;
  }

  /** Marks a pending follow-up fired or cancelled (the caller holds the session's lock when firing). */
  async settle(f: Followup, status: 'fired' | 'cancelled', reason?: string): Promise<Followup> {
    const now = Date.now();
    const settled: Followup = { ...f, status, ...(status === 'fired' ? { firedAt: now } : { cancelledAt: now, cancelReason: reason ?? 'cancelled' }) };
    await this.rows().put(f.followup_id, toRow(settled));
    this.disarm(f.followup_id);
    return settled;
  }

  /** Removes every follow-up of a session (a deleted session), disarming its timers; answers how many. */
  async deleteSession(sessionId: string): Promise<number> {
    const all = await this.list({ session_id: sessionId });
    for (const f of all) {
      this.disarm(f.followup_id);
      await this.rows().delete!(f.followup_id);
    }
    return all.length;
  }

  /** Cancels every pending follow-up of a session (cancel_agent_run); answers how many. */
  async cancelSession(sessionId: string, reason: string): Promise<number> {
    const pending = await this.list({ session_id: sessionId, status: 'pending' });
    for (const f of pending) await this.settle(f, 'cancelled', reason);
    return pending.length;
  }

  /** At boot: arms every pending follow-up this node owns (one already due fires now). Answers how many. */
  async armAll(): Promise<number> {
    const mine = (await this.list({ status: 'pending' })).filter((f) => f.node === this.node);
    for (const f of mine) this.arm(f);
    return mine.length;
  }

  arm(f: Followup, at = f.dueAt): void {
    if (f.node !== this.node) return;
    this.disarm(f.followup_id);
    const timer = setTimeout(() => void this.wake(f.followup_id), Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now())));
    timer.unref?.();
    this.timers.set(f.followup_id, timer);
  }

  disarm(id: string): void {
    clearTimeout(this.timers.get(id));
    this.timers.delete(id);
  }

  /** Stops every timer (the component unloading). */
  close(): void {
    for (const id of [...this.timers.keys()]) this.disarm(id);
  }

  private async wake(id: string): Promise<void> {
    this.timers.delete(id);
    try {
      const f = await this.get(id);
      if (!f || f.status !== 'pending' || f.node !== this.node) return;
      if (f.dueAt > Date.now()) return this.arm(f); // a delay past setTimeout's longest
      const outcome = (await this.onDue?.(f)) ?? 'done';
      if (outcome === 'busy') this.arm(f, Date.now() + BUSY_RETRY_MS);
    } catch (error) {
      this.log(`harper-agent: follow-up ${id} could not fire (trying again in ${BUSY_RETRY_MS} ms): ${error instanceof Error ? error.message : error}`);
      const f = await this.get(id).catch(() => undefined);
      if (f?.status === 'pending') this.arm(f, Date.now() + BUSY_RETRY_MS);
    }
  }
}

// A log of records kept per session in a Harper table (the model-call log, the tool-call audit): written once, read
// for a session or a page at a time newest first from the `at` index (a page costs its own size, not the table's), and
// removed with its session or when older than a retention. A map stands in for the table in unit tests.
import type { WriteBehind } from './writeBehind.js';

/** What a log record has: its id, its session and when. */
export interface LogRecord {
  id: string;
  session_id: string;
  at: number;
}

export interface LogTable {
  put(id: string, record: Record<string, unknown>, context?: object): unknown;
  delete?(id: string): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
}

/** A stored time as epoch milliseconds (a Date from Harper, its ISO text over JSON, or a number). */
export const millisOf = (at: unknown): number => (at instanceof Date ? at.getTime() : typeof at === 'string' ? Date.parse(at) : Number(at));

export class RecordLog<T extends LogRecord> {
  private readonly rows: T[] = [];
  constructor(
    private readonly table: (() => LogTable | undefined) | undefined,
    /** A stored row as plain data (Harper's records expose attributes as getters; times come back as Dates). */
    private readonly plain: (row: T) => T,
    /** Where the records wait for the thread's next transaction (agent/writeBehind.ts); absent, each put commits alone. */
    private readonly behind?: WriteBehind
  ) {}

  /** This thread's writes not yet committed: its own reads wait for them (see record). */
  private writing: Promise<unknown> = Promise.resolve();

  /**
   * Writes the records: with the thread's next transaction where there is a WriteBehind, else each put at once. A run
   * does not wait for this on its way to the next model call (a commit is a millisecond of a turn): the records are
   * committed with or before the run's next session change, in the same database, so whoever sees that change sees
   * them too; this thread's own reads (list, page) wait for what it has in flight.
   */
  record(records: T[]): Promise<void> {
    const table = this.table?.();
    if (!table) {
      this.rows.push(...records);
      return Promise.resolve();
    }
    const row = (r: T) => ({ ...r, at: new Date(r.at) }) as unknown as Record<string, unknown>;
    // A record's id is new (a UUID), so it needs no stamp after a stored version (agent/writeOrder.ts).
    const written = this.behind ? this.behind.add(records.map((r) => (context) => table.put(r.id, row(r), context))) : Promise.all(records.map((r) => table.put(r.id, row(r))));
    this.writing = Promise.all([this.writing, written.catch(() => undefined)]);
    return written.then(() => undefined);
  }

  /** A session's calls (or every session's), oldest first; `since` keeps those from that time on. */
  async list(query: { session_id?: string; since?: number } = {}): Promise<T[]> {
    await this.writing;
    const table = this.table?.();
    let out: T[];
    if (table) {
      out = [];
      const conditions = query.session_id ? [{ attribute: 'session_id', value: query.session_id }] : [];
      for await (const row of table.search({ conditions })) out.push(this.plain(row as T));
    } else out = this.rows.filter((r) => !query.session_id || r.session_id === query.session_id);
    if (query.since !== undefined) out = out.filter((r) => r.at >= query.since!);
    return out.sort((a, b) => a.at - b.at);
  }

  /** Every session's calls, newest first, one page: at most `limit` records older than `before` (a record's
   * `cursor`), read from the `at` index so a page costs its own size, not the table's. */
  async page(limit: number, before?: { at: number; id: string }): Promise<{ calls: T[]; next: { at: number; id: string } | null }> {
    await this.writing;
    const table = this.table?.();
    const calls: T[] = [];
    const older = (r: T) => !before || r.at < before.at || (r.at === before.at && r.id < before.id);
    if (table) {
      const conditions = before ? [{ attribute: 'at', comparator: 'less_than_equal', value: new Date(before.at) }] : [{ attribute: 'at', comparator: 'greater_than_equal', value: new Date(0) }];
      for await (const row of table.search({ conditions, sort: { attribute: 'at', descending: true } })) {
        const r = this.plain(row as T);
        if (!older(r)) continue;
        calls.push(r);
        if (calls.length > limit) break;
      }
    } else calls.push(...this.rows.filter(older).sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).slice(0, limit + 1));
    const more = calls.length > limit;
    const page = calls.slice(0, limit);
    return { calls: page, next: more ? { at: page.at(-1)!.at, id: page.at(-1)!.id } : null };
  }

  /** Removes a session's calls (a deleted session); answers how many. */
  async deleteSession(sessionId: string): Promise<number> {
    const ids = (await this.list({ session_id: sessionId })).map((r) => r.id);
    await this.remove(ids);
    return ids.length;
  }

  /** Removes every call made before `cutoff` (agent.retainModelCallsDays); answers how many. */
  async expireBefore(cutoff: number): Promise<number> {
    const table = this.table?.();
    const ids: string[] = [];
    if (table) {
      for await (const row of table.search({ conditions: [{ attribute: 'at', comparator: 'less_than', value: new Date(cutoff) }] })) ids.push(String((row as T).id));
    } else ids.push(...this.rows.filter((r) => r.at < cutoff).map((r) => r.id));
    await this.remove(ids);
    return ids.length;
  }

  private async remove(ids: string[]): Promise<void> {
    const table = this.table?.();
    if (table) for (const id of ids) await table.delete!(id);
    else for (let i = this.rows.length - 1; i >= 0; i--) if (ids.includes(this.rows[i]!.id)) this.rows.splice(i, 1);
  }
}

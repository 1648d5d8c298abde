// Writes to the agent's tables land in the order they are made. Harper orders the writes to one record by their
// timestamps, and each worker thread stamps with its own clock (getNextMonotonicTime: the thread's own Date.now() -
// performance.now(), taken at start and every 60 s): on this machine two threads of one Harper were measured 45 ms
// apart. A write whose stamp is not after the record's stored version is dropped without an error, its promise
// resolved as if written (last writer wins, `precedesExistingVersion`). So a change made under the session's lock on
// the slow thread, right after the fast thread's change, vanished: a prompt answered 200 that was never in the row, a
// cancel answered 200 that never happened (bench/stress.ts caught it; DESIGN.md "Writes are stamped after the record").
// Every write here carries a timestamp after the record's current version, which Harper then keeps.

/** The part of a Harper table this needs: its put and delete taking a context, and its LMDB store. */
export interface StampableTable {
  put(id: string, record: Record<string, unknown>, context?: { timestamp: number }): unknown;
  delete?(id: string, context?: { timestamp: number }): unknown;
  primaryStore?: { getEntry?(id: string): { version?: number } | undefined; resetReadTxn?(): void };
}

/** Far enough above a version for a double near today's epoch milliseconds (its step is 0.000244 ms) to be greater. */
const STEP_MS = 0.001;

/** A timestamp for the next write of `id`: now, or just after the version the record holds if that is later (a write
 * from a thread whose clock runs ahead). The read is fresh: the thread's read snapshot is dropped first. */
export function stampAfter(table: StampableTable, id: string): number | undefined {
  const store = table.primaryStore;
  if (typeof store?.getEntry !== 'function') return undefined;
  store.resetReadTxn?.();
  const version = store.getEntry(id)?.version;
  return Math.max(Date.now(), typeof version === 'number' ? version + STEP_MS : 0);
}

/** One timestamp after every one of `writes`' records (a transaction's writes all carry its context's stamp, which
 * Harper takes when the transaction starts). */
export function stampAfterAll(writes: readonly { table: StampableTable; id: string }[]): number | undefined {
  let stamp: number | undefined;
  for (const { table, id } of writes) {
    const t = stampAfter(table, id);
    if (t !== undefined) stamp = Math.max(stamp ?? 0, t);
  }
  return stamp;
}

const wrapped = new WeakMap<object, object>();

/** `table` with its put and delete stamped after each record's current version; everything else as it is. One wrapper
 * per table (the tables are read through getters that run on every use). */
export function inWriteOrder<T extends StampableTable>(table: T): T;
export function inWriteOrder<T extends StampableTable>(table: T | undefined): T | undefined;
export function inWriteOrder<T extends StampableTable>(table: T | undefined): T | undefined {
  if (!table) return undefined;
  let proxy = wrapped.get(table) as T | undefined;
  if (!proxy) wrapped.set(table, (proxy = orderedProxy(table)));
  return proxy;
}

function orderedProxy<T extends StampableTable>(table: T): T {
  const stamped = (id: string) => {
    const timestamp = stampAfter(table, id);
    return timestamp === undefined ? undefined : { timestamp };
  };
  return new Proxy(table, {
    get(target, property) {
      // A put given a transaction's context is stamped by it (stampAfterAll, before the transaction started).
      if (property === 'put') return (id: string, record: Record<string, unknown>, context?: { timestamp: number }) => target.put(id, record, context ?? stamped(id));
      if (property === 'delete' && target.delete) return (id: string) => target.delete!(id, stamped(id));
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

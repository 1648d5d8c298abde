// Records nobody waits for (the model-call log, the tool-call audit), written with the thread's next transaction
// instead of one commit each. A Harper commit costs its thread CPU whatever it holds (lmdb's prefetch and the commit's
// bookkeeping: a tenth of a millisecond and more under load), and a tool turn made four besides the session's own
// writes. Queued records ride in the next session change's transaction (SessionTables.together takes them), or, if none
// comes, in one transaction of their own at the next turn of the event loop: under load, one commit for the records
// of every session on the thread. Either way they are committed no later than the session change after them, which is
// what a reader needs (a run's records are there once its next change is).

/** One queued write: a put given the transaction's context. */
export type Write = (context: object) => unknown;

interface Queued {
  writes: Write[];
  settle: (outcome: Promise<unknown>) => void;
}

/** Writes taken out of the queue for one transaction: `write` puts them in it, `settle` follows its outcome. */
export interface Riders {
  write(context: object): void;
  settle(outcome: Promise<unknown>): void;
}

export class WriteBehind {
  private queued: Queued[] = [];
  private flush: NodeJS.Immediate | undefined;

  /** `transact`: runs `work` in one transaction of the database, committed when it is done (Harper's transaction). */
  constructor(private readonly transact: (work: (context: object) => Promise<void>) => Promise<unknown>) {}

  /** Queues `writes`; resolved once they are committed, rejected if their transaction failed. */
  add(writes: Write[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queued.push({ writes, settle: (outcome) => void outcome.then(() => resolve(), reject) });
      this.flush ??= setImmediate(() => {
        this.flush = undefined;
        const riders = this.take();
        riders.settle(this.transact(async (context) => riders.write(context)));
      });
    });
  }

  /** Everything queued, for the transaction about to start. */
  take(): Riders {
    const taken = this.queued;
    this.queued = [];
    // Nothing left for a transaction of their own.
    if (this.flush) clearImmediate(this.flush);
    this.flush = undefined;
    return {
      write: (context) => {
        // A put's own failure shows in the transaction's outcome.
        for (const q of taken) for (const w of q.writes) Promise.resolve(w(context)).catch(() => undefined);
      },
      settle: (outcome) => {
        for (const q of taken) q.settle(outcome);
      },
    };
  }
}

import { expect } from 'chai';
import { WriteBehind } from '../agent/writeBehind.js';

describe('records written with the next transaction (agent/writeBehind.ts)', () => {
  /** A stand-in for Harper's transaction: each one's puts, committed (or failed) when its work is done. */
  function database(fail = false) {
    const transactions: string[][] = [];
    const transact = async (work: (context: object) => Promise<unknown>) => {
      const puts: string[] = [];
      transactions.push(puts);
      await work({ puts });
      if (fail) throw new Error('commit failed');
    };
    const put = (id: string) => (context: object) => (context as { puts: string[] }).puts.push(id);
    return { transactions, transact, put };
  }

  it('rides in the transaction that starts next, and resolves when it commits', async () => {
    const db = database();
    const behind = new WriteBehind(db.transact);
    let committed = 0;
    void behind.add([db.put('call-1'), db.put('call-2')]).then(() => committed++);
    void behind.add([db.put('audit-1')]).then(() => committed++);
    // The session's change, as boot.ts's `together` makes it: the riders first, then its own puts.
    const riders = behind.take();
    const change = db.transact(async (context) => {
      riders.write(context);
      (context as { puts: string[] }).puts.push('message', 'row');
    });
    riders.settle(change);
    await change;
    await new Promise((r) => setImmediate(r));
    expect(db.transactions).to.deep.equal([['call-1', 'call-2', 'audit-1', 'message', 'row']]);
    expect(committed).to.equal(2);
    // Nothing was left for a transaction of their own.
    await new Promise((r) => setImmediate(r));
    expect(db.transactions.length).to.equal(1);
  });

  it('with no transaction coming, those queued in one turn of the event loop are committed together in one of their own', async () => {
    const db = database();
    const behind = new WriteBehind(db.transact);
    await Promise.all([behind.add([db.put('a')]), behind.add([db.put('b')]), behind.add([db.put('c')])]);
    expect(db.transactions).to.deep.equal([['a', 'b', 'c']]);
  });

  it("a failed commit rejects its records' promises", async () => {
    const db = database(true);
    const behind = new WriteBehind(db.transact);
    const outcome = await behind.add([db.put('a')]).then(
      () => 'committed',
      (error: Error) => error.message
    );
    expect(outcome).to.equal('commit failed');
  });
});

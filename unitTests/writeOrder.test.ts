import { expect } from 'chai';
import { inWriteOrder, stampAfter, stampAfterAll, type StampableTable } from '../agent/writeOrder.js';

describe('writes stamped after the record (agent/writeOrder.ts)', () => {
  /** A table that records what each put and delete was given, over a store holding one version per key. */
  const table = (versions: Record<string, number>) => {
    const calls: unknown[][] = [];
    let resets = 0;
    const t: StampableTable & { calls: unknown[][]; resets: () => number } = {
      calls,
      resets: () => resets,
      put: (...args) => calls.push(['put', ...args]),
      delete: (...args) => calls.push(['delete', ...args]),
      primaryStore: { getEntry: (id) => (id in versions ? { version: versions[id] } : undefined), resetReadTxn: () => void resets++ },
    };
    return t;
  };

  it('stamps now, or just after a version written from a clock that runs ahead; reads the version fresh', () => {
    const now = Date.now();
    const t = table({ ahead: now + 45, behind: now - 1000 });
    expect(stampAfter(t, 'ahead')).to.equal(now + 45 + 0.001);
    expect(stampAfter(t, 'behind')).to.be.within(now, Date.now());
    expect(stampAfter(t, 'new')).to.be.within(now, Date.now());
    expect(t.resets()).to.equal(3);
    // A table without an LMDB store (a map in tests) is written as it is.
    expect(stampAfter({ put: () => undefined }, 'x')).to.equal(undefined);
  });

  it('passes the stamp to put and delete as their context; other members as they are, one wrapper per table', () => {
    const far = Date.now() + 60_000;
    const t = table({ a: far });
    const ordered = inWriteOrder(t);
    ordered.put('a', { x: 1 });
    ordered.delete!('a');
    expect(t.calls).to.deep.equal([
      ['put', 'a', { x: 1 }, { timestamp: far + 0.001 }],
      ['delete', 'a', { timestamp: far + 0.001 }],
    ]);
    // A put in a transaction carries the transaction's context, stamped before it started (stampAfterAll).
    ordered.put('b', { x: 2 }, { timestamp: 7 });
    expect(t.calls[2]).to.deep.equal(['put', 'b', { x: 2 }, { timestamp: 7 }]);
    expect(ordered.primaryStore).to.equal(t.primaryStore);
    expect(inWriteOrder(t)).to.equal(ordered);
  });

  it('stamps a transaction after the latest of the records it writes, across tables', () => {
    const now = Date.now();
    const rows = table({ row: now + 45 });
    const records = table({ old: now - 10 });
    expect(stampAfterAll([{ table: records, id: 'old' }, { table: rows, id: 'row' }, { table: records, id: 'new' }])).to.equal(now + 45 + 0.001);
    expect(stampAfterAll([{ table: records, id: 'new' }])).to.be.within(now, Date.now());
    expect(stampAfterAll([{ table: { put: () => undefined }, id: 'x' }])).to.equal(undefined);
  });
});

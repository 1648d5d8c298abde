import { expect } from 'chai';
import { SessionStore, SHRINK_THRESHOLD_BYTES, RunSupersededError, takeThreadLock, type SessionHeader, type ThreadLock } from '../agent/session.js';
import type { Message } from '../resources/models/types.js';
import { memoryStore } from './helpers.js';

describe('SessionStore', () => {
  it('concurrent appends on one session lose nothing, each written once as its own record, in order', async () => {
    const { store, table, messages } = memoryStore(3);
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.append(s.session_id, [{ role: 'user', content: `m${i}` }])));
    const back = (await store.get(s.session_id))!;
    expect(back.messages.map((m) => m.content)).to.deep.equal(Array.from({ length: 50 }, (_, i) => `m${i}`));
    // One row write per change and one record per message: an append never rewrites the transcript.
    expect(table.puts).to.equal(51);
    expect(messages.puts).to.equal(50);
    expect(back.messageCount).to.equal(50);
    expect(back.bytes).to.equal(Buffer.byteLength(JSON.stringify(back.messages)));
    expect((await store.header(s.session_id))!.bytes).to.equal(back.bytes);
  });

  it("a change's records and its row are written in one transaction where the tables have one, stamped after the row", async () => {
    const { table, messages } = memoryStore();
    // Harper's transaction, as boot.ts passes it: the puts given its context are committed with it.
    const transactions: { writes: string[]; puts: string[] }[] = [];
    const capture = (t: typeof table, name: string) => {
      const put = t.put.bind(t);
      t.put = async (id: string, record: Record<string, unknown>, context?: object) => {
        const open = transactions.find((x) => x === (context as { txn?: unknown } | undefined)?.txn);
        if (open) open.puts.push(`${name} ${id}`);
        else if (context) throw new Error('a context from no open transaction');
        return put(id, record);
      };
    };
    capture(table, 'session');
    capture(messages, 'message');
    const store = new SessionStore({
      sessions: () => table,
      messages: () => messages,
      together: async (writes, work) => {
        const txn = { writes: writes.map((w) => `${w.table === table ? 'session' : 'message'} ${w.id}`), puts: [] as string[] };
        transactions.push(txn);
        return work({ txn });
      },
    });
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    const before = transactions.length;
    await store.append(s.session_id, [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }]);
    const [change] = transactions.slice(before);
    const keys = [...messages.rows.keys()].sort();
    expect(transactions.length - before).to.equal(1);
    // Stamped after the row (new records have no version to follow); the records put first, the row last.
    expect(change!.writes).to.deep.equal([`session ${s.session_id}`]);
    expect(change!.puts).to.deep.equal([...keys.map((k) => `message ${k}`), `session ${s.session_id}`]);
    expect((await store.get(s.session_id))!.messages.map((m) => m.content)).to.deep.equal(['one', 'two']);
    // A cut rewrites a record that exists: the transaction is stamped after it too.
    await store.append(s.session_id, [{ role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read_file', arguments: {} }] }, { role: 'tool', toolCallId: 'c1', name: 'read_file', content: 'x'.repeat(SHRINK_THRESHOLD_BYTES * 2) }]);
    const toolKey = [...messages.rows.keys()].find((k) => JSON.parse(messages.rows.get(k)!).role === 'tool')!;
    expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(1);
    expect(transactions.at(-1)).to.deep.equal({ writes: [`message ${toolKey}`, `session ${s.session_id}`], puts: [`message ${toolKey}`, `session ${s.session_id}`] });
  });

  it('pages newest first from the time index, or one owner\'s range of the owner+time index, reading the page and no more', async () => {
    const { store, table } = memoryStore(0);
    const made: { id: string; user: string; at: number }[] = [];
    // 30 sessions of three users, two to a millisecond (ties broken by id, descending).
    for (let i = 0; i < 30; i++) {
      const user = ['ann', 'bob', 'cy'][i % 3]!;
      const s = await store.create({ user, provider: 'local', model: null, session_id: `s${String(i).padStart(2, '0')}` });
      const at = 1_000 + Math.floor(i / 2);
      const row = JSON.parse(table.rows.get(s.session_id)!);
      table.rows.set(s.session_id, JSON.stringify({ ...row, updatedAt: new Date(at).toISOString(), ownerRecent: `${user}\u001f${String(at).padStart(15, '0')}\u001f${s.session_id}` }));
      made.push({ id: s.session_id, user, at });
    }
    const expected = (user?: string) => made.filter((m) => !user || m.user === user).sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).map((m) => m.id);
    const walk = async (owner: string | undefined, limit: number) => {
      const ids: string[] = [];
      let cursor: { at: number; id: string } | undefined;
      for (;;) {
        table.yielded = 0;
        const { sessions, more } = await store.page(limit, { owner, cursor });
        // The page, the one that says more follow, and the rows of the two millisecond ties at its ends (two a millisecond).
        expect(table.yielded).to.be.at.most(limit + 4);
        ids.push(...sessions.map((s) => s.session_id));
        if (!more) return ids;
        cursor = { at: sessions.at(-1)!.updatedAt, id: sessions.at(-1)!.session_id };
      }
    };
    expect(await walk(undefined, 7)).to.deep.equal(expected());
    expect(await walk('bob', 3)).to.deep.equal(expected('bob'));
    expect((await walk('bob', 3)).length).to.equal(10);
    expect(await walk('nobody', 5)).to.deep.equal([]);
    // A filter keeps paging until the page is full.
    const odd = await store.page(4, { keep: (s) => Number(s.session_id.slice(1)) % 2 === 1 });
    expect([odd.sessions.map((s) => s.session_id), odd.more]).to.deep.equal([['s29', 's27', 's25', 's23'], true]);
  });

  it('rows stored before the owner+time index get its key at boot, their times unchanged, and only this node\'s', async () => {
    const { store, table } = memoryStore(0, 'a');
    const mine = await store.create({ user: 'ann', provider: 'local', model: null });
    const theirs = await store.create({ user: 'bob', provider: 'local', model: null });
    for (const [id, node] of [[mine.session_id, 'a'], [theirs.session_id, 'b']]) {
      const { ownerRecent: _, ...row } = JSON.parse(table.rows.get(id!)!);
      table.rows.set(id!, JSON.stringify({ ...row, node, updatedAt: new Date(5_000).toISOString() }));
    }
    expect((await store.page(10, { owner: 'ann' })).sessions).to.deep.equal([]);
    expect(await store.indexOlderRows()).to.equal(1);
    const listed = (await store.page(10, { owner: 'ann' })).sessions;
    expect(listed.map((s) => [s.session_id, s.updatedAt])).to.deep.equal([[mine.session_id, 5_000]]);
    expect(await store.indexOlderRows()).to.equal(0);
  });

  it('a copy whose message records have not all arrived (replication behind) says how many it lacks', async () => {
    const { store, table, messages } = memoryStore(0, 'a');
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    for (let i = 0; i < 5; i++) await store.append(s.session_id, [{ role: 'user', content: `m${i}` }]);
    expect((await store.get(s.session_id))!.behind).to.equal(undefined);
    // Another node: the row says five messages; two records have not reached it.
    for (const key of [...messages.rows.keys()].sort().slice(-2)) messages.rows.delete(key);
    const b = new SessionStore({ sessions: () => table, messages: () => messages, node: 'b' });
    const copy = (await b.get(s.session_id))!;
    expect([copy.messages.map((m) => m.content), copy.messageCount, copy.behind]).to.deep.equal([['m0', 'm1', 'm2'], 3, 2]);
  });

  it('two writers (two threads) that append at the same place both keep their message', async () => {
    const { store, table, messages } = memoryStore(3);
    const other = new SessionStore({ sessions: () => table, messages: () => messages });
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await Promise.all([store.append(s.session_id, [{ role: 'user', content: 'from A' }]), other.append(s.session_id, [{ role: 'user', content: 'from B' }])]);
    const back = (await store.get(s.session_id))!;
    expect(back.messages.map((m) => m.content).sort()).to.deep.equal(['from A', 'from B']);
    expect([...messages.rows.keys()].map((k) => k.split('/')[1])).to.deep.equal(['00000000', '00000000']);
  });

  /** lmdb-js's lock table as two threads share it: taken or not, and a waiter woken on release. */
  function sharedLock(): ThreadLock & { held: Set<string>; taken: number } {
    const waiters = new Map<string, (() => void)[]>();
    const lock = {
      held: new Set<string>(),
      taken: 0,
      tryLock(key: string, released: () => void) {
        if (lock.held.has(key)) {
          waiters.set(key, [...(waiters.get(key) ?? []), released]);
          return false;
        }
        lock.held.add(key);
        lock.taken++;
        return true;
      },
      unlock(key: string) {
        lock.held.delete(key);
        for (const wake of waiters.get(key) ?? []) wake();
        waiters.delete(key);
      },
    };
    return lock;
  }

  it('with a lock shared across threads, two writers take turns: the second sees the first\'s change (one accepts a prompt, one is refused)', async () => {
    const { table, messages } = memoryStore(3);
    const lock = sharedLock();
    const a = new SessionStore({ sessions: () => table, messages: () => messages, threadLock: () => lock });
    const b = new SessionStore({ sessions: () => table, messages: () => messages, threadLock: () => lock });
    const s = await a.create({ user: 'u', provider: 'local', model: null });
    const accept = (store: SessionStore, text: string) =>
      store.mutate(s.session_id, (row) => {
        if (row.status === 'running') throw new Error('409');
        row.status = 'running';
        return [{ role: 'user', content: text }];
      });
    const results = await Promise.allSettled([accept(a, 'from A'), accept(b, 'from B'), accept(a, 'again A'), accept(b, 'again B')]);
    expect(results.map((r) => r.status).filter((x) => x === 'fulfilled')).to.have.length(1);
    const back = (await a.get(s.session_id))!;
    expect(back.messages).to.have.length(1);
    expect([...messages.rows.keys()]).to.have.length(1);
    expect(lock.held.size, 'every lock given back, refused changes too').to.equal(0);
    expect(lock.taken).to.equal(5); // create, then the four changes, one at a time
  });

  /** Threads over one store's tables, each reading through its own snapshot taken at its last refresh (lmdb-js's read
   * transaction, kept until the thread's next timer turn); its own writes go through. */
  const snapshotThreads = ({ table, messages }: ReturnType<typeof memoryStore>) => {
    const shared = sharedLock();
    return () => {
      let snapshot = new Map(table.rows);
      const view = Object.create(table, {
        get: { value: async (id: string) => (snapshot.has(id) ? JSON.parse(snapshot.get(id)!) : undefined) },
        search: { value: async function* () { yield* [...snapshot.values()].map((r) => JSON.parse(r)); } },
        put: { value: async (id: string, record: Record<string, unknown>) => { await table.put(id, record); snapshot.set(id, table.rows.get(id)!); } },
      });
      const lock: ThreadLock & { refreshed: number } = { refreshed: 0, tryLock: (k, r) => shared.tryLock(k, r), unlock: (k) => shared.unlock(k), refresh: () => { lock.refreshed++; snapshot = new Map(table.rows); } };
      return { store: new SessionStore({ sessions: () => view, messages: () => messages, threadLock: () => lock }), lock };
    };
  };

  it('each thread reads through its own snapshot: the lock refreshes it, so the thread that takes the lock next sees the change before it (and refuses the second prompt)', async () => {
    const tables = memoryStore(0);
    const { messages } = tables;
    const thread = snapshotThreads(tables);
    const creator = thread();
    const s = await creator.store.create({ user: 'u', provider: 'local', model: null });
    const a = thread();
    const b = thread();
    const accept = (store: SessionStore, text: string) =>
      store.mutate(s.session_id, (row) => {
        if (row.status === 'running') throw new Error('409');
        row.status = 'running';
        return [{ role: 'user', content: text }];
      });
    const results = await Promise.allSettled([accept(a.store, 'from A'), accept(b.store, 'from B')]);
    expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected']);
    expect([a.lock.refreshed, b.lock.refreshed]).to.deep.equal([1, 1]);
    expect([...messages.rows.keys()]).to.have.length(1);
  });

  it("a read sees a change another thread made before it, whatever this thread's snapshot: get, header and list drop it first", async () => {
    const thread = snapshotThreads(memoryStore(0));
    const writer = thread().store;
    const s = await writer.create({ user: 'u', provider: 'local', model: null });
    const reader = thread().store;
    expect((await reader.header(s.session_id))!.status).to.equal('idle');
    await writer.mutate(s.session_id, (row) => {
      row.status = 'running';
      return [{ role: 'user', content: 'accepted on the writer' }];
    });
    expect((await reader.header(s.session_id))!.status).to.equal('running');
    expect((await reader.get(s.session_id))!.messages.map((m) => m.content)).to.deep.equal(['accepted on the writer']);
    expect((await reader.list(10)).map((h) => [h.session_id, h.status, h.messageCount])).to.deep.equal([[s.session_id, 'running', 1]]);
  });

  it('a lock held by a thread that never gives it back is waited for, then gone past', async () => {
    const lock = sharedLock();
    lock.tryLock('k', () => undefined);
    const started = Date.now();
    expect(await takeThreadLock(lock, 'k', 120)).to.equal(false);
    expect(Date.now() - started).to.be.within(110, 400);
    lock.unlock('k');
    expect(await takeThreadLock(lock, 'k', 120)).to.equal(true);
  });

  it('a read between a change\'s message records and its row sees the session before the change, not half of it', async () => {
    const { store, table, messages } = memoryStore();
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await store.append(s.session_id, [{ role: 'user', content: 'first' }]);
    await store.setStatus(s.session_id, 'completed');
    // Hold the next row write: the new prompt's record is in, the row (status, count) not yet.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const put = table.put.bind(table);
    table.put = async (id, record) => (await held, put(id, record));
    const writing = store.mutate(s.session_id, (h) => ((h.status = 'running'), [{ role: 'user', content: 'second' }]));
    while (messages.rows.size < 2) await new Promise((r) => setImmediate(r));
    const reader = new SessionStore({ sessions: () => table, messages: () => messages });
    const between = (await reader.get(s.session_id))!;
    expect([between.status, between.messages.map((m) => m.content)]).to.deep.equal(['completed', ['first']]);
    release();
    await writing;
    const after = (await reader.get(s.session_id))!;
    expect([after.status, after.messages.map((m) => m.content)]).to.deep.equal(['running', ['first', 'second']]);
  });

  it('a row stored before AgentMessage is read whole, and its next write moves the transcript out', async () => {
    const { store, table, messages } = memoryStore();
    const legacy = [{ role: 'user', content: 'old question' }, { role: 'assistant', content: 'old answer' }];
    await table.put('old', { session_id: 'old', status: 'completed', provider: 'local', messages: legacy, createdAt: 1, updatedAt: 1 });
    expect((await store.get('old'))!.messages).to.deep.equal(legacy);
    expect((await store.header('old'))!).to.include({ messageCount: 2, bytes: Buffer.byteLength(JSON.stringify(legacy)) });
    await store.append('old', [{ role: 'user', content: 'new', at: 5 }]);
    expect(JSON.parse(table.rows.get('old')!)).to.not.have.property('messages');
    expect(messages.rows.size).to.equal(3);
    const back = (await store.get('old'))!;
    expect(back.messages).to.deep.equal([...legacy, { role: 'user', content: 'new', at: 5 }]);
    expect(back.bytes).to.equal(Buffer.byteLength(JSON.stringify(back.messages)));
  });

  it('stores rows for people reading the table: Date times and the first prompt, clipped, as the title', async () => {
    const { store, table, messages } = memoryStore();
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    expect(JSON.parse(table.rows.get(s.session_id)!)).to.include({ title: null, createdAt: new Date(s.createdAt).toISOString() });
    const prompt = `why is\n\nreplication   lagging ${'x'.repeat(200)}`;
    await store.append(s.session_id, [{ role: 'user', content: prompt, at: 1_796_283_665_686 }]);
    await store.append(s.session_id, [{ role: 'user', content: 'a second prompt' }]);
    const row = JSON.parse(table.rows.get(s.session_id)!);
    expect(row.title).to.equal(`why is replication lagging ${'x'.repeat(92)}…`);
    expect(row.title).to.have.length(120);
    expect(row.updatedAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(JSON.parse([...messages.rows.values()][0]!).at).to.equal('2026-12-03T07:41:05.686Z');
    // Read back as numbers, as the operations answer them.
    const back = (await store.get(s.session_id))!;
    expect(back.messages[0]!.at).to.equal(1_796_283_665_686);
    expect(back).to.include({ title: row.title, updatedAt: Date.parse(row.updatedAt) });
  });

  it('a change that throws writes nothing', async () => {
    const { store, table } = memoryStore();
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    const before = table.puts;
    await store.mutate(s.session_id, () => { throw new Error('no'); }).catch(() => undefined);
    expect(table.puts).to.equal(before);
  });

  it('a guarded write is refused once the run no longer owns the session', async () => {
    const { store } = memoryStore();
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await store.mutate(s.session_id, (row) => { row.status = 'running'; row.runner = 'r1'; });
    await store.setStatus(s.session_id, 'aborted');
    let error: unknown;
    await store.append(s.session_id, [{ role: 'user', content: 'late' }], { runner: 'r1' }).catch((e) => (error = e));
    expect(error).to.be.instanceOf(RunSupersededError);
    expect((await store.get(s.session_id))!.messages).to.have.length(0);
  });

  describe('shrinkNewestToolResults', () => {
    const big = (n: number, ch = 'x') => ch.repeat(n);
    const tool = (id: string, content: string): Message => ({ role: 'tool', toolCallId: id, name: 'read_file', content });
    const asst = (id: string): Message => ({ role: 'assistant', content: '', toolCalls: [{ id, name: 'read_file', arguments: {} }] });

    it('cuts every result over 2 KiB in the newest group that has one, and only that group', async () => {
      const { store } = memoryStore();
      const s = await store.create({ user: 'u', provider: 'local', model: null });
      await store.append(s.session_id, [
        { role: 'user', content: 'go' },
        asst('a'), tool('a', big(10_000)),
        asst('b'), tool('b', big(5000)), tool('b2', big(3000)), tool('b3', 'small'),
        asst('c'), tool('c', 'tiny'),
      ]);
      expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(2);
      const m = (await store.get(s.session_id))!.messages;
      expect(Buffer.byteLength(m[2]!.content)).to.equal(10_000);
      for (const i of [4, 5]) {
        expect(Buffer.byteLength(m[i]!.content)).to.be.at.most(SHRINK_THRESHOLD_BYTES);
        expect(m[i]!.content).to.match(/cut to 2 KiB after the model rejected the conversation as longer than its context window/);
        expect((m[i] as { cut?: string }).cut).to.equal('context');
      }
      expect(m[6]!.content).to.equal('small');
      // Idempotent per result: the next call reaches the older group; then nothing is left.
      expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(1);
      expect(Buffer.byteLength((await store.get(s.session_id))!.messages[2]!.content)).to.be.at.most(2048);
      expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(0);
    });

    it('recovers a result stored before the cap existed (1,057,864 bytes)', async () => {
      const { store } = memoryStore();
      const s = await store.create({ user: 'u', provider: 'local', model: null });
      await store.append(s.session_id, [{ role: 'user', content: 'go' }, asst('a'), tool('a', big(1_057_864, 'é').slice(0, 528_932))]);
      expect(Buffer.byteLength((await store.get(s.session_id))!.messages[2]!.content)).to.equal(1_057_864);
      expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(1);
      const content = (await store.get(s.session_id))!.messages[2]!.content;
      expect(Buffer.byteLength(content)).to.be.at.most(2048).and.greaterThan(2040);
      expect(content).to.contain('full result is 1057864 bytes');
    });
  });

  describe("a thread's copy of the transcript", () => {
    const page = (i: number): Message[] => [
      { role: 'assistant', content: '', toolCalls: [{ id: `c${i}`, name: 'read_file', arguments: { path: 'a.log', startLine: i } }] },
      { role: 'tool', toolCallId: `c${i}`, name: 'read_file', content: `page ${i} `.repeat(1000) },
    ];
    /** Two threads' stores over one pair of tables, sharing the lock across threads (Harper's LMDB lock). */
    async function longSession() {
      const { table, messages } = memoryStore();
      const lock = sharedLock();
      const store = new SessionStore({ sessions: () => table, messages: () => messages, threadLock: () => lock });
      const s = await store.create({ user: 'u', provider: 'local', model: null });
      await store.append(s.session_id, [{ role: 'user', content: 'read a.log' }]);
      for (let i = 1; i <= 300; i++) await store.append(s.session_id, page(i));
      return { store, table, messages, lock, id: s.session_id, other: new SessionStore({ sessions: () => table, messages: () => messages, threadLock: () => lock }) };
    }

    it('a read late in a long session takes only the records written since this thread last saw it, and sees each of them', async () => {
      const { store, messages, id, other } = await longSession();
      messages.yielded = 0;
      const first = (await store.get(id))!;
      // This thread wrote every change: its copy is current, no record is read.
      expect([first.messages.length, messages.yielded]).to.deep.equal([601, 0]);
      // Another thread appends two messages: this thread reads those two, and the whole transcript is right.
      await other.append(id, page(301));
      messages.yielded = 0;
      const after = (await store.get(id))!;
      expect(messages.yielded).to.equal(2);
      expect(after.messages).to.deep.equal([...first.messages, ...(await other.get(id))!.messages.slice(601)]);
      expect(after.messages.at(-1)!.content).to.equal('page 301 '.repeat(1000));
      // The other thread, new to the session, read it whole once.
      expect((await other.get(id))!.messages).to.deep.equal(after.messages);
    });

    it('a cut made by another thread is seen: a change that is not an append reads the transcript whole again', async () => {
      const { store, messages, id, other } = await longSession();
      expect(await other.trimToWorkingSet(id, 64 * 1024)).to.be.greaterThan(250);
      messages.yielded = 0;
      const back = (await store.get(id))!;
      expect(messages.yielded).to.equal(601);
      expect(back.messages.filter((m) => m.role === 'tool' && m.cut === 'workingSet')).to.have.length(await other.get(id).then((s) => s!.messages.filter((m) => m.role === 'tool' && m.cut === 'workingSet').length));
      expect(back.messages[2]!.content.length).to.be.lessThan(SHRINK_THRESHOLD_BYTES + 1);
      expect(back.bytes).to.equal(Buffer.byteLength(JSON.stringify(back.messages)));
    });

    it('a working-set cut late in a long session reads nothing it already holds, and what it stores is what a fresh read finds', async () => {
      const { store, table, messages, id } = await longSession();
      await store.trimToWorkingSet(id, 64 * 1024);
      // Cuts come in batches: pages are appended until the next one is due.
      let cut = 0;
      for (let n = 301; cut === 0 && n < 340; n++) {
        await store.append(id, page(n));
        messages.yielded = 0;
        cut = await store.trimToWorkingSet(id, 64 * 1024);
      }
      expect(cut).to.be.greaterThan(0);
      const mine = (await store.get(id))!;
      expect(messages.yielded).to.equal(0);
      const fresh = (await new SessionStore({ sessions: () => table, messages: () => messages }).get(id))!;
      expect(mine).to.deep.equal(fresh);
    });

    it('a change made without the lock across threads (no lock, or its wait ran out) extends no copy: the next read reads whole', async () => {
      const { store, messages, id } = await longSession();
      const unlocked = new SessionStore({ sessions: () => (store as any).tables.sessions(), messages: () => messages });
      await unlocked.get(id);
      await unlocked.append(id, page(301));
      messages.yielded = 0;
      expect((await unlocked.get(id))!.messages).to.have.length(603);
      expect(messages.yielded).to.equal(603);
    });

    it('a copy is kept for a bounded number of sessions and bytes, and is current only at the revision it was made at', async () => {
      const { TranscriptCache } = await import('../agent/transcriptCache.js');
      const cache = new TranscriptCache(2, 1000);
      const header = (bytes: number) => ({ messageCount: 1, bytes }) as SessionHeader;
      cache.remember('a', 'r1', header(100), []);
      cache.remember('b', 'r1', header(100), []);
      cache.remember('c', 'r1', header(100), []);
      expect([cache.lookup('a', 'r1', header(100)), cache.lookup('c', 'r1', header(100))?.state, cache.lookup('c', 'r2', header(100))]).to.deep.equal([undefined, 'current', undefined]);
      cache.remember('big', 'r1', header(1001), []);
      expect(cache.lookup('big', 'r1', header(1001))).to.equal(undefined);
      cache.remember('d', 'r1', header(950), []);
      expect([cache.lookup('b', 'r1', header(100)), cache.lookup('c', 'r1', header(100)), cache.lookup('d', 'r1', header(950))?.state]).to.deep.equal([undefined, undefined, 'current']);
      // A row from before revisions is never taken from a copy.
      cache.remember('e', undefined, header(10), []);
      expect(cache.lookup('e', undefined, header(10))).to.equal(undefined);
    });
  });
});

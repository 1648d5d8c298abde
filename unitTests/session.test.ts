import { expect } from 'chai';
import { SessionStore, SHRINK_THRESHOLD_BYTES, RunSupersededError } from '../agent/session.js';
import type { Message } from '../resources/models/types.js';
import { MemoryTable } from './helpers.js';

describe('SessionStore', () => {
  it('concurrent appends on one session lose nothing (whole-row puts under the lock)', async () => {
    const table = new MemoryTable(3);
    const store = new SessionStore(() => table);
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.append(s.session_id, [{ role: 'user', content: `m${i}` }])));
    const back = (await store.get(s.session_id))!;
    expect(back.messages).to.have.length(50);
    expect(new Set(back.messages.map((m) => m.content))).to.have.property('size', 50);
    expect(table.puts).to.equal(51);
  });

  it('without the lock the same writers lose messages (the test can fail)', async () => {
    const table = new MemoryTable(3);
    const store = new SessionStore(() => table);
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const row = JSON.parse(JSON.stringify(await table.get(s.session_id)));
        row.messages.push({ role: 'user', content: `m${i}` });
        await table.put(s.session_id, row);
      })
    );
    expect(((await store.get(s.session_id))!.messages as unknown[]).length).to.be.lessThan(50);
  });

  it('a change that throws writes nothing', async () => {
    const table = new MemoryTable();
    const store = new SessionStore(() => table);
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    const before = table.puts;
    await store.mutate(s.session_id, () => { throw new Error('no'); }).catch(() => undefined);
    expect(table.puts).to.equal(before);
  });

  it('a guarded write is refused once the run no longer owns the session', async () => {
    const table = new MemoryTable();
    const store = new SessionStore(() => table);
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
      const table = new MemoryTable();
      const store = new SessionStore(() => table);
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
      const table = new MemoryTable();
      const store = new SessionStore(() => table);
      const s = await store.create({ user: 'u', provider: 'local', model: null });
      await store.append(s.session_id, [{ role: 'user', content: 'go' }, asst('a'), tool('a', big(1_057_864, 'é').slice(0, 528_932))]);
      expect(Buffer.byteLength((await store.get(s.session_id))!.messages[2]!.content)).to.equal(1_057_864);
      expect(await store.shrinkNewestToolResults(s.session_id)).to.equal(1);
      const content = (await store.get(s.session_id))!.messages[2]!.content;
      expect(Buffer.byteLength(content)).to.be.at.most(2048).and.greaterThan(2040);
      expect(content).to.contain('full result is 1057864 bytes');
    });
  });
});

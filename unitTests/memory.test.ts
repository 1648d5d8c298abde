import { expect } from 'chai';
import { Memory, MemoryError, RECALL_HEADING, type MemoryTable } from '../agent/memory/memory.js';
import { MemoryTable as Table } from './helpers.js';
import { KNOWN, scriptedMemory } from './recallSet.js';

describe("the agent's memory", () => {
  it('recalls the known note for at least 9 of 10 prompts among 1,000 notes, within the budget', async () => {
    const { memory, ids } = await scriptedMemory();
    expect(ids).to.have.length(10);
    const budget = 2048;
    let recalled = 0;
    for (let i = 0; i < KNOWN.length; i++) {
      const r = (await memory.recall(KNOWN[i]!.prompt, budget))!;
      expect(Buffer.byteLength(r.text)).to.be.at.most(budget);
      expect(r.text.startsWith(`${RECALL_HEADING}\n- [note `)).to.equal(true);
      if (r.notes.includes(ids[i]!)) recalled++;
    }
    console.log(`      recalled the known note for ${recalled} of 10 prompts among 1,000 notes`);
    expect(recalled).to.be.at.least(9);
  });

  it('a smaller budget holds fewer notes, best first; 0 recalls none', async () => {
    const { memory, ids } = await scriptedMemory();
    const small = (await memory.recall(KNOWN[0]!.prompt, 300))!;
    expect(Buffer.byteLength(small.text)).to.be.at.most(300);
    expect(small.notes[0]).to.equal(ids[0]);
    expect(await memory.recall(KNOWN[0]!.prompt, 0)).to.equal(null);
  });

  it('an edit or a delete is what the next recall sees', async () => {
    const notes = new Table();
    const memory = new Memory(() => notes as unknown as MemoryTable, () => new Table() as unknown as MemoryTable);
    const n = await memory.addNote({ text: 'The geoip component refreshes weekly.', user: 'ann' });
    expect((await memory.recall('geoip component', 1000))!.notes).to.deep.equal([n.note_id]);
    await memory.updateNote(n.note_id, { text: 'The maxmind database refreshes weekly.' });
    expect(await memory.recall('geoip component', 1000)).to.equal(null);
    expect((await memory.recall('maxmind', 1000))!.notes).to.deep.equal([n.note_id]);
    await memory.deleteNote(n.note_id);
    expect(await memory.recall('maxmind', 1000)).to.equal(null);
  });

  it('refuses a note or runbook holding key material, and a note longer than a fact', async () => {
    const memory = new Memory(() => new Table() as unknown as MemoryTable, () => new Table() as unknown as MemoryTable);
    const refused = (p: Promise<unknown>) => p.then(() => null, (e) => (e instanceof MemoryError ? e.message : String(e)));
    expect(await refused(memory.addNote({ text: 'key:\n-----BEGIN RSA PRIVATE KEY-----\nabc', user: null }))).to.equal('the note holds key material (a PEM armor line): it is not stored; leave the key out');
    expect(await refused(memory.addRunbook({ title: 't', tags: [], body: '# steps\n-----BEGIN OPENSSH PRIVATE KEY-----\n', user: null }))).to.equal('the runbook holds key material (a PEM armor line): it is not stored; leave the key out');
    expect(await refused(memory.addNote({ text: 'x'.repeat(1001), user: null }))).to.equal('a note is at most 1000 characters (this one has 1001); put a longer text in a runbook');
  });
});

import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runbookFromMarkdown, shippedId, shippedRunbooks } from '../agent/memory/componentRunbooks.js';
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

  describe('runbooks a component ships (agent/memory/componentRunbooks.ts)', () => {
    it('takes title and tags from a front matter, else the first heading and the file name', () => {
      expect(runbookFromMarkdown('/c/runbooks/restart.md', '---\ntitle: Restart replication\ntags: [Replication, ops]\n---\n# Steps\n1. stop\n')).to.deep.equal({ title: 'Restart replication', tags: ['replication', 'ops'], body: '# Steps\n1. stop\n' });
      expect(runbookFromMarkdown('/c/runbooks/disk.md', '---\ntags: disk, full\n---\n# When the disk fills\nclean logs\n')).to.deep.equal({ title: 'When the disk fills', tags: ['disk', 'full'], body: '# When the disk fills\nclean logs\n' });
      expect(runbookFromMarkdown('/c/runbooks/plain-notes.md', 'no heading here')).to.deep.equal({ title: 'plain-notes', tags: [], body: 'no heading here' });
      expect(shippedId('ops/runbooks/deep/restart now.md')).to.equal('component:ops:runbooks:deep:restart-now.md');
      expect(shippedId(`ops/runbooks/${'x'.repeat(200)}.md`)).to.have.length(128).and.match(/^component:ops:runbooks:x+-[0-9a-f]{16}$/);
    });

    it('syncs them into the table: new and changed files written, gone ones removed, unchanged ones not read; a key is never stored; other runbooks untouched', async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'agent-runbooks-'));
      try {
        const file = (rel: string, text: string) => {
          mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
          writeFileSync(path.join(dir, rel), text);
        };
        file('ops/config.yaml', 'rest: false\n');
        file('ops/runbooks/restart.md', '---\ntitle: Restart replication\ntags: [replication]\n---\nstop, then start\n');
        file('ops/runbooks/keys.md', '# Keys\n-----BEGIN PRIVATE KEY-----\nabc\n');
        file('ops/runbooks/node_modules/skip.md', '# not a runbook');
        file('ops/README.md', '# not in runbooks/');
        const logged: string[] = [];
        const table = new Table();
        const memory = new Memory(() => new Table() as unknown as MemoryTable, () => table as unknown as MemoryTable, shippedRunbooks(dir, (m) => logged.push(m)), 'n1');
        const own = await memory.addRunbook({ title: 'Added by hand', tags: [], body: 'text', user: 'ann' });
        expect(await memory.refreshShipped()).to.deep.equal({ written: 1, removed: 0 });
        expect(logged).to.deep.equal(['harper-agent: runbook components/ops/runbooks/keys.md is not served: it holds key material (a PEM armor line): it is not stored; leave the key out']);
        const id = 'component:ops:runbooks:restart.md';
        expect(await memory.getRunbook(id)).to.include({ title: 'Restart replication', body: 'stop, then start\n', source: 'ops/runbooks/restart.md', user: null });
        expect((await memory.search('replication')).map((h) => (h.kind === 'runbook' ? h.runbook.runbook_id : h.kind))).to.deep.equal([id]);
        // Nothing changed: nothing read or written.
        const puts = table.puts;
        expect(await memory.refreshShipped()).to.equal(null);
        expect(table.puts).to.equal(puts);
        // Changed, then gone; a runbook of a component this node does not have is left alone.
        file('ops/runbooks/restart.md', '# Restart replication, v2\n');
        utimesSync(path.join(dir, 'ops/runbooks/restart.md'), new Date(), new Date(Date.now() + 5000));
        expect(await memory.refreshShipped()).to.deep.equal({ written: 1, removed: 0 });
        expect((await memory.getRunbook(id))!.title).to.equal('Restart replication, v2');
        await table.put('component:elsewhere:runbooks:a.md', { runbook_id: 'component:elsewhere:runbooks:a.md', title: 'on another node', tags: [], body: 'b', source: 'elsewhere/runbooks/a.md' });
        rmSync(path.join(dir, 'ops/runbooks/restart.md'));
        expect(await memory.refreshShipped()).to.deep.equal({ written: 0, removed: 1 });
        expect(await memory.getRunbook(id)).to.equal(undefined);
        expect((await memory.listRunbooks()).map((r) => r.runbook_id).sort()).to.deep.equal(['component:elsewhere:runbooks:a.md', own.runbook_id].sort());
        // A component this node wrote a runbook of, then no longer has at all: its runbook goes; the other node's stays.
        file('ops/runbooks/restart.md', '# Restart\n');
        expect(await memory.refreshShipped()).to.deep.equal({ written: 1, removed: 0 });
        expect(JSON.parse(table.rows.get(id)!).node).to.equal('n1');
        rmSync(path.join(dir, 'ops'), { recursive: true });
        expect(await memory.refreshShipped()).to.deep.equal({ written: 0, removed: 1 });
        expect((await memory.listRunbooks()).map((r) => r.runbook_id).sort()).to.deep.equal(['component:elsewhere:runbooks:a.md', own.runbook_id].sort());
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

// The agent's memory on a real Harper (agent/memory/): a note the model proposes waits for approval, is stored with
// its session, and is recalled into a later session's first request, after the stable prefix; deleted, it is gone
// from the next. A 200 KB runbook is found by its tag and read in pages; a note holding a key is refused.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { NeutralRequest } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const HEADING = 'Notes about this instance from earlier sessions (agent memory; check before relying on one):';
const PEM = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----';

describe("the agent's memory: notes recalled into prompts, runbooks read in pages", function () {
  this.timeout(60_000);
  const suite = providerSuite();
  const firstPrompt = (r: NeutralRequest) => r.messages.find((m) => m.role === 'user')!.text;

  before(async () => {
    expect((await suite.h.setConfig(providerSettings('openai', suite.server))).status).to.equal(200);
  });
  after(async () => {
    for (const n of (await suite.h.op({ operation: 'list_agent_notes' })).body.notes) await suite.h.op({ operation: 'delete_agent_note', note_id: n.note_id });
  });

  it('remember waits for approval; the note keeps its session; a new session about it recalls it in its first request, after the stable prefix; deleted, it is gone', async () => {
    const { h, server } = suite;
    const text = 'Warnings from component logspam about queue depth are harmless: it retries on its own.';
    server.reset([{ toolCalls: [{ name: 'remember', arguments: { text, scope: { kind: 'component', name: 'logspam' } } }] }, { text: 'noted' }]);
    const paused = await h.prompt('logspam queue warnings are harmless, remember that');
    expect([paused.status, paused.pendingApprovals.map((p: any) => p.name)]).to.deep.equal(['awaiting_approval', ['remember']]);
    expect((await h.op({ operation: 'list_agent_notes' })).body.notes).to.deep.equal([]);
    await h.op({ operation: 'approve_agent_action', session_id: paused.session_id, approval_id: paused.pendingApprovals[0].approval_id, approved: true });
    expect((await h.waitForSession(paused.session_id)).status).to.equal('completed');
    const [note] = (await h.op({ operation: 'list_agent_notes' })).body.notes;
    expect(note).to.include({ text, user: h.harper.admin.username, session_id: paused.session_id });
    expect(note.scope).to.deep.equal({ kind: 'component', name: 'logspam' });

    server.reset([{ text: 'It is harmless.' }, { text: 'again' }]);
    const asked = await h.prompt('why does logspam warn about its queue depth?');
    const sent = firstPrompt(server.requests[0]!.neutral);
    const line = `- [note ${note.note_id.slice(0, 8)} · component logspam · ${h.harper.admin.username} ${new Date(note.createdAt).toISOString().slice(0, 10)}] ${text}`;
    expect(sent.replace(/\n\n\[sent [^\]]+\]$/, '')).to.equal(`why does logspam warn about its queue depth?\n\n${HEADING}\n${line}`);
    // Stored with the prompt, visible in the session; the system prompt does not carry it (the prefix stays stable).
    expect(asked.messages[0].recall).to.equal(`${HEADING}\n${line}`);
    expect(server.requests[0]!.neutral.systems.join('\n')).to.not.contain('logspam');
    // A second prompt in the session sends the first one byte for byte.
    await h.prompt('and now?', asked.session_id);
    expect(firstPrompt(server.requests[1]!.neutral)).to.equal(sent);

    expect((await h.op({ operation: 'delete_agent_note', note_id: note.note_id })).body).to.deep.equal({ note_id: note.note_id, deleted: true });
    server.reset([{ text: 'no notes' }]);
    await h.prompt('why does logspam warn about its queue depth?');
    expect(firstPrompt(server.requests[0]!.neutral)).to.not.contain(HEADING);
  });

  it('a 200 KB runbook is found by its tag and read to its end in pages, each within the cap', async () => {
    const { h, server } = suite;
    const body = ['# Restarting a stuck replication', ''].concat(Array.from({ length: 3000 }, (_, i) => `${i + 1}. Check the node's subscription ${i} and restart the replication worker if its queue is stuck.`)).join('\n') + '\n';
    expect(Buffer.byteLength(body)).to.be.within(200_000, 300_000);
    const added = (await h.op({ operation: 'add_agent_runbook', title: 'Stuck replication', tags: ['replication', 'restart'], body })).body;
    expect((await h.op({ operation: 'list_agent_runbooks', tag: 'replication' })).body.runbooks.map((r: any) => r.runbook_id)).to.deep.equal([added.runbook_id]);
    server.reset();
    server.responder = (req) => {
      const last = req.messages.at(-1)!;
      if (last.role === 'user') return { toolCalls: [{ name: 'search_memory', arguments: { query: 'replication' } }] };
      const result = JSON.parse(last.text);
      if (result.matches) return { toolCalls: [{ name: 'read_runbook', arguments: { runbook_id: result.matches[0].runbook_id } }] };
      if (result.nextLine) return { toolCalls: [{ name: 'read_runbook', arguments: { runbook_id: result.runbook_id, startLine: result.nextLine, offset: result.nextOffset } }] };
      return { text: `read ${result.totalLines} lines` };
    };
    try {
      const s = await h.prompt('how do we restart a stuck replication?');
      expect([s.status, s.messages.at(-1).content]).to.deep.equal(['completed', 'read 3002 lines']);
      // Each result as the model got it, whole, when it was the newest (older pages are cut by the working set later).
      const results = server.requests.slice(1).map((r) => r.neutral.messages.at(-1)!.text);
      for (const text of results) expect(Buffer.byteLength(text)).to.be.at.most(65536);
      const parsed = results.map((text) => JSON.parse(text));
      expect(parsed[0].matches[0]).to.include({ kind: 'runbook', runbook_id: added.runbook_id, title: 'Stuck replication' });
      const pages = parsed.slice(1);
      expect(pages.length).to.be.at.least(4);
      expect(pages.map((p: any) => p.content).join('')).to.equal(body);
    } finally {
      server.responder = undefined;
      await h.op({ operation: 'delete_agent_runbook', runbook_id: added.runbook_id });
    }
  });

  it("a component's runbooks/ folder is served: listed with its file, found and read by the model, refused a delete (409), gone with its file", async () => {
    const { h, server } = suite;
    const folder = path.join(h.harper.rootPath, 'components', 'ops-runbooks');
    const body = '# Steps\n1. Run cluster_status and find the connection that is down.\n2. Restart replication on that node.\n';
    mkdirSync(path.join(folder, 'runbooks'), { recursive: true });
    writeFileSync(path.join(folder, 'runbooks', 'replication-down.md'), `---\ntitle: A replication connection is down\ntags: [replication, cluster]\n---\n${body}`);
    const id = 'component:ops-runbooks:runbooks:replication-down.md';
    try {
      const listed = (await h.op({ operation: 'list_agent_runbooks', tag: 'cluster' })).body.runbooks;
      expect(listed.map((r: any) => [r.runbook_id, r.title, r.tags, r.source, r.bytes])).to.deep.equal([[id, 'A replication connection is down', ['replication', 'cluster'], 'ops-runbooks/runbooks/replication-down.md', Buffer.byteLength(body)]]);
      const refused = await h.op({ operation: 'delete_agent_runbook', runbook_id: id });
      expect([refused.status, refused.body.error]).to.deep.equal([409, `runbook ${id} is shipped in components/ops-runbooks/runbooks/replication-down.md: remove or change that file to remove or change it`]);
      server.reset();
      server.responder = (req) => {
        const last = req.messages.at(-1)!;
        if (last.role === 'user') return { toolCalls: [{ name: 'search_memory', arguments: { query: 'replication connection down' } }] };
        const result = JSON.parse(last.text);
        if (result.matches) return { toolCalls: [{ name: 'read_runbook', arguments: { runbook_id: result.matches[0].runbook_id } }] };
        return { text: result.content };
      };
      const s = await h.prompt('a replication connection is down, what do we do?');
      expect([s.status, s.messages.at(-1).content]).to.deep.equal(['completed', body]);
      rmSync(path.join(folder, 'runbooks', 'replication-down.md'));
      expect((await h.op({ operation: 'list_agent_runbooks' })).body.runbooks.map((r: any) => r.runbook_id)).to.not.include(id);
      expect((await h.op({ operation: 'get_agent_runbook', runbook_id: id })).status).to.equal(404);
    } finally {
      server.responder = undefined;
      rmSync(folder, { recursive: true, force: true });
      await h.op({ operation: 'list_agent_runbooks' });
    }
  });

  it('the CLI adds, lists, edits and deletes notes, and adds and lists runbooks', async () => {
    const { h } = suite;
    const cli = (...args: string[]) => promisify(execFile)(process.execPath, ['dist/cli/main.js', ...args], { env: { ...process.env, ...h.cliEnv() } });
    const added = JSON.parse((await cli('note', 'add', 'Component geoip refreshes its database on Sundays.', '--scope', 'component:geoip', '--json')).stdout);
    expect(added).to.include({ text: 'Component geoip refreshes its database on Sundays.', user: h.harper.admin.username });
    expect(added.scope).to.deep.equal({ kind: 'component', name: 'geoip' });
    const row = (await cli('notes', '--query', 'geoip')).stdout.split('\n')[1]!.split(/\s{2,}/);
    expect([row[0], row[1], row[2], row[4]]).to.deep.equal([added.note_id, 'component geoip', h.harper.admin.username, 'Component geoip refreshes its database on Sundays.']);
    expect((await cli('note', 'edit', added.note_id, 'Component geoip refreshes on Sundays at 03:00.')).stdout).to.equal(`note ${added.note_id} changed\n`);
    expect((await h.op({ operation: 'list_agent_notes' })).body.notes.find((n: any) => n.note_id === added.note_id).text).to.equal('Component geoip refreshes on Sundays at 03:00.');
    expect((await cli('note', 'delete', added.note_id)).stdout).to.equal(`note ${added.note_id} deleted\n`);
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'runbook-')), 'disk.md');
    const runbook = '# Disk full\n\n1. Check the volume.\n';
    writeFileSync(file, runbook);
    const bytes = String(Buffer.byteLength(runbook));
    const out = (await cli('runbook', 'add', file, '--title', 'Disk full', '--tags', 'disk, storage')).stdout;
    const id = new RegExp(`^runbook (\\S+) added: "Disk full", ${bytes} bytes, tags disk, storage\\n$`).exec(out)![1]!;
    expect((await cli('runbooks', '--tag', 'storage')).stdout.split('\n')[1]!.split(/\s{2,}/)).to.deep.equal([id, 'Disk full', 'disk, storage', bytes]);
    expect((await cli('runbook', 'delete', id)).stdout).to.equal(`runbook ${id} deleted\n`);
  });

  it('a note holding a PEM key is refused: by the operation (400) and, proposed by the model, before any approval', async () => {
    const { h, server } = suite;
    const refused = await h.op({ operation: 'add_agent_note', text: `the key is ${PEM}` });
    expect([refused.status, refused.body.error]).to.deep.equal([400, 'the note holds key material (a PEM armor line): it is not stored; leave the key out']);
    server.reset([{ toolCalls: [{ name: 'remember', arguments: { text: `use this key: ${PEM}` } }] }, { text: 'not stored' }]);
    const s = await h.prompt('remember the key');
    expect(s.status).to.equal('completed');
    expect(JSON.parse(s.messages.find((m: any) => m.role === 'tool').content)).to.deep.equal({ error: 'the note holds key material (a PEM armor line): it is not stored; leave the key out' });
    expect((await h.op({ operation: 'list_agent_notes' })).body.notes).to.deep.equal([]);
  });
});

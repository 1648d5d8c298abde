// The agent's data lifecycle: delete (whole, or finished after a crash), retention, export (streamed), list paging.
import { expect } from 'chai';
import { exportJson, exportMarkdown } from '../agent/export.js';
import type { StoredMessage } from '../agent/compaction.js';
import { Followups, type FollowupTable } from '../agent/followups.js';
import { Lifecycle } from '../agent/lifecycle.js';
import { activeRun } from '../agent/runs.js';
import { ModelCallLog, totals, type CallTable, type ModelCallRecord } from '../agent/modelCalls.js';
import { createOperations, HttpError, StreamedAnswer } from '../agent/operations.js';
import { calls, harness, MemoryTable, text, type Harness } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };
const DAY = 86_400_000;
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

function setup(h: Harness) {
  const followupTable = new MemoryTable();
  const callTable = new MemoryTable();
  h.deps.followups = new Followups(() => followupTable as unknown as FollowupTable, null);
  h.deps.calls = new ModelCallLog(() => callTable as unknown as CallTable);
  const ops = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: '' } });
  return { ops, followupTable, callTable };
}

const call = (session_id: string, at: number, id = `${session_id}-${at}`): ModelCallRecord => ({ id, session_id, at, node: null, provider: 'p', host: 'h', model: 'm', requestBytes: 1, status: 200, inputTokens: 1, outputTokens: 1, cacheReadTokens: null, cacheWriteTokens: null, latencyMs: 1, errorClass: null, costUsd: 0, tokensEstimated: false, streamed: false, purpose: 'turn' });

async function prompt(ops: ReturnType<typeof createOperations>, message: string, session_id?: string): Promise<string> {
  const r = (await ops.agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return r.session_id;
}

const failure = (p: Promise<unknown>) => p.then(() => null, (e: HttpError) => e) as Promise<HttpError>;

describe('deleting a session', () => {
  it('removes its row, every message, its model calls and follow-ups; a second delete is 404; another session keeps all of its', async () => {
    const h = harness([calls(['schedule_followup', { delaySeconds: 600, message: 'later' }]), text('ok'), text('other')]);
    const { ops, followupTable, callTable } = setup(h);
    const id = await prompt(ops, 'hi');
    const other = await prompt(ops, 'keep me');
    await h.deps.calls!.record([call(id, 1), call(id, 2), call(other, 3)]);
    expect(followupTable.rows.size).to.equal(1);
    const messagesBefore = [...(h.store as any).tables.messages().rows.keys()].length;
    const answer = await ops.delete_agent_session.handle({ session_id: id }, user);
    expect(answer).to.deep.equal({ session_id: id, messages: 4, modelCalls: 2, followups: 1, deleted: true });
    expect(h.table.rows.has(id)).to.equal(false);
    expect([...(h.store as any).tables.messages().rows.keys()]).to.have.length(messagesBefore - 4);
    expect([...callTable.rows.keys()]).to.deep.equal([`${other}-3`]);
    expect(followupTable.rows.size).to.equal(0);
    expect((await h.store.get(other))!.messages).to.have.length(2);
    const again = await failure(ops.delete_agent_session.handle({ session_id: id }, user));
    expect([again.status, again.message]).to.deep.equal([404, `session "${id}" not found`]);
  });

  it('a running session is 409 and nothing changes', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const h = harness([async () => (await held, text('done'))]);
    const { ops } = setup(h);
    const r = (await ops.agent_prompt.handle({ message: 'slow' }, user)) as { session_id: string };
    const refused = await failure(ops.delete_agent_session.handle({ session_id: r.session_id }, user));
    expect([refused.status, refused.message]).to.deep.equal([409, `session ${r.session_id} is running: cancel it with cancel_agent_run first`]);
    release();
    await activeRun(r.session_id)?.done;
    expect((await h.store.get(r.session_id))!.messages.map((m) => m.content)).to.deep.equal(['slow', 'done']);
  });

  it('a delete a crash interrupted (tombstone written, rows left) reads as gone and is finished at the next boot', async () => {
    const h = harness([text('a')]);
    const { ops } = setup(h);
    const id = await prompt(ops, 'hi');
    await h.store.markDeleting(id);
    expect(await h.store.get(id)).to.equal(undefined);
    expect((await h.store.list(10)).map((s) => s.session_id)).to.not.include(id);
    expect((await failure(ops.get_agent_session.handle({ session_id: id }, user))).status).to.equal(404);
    expect(h.table.rows.has(id)).to.equal(true);
    const boot = new Lifecycle(h.store, h.deps.calls, h.deps.followups);
    expect(await boot.finishInterrupted()).to.equal(1);
    expect(h.table.rows.has(id)).to.equal(false);
    expect([...(h.store as any).tables.messages().rows.keys()]).to.have.length(0);
    expect(await boot.finishInterrupted()).to.equal(0);
  });
});

describe('retention', () => {
  it('a finished session older than agent.retainSessionsDays expires with all of its rows; a newer one and a running one stay; the call log expires on its own setting', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const h = harness([text('old'), text('new'), async () => (await held, text('ran'))]);
    const { ops, callTable } = setup(h);
    const old = await prompt(ops, 'old one');
    const recent = await prompt(ops, 'new one');
    const running = ((await ops.agent_prompt.handle({ message: 'running' }, user)) as { session_id: string }).session_id;
    const now = Date.now();
    // Age two sessions by 3 days, as if they had not changed since.
    for (const id of [old, running]) {
      const row = JSON.parse(h.table.rows.get(id)!);
      h.table.rows.set(id, JSON.stringify({ ...row, updatedAt: new Date(now - 3 * DAY) }));
    }
    await h.deps.calls!.record([call(old, now - 3 * DAY), call(recent, now - 10 * DAY), call(recent, now - DAY / 2)]);
    const lifecycle = new Lifecycle(h.store, h.deps.calls, h.deps.followups);
    expect(await lifecycle.expire({ retainSessionsDays: 2, retainModelCallsDays: undefined }, now)).to.deep.equal({ sessions: 1, messages: 2, modelCalls: 1, followups: 0, oldModelCalls: 0 });
    expect(h.table.rows.has(old)).to.equal(false);
    expect((await h.store.get(recent))!.messages).to.have.length(2);
    expect((await h.store.header(running))!.status).to.equal('running');
    expect(callTable.rows.size).to.equal(2);
    expect(await lifecycle.expire({ retainSessionsDays: undefined, retainModelCallsDays: 1 }, now)).to.deep.equal({ sessions: 0, messages: 0, modelCalls: 0, followups: 0, oldModelCalls: 1 });
    expect([...callTable.rows.keys()]).to.deep.equal([`${recent}-${now - DAY / 2}`]);
    release();
    await activeRun(running)?.done;
  });
});

describe('export', () => {
  async function* tracked(n: number, state: { pulled: number }): AsyncGenerator<StoredMessage & { seq: number }> {
    for (let seq = 0; seq < n; seq++) {
      state.pulled++;
      const m: StoredMessage =
        seq % 3 === 0 ? { role: 'user', content: `question ${seq}` } :
        seq % 3 === 1 ? { role: 'assistant', content: '', toolCalls: [{ id: `c${seq}`, name: 'read_file', arguments: { path: 'x' } }] } :
        { role: 'tool', toolCallId: `c${seq - 1}`, name: 'read_file', content: `{"page":"${'x'.repeat(2000)}"}`, ...(seq % 30 === 2 ? { cut: 'workingSet' as const } : {}) };
      yield { ...m, at: 1_700_000_000_000 + seq, seq };
    }
  }
  const header = { session_id: 's1', user: 'admin', status: 'completed' as const, pendingApprovals: [], provider: 'openai', model: 'm', createdAt: 0, updatedAt: 1, lastError: null, runner: null, node: 'n', messageCount: 300, bytes: 1, title: 'question 0' };

  it('Markdown lists every message in order, marks cut results, and pulls one message per chunk (never the transcript whole)', async () => {
    const state = { pulled: 0 };
    let emitted = 0;
    let largest = 0;
    const chunks: string[] = [];
    for await (const chunk of exportMarkdown({ header, messages: tracked(300, state), modelCalls: totals([]), followups: [] })) {
      chunks.push(chunk);
      largest = Math.max(largest, chunk.length);
      if (chunk.startsWith('\n### #')) emitted++;
      expect(state.pulled - emitted, 'messages read ahead of what was written').to.be.at.most(1);
    }
    const md = chunks.join('');
    const heads = [...md.matchAll(/^### #(\d+) (\S+)/gm)].map((m) => Number(m[1]));
    expect(heads).to.deep.equal(Array.from({ length: 300 }, (_, i) => i));
    expect(md.match(/\[cut: working set \(agent\.workingSetBytes\)\]/g)).to.have.length(10);
    expect(md).to.include('### #2 tool read_file · 2023-11-14T22:13:20.002Z · 2,011 bytes [cut: working set (agent.workingSetBytes)]');
    expect(largest).to.be.below(2600);
    expect(md.startsWith('# Harper Agent session s1\n\n**question 0**\n\n- status: completed\n')).to.equal(true);
    // Every fence opens a line of its own (a renderer shows it as a block): the tool call's arguments too.
    expect(md).to.include('\n→ `read_file`\n\n```json\n{"path":"x"}\n```\n');
    expect(md.split('\n').filter((l) => l.includes('```') && !/^`{3,}(json)?$/.test(l))).to.deep.equal([]);
  });

  it('JSON is one document with every message in order, written message by message', async () => {
    const chunks: string[] = [];
    for await (const chunk of exportJson({ header, messages: tracked(300, { pulled: 0 }), modelCalls: totals([]), followups: [] })) chunks.push(chunk);
    expect(chunks).to.have.length(302);
    const doc = JSON.parse(chunks.join(''));
    expect(doc.session).to.include({ session_id: 's1', messageCount: 300 });
    expect(doc.messages.map((m: any) => m.index)).to.deep.equal(Array.from({ length: 300 }, (_, i) => i));
  });

  it('a fence longer than any backtick run in the content keeps a result that holds ``` inside its block', async () => {
    async function* one(): AsyncGenerator<StoredMessage & { seq: number }> {
      yield { role: 'assistant', content: 'here:\n```\ncode\n````\n', seq: 0 };
    }
    const md = (await collect(exportMarkdown({ header: { ...header, messageCount: 1 }, messages: one(), modelCalls: totals([]), followups: [] }))).join('');
    expect(md).to.include('\n`````\nhere:\n```\ncode\n````\n`````\n');
  });

  it('the operation answers a stream; a format that does not exist is refused by the schema', async () => {
    const h = harness([text('a')]);
    const { ops } = setup(h);
    const id = await prompt(ops, 'hi');
    const answer = await ops.export_agent_session.handle({ session_id: id }, user);
    expect(answer).to.be.instanceOf(StreamedAnswer);
    expect((answer as StreamedAnswer).contentType).to.equal('text/markdown; charset=utf-8');
    const md = (await collect((answer as StreamedAnswer).chunks)).join('');
    expect([...md.matchAll(/^### #(\d+) (\w+)/gm)].map((m) => `${m[1]} ${m[2]}`)).to.deep.equal(['0 user', '1 assistant']);
  });
});

describe('list_agent_sessions pages', () => {
  it('newest first, a page at a time with nextCursor, filtered by status, user and title; a bad cursor is 400', async () => {
    const h = harness(Array.from({ length: 5 }, (_, i) => text(`a${i}`)));
    const { ops } = setup(h);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await prompt(ops, `Check replication ${i}`));
      await new Promise((r) => setTimeout(r, 3));
    }
    const newest = [...ids].reverse();
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = (await ops.list_agent_sessions.handle({ limit: 2, ...(cursor ? { cursor } : {}) }, user)) as { sessions: { session_id: string }[]; nextCursor: string | null };
      seen.push(...page.sessions.map((s) => s.session_id));
      cursor = page.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(seen).to.deep.equal(newest);
    expect(pages).to.equal(3);
    const byTitle = (await ops.list_agent_sessions.handle({ title: 'REPLICATION 3' }, user)) as any;
    expect(byTitle.sessions.map((s: any) => s.session_id)).to.deep.equal([ids[3]]);
    expect(((await ops.list_agent_sessions.handle({ status: 'running' }, user)) as any).sessions).to.deep.equal([]);
    expect(((await ops.list_agent_sessions.handle({ user: 'nobody' }, user)) as any).sessions).to.deep.equal([]);
    expect(((await ops.list_agent_sessions.handle({ user: 'admin', limit: 1 }, user)) as any).sessions).to.have.length(1);
    const bad = await failure(ops.list_agent_sessions.handle({ cursor: 'nope' }, user));
    expect([bad.status, bad.message]).to.deep.equal([400, 'cursor is not one this operation returned (pass nextCursor back as it is)']);
  });

  it('list_agent_model_calls without a session: newest first, in pages', async () => {
    const h = harness([]);
    const { ops } = setup(h);
    await h.deps.calls!.record(Array.from({ length: 5 }, (_, i) => call('s', 1000 + i)));
    const first = (await ops.list_agent_model_calls.handle({ limit: 3 }, user)) as any;
    expect(first.calls.map((c: any) => c.at)).to.deep.equal([1004, 1003, 1002]);
    expect(first.totals.requests).to.equal(3);
    const second = (await ops.list_agent_model_calls.handle({ limit: 3, cursor: first.nextCursor }, user)) as any;
    expect(second.calls.map((c: any) => c.at)).to.deep.equal([1001, 1000]);
    expect(second.nextCursor).to.equal(null);
  });
});

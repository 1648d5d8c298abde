// The agent's data lifecycle on a real Harper through the operations API: delete (every agent table checked),
// retention, export (a 300-message session, streamed) with the CLI, and bad input.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const run = promisify(execFile);
const DAY = 86_400_000;

/** Every row of every agent table that belongs to a session. */
async function rowsOf(h: TestHarper, id: string) {
  const by = async (table: string, attribute: string) => {
    const r = await h.op({ operation: 'search_by_value', database: 'agent', table, search_attribute: attribute, search_value: id, get_attributes: ['*'] });
    expect(r.status, `${table}: ${JSON.stringify(r.body)}`).to.equal(200);
    return (r.body as unknown[]).length;
  };
  return {
    AgentSession: await by('AgentSession', 'session_id'),
    AgentMessage: await by('AgentMessage', 'session_id'),
    AgentModelCall: await by('AgentModelCall', 'session_id'),
    AgentFollowup: await by('AgentFollowup', 'session_id'),
    AgentLiveText: await by('AgentLiveText', 'session_id'),
  };
}

describe("the agent's data: delete, retention, export", function () {
  this.timeout(300_000);
  const suite = providerSuite();

  /** The model: schedules a follow-up when asked, else answers. */
  function scheduling() {
    suite.server.reset();
    suite.server.responder = (req) => {
      const last = req.messages.at(-1)!;
      if (last.role === 'user' && last.text.startsWith('remind me')) return { toolCalls: [{ name: 'schedule_followup', arguments: { delaySeconds: 3600, message: 'reminder' } }] };
      return { text: 'done' };
    };
  }

  it('a deleted session and all of its rows are gone from every agent table; a second delete is 404; another session keeps its rows', async () => {
    const { h, server } = suite;
    scheduling();
    expect((await h.setConfig({ ...providerSettings('openai', server), stream: true })).status).to.equal(200);
    const doomed = await h.prompt('remind me in an hour');
    const kept = await h.prompt('hello');
    const before = await rowsOf(h, doomed.session_id);
    expect(before).to.deep.include({ AgentSession: 1, AgentMessage: 4, AgentModelCall: 2, AgentFollowup: 1 });
    const keptBefore = await rowsOf(h, kept.session_id);
    const deleted = await h.op({ operation: 'delete_agent_session', session_id: doomed.session_id });
    expect(deleted).to.deep.equal({ status: 200, body: { session_id: doomed.session_id, messages: 4, modelCalls: 2, followups: 1, deleted: true } });
    expect(await rowsOf(h, doomed.session_id)).to.deep.equal({ AgentSession: 0, AgentMessage: 0, AgentModelCall: 0, AgentFollowup: 0, AgentLiveText: 0 });
    expect(await rowsOf(h, kept.session_id)).to.deep.equal(keptBefore);
    const again = await h.op({ operation: 'delete_agent_session', session_id: doomed.session_id });
    expect(again).to.deep.equal({ status: 404, body: { error: `session "${doomed.session_id}" not found` } });
    expect((await h.op({ operation: 'get_agent_session', session_id: doomed.session_id })).status).to.equal(404);
    server.responder = undefined;
  });

  it('deleting a running session is 409 and changes nothing', async () => {
    const { h, server } = suite;
    server.reset([{ hang: true }]);
    expect((await h.setConfig(providerSettings('openai', server))).status).to.equal(200);
    const started = await h.op({ operation: 'agent_prompt', message: 'wait for it' });
    const id = started.body.session_id as string;
    await h.waitForSession(id, ['running']);
    const before = await rowsOf(h, id);
    const refused = await h.op({ operation: 'delete_agent_session', session_id: id });
    expect(refused).to.deep.equal({ status: 409, body: { error: `session ${id} is running: cancel it with cancel_agent_run first` } });
    expect(await rowsOf(h, id)).to.deep.equal(before);
    expect((await h.op({ operation: 'cancel_agent_run', session_id: id })).status).to.equal(200);
    expect((await h.op({ operation: 'delete_agent_session', session_id: id })).status).to.equal(200);
  });

  it('a session older than the retention expires with all its rows while a newer one stays; the call log expires on its own setting', async () => {
    const { h, server } = suite;
    server.reset([{ text: 'old' }, { text: 'new' }]);
    expect((await h.setConfig(providerSettings('openai', server))).status).to.equal(200);
    const old = await h.prompt('an old question');
    const recent = await h.prompt('a new question');
    // Age the old session (as if untouched for 3 days) and one call of the new one (10 days), through Harper.
    const aged = await h.op({ operation: 'update', database: 'agent', table: 'AgentSession', records: [{ session_id: old.session_id, updatedAt: new Date(Date.now() - 3 * DAY).toISOString() }] });
    expect(aged.status, JSON.stringify(aged.body)).to.equal(200);
    const [call] = (await h.op({ operation: 'list_agent_model_calls', session_id: recent.session_id })).body.calls;
    expect((await h.op({ operation: 'update', database: 'agent', table: 'AgentModelCall', records: [{ id: call.id, at: new Date(Date.now() - 10 * DAY).toISOString() }] })).status).to.equal(200);

    expect((await h.setConfig({ retainSessionsDays: 2 })).status).to.equal(200);
    const first = await h.op({ operation: 'expire_agent_data' });
    expect(first.status).to.equal(200);
    expect(first.body).to.include({ retainSessionsDays: 2, retainModelCallsDays: null, oldModelCalls: 0 });
    expect(first.body.sessions).to.be.at.least(1);
    expect(await rowsOf(h, old.session_id)).to.deep.equal({ AgentSession: 0, AgentMessage: 0, AgentModelCall: 0, AgentFollowup: 0, AgentLiveText: 0 });
    expect((await rowsOf(h, recent.session_id)).AgentMessage).to.equal(2);

    expect((await h.setConfig({ retainSessionsDays: null, retainModelCallsDays: 7 })).status).to.equal(200);
    const second = await h.op({ operation: 'expire_agent_data' });
    expect(second.body).to.include({ sessions: 0, retainModelCallsDays: 7 });
    expect(second.body.oldModelCalls).to.be.at.least(1);
    expect((await h.op({ operation: 'list_agent_model_calls', session_id: recent.session_id })).body.calls).to.deep.equal([]);
    expect((await rowsOf(h, recent.session_id)).AgentSession).to.equal(1);
    expect((await h.setConfig({ retainModelCallsDays: null })).status).to.equal(200);
  });

  it('the Markdown export of a 300-message session lists every message in order, marks cut results, and is streamed; the CLI writes the same', async () => {
    const { h, server } = suite;
    writeFileSync(path.join(h.logsDir, 'export.log'), Array.from({ length: 400 }, (_, i) => `line ${i} ${'x'.repeat(40)}`).join('\n') + '\n');
    server.reset();
    let calls = 0;
    // 149 tool calls, every tenth a whole page that the working set later cuts, then an answer: 1 + 149 x 2 + 1 = 300.
    // Each from its own line (the same call again and again is a model going round in circles, and is stopped).
    server.responder = () => (++calls <= 149 ? { toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'export.log', ...(calls % 10 === 0 ? {} : { startLine: calls, lineCount: 2 }) } }] } : { text: 'read it all' });
    expect((await h.setConfig({ ...providerSettings('openai', server), maxTurns: 200, maxToolResultBytes: 16384, workingSetBytes: 8192 })).status).to.equal(200);
    const s = await h.prompt('read export.log again and again');
    expect(s.status, s.lastError).to.equal('completed');
    expect(s.messages).to.have.length(300);
    const cut = s.messages.filter((m: any) => m.cut);
    expect(cut.length).to.be.at.least(10);

    const res = await fetch(h.harper.opsUrl, { method: 'POST', headers: { 'content-type': 'application/json', authorization: h.authHeader() }, body: JSON.stringify({ operation: 'export_agent_session', session_id: s.session_id }) });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('text/markdown; charset=utf-8');
    expect(res.headers.get('content-length'), 'streamed, not one body of known length').to.equal(null);
    let chunks = 0;
    let md = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      chunks++;
      md += decoder.decode(chunk, { stream: true });
    }
    expect(chunks, 'arrived in pieces').to.be.above(1);
    const heads = [...md.matchAll(/^### #(\d+) (\w+)/gm)].map((m) => [Number(m[1]), m[2]]);
    expect(heads).to.deep.equal(s.messages.map((m: any, i: number) => [i, m.role]));
    for (const m of cut) expect(md).to.include(`[cut: ${m.cut === 'cap' ? 'cap (agent.maxToolResultBytes)' : m.cut === 'workingSet' ? 'working set (agent.workingSetBytes)' : 'context window'}]`);
    expect(md.match(/\[cut: /g)!.length).to.equal(cut.length);
    expect(md).to.include(`- model calls: 150 requests (0 failed)`);

    const json = await h.op({ operation: 'export_agent_session', session_id: s.session_id, format: 'json' });
    expect(json.status).to.equal(200);
    expect(json.body.messages.map((m: any) => m.index)).to.deep.equal(s.messages.map((_: unknown, i: number) => i));
    expect(json.body.session).to.include({ session_id: s.session_id, messageCount: 300 });

    const cli = await run('node', ['dist/cli/main.js', 'export', s.session_id], { env: { ...process.env, ...h.cliEnv() }, maxBuffer: 64 * 1024 * 1024 });
    expect(cli.stdout).to.equal(md);
    server.responder = undefined;
  });

  it('list_agent_model_calls without a session pages newest first through the whole log; list_agent_sessions pages and filters', async () => {
    const { h } = suite;
    const seen: string[] = [];
    let cursor: string | null = null;
    let last = Number.POSITIVE_INFINITY;
    do {
      const page: any = (await h.op({ operation: 'list_agent_model_calls', limit: 7, ...(cursor ? { cursor } : {}) })).body;
      expect(page.calls.length).to.be.at.most(7);
      for (const c of page.calls) {
        expect(c.at).to.be.at.most(last);
        last = c.at;
        seen.push(c.id);
      }
      cursor = page.nextCursor;
    } while (cursor);
    expect(new Set(seen).size, 'no call twice').to.equal(seen.length);
    const everything = (await h.op({ operation: 'search_by_value', database: 'agent', table: 'AgentModelCall', search_attribute: 'id', search_value: '*', get_attributes: ['id'] })).body as { id: string }[];
    expect(seen.slice().sort()).to.deep.equal(everything.map((c) => c.id).sort());

    const titled = (await h.op({ operation: 'list_agent_sessions', title: 'EXPORT.LOG again' })).body;
    expect(titled.sessions.map((x: any) => x.title)).to.deep.equal(['read export.log again and again']);
    const done = (await h.op({ operation: 'list_agent_sessions', status: 'completed', limit: 2 })).body;
    expect(done.sessions).to.have.length(2);
    expect(done.sessions.every((x: any) => x.status === 'completed')).to.equal(true);
    const next = (await h.op({ operation: 'list_agent_sessions', status: 'completed', limit: 2, cursor: done.nextCursor })).body;
    expect(next.sessions.map((x: any) => x.session_id)).to.not.include.members(done.sessions.map((x: any) => x.session_id));
    // Paged two at a time from Harper's indexes (every session: updatedAt; one user's: ownerRecent), the pages join
    // into the table's sessions newest first (ties by id, descending), each once.
    const rows = (await h.op({ operation: 'search_by_value', database: 'agent', table: 'AgentSession', search_attribute: 'session_id', search_value: '*', get_attributes: ['session_id', 'updatedAt', 'user', 'status'] })).body as { session_id: string; updatedAt: string; user: string; status: string }[];
    const newest = (of: typeof rows) => of.filter((r) => r.status !== 'deleting').sort((a, b) => Date.parse(b.updatedAt) - Date.parse(a.updatedAt) || (a.session_id < b.session_id ? 1 : -1)).map((r) => r.session_id);
    const walk = async (query: Record<string, unknown>) => {
      const ids: string[] = [];
      let after: string | null = null;
      do {
        const page: any = (await h.op({ operation: 'list_agent_sessions', limit: 2, ...query, ...(after ? { cursor: after } : {}) })).body;
        ids.push(...page.sessions.map((x: any) => x.session_id));
        after = page.nextCursor;
      } while (after);
      return ids;
    };
    expect(rows.length).to.be.at.least(3);
    expect(await walk({})).to.deep.equal(newest(rows));
    const owner = rows[0]!.user;
    expect(await walk({ user: owner })).to.deep.equal(newest(rows.filter((r) => r.user === owner)));
  });

  it('bad input: a missing or malformed id, a format that does not exist, a negative retention: 400 naming the field', async () => {
    const { h } = suite;
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ operation: 'delete_agent_session' }, /session_id/],
      [{ operation: 'delete_agent_session', session_id: 'bad id!' }, /session_id/],
      [{ operation: 'export_agent_session', session_id: 'x', format: 'pdf' }, /format/],
      [{ operation: 'export_agent_session' }, /session_id/],
      [{ operation: 'set_agent_config', retainSessionsDays: -1 }, /retainSessionsDays/],
      [{ operation: 'set_agent_config', retainModelCallsDays: 'soon' }, /retainModelCallsDays/],
      [{ operation: 'list_agent_sessions', cursor: 'garbage' }, /cursor/],
      [{ operation: 'list_agent_sessions', status: 'lost' }, /status/],
    ];
    for (const [body, field] of cases) {
      const r = await h.op(body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.error, JSON.stringify(body)).to.match(field);
    }
    expect((await h.op({ operation: 'export_agent_session', session_id: 'no-such-session' })).status).to.equal(404);
  });
});

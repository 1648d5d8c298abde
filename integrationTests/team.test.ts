// A team uses the agent, on a real Harper (agent/access.ts): two users of a role agent.roles names and one of a role it
// does not. The allowed users complete prompts, each on their own sessions: the other's session answers 404 on every
// operation and on its event stream, as an unknown one does, and no list shows it. The role not named gets 403 on the
// operations, the admin page and MCP. A file tool on a scope the role lacks is refused with a clear tool error; an
// operation tool is refused where the user's own Harper permissions refuse it.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const ana = { username: 'team_ana', password: 'ana-pass' };
const ben = { username: 'team_ben', password: 'ben-pass' };
const cy = { username: 'team_cy', password: 'cy-pass' };
const basic = (u: { username: string; password: string }) => 'Basic ' + Buffer.from(`${u.username}:${u.password}`).toString('base64');

async function promptAs(h: TestHarper, user: typeof ana, message: string, session_id?: string) {
  const started = await h.op({ operation: 'agent_prompt', message, ...(session_id ? { session_id } : {}) }, user);
  expect(started.status, JSON.stringify(started.body)).to.equal(200);
  for (let i = 0; i < 200; i++) {
    const s = await h.op({ operation: 'get_agent_session', session_id: started.body.session_id }, user);
    if (s.body.status !== 'running') return s.body;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the prompt did not finish');
}

describe('a team uses the agent: roles, sessions of one\'s own, scopes per role', function () {
  this.timeout(120_000);
  const suite = providerSuite((h) => writeFileSync(path.join(h.logsDir, 'team.log'), 'first line\nsecond line with an error\nthird\n'));
  let h!: TestHarper;

  before(async () => {
    h = suite.h;
    for (const role of ['team_oncall', 'team_sales']) expect((await h.op({ operation: 'add_role', role, permission: { super_user: false } })).status).to.equal(200);
    for (const [u, role] of [[ana, 'team_oncall'], [ben, 'team_oncall'], [cy, 'team_sales']] as const) {
      expect((await h.op({ operation: 'add_user', role, username: u.username, password: u.password, active: true })).status).to.equal(200);
    }
    expect((await h.setConfig({ provider: 'local', roles: ['team_oncall'] })).status).to.equal(200);
  });
  after(async () => {
    await h.setConfig({ roles: null, roleScopes: null });
    for (const u of [ana, ben, cy]) await h.op({ operation: 'drop_user', username: u.username });
    for (const role of ['team_oncall', 'team_sales']) await h.op({ operation: 'drop_role', id: role });
  });

  it("each allowed user completes prompts on their own sessions; the other's answers 404 everywhere, as an unknown one does, and no list shows it", async () => {
    const mine = await promptAs(h, ana, 'summarize logs/team.log');
    expect(mine.status, mine.lastError).to.equal('completed');
    expect(mine.messages.at(-1).content).to.match(/^logs\/team\.log: 3 lines, 43 bytes, read in 1 page\(s\)/);
    const theirs = await promptAs(h, ben, 'summarize logs/team.log');
    expect(theirs.status).to.equal('completed');
    const id = mine.session_id;
    const notFound = { status: 404, body: { error: `session ${JSON.stringify(id)} not found` } };
    for (const body of [
      { operation: 'get_agent_session', session_id: id },
      { operation: 'export_agent_session', session_id: id },
      { operation: 'agent_prompt', session_id: id, message: 'mine now' },
      { operation: 'cancel_agent_run', session_id: id },
      { operation: 'approve_agent_action', session_id: id, approval_id: 'a1', approved: true },
      { operation: 'compact_agent_session', session_id: id },
      { operation: 'list_agent_model_calls', session_id: id },
      { operation: 'delete_agent_session', session_id: id },
    ]) {
      expect(await h.op(body, ben), body.operation).to.deep.equal(notFound);
      expect((await h.op({ ...body, session_id: 'no-such-session' }, ben)).status, body.operation).to.equal(404);
    }
    // Following it live: the same 404.
    const follow = await fetch(`${h.harper.opsUrl}agent/api/sessions/${id}/events`, { headers: { authorization: basic(ben) } });
    expect([follow.status, await follow.json()]).to.deep.equal([404, { error: `session ${JSON.stringify(id)} not found` }]);
    // Lists: one's own only; a super_user sees both.
    const listed = async (u: typeof ana | 'admin') => ((await h.op({ operation: 'list_agent_sessions', limit: 1000 }, u)).body.sessions as { session_id: string; user: string }[]).filter((s) => [ana.username, ben.username].includes(s.user)).map((s) => s.session_id);
    expect(await listed(ana)).to.deep.equal([id]);
    expect(await listed(ben)).to.deep.equal([theirs.session_id]);
    expect((await listed('admin')).sort()).to.deep.equal([id, theirs.session_id].sort());
    expect((await h.op({ operation: 'list_agent_sessions', user: ana.username }, ben)).body.sessions).to.deep.equal([]);
    // Still there, whole, for its owner.
    expect((await h.op({ operation: 'get_agent_session', session_id: id }, ana)).body.messages).to.have.length(mine.messages.length);
    // The agent's own config stays a super_user's.
    expect(await h.op({ operation: 'set_agent_config', maxTurns: 3 }, ana)).to.deep.equal({ status: 403, body: { error: 'set_agent_config needs a super_user role' } });
  });

  it('a role agent.roles does not name gets 403 on the operations, the admin page and MCP', async () => {
    const refused = 'needs a super_user role or a role named in agent.roles (the role team_sales is not)';
    expect(await h.op({ operation: 'list_agent_sessions' }, cy)).to.deep.equal({ status: 403, body: { error: `list_agent_sessions ${refused}` } });
    expect(await h.op({ operation: 'agent_prompt', message: 'hello' }, cy)).to.deep.equal({ status: 403, body: { error: `agent_prompt ${refused}` } });
    const page = await fetch(`${h.harper.httpUrl}agent/`, { headers: { authorization: basic(cy) } });
    expect([page.status, await page.json()]).to.deep.equal([403, { error: `the agent admin page ${refused}` }]);
    const allowedPage = await fetch(`${h.harper.httpUrl}agent/`, { headers: { authorization: basic(ana) } });
    expect(allowedPage.status).to.equal(200);
    const mcp = await fetch(`${h.harper.httpUrl}agent/mcp`, {
      method: 'POST',
      headers: { authorization: basic(cy), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'agent_prompt', arguments: { message: 'hello' } } }),
    });
    const answer = await mcp.json();
    expect(JSON.parse(answer.result.content[0].text)).to.deep.equal({ status: 403, error: `agent_prompt ${refused}` });
  });

  it('a file scope the role lacks is refused with a tool error naming agent.roleScopes; one it opens is read', async () => {
    const closed = await promptAs(h, ana, 'read config');
    const result = closed.messages.find((m: any) => m.role === 'tool');
    expect(JSON.parse(result.content)).to.deep.equal({ error: 'the config scope is not open to role team_oncall (agent.roleScopes opens logs to it)' });
    expect((await h.setConfig({ roleScopes: { team_oncall: ['logs', 'config'] } })).status).to.equal(200);
    const open = await promptAs(h, ana, 'read config');
    expect(open.messages.find((m: any) => m.role === 'tool').content).to.match(/^\{"path":"config\/harperdb-config\.yaml"/);
  });

  it('a policy per tool, per role: deny is not in the request the provider receives; ask pauses, and approved for the session the next call runs; readOnly offers nothing that writes', async () => {
    const { server } = suite;
    const tail = { toolCalls: [{ name: 'tail_file', arguments: { root: 'logs', path: 'team.log' } }] };
    server.reset([tail, tail, { text: 'tailed twice' }]);
    expect((await h.setConfig({ ...providerSettings('openai', server), toolPolicy: { team_oncall: { grep_files: 'deny', tail_file: 'ask' }, '*': { list_dir: 'deny' } } })).status).to.equal(200);
    try {
      // The policy in force, as get_agent_status tells the caller: the role's entry, then "*", then the default.
      const access = (await h.op({ operation: 'get_agent_status' }, ana)).body.access;
      // (agent.roleScopes opened config to the role in the test before.)
      expect([access.user, access.role, access.superUser, access.scopes]).to.deep.equal([ana.username, 'team_oncall', false, ['logs', 'config']]);
      expect([access.toolPolicy.grep_files, access.toolPolicy.tail_file, access.toolPolicy.list_dir, access.toolPolicy.read_file, access.toolPolicy.write_file]).to.deep.equal(['deny', 'ask', 'deny', 'allow', 'ask']);
      const paused = await promptAs(h, ana, 'tail the log');
      expect(paused.status).to.equal('awaiting_approval');
      expect(paused.pendingApprovals.map((p: any) => p.name)).to.deep.equal(['tail_file']);
      expect(server.requests[0]!.neutral.tools).to.include('tail_file').and.not.include.members(['grep_files', 'list_dir']);
      const approved = await h.op({ operation: 'approve_agent_action', session_id: paused.session_id, approval_id: paused.pendingApprovals[0].approval_id, approved: true, forSession: true }, ana);
      expect(approved.body.approvedTools).to.deep.equal(['tail_file']);
      let done: any;
      for (let i = 0; i < 200 && (done = (await h.op({ operation: 'get_agent_session', session_id: paused.session_id }, ana)).body).status === 'running'; i++) await new Promise((r) => setTimeout(r, 50));
      expect([done.status, done.messages.filter((m: any) => m.role === 'tool').length, done.messages.at(-1).content]).to.deep.equal(['completed', 2, 'tailed twice']);
      // The audit has every call of the session, for its owner only.
      const audit = (await h.op({ operation: 'list_agent_tool_calls', session_id: done.session_id }, ana)).body.toolCalls;
      const sizes = done.messages.filter((m: any) => m.role === 'tool').map((m: any) => Buffer.byteLength(m.content));
      expect(audit.map((r: any) => [r.user, r.tool, r.decision, r.resultBytes, r.arguments])).to.deep.equal([
        [ana.username, 'tail_file', 'asked', null, '{"root":"logs","path":"team.log"}'],
        [ana.username, 'tail_file', 'approved', sizes[0], '{"root":"logs","path":"team.log"}'],
        [ana.username, 'tail_file', 'allowed', sizes[1], '{"root":"logs","path":"team.log"}'],
      ]);
      expect((await h.op({ operation: 'list_agent_tool_calls', session_id: done.session_id }, ben)).status).to.equal(404);
      expect(((await h.op({ operation: 'list_agent_tool_calls', limit: 1000 }, ben)).body.toolCalls as any[]).filter((r) => r.session_id === done.session_id)).to.deep.equal([]);
      // readOnly: nothing that writes is offered.
      expect((await h.setConfig({ toolPolicy: { team_oncall: 'readOnly' } })).status).to.equal(200);
      server.reset([{ text: 'looked' }]);
      expect((await promptAs(h, ana, 'look around')).status).to.equal('completed');
      expect(server.requests[0]!.neutral.tools).to.include('read_file').and.not.include.members(['write_file', 'harper_operation']);
    } finally {
      await h.setConfig({ toolPolicy: null });
    }
  });

  it('the audit keeps a call whose arguments hold a private key with the key withheld', async () => {
    const { server } = suite;
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n';
    server.reset([{ toolCalls: [{ name: 'write_file', arguments: { root: 'components', path: 'team/key.txt', content: pem } }] }]);
    expect((await h.setConfig({ ...providerSettings('openai', server) })).status).to.equal(200);
    const s = await h.prompt('store this key');
    expect(s.status).to.equal('awaiting_approval');
    const audit = (await h.op({ operation: 'list_agent_tool_calls', session_id: s.session_id })).body.toolCalls;
    expect(audit.map((r: any) => [r.tool, r.decision, r.arguments])).to.deep.equal([['write_file', 'asked', '{"root":"components","path":"team/key.txt","content":"[withheld: key material]"}']]);
    expect((await h.op({ operation: 'cancel_agent_run', session_id: s.session_id })).status).to.equal(200);
  });

  it("an operation tool runs with the user's own Harper permissions: refused where they refuse it", async () => {
    const { server } = suite;
    server.reset([{ toolCalls: [{ name: 'get_configuration', arguments: {} }] }, { text: 'done' }]);
    expect((await h.setConfig({ ...providerSettings('openai', server) })).status).to.equal(200);
    const s = await promptAs(h, ana, 'what is the configuration?');
    expect(s.status, s.lastError).to.equal('completed');
    const result = JSON.parse(s.messages.find((m: any) => m.role === 'tool').content);
    expect(result.error).to.match(/^get_configuration: Harper refused it \(403\): /);
  });
});

// A team uses the agent (agent/access.ts): who may use it, whose sessions each user sees, the file scopes a role opens.
import { ModelCallLog } from '../agent/modelCalls.js';
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { authorize, scopesFor, sees } from '../agent/access.js';
import { createOperations, HttpError, type User } from '../agent/operations.js';
import { activeRun } from '../agent/runs.js';
import { openScoped, resolveScoped } from '../agent/tools/scopes.js';
import { harness, tempScopes, text, type Harness } from './helpers.js';

const admin: User = { username: 'admin', role: { role: 'super_user', permission: { super_user: true } } };
const ana: User = { username: 'ana', role: { role: 'oncall', permission: { super_user: false } } };
const ben: User = { username: 'ben', role: { role: 'oncall', permission: { super_user: false } } };
const cy: User = { username: 'cy', role: { role: 'sales', permission: { super_user: false } } };

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (error) {
    return [(error as HttpError).status, (error as Error).message];
  }
  return [200, ''];
};

describe('who may use the agent', () => {
  const config = { roles: ['oncall'] };

  it('a super_user always; a role agent.roles names; no one else (403 naming the role); no user 401; admin operations super_user only', () => {
    expect(authorize(admin, 'agent_prompt', {})).to.equal(admin);
    expect(authorize(ana, 'agent_prompt', config)).to.equal(ana);
    expect(refusal(() => authorize(ana, 'agent_prompt', {}))).to.deep.equal([403, 'agent_prompt needs a super_user role or a role named in agent.roles (the role oncall is not)']);
    expect(refusal(() => authorize(cy, 'list_agent_sessions', config))).to.deep.equal([403, 'list_agent_sessions needs a super_user role or a role named in agent.roles (the role sales is not)']);
    expect(refusal(() => authorize(undefined, 'agent_prompt', config))).to.deep.equal([401, 'authentication required: send Basic credentials or an operation token']);
    for (const op of ['get_agent_config', 'set_agent_config', 'expire_agent_data', 'forget_agent_context_limits']) {
      expect(refusal(() => authorize(ana, op, config))).to.deep.equal([403, `${op} needs a super_user role`]);
      expect(authorize(admin, op, config)).to.equal(admin);
    }
  });

  it('a super_user sees every session; anyone else only their own', () => {
    expect([sees(admin, 'ana'), sees(ana, 'ana'), sees(ana, 'ben'), sees(ana, null), sees({ role: ana.role }, null)]).to.deep.equal([true, true, false, false, false]);
  });

  it('file scopes: every one for a super_user; agent.roleScopes for a role, logs when it names none; a closed scope refuses, even a path resolved before', async () => {
    const scopes = tempScopes();
    writeFileSync(path.join(scopes.logs, 'a.log'), 'one\n');
    expect(scopesFor(scopes, {}, admin)).to.equal(scopes);
    expect(scopesFor(scopes, {}, undefined)).to.equal(scopes);
    const logsOnly = scopesFor(scopes, {}, ana);
    expect(logsOnly.closed).to.deep.equal({
      components: 'the components scope is not open to role oncall (agent.roleScopes opens logs to it)',
      config: 'the config scope is not open to role oncall (agent.roleScopes opens logs to it)',
    });
    expect((await resolveScoped(logsOnly, 'logs', 'a.log')).display).to.equal('logs/a.log');
    await resolveScoped(logsOnly, 'config', '').then(
      () => expect.fail('config is closed'),
      (e: Error) => expect(e.message).to.equal('the config scope is not open to role oncall (agent.roleScopes opens logs to it)')
    );
    // A super_user's read of the config resolves and is kept; the closed scope still refuses it.
    await openScoped(scopes, 'config', path.basename(scopes.config)).then((f) => f.handle.close());
    await openScoped(logsOnly, 'config', path.basename(scopes.config)).then(
      () => expect.fail('config is closed'),
      (e: Error) => expect(e.message).to.match(/^the config scope is not open to role oncall/)
    );
    expect(scopesFor(scopes, { roleScopes: { oncall: ['logs', 'components'] } }, ana).closed).to.deep.equal({ config: 'the config scope is not open to role oncall (agent.roleScopes opens logs, components to it)' });
  });
});

describe('sessions are their owner\'s', () => {
  function team(h: Harness) {
    return createOperations({
      ...h.deps,
      config: () => ({ ...h.config, roles: ['oncall'] }),
      changeConfig: () => Promise.reject(new Error('no config store in this test')),
      persistedConfig: () => ({}),
      instance: { version: 'test', startedAt: new Date(0).toISOString() },
    });
  }
  const status = (p: Promise<unknown>) => p.then(() => 200, (e: HttpError) => e.status);

  it("another user's session answers 404 on every operation, as an unknown one does; lists hold only one's own; a super_user sees all", async () => {
    const h = harness([text('for ana'), text('for ben')]);
    const ops = team(h);
    const mine = (await ops.agent_prompt.handle({ message: 'hello' }, ana)) as { session_id: string };
    await activeRun(mine.session_id)?.done;
    const theirs = (await ops.agent_prompt.handle({ message: 'hello' }, ben)) as { session_id: string };
    await activeRun(theirs.session_id)?.done;
    const id = mine.session_id;
    const attempts: [string, Record<string, unknown>][] = [
      ['get_agent_session', { session_id: id }],
      ['export_agent_session', { session_id: id }],
      ['agent_prompt', { session_id: id, message: 'mine now' }],
      ['cancel_agent_run', { session_id: id }],
      ['approve_agent_action', { session_id: id, approval_id: 'a1' }],
      ['compact_agent_session', { session_id: id }],
      ['preview_agent_request', { session_id: id }],
      ['list_agent_model_calls', { session_id: id }],
      ['delete_agent_session', { session_id: id }],
    ];
    for (const [name, input] of attempts) {
      const asBen = await ops[name]!.handle(input, ben).then(() => [200, ''], (e: HttpError) => [e.status, e.message]);
      const unknown = await ops[name]!.handle({ ...input, session_id: 'no-such-session' }, ben).then(() => [200, ''], (e: HttpError) => [e.status, e.message]);
      expect(asBen, name).to.deep.equal([404, `session ${JSON.stringify(id)} not found`]);
      expect(unknown[0], name).to.equal(404);
    }
    const list = (u: User) => ops.list_agent_sessions!.handle({}, u).then((r) => (r as { sessions: { session_id: string }[] }).sessions.map((s) => s.session_id).sort());
    expect(await list(ana)).to.deep.equal([id]);
    expect(await list(ben)).to.deep.equal([theirs.session_id]);
    expect(await list(admin)).to.deep.equal([id, theirs.session_id].sort());
    // Ana's session is still there, whole, for her and for a super_user.
    expect(await status(ops.get_agent_session!.handle({ session_id: id }, ana))).to.equal(200);
    expect(await status(ops.get_agent_session!.handle({ session_id: id }, admin))).to.equal(200);
    // The agent's own config stays a super_user's.
    expect(await status(ops.get_agent_config!.handle({}, ana))).to.equal(403);
  });

  it("a page of every session's model calls is full for a user who sees only their own: the log is read on past others' records", async () => {
    const h = harness([text('for ana'), text('for ben')]);
    h.deps.calls = new ModelCallLog();
    const ops = team(h);
    const mine = (await ops.agent_prompt.handle({ message: 'hello' }, ana)) as { session_id: string };
    await activeRun(mine.session_id)?.done;
    const theirs = (await ops.agent_prompt.handle({ message: 'hello' }, ben)) as { session_id: string };
    await activeRun(theirs.session_id)?.done;
    // Thirty calls, newest first: ana's one in three, so a raw page of 4 holds one or two of hers.
    const record = (session_id: string, at: number) => ({ id: `${session_id}-${at}`, session_id, at, node: null, provider: 'p', host: 'h', model: 'm', requestBytes: 1, status: 200, inputTokens: 1, outputTokens: 1, cacheReadTokens: null, cacheWriteTokens: null, latencyMs: 1, errorClass: null, costUsd: 0, tokensEstimated: false, streamed: false, purpose: 'turn' as const });
    await h.deps.calls!.record(Array.from({ length: 30 }, (_, i) => record(i % 3 === 0 ? mine.session_id : theirs.session_id, 1000 + i)));
    const pages: number[][] = [];
    let cursor: string | undefined;
    do {
      const page = (await ops.list_agent_model_calls!.handle({ limit: 4, ...(cursor ? { cursor } : {}) }, ana)) as { calls: { session_id: string; at: number }[]; nextCursor: string | null };
      expect(page.calls.every((c) => c.session_id === mine.session_id)).to.equal(true);
      pages.push(page.calls.map((c) => c.at));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    // Ana's ten, newest first, in full pages of 4 (the last holds what is left), each once.
    expect(pages).to.deep.equal([[1027, 1024, 1021, 1018], [1015, 1012, 1009, 1006], [1003, 1000]]);
  });
});

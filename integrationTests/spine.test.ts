import { expect } from 'chai';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bootHarper, sharedHarper, type TestHarper } from './harness.js';

describe('the agent on a real Harper host', function () {
  let h: TestHarper;
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarper();
  });

  it('a prompt with the local backend completes and the transcript is stored in AgentSession', async () => {
    const lines = Array.from({ length: 500 }, (_, i) => (i % 50 === 7 ? `line ${i} ERROR disk full` : `line ${i} ok`));
    writeFileSync(path.join(h.logsDir, 'spine.log'), lines.join('\n') + '\n');
    const s = await h.prompt('summarize logs/spine.log');
    expect(s.status).to.equal('completed');
    expect(s.lastError).to.equal(null);
    expect(s.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'assistant']);
    expect(s.messages[1].toolCalls[0]).to.deep.include({ name: 'read_file', arguments: { root: 'logs', path: 'spine.log' } });
    const page = JSON.parse(s.messages[2].content);
    expect(page).to.include({ path: 'logs/spine.log', totalLines: 500, startLine: 1, endLine: 500 });
    expect(page.content).to.equal(lines.join('\n') + '\n');
    expect(s.messages[3].content).to.match(/^logs\/spine\.log: 500 lines, \d+ bytes, read in 1 page\(s\).* 10 line\(s\) mention "error"; the first 5:\n- line 8: line 7 ERROR disk full/);
    // The row itself, read through Harper's own search_by_id, holds the same transcript.
    const row = await h.row(s.session_id);
    expect(row.messages).to.deep.equal(s.messages);
    expect(row).to.include({ status: 'completed', user: 'admin', provider: 'local', model: 'local-deterministic' });
  });

  it('400 names the field for bad input', async () => {
    expect(await h.op({ operation: 'agent_prompt' })).to.deep.equal({ status: 400, body: { error: 'agent_prompt: "message" is required' } });
    expect(await h.op({ operation: 'agent_prompt', message: 5 })).to.deep.equal({ status: 400, body: { error: 'agent_prompt: "message" must be string' } });
    expect(await h.op({ operation: 'get_agent_session', session_id: 'x', extra: 1 })).to.deep.equal({ status: 400, body: { error: 'get_agent_session: "extra" is not a known field' } });
    expect((await h.op({ operation: 'list_agent_sessions', limit: 0 })).status).to.equal(400);
  });

  it('404 for an unknown session', async () => {
    expect(await h.op({ operation: 'get_agent_session', session_id: 'nope' })).to.deep.equal({ status: 404, body: { error: 'session "nope" not found' } });
    expect((await h.op({ operation: 'agent_prompt', message: 'hi', session_id: 'nope' })).status).to.equal(404);
    expect((await h.op({ operation: 'cancel_agent_run', session_id: 'nope' })).status).to.equal(404);
  });

  it('409 for a prompt to a session awaiting approval; approval writes the file and completes', async () => {
    // Into a component folder that exists: write_file makes no new one.
    mkdirSync(path.join(h.componentsDir, 'spine-app'), { recursive: true });
    const r = await h.op({ operation: 'agent_prompt', message: 'write components/spine-app/notes.txt: hello from the agent' });
    const s = await h.waitForSession(r.body.session_id);
    expect(s.status).to.equal('awaiting_approval');
    expect(s.pendingApprovals[0]).to.deep.include({ name: 'write_file', arguments: { root: 'components', path: 'spine-app/notes.txt', content: 'hello from the agent' } });
    const again = await h.op({ operation: 'agent_prompt', message: 'more', session_id: s.session_id });
    expect(again.status).to.equal(409);
    expect(again.body.error).to.match(/is awaiting_approval/);
    const bad = await h.op({ operation: 'approve_agent_action', session_id: s.session_id, approval_id: 'nope', approved: true });
    expect(bad.status).to.equal(404);
    const ok = await h.op({ operation: 'approve_agent_action', session_id: s.session_id, approval_id: s.pendingApprovals[0].approval_id, approved: true });
    // messageIndex: where the resumed run's messages start (the write's result comes next).
    expect(ok).to.deep.equal({ status: 200, body: { session_id: s.session_id, status: 'running', approved: true, messageIndex: s.messages.length } });
    const done = await h.waitForSession(s.session_id);
    expect(done.status).to.equal('completed');
    expect(readFileSync(path.join(h.componentsDir, 'spine-app/notes.txt'), 'utf8')).to.equal('hello from the agent');
    expect(done.messages.at(-1).content).to.equal('I wrote 20 bytes to components/spine-app/notes.txt.');
  });

  it('cancel_agent_run on a session awaiting approval ends it aborted; a second cancel is 409', async () => {
    const r = await h.op({ operation: 'agent_prompt', message: 'write components/spine-app/cancel.txt: x' });
    await h.waitForSession(r.body.session_id);
    expect(await h.op({ operation: 'cancel_agent_run', session_id: r.body.session_id })).to.deep.equal({ status: 200, body: { session_id: r.body.session_id, status: 'aborted', followupsCancelled: 0 } });
    expect((await h.op({ operation: 'cancel_agent_run', session_id: r.body.session_id })).status).to.equal(409);
  });

  it("Harper's own operations still work (describe_all, a bad operation)", async () => {
    const d = await h.op({ operation: 'describe_all' });
    expect(d.status).to.equal(200);
    expect(d.body.agent.AgentSession).to.include({ hash_attribute: 'session_id', audit: true });
    expect(d.body.agent.AgentMessage).to.include({ hash_attribute: 'id', audit: true });
    expect(await h.op({ operation: 'no_such_op' })).to.deep.equal({ status: 400, body: { error: "Operation 'no_such_op' not found" } });
  });

  it('list_agent_sessions and get_agent_config answer', async () => {
    const l = await h.op({ operation: 'list_agent_sessions', limit: 2 });
    expect(l.status).to.equal(200);
    expect(l.body.sessions).to.have.length(2);
    expect(l.body.nextCursor).to.be.a('string');
    expect(l.body.sessions[0]).to.have.keys('session_id', 'user', 'status', 'provider', 'model', 'createdAt', 'updatedAt', 'lastError', 'runner', 'node', 'messageCount', 'bytes', 'pendingApprovals', 'title', 'costUsd');
    const c = await h.op({ operation: 'get_agent_config' });
    expect(c.body).to.include({ provider: 'local', maxToolResultBytes: 65536, autoApprove: false });
  });

  it('403 for a user without super_user, and 401 without credentials where local requests are not trusted', async () => {
    expect((await h.op({ operation: 'add_role', role: 'agent_reader', permission: { super_user: false } })).status).to.equal(200);
    expect((await h.op({ operation: 'add_user', role: 'agent_reader', username: 'reader', password: 'reader-pass', active: true })).status).to.equal(200);
    const r = await h.op({ operation: 'list_agent_sessions' }, { username: 'reader', password: 'reader-pass' });
    expect(r).to.deep.equal({ status: 403, body: { error: 'list_agent_sessions needs a super_user role or a role named in agent.roles (the role agent_reader is not)' } });
    const wrong = await h.op({ operation: 'list_agent_sessions' }, { username: 'admin', password: 'wrong' });
    expect(wrong.status).to.equal(401);
  });
});

describe('agent.* config at boot', function () {
  it('env and CLI flags reach the component; an invalid value logs a warning and keeps the default; harperdb-config.yaml is read', async function () {
    this.timeout(180_000);
    let h = await bootHarper({ env: { AGENT_MAXTOOLRESULTBYTES: '1.5' }, args: ['--AGENT_MAXTURNS', '7'] });
    try {
      const c = await h.op({ operation: 'get_agent_config' });
      expect(c.body).to.include({ maxToolResultBytes: 65536, maxTurns: 7 });
      const log = readFileSync(path.join(h.logsDir, 'hdb.log'), 'utf8');
      expect(log).to.contain('invalid agent.maxToolResultBytes "1.5" from env AGENT_MAXTOOLRESULTBYTES (agent.maxToolResultBytes must be an integer from 1024 to 1048576); using 65536 (the default)');
      await h.stop('SIGTERM', true);
      const configFile = path.join(h.rootPath, 'harperdb-config.yaml');
      writeFileSync(configFile, readFileSync(configFile, 'utf8') + '\nagent:\n  maxToolResultBytes: 2048\n  autoApprove: true\n');
      h = await h.restart({ env: {}, args: [] });
      const after = await h.op({ operation: 'get_agent_config' });
      expect(after.body).to.include({ maxToolResultBytes: 2048, autoApprove: true, maxTurns: 50 });
    } finally {
      await h.stop();
    }
  });
});

// Harper killed (SIGKILL) in the middle of a tool call: after a restart the row is intact, its run is not left
// running, and a new prompt works. The same instance runs with local requests untrusted, for the 401 case.
import { expect } from 'chai';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually } from './cluster.js';
import { bootHarper, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';

describe('a crash in the middle of a run', function () {
  let h: TestHarper;
  const server = new ProviderServer();
  before(async function () {
    this.timeout(120_000);
    await server.start();
    h = await bootHarper();
    // Trust no local request (as in production), so a request without credentials is refused.
    await h.stop('SIGTERM', true);
    const file = path.join(h.rootPath, 'harperdb-config.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('authorizeLocal: true', 'authorizeLocal: false'));
    h = await h.restart();
  });
  after(async () => {
    await h.stop();
    await server.close();
  });

  it('no credentials where local requests are not trusted: 401', async () => {
    const r = await h.op({ operation: 'list_agent_sessions' }, 'none');
    expect(r.status).to.equal(401);
    expect((await h.op({ operation: 'list_agent_sessions' })).status).to.equal(200);
  });

  it('the admin page and its event streams without credentials: 401 with a Basic challenge, so a browser asks', async () => {
    for (const url of ['agent/', 'agent/api/sessions/events']) {
      const r = await fetch(h.harper.httpUrl + url);
      expect(r.status, url).to.equal(401);
      expect(r.headers.get('www-authenticate')).to.equal('Basic');
      expect(await r.json()).to.deep.equal({ error: 'authentication required: send Basic credentials or an operation token' });
    }
    const { username, password } = h.harper.admin;
    const ok = await fetch(h.harper.httpUrl + 'agent/', { headers: { authorization: 'Basic ' + Buffer.from(`${username}:${password}`).toString('base64') } });
    expect(ok.status).to.equal(200);
    expect(ok.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(await ok.text()).to.contain('<title>Harper Agent</title>');
  });

  it('SIGKILL during a tool call: the row survives, the run is marked interrupted, the next prompt works', async () => {
    writeFileSync(path.join(h.logsDir, 'redos.log'), 'a'.repeat(40) + '!\n');
    writeFileSync(path.join(h.logsDir, 'after.log'), 'one\ntwo\n');
    await h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0 });
    server.reset([{ toolCalls: [{ name: 'grep_files', arguments: { root: 'logs', path: 'redos.log', pattern: '^(a+)+$' } }] }]);
    const r = await h.op({ operation: 'agent_prompt', message: 'grep for trouble' });
    const id = r.body.session_id;
    // The grep is still running past SLOW_TOOL_MS (250 ms), so the call it answers is stored while it runs.
    const during = await eventually(async () => {
      const s = await h.op({ operation: 'get_agent_session', session_id: id });
      expect(s.body.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']);
      return s;
    }, 10_000, 20);
    expect(during.body.status).to.equal('running');
    await h.stop('SIGKILL', true);
    h = await h.restart();
    const row = await h.row(id);
    expect(row.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(row.messages[1].toolCalls[0].name).to.equal('grep_files');
    expect(row.status).to.equal('error');
    expect(row.lastError).to.equal('The run was interrupted by a Harper restart. Send a new prompt to continue the session.');
    expect(row.runner).to.equal(null);
    // set_agent_config's change outlived the crash; the next prompt goes to the embedded backend.
    expect((await h.op({ operation: 'get_agent_config' })).body).to.include({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: '(set)', maxRetries: 0 });
    expect((await h.setConfig({ provider: 'local' })).status).to.equal(200);
    const next = await h.prompt('summarize logs/after.log', id);
    expect(next.status).to.equal('completed');
    expect(next.messages.at(-1).content).to.match(/^logs\/after\.log: 2 lines/);
    // The interrupted call got a stand-in result when the transcript went to a provider; the store kept it as it was.
    expect(next.messages.filter((m: any) => m.role === 'user')).to.have.length(2);
  });
});

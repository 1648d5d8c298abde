// Harper's operations as tools on a real Harper, through the real OpenAI SDK: a scripted model asks for
// system_information, pages read_log across a log larger than the cap (no page over the cap, the pages reassemble the
// entries, a logged private key never served), reads get_configuration (no secret value), and is refused an operation
// it was not given.
import { expect } from 'chai';
import { appendFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { NeutralRequest, Turn } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const CAP = 16384;
const FROM = '2030-01-01T00:00:00.000Z';
const ANALYTICS_FROM = Date.now() - 3_600_000;
const ANALYTICS_UNTIL = Date.now() + 3_600_000;
const KEY_BODY = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7';

/** The scripted investigator: system_information, then read_log page by page, then get_configuration, then an
 * operation it was not given, then an answer. */
function investigator(req: NeutralRequest): Turn {
  const calls = req.messages.flatMap((m) => m.toolCalls ?? []).map((c) => c.name);
  const last = req.messages[req.messages.length - 1];
  if (calls.length === 0) return { toolCalls: [{ name: 'system_information', arguments: { attributes: ['time', 'threads'] } }] };
  if (calls.at(-1) === 'system_information') return { toolCalls: [{ name: 'read_log', arguments: { start: 0, limit: 1000, from: FROM } }] };
  if (calls.at(-1) === 'read_log') {
    const page = JSON.parse(last!.text);
    if (page.nextStart !== undefined) return { toolCalls: [{ name: 'read_log', arguments: { start: page.nextStart, limit: 1000, from: FROM } }] };
    return { toolCalls: [{ name: 'get_configuration', arguments: {} }] };
  }
  if (calls.at(-1) === 'get_configuration') return { toolCalls: [{ name: 'list_metrics', arguments: {} }] };
  if (calls.at(-1) === 'list_metrics') {
    const metric = JSON.parse(last!.text)[0];
    // One field a sample: the whole samples of an hour in which earlier suites loaded this Harper outgrow the cap.
    return { toolCalls: [{ name: 'get_analytics', arguments: { metric, start_time: ANALYTICS_FROM, end_time: ANALYTICS_UNTIL, get_attributes: ['metric'] } }] };
  }
  if (calls.at(-1) === 'get_analytics') return { toolCalls: [{ name: 'drop_database', arguments: { database: 'data' } }] };
  return { text: `Done after ${calls.length} calls.` };
}

describe("Harper's operations as tools, on a real Harper", function () {
  this.timeout(120_000);
  const suite = providerSuite();

  it('system_information, read_log paged within the cap with its key withheld, get_configuration redacted, no unlisted operation', async () => {
    const { h, server } = suite;
    // 400 entries of about 200 bytes (80 KB, over the cap), dated in 2030 so the window holds only them; one logs a key.
    const lines: string[] = [];
    for (let i = 0; i < 400; i++) {
      const ts = new Date(Date.parse(FROM) + i * 1000).toISOString();
      const message = i === 123 ? `loaded key -----BEGIN PRIVATE KEY----- ${KEY_BODY} -----END PRIVATE KEY-----` : `agent-it entry ${i} ${'z'.repeat(160)}`;
      lines.push(`${ts} [http/1] [warn]: ${message}`);
    }
    appendFileSync(path.join(h.logsDir, 'hdb.log'), lines.join('\n') + '\n');

    // A secret in Harper's own config file, where get_configuration reads.
    const secret = await h.op({ operation: 'set_configuration', tls_privateKey: '/nowhere/sk-secret-value-123.pem' });
    expect(secret.status, JSON.stringify(secret.body)).to.equal(200);
    // The working set off: every page stays whole in the transcript, so the test reads them back from it.
    server.reset([]);
    server.responder = investigator;
    expect((await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: CAP, maxTurns: 100, workingSetBytes: 0 })).status).to.equal(200);
    const s = await h.prompt('How is this Harper doing?');
    expect([s.status, s.lastError]).to.deep.equal(['completed', null]);

    const results = s.messages.filter((m: any) => m.role === 'tool');
    const byName = (name: string) => results.filter((m: any) => m.name === name);
    const info = JSON.parse(byName('system_information')[0].content);
    expect(info).to.have.keys('time', 'threads');
    expect(info.time.uptime).to.be.a('number');

    const pages = byName('read_log').map((m: any) => JSON.parse(m.content));
    expect(pages.length).to.be.greaterThan(5);
    for (const m of byName('read_log')) expect(Buffer.byteLength(m.content)).to.be.at.most(CAP / 2);
    const entries = pages.flatMap((p: any) => p.entries);
    expect(entries.map((e: any) => e.message)).to.deep.equal(lines.map((l, i) => (i === 123 ? '[withheld: key material]' : l.slice(l.indexOf(']: ') + 3))));
    for (const [i, p] of pages.entries()) expect(p.start).to.equal(pages.slice(0, i).reduce((n: number, q: any) => n + q.count, 0));

    const config = byName('get_configuration')[0].content;
    expect(JSON.parse(config).http.port).to.be.a('number');
    expect(JSON.parse(config).tls.privateKey).to.equal('[redacted]');
    expect(config).to.not.include('sk-secret-value-123');

    // list_metrics and get_analytics answer the model as they answer the operations API (get_analytics streams its
    // records inside Harper; the tool reads them out).
    const metrics = JSON.parse(byName('list_metrics')[0].content);
    expect(metrics).to.deep.equal((await h.op({ operation: 'list_metrics' })).body);
    const analytics = JSON.parse(byName('get_analytics')[0].content);
    const directAnalytics = await h.op({ operation: 'get_analytics', metric: metrics[0], start_time: ANALYTICS_FROM, end_time: ANALYTICS_UNTIL, get_attributes: ['metric'] });
    expect(analytics).to.be.an('array');
    expect(analytics).to.deep.equal(directAnalytics.body);
    for (const sample of analytics) expect(sample.metric).to.equal(metrics[0]);

    const refused = byName('drop_database')[0];
    expect(refused.isError).to.equal(true);
    expect(refused.content).to.match(/unknown tool/i);

    // Nothing the model was sent holds the key or the API key.
    const sent = JSON.stringify(server.requests.map((r) => r.body));
    expect(sent).to.not.include(KEY_BODY);
    expect(sent).to.not.include('sk-secret-value-123');
    expect(s.messages.at(-1).content).to.equal(`Done after ${5 + pages.length} calls.`);
  });

  it("agent.user: the operations run with that user's role, refused exactly as Harper refuses it; agent.systemPromptAppend reaches the model", async () => {
    const { h, server } = suite;
    expect((await h.op({ operation: 'add_role', role: 'ops_reader', permission: { super_user: false } })).status).to.equal(200);
    expect((await h.op({ operation: 'add_user', role: 'ops_reader', username: 'ops_reader', password: 'reader-pass', active: true })).status).to.equal(200);
    const direct = await h.op({ operation: 'read_log', limit: 5 }, { username: 'ops_reader', password: 'reader-pass' });
    expect(direct.status).to.equal(403);
    server.reset([{ toolCalls: [{ name: 'read_log', arguments: { limit: 5 } }] }, { text: 'refused' }]);
    const append = 'Only ever look at the replication logs.';
    expect((await h.setConfig({ ...providerSettings('openai', server), user: 'ops_reader', systemPromptAppend: append })).status).to.equal(200);
    try {
      const s = await h.prompt('Read the log.');
      expect([s.status, s.lastError]).to.deep.equal(['completed', null]);
      const result = s.messages.find((m: any) => m.role === 'tool');
      expect(result.isError).to.equal(true);
      expect(JSON.parse(result.content).error).to.equal(`read_log: Harper refused it (403): ${direct.body.error}`);
      expect(server.requests[0]!.neutral.systems).to.have.length(1);
      expect(server.requests[0]!.neutral.systems[0]!.endsWith(`\n\n=== Operator instructions ===\n${append}`)).to.equal(true);
    } finally {
      expect((await h.setConfig({ user: null, systemPromptAppend: null })).status).to.equal(200);
    }
  });

  it('harper_operation: an operation not in agent.allowOperations is refused without asking; an allowed one waits for approval, then runs', async () => {
    const { h, server } = suite;
    server.reset([
      { toolCalls: [{ name: 'harper_operation', arguments: { operation: 'drop_database', arguments: { database: 'data' } } }] },
      { toolCalls: [{ name: 'harper_operation', arguments: { operation: 'create_database', arguments: { database: 'agent_made' } } }] },
      { text: 'created' },
    ]);
    expect((await h.setConfig({ ...providerSettings('openai', server), allowOperations: ['create_database'] })).status).to.equal(200);
    try {
      const waiting = await h.prompt('Make a database.');
      expect(waiting.status).to.equal('awaiting_approval');
      const refused = waiting.messages.find((m: any) => m.role === 'tool');
      expect([refused.isError, JSON.parse(refused.content).error]).to.deep.equal([true, 'drop_database is not in agent.allowOperations (allowed: create_database); only the operator can add it']);
      expect(waiting.pendingApprovals).to.have.length(1);
      expect(waiting.pendingApprovals[0]).to.deep.include({ name: 'harper_operation', arguments: { operation: 'create_database', arguments: { database: 'agent_made' } } });
      expect((await h.op({ operation: 'describe_all' })).body).to.not.have.property('agent_made');
      const approved = await h.op({ operation: 'approve_agent_action', session_id: waiting.session_id, approval_id: waiting.pendingApprovals[0].approval_id, approved: true });
      expect(approved.status, JSON.stringify(approved.body)).to.equal(200);
      const done = await h.waitForSession(waiting.session_id, ['completed', 'error', 'aborted']);
      expect([done.status, done.lastError]).to.deep.equal(['completed', null]);
      expect((await h.op({ operation: 'describe_all' })).body).to.have.property('agent_made');
    } finally {
      expect((await h.setConfig({ allowOperations: null })).status).to.equal(200);
      await h.op({ operation: 'drop_database', database: 'agent_made' });
    }
  });

  describe('http_fetch', () => {
    let web: Server;
    let origin: string;
    let echoes = 0;
    const body = Array.from({ length: 2000 }, (_, i) => `status line ${i}`).join('\n');
    before(async () => {
      web = createServer(async (req, res) => {
        if (req.url === '/echo') {
          echoes++;
          let got = '';
          for await (const c of req) got += c;
          return void res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, got }));
        }
        if (req.url === '/to-private') return void res.writeHead(302, { location: 'http://10.0.0.1/' }).end();
        res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
      });
      await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
      origin = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
    });
    after(() => web.close());

    it('pages an allowed loopback target; metadata, private addresses and a redirect to one are refused, saying why', async () => {
      const { h, server } = suite;
      const refusedUrls = ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', `${origin}/to-private`];
      server.reset([]);
      server.responder = (req) => {
        const calls = req.messages.flatMap((m) => m.toolCalls ?? []);
        const last = req.messages[req.messages.length - 1]!;
        if (calls.length > 0 && last.role === 'tool' && calls.at(-1)!.arguments && (calls.at(-1)!.arguments as any).url === `${origin}/status`) {
          const page = JSON.parse(last.text);
          if (page.nextOffset !== undefined) return { toolCalls: [{ name: 'http_fetch', arguments: { url: `${origin}/status`, offset: page.nextOffset } }] };
        }
        if (calls.length === 0) return { toolCalls: [{ name: 'http_fetch', arguments: { url: `${origin}/status` } }] };
        const refusedSoFar = calls.filter((c) => refusedUrls.includes((c.arguments as any).url)).length;
        if (refusedSoFar < refusedUrls.length) return { toolCalls: [{ name: 'http_fetch', arguments: { url: refusedUrls[refusedSoFar] } }] };
        if (!calls.some((c) => (c.arguments as any).url === `${h.harper.httpUrl}agent/`)) return { toolCalls: [{ name: 'http_fetch', arguments: { url: `${h.harper.httpUrl}agent/`, method: 'HEAD' } }] };
        return { text: 'checked' };
      };
      // The test server, the refused targets (allowed, so the address check is what refuses them), and this Harper's
      // own HTTP port, which is allowed by default and must stay allowed beside the operator's list.
      const fetchAllow = [origin, 'http://169.254.169.254', 'http://10.0.0.1', h.harper.httpUrl.replace(/\/$/, '')];
      expect((await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: CAP, workingSetBytes: 0, fetchAllow })).status).to.equal(200);
      const s = await h.prompt('Is the status endpoint answering?');
      expect([s.status, s.lastError]).to.deep.equal(['completed', null]);
      const results = s.messages.filter((m: any) => m.role === 'tool');
      const pages = results.filter((m: any) => !m.isError && JSON.parse(m.content).url === `${origin}/status`).map((m: any) => JSON.parse(m.content));
      expect(pages.length).to.be.greaterThan(2);
      expect(pages.map((p: any) => p.content).join('')).to.equal(body);
      for (const p of pages) expect(p.status).to.equal(200);
      const errors = results.filter((m: any) => m.isError).map((m: any) => JSON.parse(m.content).error);
      expect(errors).to.deep.equal([
        'http://169.254.169.254/latest/meta-data/ is refused: 169.254.169.254 is link-local (cloud metadata lives there)',
        'http://10.0.0.1/ is refused: 10.0.0.1 is a private, unspecified or multicast address',
        'http://10.0.0.1/ is refused: 10.0.0.1 is a private, unspecified or multicast address',
      ]);
      const own = JSON.parse(results.at(-1).content);
      // This Harper's own port answers (the shared test Harper trusts local requests; http_fetch sends no credentials).
      expect(own).to.include({ url: `${h.harper.httpUrl}agent/`, status: 200 });
      expect((await h.setConfig({ fetchAllow: null })).status).to.equal(200);
    });

    it('a POST waits for the operator: approved, it is sent once with its body', async () => {
      const { h, server } = suite;
      server.reset([{ toolCalls: [{ name: 'http_fetch', arguments: { url: `${origin}/echo`, method: 'POST', body: '{"flush":true}' } }] }, { text: 'posted' }]);
      expect((await h.setConfig({ ...providerSettings('openai', server), fetchAllow: [origin] })).status).to.equal(200);
      try {
        const waiting = await h.prompt('Flush the cache.');
        expect(waiting.status).to.equal('awaiting_approval');
        expect(echoes).to.equal(0); // nothing sent before the approval
        expect(waiting.pendingApprovals[0]).to.deep.include({ name: 'http_fetch', arguments: { url: `${origin}/echo`, method: 'POST', body: '{"flush":true}' } });
        const approved = await h.op({ operation: 'approve_agent_action', session_id: waiting.session_id, approval_id: waiting.pendingApprovals[0].approval_id, approved: true });
        expect(approved.status, JSON.stringify(approved.body)).to.equal(200);
        const done = await h.waitForSession(waiting.session_id, ['completed', 'error', 'aborted']);
        expect([done.status, done.lastError]).to.deep.equal(['completed', null]);
        const result = JSON.parse(done.messages.find((m: any) => m.role === 'tool').content);
        expect(result).to.include({ status: 201 });
        expect(JSON.parse(result.content)).to.deep.equal({ method: 'POST', got: '{"flush":true}' });
        expect(echoes).to.equal(1);
      } finally {
        expect((await h.setConfig({ fetchAllow: null })).status).to.equal(200);
      }
    });
  });
});

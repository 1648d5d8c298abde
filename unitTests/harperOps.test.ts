// Harper's operations as tools (agent/tools/harperOps.ts): what each sends, what it never serves, how read_log pages,
// and how Harper's refusals reach the model. Harper itself is a stand-in here; integrationTests/harperOps.test.ts runs
// them on a real Harper.
import { expect } from 'chai';
import { harperOperationTools, operationsAs, redactSecrets } from '../agent/tools/harperOps.js';
import { defaultTools } from '../agent/tools/index.js';
import { ToolError, type ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

const KEY = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----';
const tool = (name: string) => harperOperationTools.find((t) => t.name === name)!;

function context(answer: (body: Record<string, unknown>) => unknown, maxResultBytes = 65536) {
  const sent: Record<string, unknown>[] = [];
  const ctx: ToolContext = { scopes: tempScopes(), maxResultBytes, signal: new AbortController().signal, operation: async (body) => (sent.push(body), answer(body)) };
  return { ctx, sent };
}

describe('Harper operations as tools', () => {
  it('are in the default tools after the file and data tools, before http_fetch, with no name twice', () => {
    const names = defaultTools.map((t) => t.name);
    expect(new Set(names).size).to.equal(names.length);
    expect(names.slice(-23)).to.deep.equal(['system_information', 'read_log', 'describe_all', 'describe_database', 'cluster_status', 'get_components', 'get_configuration', 'get_status', 'list_metrics', 'get_analytics', 'get_job', 'search_jobs_by_start_date', 'list_users', 'list_roles', 'harper_operation', 'http_fetch', 'schedule_followup', 'profile_cpu', 'heap_usage', 'harper_best_practice', 'remember', 'search_memory', 'read_runbook']);
  });

  it('send the operation with the model\'s arguments', async () => {
    const { ctx, sent } = context(() => ({ time: { uptime: 5 } }));
    expect(await tool('system_information').handler({ attributes: ['time'] }, ctx)).to.deep.equal({ time: { uptime: 5 } });
    expect(sent).to.deep.equal([{ operation: 'system_information', attributes: ['time'] }]);
  });

  it('read out an answer Harper streams (an iterable of promised records), up to 10,000 entries and a note', async () => {
    async function* records(n: number) {
      for (let i = 0; i < n; i++) yield Promise.resolve({ id: i, metric: 'duration', token: `t${i}` });
    }
    const { ctx, sent } = context((body) => records(body.metric === 'many' ? 10_001 : 3));
    expect(await tool('get_analytics').handler({ metric: 'duration', start_time: 1, end_time: 2 }, ctx)).to.deep.equal([0, 1, 2].map((id) => ({ id, metric: 'duration', token: '[redacted]' })));
    expect(sent[0]).to.deep.equal({ operation: 'get_analytics', metric: 'duration', start_time: 1, end_time: 2 });
    const many = (await tool('get_analytics').handler({ metric: 'many' }, ctx)) as unknown[];
    expect(many).to.have.length(10_001);
    expect(many[9_999]).to.deep.include({ id: 9_999 });
    expect(many[10_000]).to.equal('[more entries not read: over 10000; narrow the question]');
  });

  it('are off without a user: a clear refusal, nothing sent', async () => {
    const ctx: ToolContext = { scopes: tempScopes(), maxResultBytes: 65536, signal: new AbortController().signal };
    let error: unknown;
    try {
      await tool('cluster_status').handler({}, ctx);
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(ToolError);
    expect((error as Error).message).to.equal('cluster_status is off: this run acts for no Harper user (the session has none)');
  });

  it('get_configuration: secret values redacted, other values kept, a PEM key anywhere withheld', async () => {
    const config = { http: { port: 9926, keepAliveTimeout: 30000 }, tls: { privateKey: '/keys/privateKey.pem', certificate: '/keys/cert.pem' }, agent: { apiKey: 'sk-live-1', provider: 'openai' }, clustering: { user: 'cluster', password: 'p' }, note: KEY };
    const { ctx } = context(() => config);
    expect(await tool('get_configuration').handler({}, ctx)).to.deep.equal({
      http: { port: 9926, keepAliveTimeout: 30000 },
      tls: { privateKey: '[redacted]', certificate: '/keys/cert.pem' },
      agent: { apiKey: '[redacted]', provider: 'openai' },
      clustering: { user: 'cluster', password: '[redacted]' },
      note: '[withheld: key material]',
    });
    expect(redactSecrets({ authentication: { operationTokenTimeout: '1d', refreshToken: 'abc' }, clientSecret: 's', api_key: 'k' })).to.deep.equal({ authentication: { operationTokenTimeout: '1d', refreshToken: '[redacted]' }, clientSecret: '[redacted]', api_key: '[redacted]' });
  });

  it('harper_operation: destructive, refused unless agent.allowOperations names the operation, then sent with its arguments', async () => {
    const change = tool('harper_operation');
    expect(change.destructive).to.equal(true);
    const { ctx, sent } = context(() => ({ message: 'created' }));
    expect(change.refuse!({ operation: 'drop_database' }, ctx)).to.equal('drop_database is not in agent.allowOperations (allowed: none); only the operator can add it');
    ctx.allowOperations = ['create_database'];
    expect(change.refuse!({ operation: 'drop_database' }, ctx)).to.equal('drop_database is not in agent.allowOperations (allowed: create_database); only the operator can add it');
    expect(change.refuse!({ operation: 'create_database' }, ctx)).to.equal(null);
    expect(await change.handler({ operation: 'create_database', arguments: { database: 'd', operation: 'drop_database' } }, ctx)).to.deep.equal({ message: 'created' });
    expect(sent).to.deep.equal([{ database: 'd', operation: 'create_database' }]);
  });

  it('list_users: never a password hash or token', async () => {
    const { ctx } = context(() => [{ username: 'admin', active: true, role: { role: 'super_user' }, password: 'hash', hash_function: 'sha256', refresh_token: 't' }]);
    expect(await tool('list_users').handler({}, ctx)).to.deep.equal([{ username: 'admin', active: true, role: { role: 'super_user' } }]);
  });

  describe('read_log', () => {
    const entries = Array.from({ length: 300 }, (_, i) => ({ timestamp: `2026-12-03T10:00:${String(i % 60).padStart(2, '0')}.000Z`, thread: 'http/1', level: i % 10 ? 'info' : 'error', tags: [], message: `entry ${i} ${'x'.repeat(200)}` }));
    const log = (body: Record<string, unknown>) => entries.slice(body.start as number, (body.start as number) + (body.limit as number));

    it('pages within half the cap with nextStart, and the pages reassemble the log', async () => {
      const { ctx, sent } = context(log, 16384);
      const read: unknown[] = [];
      let start: number | undefined = 0;
      while (start !== undefined) {
        const page = (await readLog({ start, limit: 100 }, ctx)) as { entries: unknown[]; nextStart?: number; count: number };
        expect(Buffer.byteLength(JSON.stringify(page))).to.be.at.most(8192);
        expect(page.count).to.equal(page.entries.length);
        read.push(...page.entries);
        start = page.nextStart;
      }
      expect(read).to.deep.equal(entries);
      expect(sent[0]).to.deep.equal({ operation: 'read_log', start: 0, limit: 100, order: 'asc' });
    });

    it('passes level and window on, and withholds an entry that holds a private key', async () => {
      const withKey = [{ timestamp: 't', level: 'error', message: `loaded ${KEY}` }, { timestamp: 't', level: 'error', message: 'fine' }];
      const { ctx, sent } = context(() => withKey);
      const page = await readLog({ level: 'error', from: '2026-12-03T00:00:00Z', until: '2026-12-04T00:00:00Z' }, ctx);
      expect(page).to.deep.equal({ start: 0, count: 2, entries: [{ timestamp: 't', level: 'error', message: '[withheld: key material]' }, withKey[1]] });
      expect(sent[0]).to.deep.equal({ operation: 'read_log', start: 0, limit: 100, order: 'asc', level: 'error', from: '2026-12-03T00:00:00Z', until: '2026-12-04T00:00:00Z' });
    });

    it('an entry too long for a page alone keeps its head, and the next page follows it', async () => {
      const { ctx } = context(() => [{ timestamp: 't', level: 'info', message: 'y'.repeat(50_000) }, { timestamp: 't', level: 'info', message: 'next' }], 16384);
      const page = (await readLog({ limit: 2 }, ctx)) as { entries: { message: string }[]; nextStart: number };
      expect(Buffer.byteLength(JSON.stringify(page))).to.be.at.most(8192);
      expect(page.entries).to.have.length(1);
      expect(page.entries[0]!.message).to.match(/^y+…\[entry cut: 50000 bytes\]$/);
      expect(page.nextStart).to.equal(1);
    });
  });

  it('operationsAs: runs as the user looked up by name, with Harper\'s check; refusals carry Harper\'s status and words', async () => {
    const calls: unknown[] = [];
    const server = {
      getUser: async (name: string) => (name === 'reader' ? { username: 'reader' } : undefined),
      operation: async (body: Record<string, unknown>, context: { user: unknown }, authorize: boolean) => {
        calls.push([body, context, authorize]);
        throw Object.assign(new Error('x'), { statusCode: 403, http_resp_msg: { error: 'This operation is not authorized due to role restrictions and/or invalid database items' } });
      },
    };
    const run = operationsAs(server)('reader');
    let error: unknown;
    await run({ operation: 'read_log' }).catch((e) => (error = e));
    expect((error as Error).message).to.equal('read_log: Harper refused it (403): This operation is not authorized due to role restrictions and/or invalid database items');
    expect(calls).to.deep.equal([[{ operation: 'read_log' }, { user: { username: 'reader' } }, true]]);
    await operationsAs(server)('gone')({ operation: 'read_log' }).catch((e) => (error = e));
    expect((error as Error).message).to.equal("read_log is off: the session's user gone is not a Harper user");
  });
});

function readLog(args: Record<string, unknown>, ctx: ToolContext) {
  return tool('read_log').handler(args, ctx);
}

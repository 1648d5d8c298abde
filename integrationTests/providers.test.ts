// Each provider through Harper's operations API: the real SDK inside Harper talks to the provider-compatible server.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ProviderServer, type Provider } from './providerServer/server.js';
import { sharedHarper, type TestHarper } from './harness.js';

export function providerConfig(provider: Provider, server: ProviderServer) {
  return { provider, baseUrl: provider === 'openai' ? `${server.url}/v1` : server.url, apiKey: 'test-key', maxRetries: 0, model: `${provider}-test-model` };
}

export async function useLocal(h: TestHarper) {
  const r = await h.setConfig({ provider: 'local', baseUrl: null, apiKey: null, model: null, maxRetries: 2, maxToolResultBytes: 65536 });
  expect(r.status).to.equal(200);
}

describe('provider backends through Harper', function () {
  let h: TestHarper;
  const server = new ProviderServer();
  before(async function () {
    this.timeout(120_000);
    h = await sharedHarper();
    await server.start();
    writeFileSync(path.join(h.logsDir, 'provider.log'), 'alpha\nbeta ERROR\ngamma\n');
  });
  after(async () => {
    await useLocal(h);
    await server.close();
  });

  for (const provider of ['openai', 'anthropic', 'bedrock'] as const) {
    it(`${provider}: a prompt that makes one tool call and completes`, async () => {
      expect((await h.setConfig(providerConfig(provider, server))).status).to.equal(200);
      server.reset([{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'provider.log' } }] }, { text: 'provider.log has 3 lines; line 2 is an error.' }]);
      const s = await h.prompt('what is in logs/provider.log?');
      expect(s.status, s.lastError).to.equal('completed');
      expect(s).to.include({ provider, model: `${provider}-test-model` });
      expect(s.messages.at(-1).content).to.equal('provider.log has 3 lines; line 2 is an error.');
      expect(server.requests).to.have.length(2);
      for (const r of server.requests) {
        expect(r.provider).to.equal(provider);
        expect(r.neutral.systems).to.have.length(1);
        expect(r.neutral.model).to.equal(`${provider}-test-model`);
      }
      const result = server.requests[1]!.neutral.messages.at(-1)!;
      expect(result.role).to.equal('tool');
      expect(JSON.parse(result.text)).to.include({ path: 'logs/provider.log', content: 'alpha\nbeta ERROR\ngamma\n', totalLines: 3 });
    });
  }

  it('a tool result of 1 MB is stored capped in the AgentSession row', async () => {
    expect((await h.op({ operation: 'create_database', database: 'capdata' })).status).to.equal(200);
    expect((await h.op({ operation: 'create_table', database: 'capdata', table: 'blobs', primary_key: 'id' })).status).to.equal(200);
    const big = 'b'.repeat(1_000_000);
    let inserted = { status: 0 };
    for (let i = 0; i < 20 && inserted.status !== 200; i++) {
      inserted = await h.op({ operation: 'insert', database: 'capdata', table: 'blobs', records: [{ id: 'one', payload: big }] });
      if (inserted.status !== 200) await new Promise((r) => setTimeout(r, 250)); // the new table reaches every thread
    }
    expect(inserted.status).to.equal(200);
    expect((await h.setConfig({ ...providerConfig('openai', server), maxToolResultBytes: 4096 })).status).to.equal(200);
    server.reset([{ toolCalls: [{ name: 'search_table', arguments: { database: 'capdata', table: 'blobs', id: 'one' } }] }, { text: 'it is big' }]);
    const s = await h.prompt('show the blob');
    expect(s.status, s.lastError).to.equal('completed');
    const row = await h.row(s.session_id);
    const tool = row.messages.find((m: any) => m.role === 'tool');
    expect(Buffer.byteLength(tool.content)).to.be.at.most(4096).and.greaterThan(4000);
    expect(tool.cut).to.equal('cap');
    const m = /…\[truncated; full result is (\d+) bytes\. Ask for less: ask for fewer records \(limit\), fewer attributes \(select\), or a narrower condition\]$/.exec(tool.content);
    expect(m, tool.content.slice(-300)).to.not.equal(null);
    expect(Number(m![1])).to.be.within(1_000_050, 1_000_200); // the record as JSON: 1 MB payload plus its envelope
    for (const m of row.messages.filter((x: any) => x.role === 'tool')) expect(Buffer.byteLength(m.content)).to.be.at.most(4096);
    // What the model received is what was stored.
    expect(server.requests[1]!.neutral.messages.at(-1)!.text).to.equal(tool.content);
  });
});

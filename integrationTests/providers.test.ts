// Each provider through Harper's operations API: the real SDK inside Harper talks to the provider-compatible server.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Provider } from './providerServer/server.js';
import type { TestHarper } from './harness.js';
import { providerSettings } from './recoveryScenarios.js';
import { providerSuite } from './providerSuite.js';

describe('provider backends through Harper', function () {
  const suite = providerSuite((h) => writeFileSync(path.join(h.logsDir, 'provider.log'), 'alpha\nbeta ERROR\ngamma\n'));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  for (const provider of ['openai', 'anthropic', 'bedrock', 'ollama'] as const) {
    it(`${provider}: a prompt that makes one tool call and completes`, async () => {
      const settings = providerSettings(provider, server);
      expect((await h.setConfig(settings)).status).to.equal(200);
      server.reset([{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'provider.log' } }] }, { text: 'provider.log has 3 lines; line 2 is an error.' }]);
      const s = await h.prompt('what is in logs/provider.log?');
      expect(s.status, s.lastError).to.equal('completed');
      expect(s).to.include({ provider, model: settings.model });
      expect(s.messages.at(-1).content).to.equal('provider.log has 3 lines; line 2 is an error.');
      expect(server.requests).to.have.length(2);
      for (const r of server.requests) {
        expect(r.provider).to.equal(provider);
        expect(r.neutral.systems).to.have.length(1);
        expect(r.neutral.model).to.equal(settings.model);
      }
      const result = server.requests[1]!.neutral.messages.at(-1)!;
      expect(result.role).to.equal('tool');
      expect(JSON.parse(result.text)).to.include({ path: 'logs/provider.log', content: 'alpha\nbeta ERROR\ngamma\n', totalLines: 3 });
    });
  }

  it('a tool result of 1 MB is stored capped in the AgentSession row, and sent as stored, with each provider', async () => {
    expect((await h.op({ operation: 'create_database', database: 'capdata' })).status).to.equal(200);
    expect((await h.op({ operation: 'create_table', database: 'capdata', table: 'blobs', primary_key: 'id' })).status).to.equal(200);
    const big = 'b'.repeat(1_000_000);
    let inserted = { status: 0 };
    for (let i = 0; i < 20 && inserted.status !== 200; i++) {
      inserted = await h.op({ operation: 'insert', database: 'capdata', table: 'blobs', records: [{ id: 'one', payload: big }] });
      if (inserted.status !== 200) await new Promise((r) => setTimeout(r, 250)); // the new table reaches every thread
    }
    expect(inserted.status).to.equal(200);
    for (const provider of ['openai', 'anthropic', 'bedrock', 'ollama'] as const) {
      expect((await h.setConfig({ ...providerSettings(provider, server), maxToolResultBytes: 4096 })).status).to.equal(200);
      server.reset([{ toolCalls: [{ name: 'search_table', arguments: { database: 'capdata', table: 'blobs', id: 'one' } }] }, { text: 'it is big' }]);
      const s = await h.prompt('show the blob');
      expect(s.status, s.lastError).to.equal('completed');
      const row = await h.row(s.session_id);
      const tool = row.messages.find((m: any) => m.role === 'tool');
      expect(Buffer.byteLength(tool.content), provider).to.be.at.most(4096).and.greaterThan(4000);
      expect(tool.cut).to.equal('cap');
      const m = /…\[truncated; full result is (\d+) bytes\. Ask for less: ask for fewer records \(limit\), fewer attributes \(select\), or a narrower condition\]$/.exec(tool.content);
      expect(m, tool.content.slice(-300)).to.not.equal(null);
      expect(Number(m![1])).to.be.within(1_000_050, 1_000_200); // the record as JSON: 1 MB payload plus its envelope
      for (const m of row.messages.filter((x: any) => x.role === 'tool')) expect(Buffer.byteLength(m.content)).to.be.at.most(4096);
      // What the model received is what was stored.
      expect(server.requests[1]!.provider).to.equal(provider);
      expect(server.requests[1]!.neutral.messages.at(-1)!.text).to.equal(tool.content);
    }
  });
});

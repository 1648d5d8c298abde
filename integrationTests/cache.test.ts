// Prompt caching on a real Harper through the real SDKs: the provider server caches and bills as each API does
// (providerServer/promptCache.ts: OpenAI's automatic prefix cache; Anthropic's and Bedrock's marks, writes at 1.25x
// and reads at 0.1x of the input price). A 20-prompt investigation reading three pages a prompt at a 160 KB window:
// what it is billed for its input against the log it read, what the cache saved, and the call log's cost against the
// server's bill. preview_agent_request answers the request the agent then sends.
import { expect } from 'chai';
import { CACHE_LIMIT, cachedInvestigation } from './cacheScenario.js';
import { providerSuite } from './providerSuite.js';
import { sessionReader } from './providerServer/pager.js';
import type { Provider } from './providerServer/server.js';
import { providerSettings, writeBigLog } from './recoveryScenarios.js';

const PROMPTS = 20;

describe('prompt caching: billed input, not bytes sent', function () {
  this.timeout(300_000);
  const suite = providerSuite((h) => writeBigLog(h.logsDir));

  for (const provider of ['openai', 'anthropic', 'bedrock'] as const satisfies readonly Provider[]) {
    it(`${provider}: ${PROMPTS} prompts of three pages at a 160 KB window: billed input at most 1.5x the log bytes read, the cache's share, the call log's cost within 2% of the bill`, async () => {
      const f = await cachedInvestigation(suite.h, suite.server, provider, PROMPTS);
      console.log(
        `      ${provider}: ${f.requests} requests (${f.summaries} summary calls), ${f.read.toLocaleString('en-US')} bytes of log read; input ${f.sent.toLocaleString('en-US')} tokens, ` +
          `${f.cacheRead.toLocaleString('en-US')} read from the cache (${Math.round((f.cacheRead / f.sent) * 100)}%), ${f.cacheWrite.toLocaleString('en-US')} written; ` +
          `billed ${Math.round(f.billed).toLocaleString('en-US')} token-equivalents = ${(f.billed / f.read).toFixed(2)} per byte read, billed ${Math.round((f.billed / f.sent) * 100)}% of what the same input costs uncached`
      );
      expect(f.billed, 'billed input (token-equivalents) against the log bytes read').to.be.at.most(1.5 * f.read);
      // The cache does the work: without it every input token is billed whole (1.0 here). Anthropic and Bedrock bill each
      // write at 1.25x, and every new page is written once.
      expect(f.billed / f.sent, 'billed input against the same input uncached').to.be.below(provider === 'openai' ? 0.45 : 0.6);

      // The call log prices what the provider reported, cache reads and writes at their prices: within 2% of the bill.
      expect(f.totals).to.include({ inputTokens: f.sent, cacheReadTokens: f.cacheRead });
      expect(f.totals.cacheWriteTokens).to.equal(provider === 'openai' ? 0 : f.cacheWrite);
      expect(Math.abs(f.totals.costUsd - f.billUsd) / f.billUsd, `call log $${f.totals.costUsd} against the bill $${f.billUsd}`).to.be.below(0.02);
      expect(f.totals.cacheShare).to.equal(Math.round((f.cacheRead / f.sent) * 1000) / 1000);
    });
  }

  it('preview_agent_request answers the request the agent then sends: system text, tools and every message, the new prompt with its time', async () => {
    const { h, server } = suite;
    server.reset([], CACHE_LIMIT);
    server.responder = sessionReader('logs', 'big.log', 2);
    expect((await h.setConfig({ ...providerSettings('anthropic', server), maxTurns: 20 })).status).to.equal(200);
    const first = await h.promptLight('Read logs/big.log.');
    expect(first.status).to.equal('completed');
    const preview = await h.op({ operation: 'preview_agent_request', session_id: first.session_id, message: 'Go on reading logs/big.log.' });
    expect(preview.status, JSON.stringify(preview.body)).to.equal(200);
    const p = preview.body;
    const before = server.requests.length;
    const second = await h.promptLight('Go on reading logs/big.log.', first.session_id);
    expect(second.status).to.equal('completed');
    const sent = server.requests[before]!.neutral;
    expect(sent.systems).to.deep.equal([p.request.system]);
    expect(sent.tools).to.deep.equal(p.request.tools);
    // Every message as previewed (the new prompt's time to the second: sent within moments of the preview).
    const strip = (text: string) => text.replace(/\n\n\[sent \S+\]$/, '');
    expect(sent.messages.map((m) => [m.role, strip(m.text)])).to.deep.equal(
      p.request.messages.map((m: any) => [m.role, strip(m.content)])
    );
    expect(sent.messages.at(-1)!.text).to.match(/^Go on reading logs\/big\.log\.\n\n\[sent \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]$/);
    // Sizes: the parts add up, and everything before the new prompt is the stable prefix the previous request sent.
    expect(p.parts.map((x: any) => x.part)).to.deep.equal(['tools', 'system', 'messages']);
    expect(p.parts.reduce((n: number, x: any) => n + x.bytes, 0)).to.equal(p.bytes);
    const newest = Buffer.byteLength(JSON.stringify(p.request.messages.at(-1)));
    expect(p.stablePrefixBytes).to.equal(p.bytes - newest);
    expect(p).to.include({ session_id: first.session_id, provider: 'anthropic', cacheMarks: true, compactionDue: false, messages: p.request.messages.length });
    // An unknown session is a 404, a new one previews the system text and tools alone plus the prompt.
    expect((await h.op({ operation: 'preview_agent_request', session_id: 'nope-nope' })).status).to.equal(404);
    const fresh = (await h.op({ operation: 'preview_agent_request', message: 'hello' })).body;
    expect(fresh.request.messages).to.have.length(1);
    expect(fresh.stablePrefixBytes).to.equal(fresh.parts[0].bytes + fresh.parts[1].bytes);
  });
});

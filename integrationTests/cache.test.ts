// Prompt caching on a real Harper through the real SDKs: the provider server caches and bills as each API does
// (providerServer/promptCache.ts: OpenAI's automatic prefix cache; Anthropic's and Bedrock's marks, writes at 1.25x
// and reads at 0.1x of the input price). A 20-prompt investigation reading three pages a prompt at a 160 KB window:
// what it is billed for its input against the log it read, what the cache saved, and the call log's cost against the
// server's bill. preview_agent_request answers the request the agent then sends.
import { expect } from 'chai';
import { providerSuite } from './providerSuite.js';
import type { BillPrice } from './providerServer/promptCache.js';
import { isSummaryRequest, sessionReader } from './providerServer/pager.js';
import type { Provider, Recorded } from './providerServer/server.js';
import { providerSettings, writeBigLog } from './recoveryScenarios.js';

const LIMIT = 160_000;
const PROMPTS = 20;
/** Anthropic's list price shape: reads at 0.1x the input price, writes at 1.25x. OpenAI bills no writes. */
const PRICE: BillPrice = { inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 };

/** The log bytes the model read: each read_file page's text, counted once, where it first reached the server. */
function logBytesRead(requests: readonly Recorded[]): number {
  const pages = new Map<string, number>();
  for (const r of requests) {
    for (const m of r.neutral.messages) {
      if (m.role !== 'tool' || !m.toolCallId || pages.has(m.toolCallId)) continue;
      try {
        const page = JSON.parse(m.text) as { content?: unknown };
        if (typeof page.content === 'string') pages.set(m.toolCallId, Buffer.byteLength(page.content));
      } catch {
        // a result cut to its head: seen whole before
      }
    }
  }
  return [...pages.values()].reduce((a, b) => a + b, 0);
}

describe('prompt caching: billed input, not bytes sent', function () {
  this.timeout(300_000);
  const suite = providerSuite((h) => writeBigLog(h.logsDir));

  for (const provider of ['openai', 'anthropic', 'bedrock'] as const satisfies readonly Provider[]) {
    it(`${provider}: ${PROMPTS} prompts of three pages at a 160 KB window: billed input at most 1.5x the log bytes read, the cache's share, the call log's cost within 2% of the bill`, async () => {
      const { h, server } = suite;
      server.reset([], LIMIT);
      server.caching = true;
      server.responder = sessionReader('logs', 'big.log', 3);
      const settings = providerSettings(provider, server);
      expect((await h.setConfig({ ...settings, maxTurns: 20, prices: { [settings.model]: PRICE } })).status).to.equal(200);
      let id: string | undefined;
      for (let i = 0; i < PROMPTS; i++) {
        const r = await h.promptLight(`Go on reading logs/big.log (${i + 1}).`, id);
        id = r.session_id;
        expect(r.status, `prompt ${i + 1}: ${r.lastError}`).to.equal('completed');
      }
      const requests = server.requests.filter((r) => r.status === 200);
      const read = logBytesRead(server.requests);
      const bill = server.cache.bill;
      const billed = server.cache.billedInputTokens(PRICE);
      const sent = bill.uncached + bill.read + bill.write;
      const summaries = requests.filter((r) => isSummaryRequest(r.neutral)).length;
      console.log(
        `      ${provider}: ${requests.length} requests (${summaries} summary calls), ${read.toLocaleString('en-US')} bytes of log read; input ${sent.toLocaleString('en-US')} tokens, ` +
          `${bill.read.toLocaleString('en-US')} read from the cache (${Math.round((bill.read / sent) * 100)}%), ${bill.write.toLocaleString('en-US')} written; ` +
          `billed ${Math.round(billed).toLocaleString('en-US')} token-equivalents = ${(billed / read).toFixed(2)} per byte read (${((billed * 4) / read).toFixed(2)} in bytes), billed ${Math.round((billed / sent) * 100)}% of what the same input costs uncached`
      );
      expect(billed, 'billed input (token-equivalents) against the log bytes read').to.be.at.most(1.5 * read);
      // The cache does the work: without it every input token is billed whole (1.0 here). Anthropic and Bedrock bill each
      // write at 1.25x, and every new page is written once.
      expect(billed / sent, 'billed input against the same input uncached').to.be.below(provider === 'openai' ? 0.45 : 0.6);

      // The call log prices what the provider reported, cache reads and writes at their prices: within 2% of the bill.
      const calls = await h.op({ operation: 'list_agent_model_calls', session_id: id, limit: 10_000 });
      const { totals } = calls.body;
      expect(totals).to.include({ inputTokens: sent, cacheReadTokens: bill.read });
      expect(totals.cacheWriteTokens).to.equal(provider === 'openai' ? 0 : bill.write);
      const cost = server.cache.costUsd(PRICE);
      expect(Math.abs(totals.costUsd - cost) / cost, `call log $${totals.costUsd} against the bill $${cost}`).to.be.below(0.02);
      expect(totals.cacheShare).to.equal(Math.round((bill.read / sent) * 1000) / 1000);
    });
  }

  it('preview_agent_request answers the request the agent then sends: system text, tools and every message, the new prompt with its time', async () => {
    const { h, server } = suite;
    server.reset([], LIMIT);
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

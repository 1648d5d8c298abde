// The demo's three recovery scenarios as assertions, through Harper, with each provider's real SDK and wording.
import { expect } from 'chai';
import { SYSTEM_PROMPT } from '../agent/systemPrompt.js';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { BROKEN_TOOL_MESSAGE_BYTES, brokenSession, twoPrompts, writeBigLog } from './recoveryScenarios.js';

describe('recovery from context-window rejections, end to end', function () {
  let bigLog = '';
  const suite = providerSuite((h) => (bigLog = writeBigLog(h.logsDir)));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  it('300 KB over the first request: both prompts complete, pages about 32 KB, nothing rejected, one system prompt per request', async () => {
    const r = await twoPrompts(h, server, 'openai', 300_000);
    expect(r.runs.map((x) => x.status)).to.deep.equal(['completed', 'completed']);
    expect(r.runs.flatMap((x) => x.requests).some((q) => q.rejected)).to.equal(false);
    const pages = r.runs[1]!.toolMessageBytes;
    expect(pages).to.have.length(2);
    for (const p of pages) expect(p).to.be.within(32_000, 33_500);
    // Exactly one system prompt per request: ours, ending with where the agent runs, the same in every request of the run.
    const systems = server.requests.map((req) => req.neutral.systems);
    for (const s of systems) {
      expect(s).to.have.length(1);
      expect(s[0]!.startsWith(`${SYSTEM_PROMPT}\n\n=== Where you run ===\nHarper `)).to.equal(true);
    }
    // The prompt's text is in the request body exactly once; a second copy (as the old agent sent) would add `twice`.
    const body = JSON.stringify(server.requests[0]!.body);
    const escaped = JSON.stringify(SYSTEM_PROMPT).slice(1, -1);
    expect(body.split(escaped).length - 1).to.equal(1);
    const twice = Buffer.byteLength(JSON.stringify({ role: 'system', content: SYSTEM_PROMPT })) + 1;
    console.log(`      first request: ${server.requests[0]!.bytes} bytes with one system prompt; a second copy would add ${twice} bytes`);
  });

  for (const provider of ['openai', 'anthropic', 'bedrock', 'ollama'] as const) {
    it(`${provider}, a limit 40 KB over the first request: the request after the second page is rejected, that page is cut to 2 KiB, the retry completes`, async () => {
      const r = await twoPrompts(h, server, provider, 40_000);
      const [one, two] = r.runs;
      expect(one!.status).to.equal('completed');
      expect(one!.requests.every((q) => !q.rejected)).to.equal(true);
      expect(two!.status, two!.lastError ?? '').to.equal('completed');
      const rejected = two!.requests.filter((q) => q.rejected);
      expect(rejected).to.have.length(1);
      const i = two!.requests.findIndex((q) => q.rejected);
      expect(two!.requests[i]!.bytes).to.be.greaterThan(r.limit);
      expect(two!.requests[i + 1]!.bytes).to.be.at.most(r.limit);
      expect(two!.requests[i]!.bytes - two!.requests[i + 1]!.bytes).to.be.greaterThan(28_000);
      expect(two!.toolMessageBytes[0]).to.be.within(32_000, 33_500);
      expect(two!.toolMessageBytes[1]).to.be.within(2000, 2048);
      const row = await h.row(r.sessionId);
      const tools = row.messages.filter((m: any) => m.role === 'tool');
      expect(tools.map((m: any) => m.cut ?? null)).to.deep.equal([null, 'context']);
      expect(tools[1].content).to.match(/cut to 2 KiB after the model rejected the conversation as longer than its context window; full result is \d+ bytes/);
    });

    it(`${provider}: a session seeded with a stored 1,057,864-byte tool message recovers`, async () => {
      const r = await brokenSession(h, server, provider, 300_000, bigLog);
      const run = r.runs[0]!;
      expect(r.title).to.contain('1,057,864-byte');
      expect(run.status, run.lastError ?? '').to.equal('completed');
      expect(run.requests[0]!.rejected).to.equal(true);
      expect(run.requests[0]!.bytes).to.be.greaterThan(BROKEN_TOOL_MESSAGE_BYTES);
      expect(run.requests.slice(1).every((q) => !q.rejected)).to.equal(true);
      expect(run.toolMessageBytes[0]).to.be.at.most(2048);
      expect(run.toolMessageBytes[1]).to.be.within(32_000, 33_500);
    });
  }

  it('a rejection with nothing left to cut ends error with an actionable lastError, and no tool runs', async () => {
    server.reset([{ contextError: true }]);
    await h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0 });
    const s = await h.prompt('x'.repeat(1000));
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/^The prompt being answered does not fit the model's context window even alone \(.+\): no tool result is left to cut, and everything before the prompt is already a summary\. To continue: shorten the prompt, or use a model with a larger window\.$/);
    expect(server.requests).to.have.length(1);
  });
});

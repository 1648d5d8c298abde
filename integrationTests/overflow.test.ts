// Every OpenAI-compatible server's overflow, through Harper and the real OpenAI SDK: the run recovers by cutting the
// newest page, or ends with the actionable lastError. Silent overflows too.
import { expect } from 'chai';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { HELD_BACK_NOT_OVERFLOW, HELD_BACK_OVERFLOW } from './providerServer/heldBackSamples.js';
import { NOT_OVERFLOW_SAMPLES, OVERFLOW_SAMPLES } from './providerServer/overflowSamples.js';
import { pagerResponder } from './providerServer/pager.js';
import { providerSettings, twoPrompts, writeBigLog } from './recoveryScenarios.js';

describe('overflow detection for OpenAI-compatible servers', function () {
  const suite = providerSuite((h) => writeBigLog(h.logsDir));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  for (const sample of [...OVERFLOW_SAMPLES, ...HELD_BACK_OVERFLOW]) {
    it(`${sample.server}: rejected 40 KB over the first request, the page is cut, the retry completes`, async () => {
      const run = twoPrompts(h, server, 'openai', 40_000);
      server.contextError = () => ({ status: sample.status, body: sample.body });
      const r = await run;
      const two = r.runs[1]!;
      expect(two.status, two.lastError ?? '').to.equal('completed');
      expect(two.requests.filter((q) => q.rejected)).to.have.length(1);
      expect(two.toolMessageBytes[1]).to.be.at.most(2048);
    });
  }

  for (const sample of [...NOT_OVERFLOW_SAMPLES, ...HELD_BACK_NOT_OVERFLOW]) {
    it(`${sample.server} (${sample.status}) is not taken for an overflow: the run ends error, nothing is cut`, async () => {
      server.reset([{ error: { status: sample.status, body: sample.body } }]);
      await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: 65536 });
      const s = await h.prompt('hello');
      expect(s.status).to.equal('error');
      expect(s.lastError).to.match(new RegExp(`^openai request failed \\(HTTP ${sample.status}\\)`));
      expect(server.requests).to.have.length(1);
    });
  }

  it('a server that truncates silently (length, nothing produced) is recovered like a rejection', async () => {
    const pager = pagerResponder('logs', 'big.log');
    server.reset();
    let first = 0; // the limit is 40 KB over the first request: one page fits, two do not
    server.responder = (req) => ((first ||= req.bytes) + 40_000 < req.bytes ? { finish: 'length', text: '' } : pager(req));
    await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: 65536 });
    const one = await h.prompt('Read logs/big.log');
    const two = await h.prompt('Read the next page of logs/big.log', one.session_id);
    expect(two.status, two.lastError).to.equal('completed');
    const tools = two.messages.filter((m: any) => m.role === 'tool');
    expect(tools.map((m: any) => m.cut ?? null)).to.deep.equal([null, 'context']);
  });

  it('usage at agent.contextWindowTokens is a silent overflow; when the retry overflows too, lastError says so', async () => {
    const WINDOW = 20_000; // the page is sized to fit it (agent/context/window.ts); the server reports it full anyway
    server.reset();
    server.responder = (req) => ({ text: 'an answer from a cut prompt', usage: { input: WINDOW, output: 5 } });
    await h.setConfig({ ...providerSettings('openai', server), contextWindowTokens: WINDOW });
    server.script = [{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'big.log' } }] }];
    const s = await h.prompt('Read logs/big.log');
    expect(s.status).to.equal('error');
    // The retry after cutting the page to its head overflows too: the error says so, and what to do.
    expect(s.lastError).to.match(new RegExp(`^The conversation is still longer than the model's context window after cutting 1 tool result\\(s\\) to 2 KiB \\(.*reported ${WINDOW} input tokens, all of agent\\.contextWindowTokens \\(${WINDOW}\\).*a silent overflow\\)\\)\\. To continue: `));
    expect(server.requests).to.have.length(3);
    await h.setConfig({ contextWindowTokens: null });
  });
});

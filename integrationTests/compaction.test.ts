// Compaction on a real Harper through the real SDKs: a server that rejects any request over 160 KB (OpenAI's, Anthropic's,
// Bedrock's own envelopes) and reports no window; one session, one prompt after another, each reading three pages of a
// log. Without compaction the session dies at prompt 22 (the measure); with it every prompt completes and the
// requests stay bounded. Then the summary call's failures (overflow, 500, a cut stream) and a cancel during it. The
// local provider's digest and compaction on demand: compactionLocal.test.ts (its own file, so a test lane runs it
// beside this one).
import { expect } from 'chai';
import { WORKING_STATE_HEADING } from '../agent/context/workingState.js';
import { isSummaryRequest, sessionReader } from './providerServer/pager.js';
import type { Provider, Recorded, Turn } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings, writeBigLog } from './recoveryScenarios.js';

const LIMIT = 160_000;
/** Prompts in each long session. */
const PROMPTS = 40;

describe('compaction: a session never dies of its length', function () {
  this.timeout(900_000);
  const suite = providerSuite((h) => writeBigLog(h.logsDir));

  /** `prompts` prompts in one session, each reading three pages; throws at the first that does not complete. */
  async function longSession(provider: Provider, prompts: number, config: Record<string, unknown> = {}, onSummary?: Parameters<typeof sessionReader>[3]) {
    const { h, server } = suite;
    server.reset([], LIMIT);
    server.responder = sessionReader('logs', 'big.log', 3, onSummary);
    expect((await h.setConfig({ ...providerSettings(provider, server), maxTurns: 20, ...config })).status).to.equal(200);
    let id: string | undefined;
    const started: number[] = [];
    for (let i = 0; i < prompts; i++) {
      started.push(server.requests.length);
      const r = await h.promptLight(`Go on reading logs/big.log (${i + 1}).`, id);
      id = r.session_id;
      if (r.status !== 'completed') throw new Error(`prompt ${i + 1} ended ${r.status}: ${r.lastError}`);
    }
    return { id: id!, requests: server.requests.slice(), started };
  }

  function bounded(provider: Provider, prompts: number, requests: Recorded[], started: number[]) {
    const first = requests.findIndex((r) => isSummaryRequest(r.neutral));
    expect(first, 'a compaction happened').to.be.greaterThan(0);
    const rejected = requests.filter((r) => r.rejected);
    expect(rejected.length, 'rejections').to.be.at.most(1);
    const after = requests.slice(first);
    for (const r of after) expect(r.bytes, 'after the first compaction').to.be.at.most(LIMIT);
    // Bounded, not growing: the ten prompts after the first compaction's, and the last ten, reach the same largest request
    // (give or take the digits of prompt numbers and line numbers, which grow: 1%).
    // The working state in the summary grows with the session up to its own budget (the prompts and notes, cut from the
    // middle once it is full): that growth aside.
    const turnsOf = (from: number, to: number) => requests.slice(started[from], to < started.length ? started[to] : requests.length).filter((r) => !isSummaryRequest(r.neutral));
    const stateOf = (r: Recorded) => {
      const text = r.neutral.messages[0]?.text ?? '';
      const at = text.indexOf(WORKING_STATE_HEADING);
      return at < 0 ? 0 : Buffer.byteLength(text.slice(at));
    };
    const largestOf = (rs: Recorded[]) => rs.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const p = started.findIndex((s) => s > first) - 1;
    const earlyRequest = largestOf(turnsOf(p + 1, p + 11));
    const lateRequest = largestOf(turnsOf(prompts - 10, prompts));
    const [early, late] = [earlyRequest.bytes, lateRequest.bytes];
    const grown = stateOf(lateRequest) - stateOf(earlyRequest);
    expect(late - grown, 'the largest request of the last ten prompts (less the working state\'s growth), against the ten after the first compaction').to.be.at.most(Math.ceil(early * 1.01));
    const tenthAfter = turnsOf(p + 1, prompts)[9]!.bytes;
    const summaries = requests.filter((r) => isSummaryRequest(r.neutral));
    const largest = Math.max(...requests.map((r) => r.bytes));
    console.log(
      `      ${provider}: ${prompts} prompts, ${requests.length} requests (${summaries.length} summary calls, ${summaries.reduce((n, r) => n + r.bytes, 0).toLocaleString('en-US')} bytes); first compaction in prompt ${p + 1}; ` +
        `${rejected.length} rejected; largest ${largest.toLocaleString('en-US')} bytes; largest of the ten prompts after the first compaction ${early.toLocaleString('en-US')}, of the last ten ${late.toLocaleString('en-US')}; ` +
        `request 10 after it ${tenthAfter.toLocaleString('en-US')}, the last ${requests.at(-1)!.bytes.toLocaleString('en-US')}; the working state grew ${grown.toLocaleString('en-US')} bytes to ${stateOf(lateRequest).toLocaleString('en-US')}`
    );
    return summaries.length;
  }

  // 40 prompts show what 300 did (the same compaction, again and again: a summary call every page or two); the bench's
  // long-session row goes to 1,000.
  it(`openai: ${PROMPTS} prompts of three pages each in one session, a 160 KB server: all complete, bounded, at most one rejection`, async () => {
    const { h } = suite;
    const { id, requests, started } = await longSession('openai', PROMPTS);
    const summaries = bounded('openai', PROMPTS, requests, started);
    const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
    // Every original message is still returned; the records hold the summaries the model saw.
    expect(s.messages.filter((m: any) => m.role === 'user')).to.have.length(PROMPTS);
    const records = s.messages.filter((m: any) => m.role === 'compaction');
    // One summary call per record, or one per part where the segment was too large for one call.
    const parts = records.map((r: any) => Number(/^summarized in (\d+) parts$/.exec(r.detail ?? '')?.[1] ?? 1));
    expect(parts.reduce((a: number, b: number) => a + b, 0)).to.equal(summaries);
    expect(parts.some((n: number) => n > 1), 'a segment summarized in parts').to.equal(true);
    for (const r of records) {
      expect(r.compactedBy).to.equal('model');
      expect(r.content).to.match(/^\[Summary of the earlier part of this session \(\d+ messages\), written by the model\. The messages after it follow whole\.\]\nInvestigating big\.log: read up to line \d+/);
    }
    const calls = (await h.op({ operation: 'list_agent_model_calls', session_id: id, limit: 10_000 })).body.calls;
    expect(calls.filter((c: any) => c.purpose === 'compaction')).to.have.length(summaries);
    expect(calls).to.have.length(requests.length);
  });

  // Anthropic's and Bedrock's SDKs, envelopes and usage through the same compactions: 24 prompts reach three or more
  // (the first in prompt 12); that requests stay bounded however long a session lives is the request module's, the
  // same for every provider, and the OpenAI session above shows it over 40.
  for (const provider of ['anthropic', 'bedrock'] as const) {
    it(`${provider}: 24 prompts in one session, a 160 KB server: all complete, three compactions or more, every request after the first within the limit, at most one rejection`, async () => {
      const { requests } = await longSession(provider, 24);
      const first = requests.findIndex((r) => isSummaryRequest(r.neutral));
      expect(first, 'a compaction happened').to.be.greaterThan(0);
      expect(requests.filter((r) => isSummaryRequest(r.neutral)).length, 'summary calls').to.be.at.least(3);
      expect(requests.filter((r) => r.rejected).length, 'rejections').to.be.at.most(1);
      for (const r of requests.slice(first)) expect(r.bytes, 'after the first compaction').to.be.at.most(LIMIT);
      console.log(`      ${provider}: 24 prompts, ${requests.length} requests, ${requests.filter((r) => isSummaryRequest(r.neutral)).length} summary calls, largest after the first compaction ${Math.max(...requests.slice(first).map((r) => r.bytes)).toLocaleString('en-US')} bytes`);
    });
  }

  const failures: [string, Turn, string][] = [
    ['an overflow', { contextError: true }, 'context_window'],
    ['a 500', { error: { status: 500, body: { error: { message: 'The server had an error while processing your request.', type: 'server_error' } } } }, 'server'],
    ['a stream cut mid-answer', { cutAfter: 'Investigating big.log: read up' }, 'network'],
  ];
  for (const [what, turn, errorClass] of failures) {
    it(`a summary call answered with ${what} falls back to the digest; the prompt completes; the call log shows the failed call`, async () => {
      const { h } = suite;
      // A 40,000-token window: pages sized to it (about 18 KB: agent/context/window.ts), a compaction within six prompts.
      const { id } = await longSession('openai', 6, { contextWindowTokens: 40_000 }, () => turn);
      const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
      const record = s.messages.find((m: any) => m.role === 'compaction');
      expect(record.compactedBy).to.equal('digest');
      expect(record.detail).to.match(/^the summary call failed: /);
      expect(record.content).to.match(/\nDigest \(deterministic, written without the model\):\n- read_file \{"root":"logs","path":"big\.log"\} -> \d{1,2},\d{3} bytes/);
      expect(record.content).to.contain("\n=== Working state (rebuilt at every compaction from the whole session) ===\nThe operator's prompts, word for word, oldest first:\n1. [");
      const calls = (await h.op({ operation: 'list_agent_model_calls', session_id: id })).body.calls;
      const failed = calls.filter((c: any) => c.purpose === 'compaction');
      expect(failed.length).to.be.at.least(1);
      expect(failed[0].errorClass).to.equal(errorClass);
      expect(s.status).to.equal('completed');
    });
  }

  it('a cancel during the summary call leaves no compaction written; the next prompt works and compacts', async () => {
    const { h, server } = suite;
    let hold = true;
    const reader = sessionReader('logs', 'big.log', 3, () => (hold ? { hang: true } : undefined));
    server.reset([], LIMIT);
    server.responder = reader;
    expect((await h.setConfig({ ...providerSettings('openai', server), maxTurns: 20, contextWindowTokens: 40_000 })).status).to.equal(200);
    let id: string | undefined;
    for (let i = 0; i < 6 && !server.requests.some((r) => isSummaryRequest(r.neutral)); i++) {
      const r = await h.op({ operation: 'agent_prompt', message: `Go on reading logs/big.log (${i + 1}).`, ...(id ? { session_id: id } : {}) });
      id = r.body.session_id;
      for (let k = 0; k < 400; k++) {
        if (server.requests.some((q) => isSummaryRequest(q.neutral))) break;
        const row = await h.op({ operation: 'search_by_id', database: 'agent', table: 'AgentSession', ids: [id], get_attributes: ['status'] });
        if (row.body[0].status !== 'running') break;
        await new Promise((res) => setTimeout(res, 25));
      }
    }
    expect(server.requests.some((r) => isSummaryRequest(r.neutral)), 'a summary call is held').to.equal(true);
    const before = (await h.row(id!)).messages.length;
    const cancelled = await h.op({ operation: 'cancel_agent_run', session_id: id });
    expect([cancelled.status, cancelled.body.status]).to.deep.equal([200, 'aborted']);
    await new Promise((res) => setTimeout(res, 300));
    const row = await h.row(id!);
    expect([row.status, row.lastError]).to.deep.equal(['aborted', 'Cancelled with cancel_agent_run.']);
    expect(row.messages).to.have.length(before);
    expect(row.messages.some((m: any) => m.role === 'compaction')).to.equal(false);
    hold = false;
    const next = await h.promptLight('Go on reading logs/big.log.', id);
    expect([next.status, next.lastError]).to.deep.equal(['completed', null]);
    expect((await h.row(id!)).messages.filter((m: any) => m.role === 'compaction')).to.have.length.at.least(1);
  });
});

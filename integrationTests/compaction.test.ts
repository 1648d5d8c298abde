// Compaction on a real Harper through the real SDKs: a server that rejects any request over 160 KB (OpenAI's, Anthropic's,
// Bedrock's own envelopes) and reports no window; one session, one prompt after another, each reading three pages of a
// log. Without compaction the session dies at prompt 22 (the measure); with it every prompt completes and the
// requests stay bounded. Then the summary call's failures (overflow, 500, a cut stream) and a cancel during it, the
// local provider's digest, and compaction on demand through the operations API and the CLI.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { isSummaryRequest, sessionReader } from './providerServer/pager.js';
import type { Provider, Recorded, Turn } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings, writeBigLog } from './recoveryScenarios.js';

const LIMIT = 160_000;
const run = promisify(execFile);

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
    const turnsOf = (from: number, to: number) => requests.slice(started[from], to < started.length ? started[to] : requests.length).filter((r) => !isSummaryRequest(r.neutral)).map((r) => r.bytes);
    const p = started.findIndex((s) => s > first) - 1;
    const early = Math.max(...turnsOf(p + 1, p + 11));
    const late = Math.max(...turnsOf(prompts - 10, prompts));
    expect(late, 'the largest request of the last ten prompts, against the ten after the first compaction').to.be.at.most(Math.ceil(early * 1.01));
    const tenthAfter = turnsOf(p + 1, prompts)[9]!;
    const summaries = requests.filter((r) => isSummaryRequest(r.neutral));
    const largest = Math.max(...requests.map((r) => r.bytes));
    console.log(
      `      ${provider}: ${prompts} prompts, ${requests.length} requests (${summaries.length} summary calls, ${summaries.reduce((n, r) => n + r.bytes, 0).toLocaleString('en-US')} bytes); first compaction in prompt ${p + 1}; ` +
        `${rejected.length} rejected; largest ${largest.toLocaleString('en-US')} bytes; largest of the ten prompts after the first compaction ${early.toLocaleString('en-US')}, of the last ten ${late.toLocaleString('en-US')}; ` +
        `request 10 after it ${tenthAfter.toLocaleString('en-US')}, the last ${requests.at(-1)!.bytes.toLocaleString('en-US')}`
    );
    return summaries.length;
  }

  it('openai: 300 prompts of three pages each in one session, a 160 KB server: all complete, bounded, at most one rejection', async () => {
    const { h } = suite;
    const { id, requests, started } = await longSession('openai', 300);
    const summaries = bounded('openai', 300, requests, started);
    const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
    // Every original message is still returned; the records hold the summaries the model saw.
    expect(s.messages.filter((m: any) => m.role === 'user')).to.have.length(300);
    const records = s.messages.filter((m: any) => m.role === 'compaction');
    // One summary call per record, or one per part where the segment was too large for one call.
    const parts = records.map((r: any) => Number(/^summarized in (\d+) parts$/.exec(r.detail ?? '')?.[1] ?? 1));
    expect(parts.reduce((a: number, b: number) => a + b, 0)).to.equal(summaries);
    expect(parts.some((n: number) => n > 1), 'a segment summarized in parts').to.equal(true);
    for (const r of records) {
      expect(r.compactedBy).to.equal('model');
      expect(r.content).to.match(/^\[Summary of messages #0-#\d+ of this session, written by the model\. The messages after it follow whole\.\]\nInvestigating big\.log: read up to line \d+/);
    }
    const calls = (await h.op({ operation: 'list_agent_model_calls', session_id: id, limit: 10_000 })).body.calls;
    expect(calls.filter((c: any) => c.purpose === 'compaction')).to.have.length(summaries);
    expect(calls).to.have.length(requests.length);
  });

  for (const provider of ['anthropic', 'bedrock'] as const) {
    it(`${provider}: 60 prompts in one session, a 160 KB server: all complete, bounded, at most one rejection`, async () => {
      const { requests, started } = await longSession(provider, 60);
      bounded(provider, 60, requests, started);
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
      const { id } = await longSession('openai', 4, { contextWindowTokens: 40_000 }, () => turn);
      const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
      const record = s.messages.find((m: any) => m.role === 'compaction');
      expect(record.compactedBy).to.equal('digest');
      expect(record.detail).to.match(/^the summary call failed: /);
      expect(record.content).to.match(/\nDigest \(deterministic, written without the model\):\n#0 prompt: Go on reading logs\/big\.log \(1\)\.\n#1 read_file \{"root":"logs","path":"big\.log"\} -> #2 3\d,\d{3} bytes/);
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

  it('local: 300 prompts of three pages in one session compact by digest, and every request stays within the budget', async () => {
    const { h } = suite;
    // Three pages at the default cap: about 96 KB.
    writeFileSync(path.join(h.logsDir, 'three.log'), Array.from({ length: 1200 }, (_, i) => `2026-12-04T10:00:00.000Z [http/1] [${i % 100 === 0 ? 'error' : 'info'}]: request ${i + 1} ${i % 100 === 0 ? 'ERROR upstream timed out' : 'served'}\n`).join('').padEnd(96_000, '.'));
    expect((await h.setConfig({ provider: 'local', contextWindowTokens: 56_000, maxTurns: 50 })).status).to.equal(200);
    let id: string | undefined;
    for (let i = 0; i < 300; i++) {
      const r = await h.promptLight('summarize logs/three.log', id);
      id = r.session_id;
      if (r.status !== 'completed') throw new Error(`prompt ${i + 1} ended ${r.status}: ${r.lastError}`);
    }
    const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
    const records = s.messages.filter((m: any) => m.role === 'compaction');
    expect(records.length).to.be.greaterThan(10);
    for (const r of records) expect([r.compactedBy, r.detail]).to.deep.equal(['digest', 'the local backend is not a model']);
    expect(s.messages.filter((m: any) => m.role === 'user')).to.have.length(300);
    // Every answer covers the whole file, compacted or not: the local backend's newest note carries its tally.
    const answers = s.messages.filter((m: any) => m.role === 'assistant' && !m.toolCalls?.length).map((m: any) => m.content);
    expect(answers).to.have.length(300);
    expect(answers[0]).to.match(/^logs\/three\.log: 1201 lines, 96000 bytes, read in 3 page\(s\); 96000 bytes of text seen\. 12 line\(s\) mention "error"; the first 5:\n- line 1: /);
    expect(new Set(answers).size).to.equal(1);
    expect(s.estimatedContextTokens).to.be.at.most(s.contextBudget.tokens);
    console.log(`      local: 300 prompts, ${s.messages.length} messages stored, ${records.length} digests; the next request about ${s.estimatedContextTokens.toLocaleString('en-US')} tokens of a ${s.contextBudget.tokens.toLocaleString('en-US')}-token budget`);
    expect((await h.op({ operation: 'list_agent_model_calls', session_id: id })).body.calls).to.have.length(0);
  });

  it('compact_agent_session and `harper-agent compact` compact on demand; get_agent_session and `show` mark the boundary', async () => {
    const { h } = suite;
    expect((await h.setConfig({ provider: 'local', contextWindowTokens: null, maxTurns: 50 })).status).to.equal(200);
    const first = await h.promptLight('summarize logs/big.log');
    expect(first.status).to.equal('completed');
    const answer = await h.op({ operation: 'compact_agent_session', session_id: first.session_id });
    expect(answer.status).to.equal(200);
    const stored = (await h.row(first.session_id)).messages;
    const index = stored.length - 1;
    expect(answer.body.compaction).to.include({ index, role: 'compaction', keepFrom: index, compactedBy: 'digest', detail: 'the local backend is not a model', boundary: `the model sees a deterministic digest below instead of messages #0-#${index - 1} (the local backend is not a model)` });
    expect(answer.body.status).to.equal('completed');
    expect(stored[index]).to.include({ role: 'compaction', keepFrom: index, compactedBy: 'digest', content: answer.body.compaction.content });
    const again = await h.op({ operation: 'compact_agent_session', session_id: first.session_id });
    expect([again.status, again.body.error]).to.deep.equal([409, `session ${first.session_id} has nothing to compact since its last compaction`]);
    expect((await h.op({ operation: 'compact_agent_session', session_id: 'no-such-session' })).status).to.equal(404);
    expect((await h.op({ operation: 'compact_agent_session' })).status).to.equal(400);

    // The next prompt reads on from the digest; then the CLI compacts again and `show` prints both boundaries.
    expect((await h.promptLight('summarize logs/big.log', first.session_id)).status).to.equal('completed');
    const env = { ...process.env, HARPER_AGENT_URL: h.harper.opsUrl, HARPER_AGENT_USER: h.harper.admin.username, HARPER_AGENT_PASSWORD: h.harper.admin.password };
    const cli = path.resolve('dist/cli/main.js');
    const compacted = await run(process.execPath, [cli, 'compact', first.session_id], { env });
    expect(compacted.stdout).to.match(new RegExp(`^session ${first.session_id}: the model sees a deterministic digest below instead of messages #0-#\\d+ \\(the local backend is not a model\\)\\n  ══ #\\d+ compaction · [\\d,]+ bytes · `));
    const shown = await run(process.execPath, [cli, 'show', first.session_id], { env });
    const boundaries = shown.stdout.split('\n').filter((l) => l.startsWith('  ══ #'));
    expect(boundaries).to.have.length(2);
    expect(boundaries[0]).to.equal(`  ══ #${index} compaction · ${Buffer.byteLength(answer.body.compaction.content).toLocaleString('en-US')} bytes · ${answer.body.compaction.boundary} ══`);
  });
});

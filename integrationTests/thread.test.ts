// A long investigation keeps its thread through compaction, on a real Harper through the real OpenAI SDK, against a
// server that rejects any request over 160 KB. The scripted model remembers nothing between requests: it acts only on
// what each request holds. Its first prompt finds a buried exception (grep_files) and rules out a cause; every later
// prompt reads on through a 2 MB log, six pages a prompt. After at least three compactions, what the model is sent
// still holds the first prompt word for word, the finding, what was ruled out and the cursor of the read, and the
// reads go on from that cursor to the end of the file, never from line 1 again. Twice: with a summarizer that knows
// nothing (so the working state alone carries the thread), and with the summary call failing (the digest path).
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { usd } from '../agent/modelCalls.js';
import { isSummaryRequest, threadFollower } from './providerServer/pager.js';
import type { Turn } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const LIMIT = 160_000;
const FILE = 'thread.log';
const NEEDLE = 'Connection pool exhausted';
const NEEDLE_LINE = 41_873;
const LINES = 45_000;
const FIRST_PROMPT = 'Requests to /api/orders time out since 02:00. Find the cause in logs/thread.log, then read the whole log for anything else.';

function writeThreadLog(logsDir: string): void {
  const lines: string[] = [];
  for (let i = 1; i <= LINES; i++) {
    lines.push(i === NEEDLE_LINE ? `2026-12-05T02:${String(i % 60).padStart(2, '0')}:00.000Z [error] db: ${NEEDLE} (max 10) for GET /api/orders` : `2026-12-05T02:${String(i % 60).padStart(2, '0')}:00.000Z [info] GET /api/items/${i} 200 ${i % 97} ms`);
  }
  writeFileSync(path.join(logsDir, FILE), lines.join('\n') + '\n');
}

describe('a long investigation keeps its thread through compaction', function () {
  this.timeout(300_000);
  const suite = providerSuite((h) => writeThreadLog(h.logsDir));

  const paths: [string, Turn][] = [
    ['a summarizer that knows nothing', { text: 'An investigation of the instance is under way.' }],
    ['the digest (the summary call fails)', { error: { status: 500, body: { error: { message: 'The server had an error while processing your request.', type: 'server_error' } } } }],
  ];
  for (const [what, summary] of paths) {
    it(`through ${what}: after three compactions the request holds the first prompt, the finding and the read's cursor; the reads go on to the end from it`, async () => {
      const { h, server } = suite;
      server.reset([], LIMIT);
      server.responder = threadFollower('logs', FILE, 6, NEEDLE, summary);
      expect((await h.setConfig({ ...providerSettings('openai', server), maxTurns: 20 })).status).to.equal(200);
      let id: string | undefined;
      let answer = '';
      for (let i = 0; i < 40 && !answer.startsWith('Reached the end'); i++) {
        const r = await h.promptLight(i === 0 ? FIRST_PROMPT : 'Go on reading logs/thread.log.', id);
        id = r.session_id;
        expect(r.status, `prompt ${i + 1}: ${r.lastError}`).to.equal('completed');
        answer = (await h.op({ operation: 'get_agent_session', session_id: id })).body.messages.at(-1).content;
      }
      expect(answer).to.equal(`Reached the end of ${FILE}: ${LINES} lines.`);

      const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
      const records = s.messages.filter((m: any) => m.role === 'compaction');
      expect(records.length, 'compactions').to.be.at.least(3);
      expect(records.every((r: any) => r.compactedBy === ('error' in summary ? 'digest' : 'model'))).to.equal(true);

      // Every read went on from the page before it: the first from line 1, then never from the start again.
      const reads = s.messages.flatMap((m: any) => (m.toolCalls ?? []).filter((c: any) => c.name === 'read_file').map((c: any) => c.arguments));
      const pages = s.messages.filter((m: any) => m.role === 'tool' && m.name === 'read_file').map((m: any) => /"nextLine":(\d+),"nextOffset":(\d+)/.exec(m.content));
      expect(reads[0]).to.deep.equal({ root: 'logs', path: FILE });
      for (let i = 1; i < reads.length; i++) {
        expect(reads[i], `read ${i + 1}`).to.deep.equal({ root: 'logs', path: FILE, startLine: Number(pages[i - 1]![1]), offset: Number(pages[i - 1]![2]) });
      }

      // What the model saw after the third compaction, and in the last request: the thread, word for word.
      const turns = server.requests.filter((r) => r.status === 200 && !isSummaryRequest(r.neutral));
      const third = server.requests.indexOf(server.requests.filter((r) => isSummaryRequest(r.neutral))[2]!);
      const after = turns.find((r) => server.requests.indexOf(r) > third)!;
      for (const request of [after, turns.at(-1)!]) {
        const summaryMessage = request.neutral.messages[0]!.text;
        expect(summaryMessage).to.match(/^\[Summary of the earlier part of this session \(\d+ messages\)/);
        expect(summaryMessage).to.contain(`1. [`).and.to.contain(`] ${FIRST_PROMPT}\n`);
        expect(summaryMessage).to.contain(`- answer: Found "${NEEDLE}" at line ${NEEDLE_LINE} of ${FILE}. Ruled out: the disk (usage 41%, far from full).`);
        expect(summaryMessage).to.match(new RegExp(`\\n- read_file \\{"root":"logs","path":"${FILE.replace('.', '\\.')}","startLine":\\d+,"offset":\\d+\\} reads on after line \\d+`));
      }
      console.log(`      ${what}: ${reads.length} pages in ${s.messages.filter((m: any) => m.role === 'user').length} prompts, ${records.length} compactions, ${server.requests.length} requests`);
    });
  }

  it('a model that repeats one read is told once, at the third, and stopped before the sixth; lastError says so and what the calls cost', async () => {
    const { h, server } = suite;
    server.reset([], LIMIT);
    server.responder = () => ({ toolCalls: [{ name: 'tail_file', arguments: { root: 'logs', path: FILE, lines: 3 } }] });
    const settings = providerSettings('openai', server);
    expect((await h.setConfig({ ...settings, maxTurns: 20, prices: { [settings.model]: { inputPerMTokens: 1, outputPerMTokens: 2 } } })).status).to.equal(200);
    const r = await h.promptLight('What are the newest lines of logs/thread.log?');
    expect(r.status).to.equal('error');
    const s = (await h.op({ operation: 'get_agent_session', session_id: r.session_id })).body;
    const results = s.messages.filter((m: any) => m.role === 'tool');
    expect(results.map((m: any) => JSON.parse(m.content).notice !== undefined)).to.deep.equal([false, false, true, false, false]);
    const calls = (await h.op({ operation: 'list_agent_model_calls', session_id: r.session_id })).body;
    expect(calls.calls).to.have.length(6);
    expect(r.lastError).to.equal(
      `The model repeated the same call, tail_file {"root":"logs","path":"${FILE}","lines":3}, 6 times in a row after being told its results do not change, so the run was stopped before running it again. This prompt's 6 model request(s) cost ${usd(calls.totals.costUsd)} (list_agent_model_calls). To go on: send a prompt that says what to do differently (another file, a cursor, a narrower question).`
    );
  });
});

// A small local model: agent.contextWindowTokens 8,192 or 4,096 and nothing else changed, through the Ollama backend
// and through the OpenAI SDK (an OpenAI-compatible server such as llama.cpp), on a real Harper, against a server that
// counts each prompt's tokens with a real BPE tokenizer and rejects any request whose prompt and answer tokens pass the
// window. One prompt reads a 200 KB log to its end: the agent shares the window out (agent/context/window.ts: an
// eighth for the answer, the core tools with short descriptions, pages sized to the budget), compacts as it goes, and
// goes on from the cursor the request holds. No request is rejected, none passes the window, no page is read twice.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { isSummaryRequest, windowReader } from './providerServer/pager.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const FILE = 'window.log';
const LINES = 2_000;

function writeWindowLog(logsDir: string): void {
  const lines: string[] = [];
  for (let i = 1; i <= LINES; i++) lines.push(`2026-12-06T03:${String(i % 60).padStart(2, '0')}:${String(i % 59).padStart(2, '0')}.${String(i % 997).padStart(3, '0')}Z [info] GET /api/orders/${i} 200 ${i % 89} ms`);
  writeFileSync(path.join(logsDir, FILE), lines.join('\n') + '\n');
}

describe('a small local model reads a 200 KB log to its end', function () {
  this.timeout(300_000);
  const suite = providerSuite((h) => writeWindowLog(h.logsDir));

  const cases = [
    ['ollama', 'llama3.1:8b', 8192],
    ['openai', 'qwen2.5-7b-instruct', 8192],
    ['ollama', 'llama3.1:8b', 4096],
    ['openai', 'qwen2.5-7b-instruct', 4096],
  ] as const;
  for (const [provider, model, window] of cases) {
    it(`${provider} (${model}), agent.contextWindowTokens ${window}, agent.maxTokens unset: every request within the window, none rejected, every page read once`, async () => {
      const { h, server } = suite;
      server.reset();
      server.tokenLimit = window;
      server.responder = windowReader('logs', FILE);
      const set = await h.setConfig({ ...providerSettings(provider, server), model, contextWindowTokens: window, maxTokens: null, maxTurns: 500 });
      expect(set.status, JSON.stringify(set.body)).to.equal(200);

      const s = await h.promptLight(`Read logs/${FILE} to its end.`, undefined, 240_000);
      const session = (await h.op({ operation: 'get_agent_session', session_id: s.session_id })).body;
      expect(s.status, s.lastError ?? undefined).to.equal('completed');
      expect(session.messages.at(-1).content).to.equal(`Reached the end of ${FILE}: ${LINES} lines.`);

      // Nothing rejected, nothing over the window, and the answer asked for is an eighth of it.
      expect(server.requests.filter((r) => r.rejected)).to.deep.equal([]);
      const largest = Math.max(...server.requests.map((r) => r.tokens! + r.maxOut!));
      expect(largest).to.be.at.most(window);
      expect(new Set(server.requests.filter((r) => !isSummaryRequest(r.neutral)).map((r) => r.maxOut))).to.deep.equal(new Set([window / 8]));
      // The core tools only, with short descriptions: the fixed part leaves the window room.
      const turn = server.requests.find((r) => !isSummaryRequest(r.neutral))!;
      expect(turn.neutral.tools).to.include.members(['read_file', 'tail_file', 'list_dir', 'grep_files']).and.not.include('write_file');

      // Every read went on from the page before it: the first from line 1, never from the start again.
      const reads = session.messages.flatMap((m: any) => (m.toolCalls ?? []).filter((c: any) => c.name === 'read_file').map((c: any) => c.arguments));
      const pages = session.messages.filter((m: any) => m.role === 'tool').map((m: any) => /"nextLine":(\d+),"nextOffset":(\d+)/.exec(m.content));
      expect(reads[0]).to.deep.equal({ root: 'logs', path: FILE });
      for (let i = 1; i < reads.length; i++) expect(reads[i], `read ${i + 1}`).to.deep.equal({ root: 'logs', path: FILE, startLine: Number(pages[i - 1]![1]), offset: Number(pages[i - 1]![2]) });
      const compactions = session.messages.filter((m: any) => m.role === 'compaction').length;
      console.log(`      ${provider} at ${window}: ${reads.length} pages, ${compactions} compactions, ${server.requests.length} requests, the largest ${largest} tokens with its answer`);
    });
  }

  it('set_agent_config refuses a window too small for any run, naming the key and the smallest that works', async () => {
    const { h, server } = suite;
    expect((await h.setConfig({ ...providerSettings('ollama', server), model: 'llama3.1:8b', contextWindowTokens: null, maxTokens: null })).status).to.equal(200);
    const tooSmall = await h.setConfig({ contextWindowTokens: 1024 });
    expect(tooSmall.status).to.equal(400);
    const m = /^agent\.contextWindowTokens 1024 is too small: the system prompt and the smallest tool list take about (\d+) tokens, and with an answer of 256 tokens \(an eighth of it\) they must fit in 40% of the rest, leaving room for a page and the transcript\. The smallest that works is (\d+)\.$/.exec(tooSmall.body.error);
    expect(m, tooSmall.body.error).to.not.equal(null);
    const smallest = Number(m![2]);
    // The value it names works, and the one below it does not; nothing of the refused change was stored.
    expect((await h.setConfig({ contextWindowTokens: smallest - 256 })).status).to.equal(400);
    expect((await h.op({ operation: 'get_agent_config' })).body.contextWindowTokens).to.equal(undefined);
    expect((await h.setConfig({ contextWindowTokens: smallest })).status).to.equal(200);
    // With agent.maxTokens set, the answer is what it says: a window that holds it less the fixed part's share.
    const big = await h.setConfig({ contextWindowTokens: 8192, maxTokens: 8000 });
    expect(big.status).to.equal(400);
    expect(big.body.error).to.match(/^agent\.contextWindowTokens 8192 is too small: .* with agent\.maxTokens 8000 .* The smallest that works is \d+ \(or lower agent\.maxTokens\)\.$/);
  });
});

// The pre-flight budget through Harper: a 12-turn investigation at a tight window sends no request over it when the
// budget is configured; without one, the provider rejects requests (and the agent learns from the first). The server
// counts each prompt's tokens with a real tokenizer (promptTokens) against a 25,000-token window; the agent counts a
// model it has no tokenizer for with the o200k stand-in (agent/tokenCount.ts).
import { expect } from 'chai';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { investigatorResponder } from './providerServer/pager.js';
import { ollamaShow } from './providerServer/server.js';
import { writeBigLog } from './recoveryScenarios.js';

const WINDOW = 25_000;
const TURNS = 12;

describe('pre-flight context budget', function () {
  const suite = providerSuite((h) => writeBigLog(h.logsDir));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  async function investigate(model: string, budget: boolean, discovery?: (path: string) => unknown, provider: 'openai' | 'ollama' = 'openai') {
    server.reset();
    server.tokenLimit = WINDOW;
    server.discovery = discovery;
    server.responder = investigatorResponder('logs', 'big.log', TURNS);
    // Compaction off: this measures the pre-flight alone (the scripted investigator counts its pages since the prompt,
    // which a compaction inside the prompt's turn would fold into a summary).
    await h.setConfig({ provider, baseUrl: provider === 'openai' ? `${server.url}/v1` : server.url, apiKey: 'k', maxRetries: 0, model, maxToolResultBytes: 65536, maxTokens: 1000, contextWindowTokens: budget ? WINDOW : null, compaction: false, workingSetBytes: 98304 });
    const s = await h.prompt(`Investigate logs/big.log, ${TURNS} pages.`);
    return { s, rejected: server.requests.filter((r) => r.rejected).length, requests: server.requests.length, largest: Math.max(...server.requests.map((r) => r.tokens! + r.maxOut!)) };
  }

  it(`${TURNS} turns in a ${WINDOW.toLocaleString('en-US')}-token window: 0 rejections with the budget configured, some without`, async () => {
    const on = await investigate(`pf-on-${Date.now()}`, true);
    const session = (await h.op({ operation: 'get_agent_session', session_id: on.s.session_id })).body;
    const off = await investigate(`pf-off-${Date.now()}`, false);
    console.log(`      with the budget: ${on.rejected} rejected of ${on.requests} requests (largest ${on.largest} tokens with its answer); without: ${off.rejected} rejected of ${off.requests}`);
    expect(on.s.status, on.s.lastError).to.equal('completed');
    expect(on.rejected).to.equal(0);
    expect(on.largest).to.be.at.most(WINDOW);
    expect(on.s.messages.filter((m: any) => m.role === 'tool')).to.have.length(TURNS);
    expect(off.rejected).to.be.greaterThan(0);
    expect(session.contextBudget).to.deep.equal({ tokens: WINDOW - 1000, source: `agent.contextWindowTokens (${WINDOW}) less agent.maxTokens (1000)` });
    // No tokenizer package knows a pf-… model; it runs on an OpenAI-compatible server: the stand-in counts it.
    expect(session.estimatedWith).to.match(/^gpt-tokenizer o200k_base × 1\.15 \(a stand-in: none for pf-on-\d+\)$/);
    expect(session.estimatedContextTokens).to.be.a('number').and.at.most(WINDOW - 1000);
  });

  // A model no catalog knows, on servers that report their window: vLLM in its model list, llama.cpp in /props.
  const servers = {
    vLLM: {
      discovery: (model: string) => (path: string) => (path === '/v1/models' ? { object: 'list', data: [{ id: model, object: 'model', owned_by: 'vllm', max_model_len: WINDOW }] } : undefined),
      gets: () => ['/v1/models'],
      source: 'GET /v1/models max_model_len',
    },
    'llama.cpp': {
      discovery: (model: string) => (path: string) =>
        path === '/v1/models' ? { object: 'list', data: [{ id: model, object: 'model', owned_by: 'llamacpp', meta: { n_ctx_train: 131072 } }] } : path === '/props' ? { default_generation_settings: { n_ctx: WINDOW }, total_slots: 1 } : undefined,
      gets: () => ['/v1/models', '/props'],
      source: 'GET /props n_ctx (llama.cpp)',
    },
    Ollama: {
      discovery: (model: string) => (asked: string) => (asked === `/api/show ${model}` ? ollamaShow(WINDOW) : undefined),
      gets: (model: string) => [`/api/show ${model}`],
      source: 'POST /api/show model_info llama.context_length',
      provider: 'ollama' as const,
    },
  };
  for (const [name, kind] of Object.entries(servers) as [string, { discovery: (m: string) => (p: string) => unknown; gets: (m: string) => string[]; source: string; provider?: 'ollama' }][]) {
    it(`a model never seen on ${name}: the window the server reports, asked once, drives the pre-flight (0 rejections); listed and forgotten`, async () => {
      const model = `pf-${name}-${Date.now()}`;
      const run = await investigate(model, false, kind.discovery(model), kind.provider);
      expect(run.s.status, run.s.lastError).to.equal('completed');
      expect(run.rejected).to.equal(0);
      expect(run.largest).to.be.at.most(WINDOW);
      expect(server.discoveries).to.deep.equal(kind.gets(model)); // once for 20 turns
      if (kind.provider === 'ollama') for (const r of server.requests) expect([r.body.truncate, r.body.options.num_ctx]).to.deep.equal([false, WINDOW]);
      const session = (await h.op({ operation: 'get_agent_session', session_id: run.s.session_id })).body;
      expect(session.contextBudget).to.deep.equal({ tokens: WINDOW - 1000, source: `the server (${kind.source}) (${WINDOW}) less agent.maxTokens (1000)` });
      const baseUrl = kind.provider === 'ollama' ? server.url : `${server.url}/v1`;
      const key = `${kind.provider ?? 'openai'}|${baseUrl}|${model}`;
      const listed = (await h.op({ operation: 'list_agent_context_limits' })).body.limits.find((r: any) => r.key === key);
      expect(listed).to.deep.include({ provider: kind.provider ?? 'openai', baseUrl, model, windowTokens: WINDOW, windowSource: kind.source });
      expect((await h.op({ operation: 'forget_agent_context_limits', keys: [key] })).body).to.deep.equal({ forgotten: [key] });
      expect((await h.op({ operation: 'list_agent_context_limits' })).body.limits.map((r: any) => r.key)).to.not.include(key);
    });
  }
});

// The pre-flight budget through Harper: a 20-turn investigation at a tight limit sends no request over it when the
// budget is configured; without one, the provider rejects requests (and the agent learns from the first).
import { expect } from 'chai';
import type { TestHarper } from './harness.js';
import { providerSuite } from './providerSuite.js';
import { investigatorResponder } from './providerServer/pager.js';
import { ollamaShow } from './providerServer/server.js';
import { writeBigLog } from './recoveryScenarios.js';

const LIMIT = 100_000; // bytes; the server counts a token as 4 bytes, so the window is 25,000 tokens
const TURNS = 20;

describe('pre-flight context budget', function () {
  const suite = providerSuite((h) => writeBigLog(h.logsDir));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  async function investigate(model: string, budget: boolean, discovery?: (path: string) => unknown, provider: 'openai' | 'ollama' = 'openai') {
    server.reset([], LIMIT);
    server.discovery = discovery;
    server.responder = investigatorResponder('logs', 'big.log', TURNS);
    // Compaction off: this measures the pre-flight alone (the scripted investigator counts its pages since the prompt,
    // which a compaction inside the prompt's turn would fold into a summary).
    await h.setConfig({ provider, baseUrl: provider === 'openai' ? `${server.url}/v1` : server.url, apiKey: 'k', maxRetries: 0, model, maxToolResultBytes: 65536, maxTokens: 1000, contextWindowTokens: budget ? LIMIT / 4 : null, compaction: false, workingSetBytes: 98304 });
    const s = await h.prompt('Investigate logs/big.log, 20 pages.');
    return { s, rejected: server.requests.filter((r) => r.rejected).length, requests: server.requests.length, largest: Math.max(...server.requests.map((r) => r.bytes)) };
  }

  it(`${TURNS} turns at a ${LIMIT / 1000} KB limit: 0 rejections with the budget configured, some without`, async () => {
    const on = await investigate(`pf-on-${Date.now()}`, true);
    const session = (await h.op({ operation: 'get_agent_session', session_id: on.s.session_id })).body;
    const off = await investigate(`pf-off-${Date.now()}`, false);
    console.log(`      with the budget: ${on.rejected} rejected of ${on.requests} requests (largest ${on.largest} bytes); without: ${off.rejected} rejected of ${off.requests}`);
    expect(on.s.status, on.s.lastError).to.equal('completed');
    expect(on.rejected).to.equal(0);
    expect(on.largest).to.be.at.most(LIMIT);
    expect(on.s.messages.filter((m: any) => m.role === 'tool')).to.have.length(TURNS);
    expect(off.rejected).to.be.greaterThan(0);
    expect(session.contextBudget).to.deep.equal({ tokens: LIMIT / 4 - 1000, source: `agent.contextWindowTokens (${LIMIT / 4}) less agent.maxTokens (1000)` });
    expect(session.estimatedWith).to.equal('bytes / 3'); // no tokenizer package knows a pf-… model
    expect(session.estimatedContextTokens).to.be.a('number').and.at.most(LIMIT / 4 - 1000 + 12_000);
  });

  // A model no catalog knows, on servers that report their window: vLLM in its model list, llama.cpp in /props.
  const servers = {
    vLLM: {
      discovery: (model: string) => (path: string) => (path === '/v1/models' ? { object: 'list', data: [{ id: model, object: 'model', owned_by: 'vllm', max_model_len: LIMIT / 4 }] } : undefined),
      gets: () => ['/v1/models'],
      source: 'GET /v1/models max_model_len',
    },
    'llama.cpp': {
      discovery: (model: string) => (path: string) =>
        path === '/v1/models' ? { object: 'list', data: [{ id: model, object: 'model', owned_by: 'llamacpp', meta: { n_ctx_train: 131072 } }] } : path === '/props' ? { default_generation_settings: { n_ctx: LIMIT / 4 }, total_slots: 1 } : undefined,
      gets: () => ['/v1/models', '/props'],
      source: 'GET /props n_ctx (llama.cpp)',
    },
    Ollama: {
      discovery: (model: string) => (asked: string) => (asked === `/api/show ${model}` ? ollamaShow(LIMIT / 4) : undefined),
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
      expect(run.largest).to.be.at.most(LIMIT);
      expect(server.discoveries).to.deep.equal(kind.gets(model)); // once for 20 turns
      if (kind.provider === 'ollama') for (const r of server.requests) expect([r.body.truncate, r.body.options.num_ctx]).to.deep.equal([false, LIMIT / 4]);
      const session = (await h.op({ operation: 'get_agent_session', session_id: run.s.session_id })).body;
      expect(session.contextBudget).to.deep.equal({ tokens: LIMIT / 4 - 1000, source: `the server (${kind.source}) (${LIMIT / 4}) less agent.maxTokens (1000)` });
      const baseUrl = kind.provider === 'ollama' ? server.url : `${server.url}/v1`;
      const key = `${kind.provider ?? 'openai'}|${baseUrl}|${model}`;
      const listed = (await h.op({ operation: 'list_agent_context_limits' })).body.limits.find((r: any) => r.key === key);
      expect(listed).to.deep.include({ provider: kind.provider ?? 'openai', baseUrl, model, windowTokens: LIMIT / 4, windowSource: kind.source });
      expect((await h.op({ operation: 'forget_agent_context_limits', keys: [key] })).body).to.deep.equal({ forgotten: [key] });
      expect((await h.op({ operation: 'list_agent_context_limits' })).body.limits.map((r: any) => r.key)).to.not.include(key);
    });
  }
});

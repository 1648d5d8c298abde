import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ContextLimits, contextBudget, estimateTokens } from '../agent/contextBudget.js';
import { requestMessages } from '../agent/compaction.js';
import { catalogWindow, NEWER_THAN_CATALOG } from '../agent/modelCatalog.js';
import { memoized, tokenCounter } from '../agent/tokenCount.js';
import { countTokens } from 'gpt-tokenizer/model/gpt-4.1-mini';
import { toOpenAIMessages } from 'harper-agent-openai/backend';
import { getContextWindow } from 'tokenlens';
import { defaultConfig } from '../agent/agent.js';
import { SYSTEM_PROMPT } from '../agent/systemPrompt.js';
import { activeRun } from '../agent/runs.js';
import { createOperations } from '../agent/operations.js';
import { OpenAIBackend } from 'harper-agent-openai/backend';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { ModelError, providerErrors } from '../resources/models/backendHelpers.js';
import type { GenerateInput, ToolMessage } from '../resources/models/types.js';
import { calls, harness, text, type Harness } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };
async function prompt(h: Harness, message: string, session_id?: string) {
  const ops = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('no config store in this test')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: new Date(0).toISOString() } });
  const r = (await ops.agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return (await h.store.get(r.session_id))!;
}

describe('context budget', () => {
  it('the estimate is never below the byte-derived count of real request bodies (bytes / 4)', async () => {
    const server = await new ProviderServer().start();
    try {
      const backend = new OpenAIBackend({ baseUrl: `${server.url}/v1`, apiKey: 'k', requestTimeoutMs: 5000, maxRetries: 0, errors: providerErrors });
      const samples: GenerateInput[] = [
        { system: 'sys', model: 'm', maxTokens: 10, tools: [], messages: [{ role: 'user', content: 'hi' }] },
        { system: 'sys'.repeat(300), model: 'm', maxTokens: 10, tools: [{ name: 't', description: 'd'.repeat(500), parameters: { type: 'object' } }], messages: [{ role: 'user', content: 'é€😀'.repeat(3000) }] },
        { system: 's', model: 'm', maxTokens: 10, tools: [], messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 't', arguments: { q: '"\\'.repeat(100) } }] }, { role: 'tool', toolCallId: 'a', name: 't', content: '\u0001'.repeat(5000) }] },
      ];
      for (const input of samples) {
        server.reset([{ text: 'ok' }]);
        await backend.generate(input, new AbortController().signal);
        const trueCount = Math.ceil(server.requests[0]!.bytes / 4);
        expect(estimateTokens(input)).to.be.at.least(trueCount);
      }
    } finally {
      await server.close();
    }
  });

  it("a tokenizer for the models a package has one for (OpenAI's); none for others, or for ids that are not plain", async () => {
    const gpt = await tokenCounter('gpt-4.1-mini');
    expect(gpt!.name).to.equal('gpt-tokenizer gpt-4.1-mini');
    expect(gpt!.count('request 123 served in 45 ms')).to.equal(countTokens('request 123 served in 45 ms'));
    for (const model of ['claude-sonnet-4-5', 'llama3.1:8b', '../main', 'anthropic.claude-3-5-sonnet-20240620-v1:0']) expect(await tokenCounter(model), model).to.equal(undefined);
  });

  it("a counter tokenizes a long part once: a repeat is answered from its memo, short parts each time, the oldest dropped past the bound", () => {
    const seen: string[] = [];
    const count = memoized((text) => (seen.push(text), text.length), 4096);
    const [a, b, c] = ['a', 'b', 'c'].map((ch) => ch.repeat(2000));
    expect([count(a), count(b), count(a), count('short'), count('short')]).to.deep.equal([2000, 2000, 2000, 5, 5]);
    expect(seen).to.deep.equal([a, b, 'short', 'short']);
    // c takes the memo past 4,096 characters: the least recently used (b, since a was used after it) goes.
    count(c);
    count(a);
    count(b);
    expect(seen.slice(4)).to.deep.equal([c, b]);
  });

  it('with the tokenizer the estimate is over what OpenAI counts for a chat by at most 10%; bytes / 3 is under it on log text', async () => {
    const gpt = (await tokenCounter('gpt-4.1-mini'))!;
    const log = Array.from({ length: 600 }, (_, i) => `2026-12-02T10:00:${String(i % 60).padStart(2, '0')}.000Z [http/1] [info]: request ${i} served in ${i % 97} ms`).join('\n');
    const input: GenerateInput = {
      system: 'You investigate a Harper instance.',
      model: 'gpt-4.1-mini',
      maxTokens: 1000,
      tools: [{ name: 'read_file', description: 'Read a file a page at a time.', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
      messages: [
        { role: 'user', content: 'what failed?' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read_file', arguments: { path: 'hdb.log' } }] },
        { role: 'tool', toolCallId: 'c1', name: 'read_file', content: JSON.stringify({ path: 'hdb.log', content: log }) },
      ],
    };
    // OpenAI's own accounting for chat: each message's content and role plus 3, tools as their JSON, 3 to prime the reply.
    const wire = toOpenAIMessages(input);
    const openaiCount = wire.reduce((n, m) => n + 3 + countTokens(String(m.role)) + countTokens(typeof m.content === 'string' ? m.content : JSON.stringify((m as { tool_calls?: unknown }).tool_calls ?? '')), 3) + countTokens(JSON.stringify(input.tools));
    const counted = estimateTokens(input, gpt);
    const bytes = estimateTokens(input);
    expect(counted).to.be.at.least(openaiCount);
    expect(counted).to.be.at.most(Math.ceil(openaiCount * 1.1));
    // Why a tokenizer matters: log lines (timestamps, numbers) run near 2.2 bytes a token, so bytes / 3 counts low.
    expect(bytes).to.be.below(openaiCount);
  });

  it('get_agent_session says how the estimate was made: the tokenizer for an OpenAI model, bytes / 3 otherwise', async () => {
    const h = harness([text('hi')], { model: 'gpt-4.1-mini' });
    const s = await prompt(h, 'hello');
    const ops = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 't', startedAt: '' } });
    const view = (await ops.get_agent_session.handle({ session_id: s.session_id }, user)) as { estimatedWith: string; estimatedContextTokens: number };
    expect(view.estimatedWith).to.equal('gpt-tokenizer gpt-4.1-mini');
    expect(view.estimatedContextTokens).to.be.below(estimateTokens({ system: SYSTEM_PROMPT, tools: h.deps.tools.specs(), messages: requestMessages(s.messages) }));
    const other = harness([text('hi')], { model: 'llama3.1' });
    const s2 = await prompt(other, 'hello');
    const ops2 = createOperations({ ...other.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 't', startedAt: '' } });
    expect(((await ops2.get_agent_session.handle({ session_id: s2.session_id }, user)) as { estimatedWith: string }).estimatedWith).to.equal('bytes / 3');
  });

  const at = (model: string, baseUrl?: string) => ({ provider: 'openai', baseUrl, model });

  it('budget: the configured window, then the server, then the catalog, else none; a learned failure lowers it', async () => {
    const limits = new ContextLimits();
    const config = { ...defaultConfig(), maxTokens: 1000 };
    const server = async () => ({ tokens: 32_768, source: 'GET /v1/models max_model_len' });
    expect(await contextBudget({ ...config, contextWindowTokens: 20_000 }, at('x'), limits, server)).to.deep.equal({ tokens: 19_000, source: 'agent.contextWindowTokens (20000) less agent.maxTokens (1000)' });
    expect(await contextBudget(config, at('gpt-4.1-mini'), limits)).to.deep.equal({ tokens: 1_046_576, source: 'the model catalog (tokenlens openai:gpt-4.1-mini) (1047576) less agent.maxTokens (1000)' });
    expect(await contextBudget(config, at('vllm-model', 'http://gpu:8000/v1'), limits, server)).to.deep.equal({ tokens: 31_768, source: 'the server (GET /v1/models max_model_len) (32768) less agent.maxTokens (1000)' });
    expect(await contextBudget(config, at('unknown-model'), limits)).to.equal(null);
    await limits.learn(at('unknown-model'), 10_000);
    expect(await contextBudget(config, at('unknown-model'), limits)).to.deep.include({ tokens: 9000 });
    await limits.learn(at('unknown-model'), 20_000); // a larger failure teaches nothing
    expect((await contextBudget(config, at('unknown-model'), limits))!.tokens).to.equal(9000);
    // What one server taught holds for that server only.
    expect(await contextBudget(config, at('unknown-model', 'http://other:8000/v1'), limits)).to.equal(null);
  });

  it('a server is asked once per provider, base URL and model; one that does not say is not asked again at once', async () => {
    const limits = new ContextLimits();
    let asked = 0;
    const says = async () => (asked++, { tokens: 16_384, source: 'GET /props n_ctx (llama.cpp)' });
    for (let i = 0; i < 3; i++) expect(await limits.reported(at('m', 'http://a/v1'), says)).to.deep.equal({ tokens: 16_384, source: 'GET /props n_ctx (llama.cpp)' });
    expect(asked).to.equal(1);
    await limits.reported(at('m', 'http://b/v1'), says);
    expect(asked).to.equal(2);
    let silent = 0;
    const saysNothing = async () => (silent++, undefined);
    expect(await limits.reported(at('n', 'http://a/v1'), saysNothing)).to.equal(undefined);
    expect(await limits.reported(at('n', 'http://a/v1'), saysNothing)).to.equal(undefined);
    expect(silent).to.equal(1);
  });

  it('limits survive in the table, are listed, and are forgotten (all or by key)', async () => {
    const rows = new Map<string, Record<string, unknown>>();
    const table = {
      get: (id: string) => rows.get(id),
      put: (id: string, r: Record<string, unknown>) => void rows.set(id, r),
      delete: (id: string) => void rows.delete(id),
      search: async function* () {
        yield* rows.values();
      },
    };
    await new ContextLimits(() => table).learn({ provider: 'anthropic', model: 'm' }, 5000);
    await new ContextLimits(() => table).reported(at('v', 'http://gpu/v1'), async () => ({ tokens: 8192, source: 'GET /v1/models max_model_len' }));
    const limits = new ContextLimits(() => table);
    expect(await limits.failedAt({ provider: 'anthropic', model: 'm' })).to.equal(5000);
    expect((await limits.list()).map((r) => [r.key, r.baseUrl, r.model, r.failedTokens ?? null, r.windowTokens ?? null, r.windowSource ?? null])).to.deep.equal([
      ['anthropic|default|m', null, 'm', 5000, null, null],
      ['openai|http://gpu/v1|v', 'http://gpu/v1', 'v', null, 8192, 'GET /v1/models max_model_len'],
    ]);
    expect(await limits.forget(['anthropic|default|m'])).to.deep.equal(['anthropic|default|m']);
    expect(await limits.failedAt({ provider: 'anthropic', model: 'm' })).to.equal(undefined);
    expect(await limits.forget()).to.deep.equal(['openai|http://gpu/v1|v']);
    expect(rows.size).to.equal(0);
  });

  it('the catalog: by provider and id (then by id); models newer than the catalog are not in it yet', async () => {
    expect(await catalogWindow('openai', 'gpt-4.1-mini')).to.deep.equal({ tokens: 1_047_576, source: 'tokenlens openai:gpt-4.1-mini' });
    expect(await catalogWindow('bedrock', 'anthropic.claude-3-5-sonnet-20240620-v1:0')).to.deep.equal({ tokens: 200_000, source: 'tokenlens amazon-bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0' });
    expect(await catalogWindow('openai', 'grok-3')).to.deep.equal({ tokens: 131_072, source: 'tokenlens openai:grok-3' }); // the catalog finds a model under another provider's name too
    expect(await catalogWindow('openai', 'never-heard-of-it')).to.equal(undefined);
    // When the catalog lists one of these, this fails: take it out of NEWER_THAN_CATALOG.
    for (const model of Object.keys(NEWER_THAN_CATALOG)) expect(getContextWindow(model), model).to.deep.equal({});
    expect(await catalogWindow('anthropic', 'claude-sonnet-4-5')).to.deep.equal({ tokens: 200_000, source: 'claude-sonnet-4-5, newer than the catalog' });
  });

  function seed(h: Harness) {
    writeFileSync(path.join(h.scopes.logs, 'pf.log'), ('p'.repeat(99) + '\n').repeat(300));
  }
  const read = () => calls(['read_file', { root: 'logs', path: 'pf.log' }]);

  it('pre-flight shrinks from the newest group, group by group, until the request fits, without a rejection', async () => {
    // A budget learned from a rejection (no window known, so nothing is fitted to one): pages as large as the cap gives.
    const h = harness([read(), read(), read(), text('done')], { maxTokens: 1000, compaction: false });
    h.deps.limits = new ContextLimits();
    await h.deps.limits.learn({ provider: 'scripted', model: 'scripted-1' }, Math.ceil(11_000 / 0.9));
    seed(h);
    const s = await prompt(h, 'read three times');
    expect(s.status, s.lastError ?? '').to.equal('completed');
    const cuts = s.messages.filter((m): m is ToolMessage => m.role === 'tool').map((m) => m.cut ?? null);
    // Each 30 KB page alone is ~10k tokens: before each next request the newest one is cut.
    expect(cuts).to.deep.equal(['context', 'context', 'context']);
    for (const input of h.backend.inputs) expect(estimateTokens(input)).to.be.at.most(11_000);
  });

  it('when nothing is left to cut, the run ends error without sending; with compaction on, the error says the prompt alone does not fit', async () => {
    const off = harness([text('never sent')], { contextWindowTokens: 2000, maxTokens: 500, compaction: false });
    const s = await prompt(off, 'x'.repeat(20_000));
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/^The conversation does not fit the model's context window: about \d+ tokens against a budget of 1500 \(agent\.contextWindowTokens \(2000\) less agent\.maxTokens \(500\)\), and no tool result is left to cut\. Nothing was sent\. To continue: shorten the prompt, or start a new session, or turn agent\.compaction on\.$/);
    expect(off.backend.inputs).to.have.length(0);
    const on = harness([text('never sent')], { contextWindowTokens: 2000, maxTokens: 500 });
    const s2 = await prompt(on, 'x'.repeat(20_000));
    expect(s2.lastError).to.match(/^The prompt being answered does not fit the model's context window even alone: about \d+ tokens \(the system prompt and tool list, the summary of everything before, the prompt and its newest results\) against a budget of 1500 \(agent\.contextWindowTokens \(2000\) less agent\.maxTokens \(500\)\), and no tool result is left to cut\. Nothing was sent\. To continue: shorten the prompt, or use a model with a larger window \(agent\.model, agent\.contextWindowTokens\)\.$/);
    expect(on.backend.inputs).to.have.length(0);
  });

  it('a rejection the estimate let through is learned and used from then on', async () => {
    const limits = new ContextLimits();
    const tooLong = new ModelError('too long', 'scripted', 400, true);
    const h = harness([read(), tooLong, text('ok'), read(), text('fine')], { compaction: false });
    h.deps.limits = limits;
    seed(h);
    const s = await prompt(h, 'read');
    expect(s.status).to.equal('completed');
    const failed = await limits.failedAt({ provider: 'scripted', model: 'scripted-1' });
    expect(failed).to.be.a('number');
    const s2 = await prompt(h, 'read again', s.session_id);
    expect(s2.status).to.equal('completed');
    // The second read would have been over 0.9 x the failed size: it was cut before sending, not rejected.
    expect(estimateTokens(h.backend.inputs.at(-1)!)).to.be.at.most(Math.floor(failed! * 0.9));
  });
});

import { expect } from 'chai';
import { estimateTokens } from '../agent/contextBudget.js';
import { activeRun } from '../agent/runs.js';
import { callRecords, costOf, ModelCallLog, priceOf, RunMeter, totals } from '../agent/modelCalls.js';
import { nextCallTokens } from '../agent/modelCall.js';
import { createOperations } from '../agent/operations.js';
import { LIVE_TEXT_EVERY_MS, LiveWriter, type LiveEvent } from '../agent/sessionFeed.js';
import type { Session } from '../agent/session.js';
import { classifyProviderError, networkError } from '../resources/models/backendHelpers.js';
import { Models } from '../resources/models/models.js';
import type { BackendOptions, GenerateInput, GenerateOutput, StreamEvent } from '../resources/models/types.js';
import { calls, harness, text, type Harness } from './helpers.js';

describe('the model-call log (agent/recordLog.ts)', () => {
  it("is written without the run waiting, and this thread's reads wait for its writes in flight", async () => {
    // A table whose put takes a while to commit (Harper's is about a millisecond), and stores only then.
    const rows = new Map<string, Record<string, unknown>>();
    let commits = 0;
    const table = {
      put: (id: string, record: Record<string, unknown>) => new Promise<void>((resolve) => setTimeout(() => (rows.set(id, record), commits++, resolve()), 20)),
      async *search(query: { conditions: { attribute: string; value: unknown }[] }) {
        for (const row of rows.values()) if (query.conditions.every((c) => row[c.attribute] === c.value)) yield row;
      },
    };
    const log = new ModelCallLog(() => table);
    const record = (id: string, at: number) => ({ ...callRecords([{ url: 'https://api.example/v1', bytes: 10, started: at, status: 200, respondedAt: at + 5 }], { estimate: 1 }, { session_id: 's', node: null, provider: 'p', model: 'm', streamed: false, purpose: 'turn' })[0]!, id, at });
    const written = log.record([record('a', 1), record('b', 2)]);
    void log.record([record('c', 3)]);
    expect(commits).to.equal(0);
    // Both records of the first call are in flight at once, and the second call's behind them.
    expect((await log.list({ session_id: 's' })).map((r) => r.id)).to.deep.equal(['a', 'b', 'c']);
    expect(commits).to.equal(3);
    await written;
  });
});

describe('the request meter', () => {
  it('records each request an SDK sends through its fetch: URL, body bytes (text or binary), status; none when it failed', async () => {
    const meter = new RunMeter();
    const statuses = [429, 200];
    const send = meter.fetch(async () => new Response('{}', { status: statuses.shift()! }));
    await send('http://127.0.0.1:9/v1/chat/completions', { method: 'POST', body: '{"é":1}' });
    await send(new URL('http://127.0.0.1:9/v1/chat/completions'), { method: 'POST', body: new Uint8Array(5) });
    const failing = meter.fetch(async () => {
      throw new TypeError('fetch failed');
    });
    await failing('http://127.0.0.1:9/x', { body: 'abc' }).catch(() => undefined);
    const sent = meter.take();
    expect(sent.map((s) => [s.url, s.bytes, s.status])).to.deep.equal([
      ['http://127.0.0.1:9/v1/chat/completions', 8, 429],
      ['http://127.0.0.1:9/v1/chat/completions', 5, 200],
      ['http://127.0.0.1:9/x', 3, undefined],
    ]);
    expect(meter.take()).to.deep.equal([]);
  });
});

describe('model-call records', () => {
  const price = { inputPerMTokens: 3, outputPerMTokens: 15 };
  const context = { session_id: 's1', node: 'n1', provider: 'anthropic', model: 'm', price, streamed: true, now: 10_000 };

  it('retried attempts are classed by their status; the last carries the usage, the call\'s class and its cost', () => {
    const sent = [
      { url: 'https://api.anthropic.com/v1/messages', bytes: 100, started: 1000, status: 429, respondedAt: 1200 },
      { url: 'https://api.anthropic.com/v1/messages', bytes: 100, started: 2000, status: 529, respondedAt: 2100 },
      { url: 'https://api.anthropic.com/v1/messages', bytes: 100, started: 3000, status: 200, respondedAt: 3500 },
    ];
    const records = callRecords(sent, { usage: { inputTokens: 1000, outputTokens: 200 }, estimate: 5000 }, context);
    expect(records.map(({ id: _id, ...r }) => r)).to.deep.equal([
      { session_id: 's1', at: 1000, node: 'n1', provider: 'anthropic', host: 'api.anthropic.com', model: 'm', requestBytes: 100, status: 429, inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null, latencyMs: 200, errorClass: 'rate_limit', costUsd: 0, tokensEstimated: false, streamed: true, purpose: 'turn' },
      { session_id: 's1', at: 2000, node: 'n1', provider: 'anthropic', host: 'api.anthropic.com', model: 'm', requestBytes: 100, status: 529, inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null, latencyMs: 100, errorClass: 'server', costUsd: 0, tokensEstimated: false, streamed: true, purpose: 'turn' },
      { session_id: 's1', at: 3000, node: 'n1', provider: 'anthropic', host: 'api.anthropic.com', model: 'm', requestBytes: 100, status: 200, inputTokens: 1000, outputTokens: 200, cacheReadTokens: null, cacheWriteTokens: null, latencyMs: 7000, errorClass: null, costUsd: (1000 * 3 + 200 * 15) / 1e6, tokensEstimated: false, streamed: true, purpose: 'turn' },
    ]);
  });

  it('a successful call with no usage reported is costed from the estimate, and says so; a failed one costs nothing', () => {
    const sent = [{ url: 'http://127.0.0.1:8000/v1/chat/completions', bytes: 10, started: 0, status: 200 }];
    const [ok] = callRecords(sent, { estimate: 4000, outputEstimate: 100 }, context);
    expect(ok).to.include({ inputTokens: null, outputTokens: null, tokensEstimated: true, host: '127.0.0.1:8000', costUsd: costOf(price, { input: 4000, output: 100 }) });
    const [failed] = callRecords([{ ...sent[0]!, status: 400 }], { estimate: 4000, errorClass: 'context_window' }, context);
    expect(failed).to.include({ errorClass: 'context_window', costUsd: 0, tokensEstimated: false });
    const [unpriced] = callRecords(sent, { usage: { inputTokens: 1, outputTokens: 1 }, estimate: 1 }, { ...context, price: undefined });
    expect(unpriced!.costUsd).to.equal(null);
  });

  it('cost: uncached input, cache reads and cache writes each at their price (the input price where none is known)', () => {
    const priced = { inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 };
    // 10,000 input of which 8,000 read and 1,500 written: 500 at $3, 8,000 at $0.30, 1,500 at $3.75, 200 out at $15.
    expect(costOf(priced, { input: 10_000, output: 200, cacheRead: 8_000, cacheWrite: 1_500 })).to.be.closeTo((500 * 3 + 8_000 * 0.3 + 1_500 * 3.75 + 200 * 15) / 1e6, 1e-12);
    expect(costOf({ inputPerMTokens: 2, outputPerMTokens: 8 }, { input: 10_000, output: 0, cacheRead: 8_000 })).to.equal((10_000 * 2) / 1e6);
    const [record] = callRecords([{ url: 'https://api.anthropic.com/v1/messages', bytes: 1, started: 0, status: 200 }], { usage: { inputTokens: 10_000, outputTokens: 200, cacheReadTokens: 8_000, cacheWriteTokens: 1_500 }, estimate: 1 }, { ...context, price: priced });
    expect(record).to.include({ inputTokens: 10_000, cacheReadTokens: 8_000, cacheWriteTokens: 1_500, costUsd: costOf(priced, { input: 10_000, output: 200, cacheRead: 8_000, cacheWrite: 1_500 }) });
    expect(totals([record!, { ...record!, inputTokens: 6_000, cacheReadTokens: 0 }])).to.include({ inputTokens: 16_000, cacheReadTokens: 8_000, cacheWriteTokens: 3_000, cacheShare: 0.5 });
  });

  it('the spending pre-check takes the previous request as read from the cache once the provider has reported cache reads', () => {
    const call = (inputTokens: number, cacheReadTokens: number | null, errorClass: string | null = null) => ({ inputTokens, cacheReadTokens, errorClass });
    expect(nextCallTokens([], 5_000, 1_000)).to.deep.equal({ input: 5_000, output: 1_000 });
    expect(nextCallTokens([call(4_000, null)], 5_000, 1_000)).to.deep.equal({ input: 5_000, output: 1_000 });
    expect(nextCallTokens([call(3_000, 2_000), call(4_000, 3_000)], 5_000, 1_000)).to.deep.equal({ input: 5_000, output: 1_000, cacheRead: 4_000, cacheWrite: 1_000 });
    // A failed call is not the previous request; a request smaller than the last is all read.
    expect(nextCallTokens([call(3_000, 2_000), call(9_000, null, 'context_window')], 2_500, 1_000)).to.deep.equal({ input: 2_500, output: 1_000, cacheRead: 2_500, cacheWrite: 0 });
  });

  it('prices: agent.prices by provider:model, then by model, over the catalog; the catalog prices OpenAI and Anthropic models; local models have none', () => {
    expect(priceOf({}, 'openai', 'gpt-4.1-mini')).to.deep.equal({ price: { inputPerMTokens: 0.4, outputPerMTokens: 1.6, cacheReadPerMTokens: 0.1 }, source: 'tokenlens openai:gpt-4.1-mini' });
    expect(priceOf({}, 'bedrock', 'anthropic.claude-3-5-sonnet-20240620-v1:0')?.price).to.deep.equal({ inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 });
    expect(priceOf({}, 'anthropic', 'claude-sonnet-4-5')).to.deep.equal({ price: { inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 }, source: 'claude-sonnet-4-5, newer than the catalog' });
    expect(priceOf({}, 'ollama', 'llama3.1:8b')).to.equal(undefined);
    const mine = { inputPerMTokens: 0, outputPerMTokens: 0 };
    expect(priceOf({ prices: { 'llama3.1:8b': mine } }, 'ollama', 'llama3.1:8b')).to.deep.equal({ price: mine, source: 'agent.prices' });
    const negotiated = { inputPerMTokens: 0.2, outputPerMTokens: 0.8 };
    expect(priceOf({ prices: { 'openai:gpt-4.1-mini': negotiated, 'gpt-4.1-mini': mine } }, 'openai', 'gpt-4.1-mini')!.price).to.deep.equal(negotiated);
  });
});

describe('errors met in a stream', () => {
  it('an overflow in an error event (no status: the stream began with 200) is a context-window rejection', () => {
    const e = classifyProviderError('openai', { message: "This model's maximum context length is 8192 tokens", code: 'context_length_exceeded', inStream: true });
    expect(e).to.include({ contextWindowExceeded: true, status: undefined, errorClass: 'context_window' });
    expect(e.message).to.equal("openai request failed (an error event in the stream): This model's maximum context length is 8192 tokens.");
  });

  it('any other error event is a failed request of class stream, with no advice to check the endpoint', () => {
    const e = classifyProviderError('anthropic', { type: 'overloaded_error', message: 'Overloaded', inStream: true });
    expect(e).to.include({ contextWindowExceeded: false, errorClass: 'stream', message: 'anthropic request failed (an error event in the stream): Overloaded.' });
  });

  it('a dropped connection reads the same before the answer and in the middle of it; Smithy\'s TimeoutError for a reset is not a timeout', () => {
    const socket = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    const before = new Error('Connection error.', { cause: new TypeError('fetch failed', { cause: socket }) });
    const during = new TypeError('terminated', { cause: socket });
    expect(networkError('openai', before, 1000).message).to.equal(networkError('openai', during, 1000).message);
    expect(networkError('openai', during, 1000)).to.include({ errorClass: 'network', message: 'openai request failed: the connection closed before the answer was complete (UND_ERR_SOCKET). Check that the provider endpoint is reachable.' });
    const smithyReset = Object.assign(new Error('socket hang up'), { name: 'TimeoutError', code: 'ECONNRESET' });
    expect(networkError('bedrock', smithyReset, 1000)).to.include({ errorClass: 'network', message: 'bedrock request failed: the connection closed before the answer was complete (ECONNRESET). Check that the provider endpoint is reachable.' });
    const timeout = Object.assign(new Error('Request timed out.'), { name: 'APIConnectionTimeoutError' });
    expect(networkError('openai', timeout, 1000)).to.include({ errorClass: 'timeout' });
  });
});

describe('the live writer', () => {
  const call = (id: string, path: string) => ({ id, name: 'read_file', arguments: { path } });
  const windowOver = () => new Promise((r) => setTimeout(r, LIVE_TEXT_EVERY_MS + 30));

  it('holds the first window, then sends what it gathered in order (text, the tool call, the text after it), each piece with how much text came before it', async () => {
    const sent: LiveEvent[] = [];
    const w = new LiveWriter((e) => sent.push(e), 'c1', 3);
    w.onEvent({ type: 'text', text: 'The ' });
    w.onEvent({ type: 'toolCall', call: call('t0', 'a') });
    w.onEvent({ type: 'text', text: 'log ' });
    expect(sent).to.deep.equal([]);
    await windowOver();
    expect(sent).to.deep.equal([
      { kind: 'text', call: 'c1', index: 3, at: 0, text: 'The ' },
      { kind: 'toolCall', call: 'c1', index: 3, toolCall: call('t0', 'a') },
      { kind: 'text', call: 'c1', index: 3, at: 4, text: 'log ' },
    ]);
  });

  it('after the first window: text gathered for up to 100 ms, a tool call at once after the text before it, then the end; nothing after close', async () => {
    const sent: LiveEvent[] = [];
    const w = new LiveWriter((e) => sent.push(e), 'c1', 3);
    w.onEvent({ type: 'text', text: 'The log ' });
    await windowOver();
    w.onEvent({ type: 'text', text: 'has' });
    w.onEvent({ type: 'text', text: ' two' });
    expect(sent).to.have.length(1);
    await windowOver();
    w.onEvent({ type: 'text', text: ' parts' });
    w.onEvent({ type: 'toolCall', call: call('t1', 'x') });
    w.close(false);
    w.onEvent({ type: 'text', text: 'late' });
    expect(sent).to.deep.equal([
      { kind: 'text', call: 'c1', index: 3, at: 0, text: 'The log ' },
      { kind: 'text', call: 'c1', index: 3, at: 8, text: 'has two' },
      { kind: 'text', call: 'c1', index: 3, at: 15, text: ' parts' },
      { kind: 'toolCall', call: 'c1', index: 3, toolCall: call('t1', 'x') },
      { kind: 'end', call: 'c1', index: 3, failed: false },
    ]);
  });

  it('a call over inside its first window publishes nothing, finished or failed, and nothing later', async () => {
    const sent: LiveEvent[] = [];
    const w = new LiveWriter((e) => sent.push(e), 'c2', 1);
    w.onEvent({ type: 'text', text: 'Hello' });
    w.onEvent({ type: 'toolCall', call: call('t2', 'x') });
    w.close(false);
    const failed = new LiveWriter((e) => sent.push(e), 'c3', 1);
    failed.onEvent({ type: 'text', text: 'partial' });
    failed.close(true);
    await windowOver();
    expect(sent).to.deep.equal([]);
  });

  it('later, a failed call drops the text it had gathered and ends failed; a finished one without text sends no end; a publish that throws does not reach the run', async () => {
    const sent: LiveEvent[] = [];
    const w = new LiveWriter((e) => sent.push(e), 'c4', 1);
    w.onEvent({ type: 'text', text: 'shown' });
    await windowOver();
    w.onEvent({ type: 'text', text: ' not shown' });
    w.close(true);
    expect(sent).to.deep.equal([
      { kind: 'text', call: 'c4', index: 1, at: 0, text: 'shown' },
      { kind: 'end', call: 'c4', index: 1, failed: true },
    ]);
    const calls = new LiveWriter((e) => sent.push(e), 'c5', 5);
    calls.onEvent({ type: 'toolCall', call: call('t3', 'y') });
    await windowOver();
    calls.close(false);
    expect(sent.slice(2)).to.deep.equal([{ kind: 'toolCall', call: 'c5', index: 5, toolCall: call('t3', 'y') }]);
    const broken = new LiveWriter(() => {
      throw new Error('no table');
    }, 'c6', 0);
    broken.onEvent({ type: 'toolCall', call: call('x', 'z') });
    await windowOver();
    broken.close(false);
  });
});

// ------------------------------------------------------------------------------------------------------------
// Through the loop: a backend that sends "requests" through the meter it is given, as the real backends do.

// `pauseMs`: how long the stream takes after its first piece (a call over within the live writer's first window
// publishes nothing).
type MeteredStep = { out: GenerateOutput; bytes?: number; status?: number; stream?: string[]; pauseMs?: number } | { fail: Error; status?: number; stream?: string[]; pauseMs?: number };

function meteredHarness(steps: MeteredStep[], config: Parameters<typeof harness>[1] = {}) {
  const h = harness([], { provider: 'metered', model: 'm1', ...config });
  h.deps.calls = new ModelCallLog();
  const live: [string, LiveEvent][] = [];
  h.deps.publishLive = (id, e) => live.push([id, e]);
  const inputs: GenerateInput[] = [];
  Models.register({
    provider: 'metered',
    defaultModel: 'm1',
    create: (options: BackendOptions) => ({
      provider: 'metered',
      async generate(input: GenerateInput, _signal: AbortSignal, onEvent?: (e: StreamEvent) => void) {
        inputs.push(input);
        const step = steps.shift();
        if (!step) throw new Error('script exhausted');
        const done = options.meter!.begin('https://models.example:8443/v1/generate', 'bytes' in step && step.bytes ? step.bytes : 1000);
        done('status' in step && step.status !== undefined ? step.status : 'fail' in step ? 400 : 200);
        for (const [i, t] of (step.stream ?? []).entries()) {
          onEvent?.({ type: 'text', text: t });
          if (i === 0 && step.pauseMs) await new Promise((r) => setTimeout(r, step.pauseMs));
        }
        if ('fail' in step) throw step.fail;
        return step.out;
      },
    }),
  });
  return { h, live, inputs };
}

const user = { username: 'admin', role: { permission: { super_user: true } } };
async function prompt(h: Harness, message: string, session_id?: string): Promise<Session> {
  const ops = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: new Date(0).toISOString() } });
  const r = (await ops.agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return (await h.store.get(r.session_id))!;
}

const used = (o: GenerateOutput, inputTokens: number, outputTokens: number): GenerateOutput => ({ ...o, usage: { inputTokens, outputTokens } });
const PRICES = { m1: { inputPerMTokens: 1_000_000, outputPerMTokens: 1_000_000 } }; // a dollar a token

describe('the loop records model calls and keeps to the spending limits', () => {
  it('one record per request, in the session, with the tokens reported and the cost at agent.prices', async () => {
    const { h } = meteredHarness([{ out: used(calls(['list_dir', { root: 'logs' }]), 10, 2) }, { out: used(text('done'), 12, 1), bytes: 1200 }], { prices: PRICES });
    const s = await prompt(h, 'list the logs');
    expect(s.status).to.equal('completed');
    const records = await h.deps.calls!.list({ session_id: s.session_id });
    expect(records.map((r) => [r.host, r.requestBytes, r.status, r.inputTokens, r.outputTokens, r.costUsd, r.errorClass, r.streamed])).to.deep.equal([
      ['models.example:8443', 1000, 200, 10, 2, 12, null, true],
      ['models.example:8443', 1200, 200, 12, 1, 13, null, true],
    ]);
  });

  it('agent.maxCostUsd: the call that could cross it is not sent; lastError says what was spent and how to raise it; every tool call is answered', async () => {
    // Fixed call ids: both runs send byte-identical requests, so the free run's estimates are the capped run's.
    const list = (id: string): GenerateOutput => ({ text: '', toolCalls: [{ id, name: 'list_dir', arguments: { root: 'logs' } }], finishReason: 'tool_calls' });
    const script = (): MeteredStep[] => [{ out: used(list('call-1'), 10, 2) }, { out: used(list('call-2'), 10, 2) }, { out: used(text('done'), 10, 2) }];
    // With no limit: what each request is estimated at (the loop's own estimate of what it sends).
    const free = meteredHarness(script(), { prices: PRICES, maxTokens: 16 });
    expect((await prompt(free.h, 'list twice')).status).to.equal('completed');
    const estimates = free.inputs.map((input) => estimateTokens(input));
    // At a dollar a token: two calls of 12 are spent when the third is checked at its estimate plus 16 of output.
    const limit = 12 + 12 + estimates[2]! + 16 - 1;
    const { h, inputs } = meteredHarness(script(), { prices: PRICES, maxTokens: 16, maxCostUsd: limit });
    const s = await prompt(h, 'list twice');
    expect(s.status).to.equal('error');
    expect(inputs).to.have.length(2);
    expect(s.lastError).to.equal(
      `This prompt has spent $24.00 in 2 model request(s); the next call could cost up to $${(estimates[2]! + 16).toFixed(2)} (about ${estimates[2]} input tokens and up to agent.maxTokens 16 output tokens at agent.prices prices), which would cross agent.maxCostUsd ($${limit.toFixed(2)}). Nothing more was sent. To go on: raise agent.maxCostUsd (harper-agent config maxCostUsd=<dollars>) and send a new prompt.`
    );
    expect(s.messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'assistant', 'tool']);
  });

  it('agent.maxSessionCostUsd counts every prompt of the session; agent.maxCostUsd only this prompt\'s', async () => {
    const { h, inputs } = meteredHarness([{ out: used(text('one'), 10, 2) }, { out: used(text('two'), 10, 2) }], { prices: { m1: { inputPerMTokens: 1, outputPerMTokens: 1 } }, maxTokens: 16 });
    const first = await prompt(h, 'one');
    expect(first.status).to.equal('completed');
    const spent = (await h.deps.calls!.list({ session_id: first.session_id }))[0]!.costUsd!;
    expect(spent).to.equal(12 / 1e6);
    // The next call's estimate is well under a cent; a per-prompt limit of a cent lets it through, a session limit of
    // what was spent plus less than that estimate stops it.
    h.config.maxCostUsd = 0.01;
    h.config.maxSessionCostUsd = spent + 1 / 1e6;
    const second = await prompt(h, 'two', first.session_id);
    expect(second.status).to.equal('error');
    expect(second.lastError).to.match(/^This session has spent \$0\.0000 in 1 model request\(s\);.* which would cross agent\.maxSessionCostUsd \(\$0\.0000\)\./);
    expect(inputs).to.have.length(1);
    h.config.maxSessionCostUsd = undefined;
    const third = await prompt(h, 'two', first.session_id);
    expect(third.status).to.equal('completed');
    expect(third.messages.at(-1)!.content).to.equal('two');
  });

  it('a limit with no price known for the model sends nothing and says to set agent.prices', async () => {
    const { h, inputs } = meteredHarness([{ out: text('never') }], { maxCostUsd: 5 });
    const s = await prompt(h, 'hi');
    expect(s.status).to.equal('error');
    expect(inputs).to.have.length(0);
    expect(s.lastError).to.equal('A spending limit is set (agent.maxCostUsd) but no price is known for metered model m1, so nothing was sent. Set its price in agent.prices (e.g. {"m1":{"inputPerMTokens":0,"outputPerMTokens":0}}), or unset the limit.');
  });

  it('streams to followers and stores only the finished message; a call that fails mid-stream stores nothing of its text and is logged with its class', async () => {
    const fail = classifyProviderError('metered', { type: 'overloaded_error', message: 'Overloaded', inStream: true });
    const { h, live } = meteredHarness([
      { out: text('Hello there'), stream: ['Hello ', 'there'], pauseMs: LIVE_TEXT_EVERY_MS + 30 },
      { fail, stream: ['Half an ans'], pauseMs: LIVE_TEXT_EVERY_MS + 30 },
    ]);
    const s = await prompt(h, 'hi');
    await new Promise((r) => setTimeout(r, LIVE_TEXT_EVERY_MS + 30));
    expect(s.messages.map((m) => m.content)).to.deep.equal(['hi', 'Hello there']);
    const shown = live.filter(([id]) => id === s.session_id).map(([, e]) => e);
    expect(shown.map((e) => ({ ...e, call: '' }))).to.deep.equal([
      { kind: 'text', call: '', index: 1, at: 0, text: 'Hello ' },
      { kind: 'text', call: '', index: 1, at: 6, text: 'there' },
      { kind: 'end', call: '', index: 1, failed: false },
    ]);
    const again = await prompt(h, 'more', s.session_id);
    expect(again.status).to.equal('error');
    expect(again.messages.map((m) => m.content)).to.deep.equal(['hi', 'Hello there', 'more']);
    const last = live.at(-1)![1];
    expect(last).to.include({ kind: 'end', index: 3, failed: true });
    const records = await h.deps.calls!.list({ session_id: s.session_id });
    expect(records.map((r) => [r.status, r.errorClass])).to.deep.equal([[200, null], [400, 'stream']]);
  });

  it('agent.stream false: the backend is asked without a stream and nothing is published', async () => {
    const { h, live } = meteredHarness([{ out: text('plain'), stream: ['plain'] }], { stream: false });
    const s = await prompt(h, 'hi');
    expect(s.messages.at(-1)!.content).to.equal('plain');
    expect(live).to.deep.equal([]);
  });
});

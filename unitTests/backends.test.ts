// Each backend through its real SDK over HTTP, against the provider-compatible server.
import { expect } from 'chai';
import { AnthropicBackend } from 'harper-agent-anthropic/backend';
import { BedrockBackend } from 'harper-agent-bedrock/backend';
import { OllamaBackend, windowFromShow } from 'harper-agent-ollama/backend';
import { gatherStream, OpenAIBackend } from 'harper-agent-openai/backend';
import { bedrockError, ollamaShow, ProviderServer, type Provider, type Turn } from '../integrationTests/providerServer/server.js';
import { isModelError, providerErrors, type ModelError } from '../resources/models/backendHelpers.js';
import type { GenerateInput, ModelBackend } from '../resources/models/types.js';

process.env.AWS_ACCESS_KEY_ID = 'test-access-key';
process.env.AWS_SECRET_ACCESS_KEY = 'test-secret-key';
process.env.AWS_EC2_METADATA_DISABLED = 'true';

const server = new ProviderServer();
before(() => server.start());
after(() => server.close());

function make(provider: Provider, baseUrl = server.url): ModelBackend {
  const o = { apiKey: 'test-key', baseUrl, requestTimeoutMs: 5000, maxRetries: 0, region: 'us-east-1', errors: providerErrors };
  if (provider === 'openai') return new OpenAIBackend({ ...o, baseUrl: `${baseUrl}/v1` });
  if (provider === 'anthropic') return new AnthropicBackend(o);
  if (provider === 'ollama') return new OllamaBackend(o);
  return new BedrockBackend(o);
}

const input: GenerateInput = {
  system: 'SYSTEM PROMPT: you are a test',
  model: 'test-model',
  maxTokens: 256,
  tools: [{ name: 'read_file', description: 'read', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
  messages: [
    { role: 'user', content: 'read two files' },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_a', name: 'read_file', arguments: { path: 'a' } }, { id: 'call_b', name: 'read_file', arguments: { path: 'b' } }] },
    { role: 'tool', toolCallId: 'call_a', name: 'read_file', content: 'contents of a' },
    { role: 'tool', toolCallId: 'call_b', name: 'read_file', content: '{"error":"no b"}', isError: true },
    { role: 'assistant', content: 'a read, b missing' },
    { role: 'user', content: 'thanks' },
  ],
};

async function failure(backend: ModelBackend, turn: Turn): Promise<ModelError> {
  server.reset([turn]);
  const e = await backend.generate(input, new AbortController().signal).then(() => null, (err) => err);
  expect(isModelError(e), String(e)).to.equal(true);
  return e as ModelError;
}

const contextRejections: Record<Provider, [string, Turn][]> = {
  openai: [['400 context_length_exceeded', { contextError: true }]],
  anthropic: [
    ['400 prompt is too long', { contextError: true }],
    ['413 request_too_large', { error: { status: 413, body: { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' } } } }],
  ],
  ollama: [['400 the input length exceeds the context length (truncate: false)', { contextError: true }]],
  bedrock: [
    ['ValidationException: Input is too long', { contextError: true }],
    ['ValidationException: too many input tokens', { error: bedrockError(400, 'ValidationException', 'The model returned the following errors: too many input tokens. Reduce the input.') }],
  ],
};

function notFlagged(provider: Provider): [string, Turn, number][] {
  const env = (status: number, message: string, type = 'api_error') =>
    provider === 'openai'
      ? { error: { status, body: { error: { message, type, code: null } } } }
      : provider === 'anthropic'
        ? { error: { status, body: { type: 'error', error: { type, message } } } }
        : provider === 'ollama'
          ? { error: { status, body: { error: message } } }
          : { error: bedrockError(status, status === 400 ? 'ValidationException' : status === 429 ? 'ThrottlingException' : status === 403 ? 'AccessDeniedException' : 'InternalServerException', message) };
  return [
    ['401', env(401, 'invalid x-api-key', 'authentication_error'), 401],
    ['403', env(403, 'not allowed', 'permission_error'), 403],
    ['429 (mentions tokens)', env(429, 'Rate limit reached: too many input tokens per minute', 'rate_limit_error'), 429],
    ['500', env(500, 'internal error'), 500],
    ['503', env(503, 'overloaded', 'overloaded_error'), 503],
    ['another 400', env(400, 'messages: field required', 'invalid_request_error'), 400],
  ];
}

for (const provider of ['openai', 'anthropic', 'bedrock', 'ollama'] as const) {
  describe(`${provider} backend through its SDK`, () => {
    let backend: ModelBackend;
    before(() => (backend = make(provider)));

    it('maps the transcript to the wire and back (tool calls by id, error results) with one system prompt', async () => {
      server.reset([{ text: 'you are welcome' }]);
      const out = await backend.generate(input, new AbortController().signal);
      expect(out).to.deep.include({ text: 'you are welcome', toolCalls: [], finishReason: 'stop' });
      const req = server.requests[0]!;
      expect(req.neutral.systems).to.deep.equal([input.system]);
      expect(req.neutral.tools).to.deep.equal(['read_file']);
      // Ollama has no call ids: its calls and results go in order, each result naming its tool.
      const callId = (id: string) => (provider === 'ollama' ? 'read_file' : id);
      expect(req.neutral.messages).to.deep.equal([
        { role: 'user', text: 'read two files' },
        { role: 'assistant', text: '', toolCalls: [{ id: callId('call_a'), name: 'read_file', arguments: { path: 'a' } }, { id: callId('call_b'), name: 'read_file', arguments: { path: 'b' } }] },
        { role: 'tool', toolCallId: callId('call_a'), text: 'contents of a' },
        { role: 'tool', toolCallId: callId('call_b'), text: '{"error":"no b"}' },
        { role: 'assistant', text: 'a read, b missing', toolCalls: [] },
        { role: 'user', text: 'thanks' },
      ]);
      if (provider === 'openai') {
        expect(req.body.messages.filter((m: any) => m.role === 'system')).to.have.length(1);
        expect(req.body.messages[0]).to.deep.equal({ role: 'system', content: input.system });
      }
      if (provider === 'anthropic') expect(req.body.system).to.equal(input.system);
      if (provider === 'bedrock') expect(req.body.system).to.deep.equal([{ text: input.system }]);
      if (provider === 'ollama') expect(req.body.messages.filter((m: any) => m.role === 'system')).to.deep.equal([{ role: 'system', content: input.system }]);
    });

    it('parallel tool calls, finish reason tool_calls, usage', async () => {
      server.reset([{ toolCalls: [{ name: 'read_file', arguments: { path: 'x' } }, { name: 'read_file', arguments: { path: 'y' } }] }]);
      const out = await backend.generate(input, new AbortController().signal);
      expect(out.finishReason).to.equal('tool_calls');
      expect(out.toolCalls.map((c) => c.arguments)).to.deep.equal([{ path: 'x' }, { path: 'y' }]);
      expect(out.toolCalls[0]!.id).to.be.a('string').and.not.equal(out.toolCalls[1]!.id);
      expect(out.usage!.inputTokens).to.equal(Math.ceil(server.requests[0]!.bytes / 4));
      expect(out.usage!.outputTokens).to.equal(20);
    });

    it('finish reasons length and content_filter', async () => {
      server.reset([{ finish: 'length', text: 'half' }, { finish: 'content_filter' }]);
      expect((await backend.generate(input, new AbortController().signal)).finishReason).to.equal('length');
      // Ollama has no content filter to report: its answer ends as any other.
      expect((await backend.generate(input, new AbortController().signal)).finishReason).to.equal(provider === 'ollama' ? 'stop' : 'content_filter');
    });

    for (const [label, turn] of contextRejections[provider]) {
      it(`flags ${label} as contextWindowExceeded`, async () => {
        const e = await failure(backend, turn);
        expect(e.contextWindowExceeded).to.equal(true);
        expect(e.status).to.be.oneOf([400, 413]);
        if (provider === 'bedrock') {
          expect(e.message).to.equal('bedrock request failed (HTTP 400): the request is longer than the model context window.');
        }
      });
    }

    for (const [label, turn, status] of notFlagged(provider)) {
      it(`does not flag ${label}`, async () => {
        const e = await failure(backend, turn);
        expect(e.contextWindowExceeded).to.equal(false);
        expect(e.status).to.equal(status);
        expect(e.message).to.match(new RegExp(`^${provider} request failed \\(HTTP ${status}\\)`));
        if (provider === 'bedrock') expect(e.message).to.not.match(/internal error|not allowed|Rate limit|field required/);
      });
    }

    it('does not flag a network error, and says what to check', async () => {
      const dead = make(provider, 'http://127.0.0.1:9');
      const e = await dead.generate(input, new AbortController().signal).then(() => null, (err) => err);
      expect(isModelError(e)).to.equal(true);
      expect(e).to.include({ contextWindowExceeded: false, status: undefined });
      expect(e.message).to.match(/Check that the provider endpoint is reachable/);
    });
  });
}

describe('openai backend edge cases', () => {
  it('a tool call whose arguments are not JSON is an invalid_tool_call', async () => {
    server.reset([{ toolCalls: [{ name: 'read_file', arguments: '{"path": "x"' }] }]);
    const out = await make('openai').generate(input, new AbortController().signal);
    expect(out.finishReason).to.equal('invalid_tool_call');
    expect(out.detail).to.match(/arguments of read_file are not a JSON object/);
  });
});

describe("openai backend: a stream's chunks gathered (gatherStream)", () => {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: Record<string, number>) => ({ id: 'c1', object: 'chat.completion.chunk', created: 7, model: 'm', choices: delta || finish ? [{ index: 0, delta, finish_reason: finish, logprobs: null }] : [], ...(usage ? { usage } : {}) });
  async function* chunks(list: unknown[]) {
    for (const c of list) yield c as never;
  }

  it('into the completion a plain call returns: text as it comes, each tool call once its arguments are whole, usage last', async () => {
    const events: unknown[] = [];
    const completion = await gatherStream(
      chunks([
        chunk({ role: 'assistant', content: 'Reading ' }),
        chunk({ content: 'it.' }),
        chunk({ tool_calls: [{ index: 0, id: 't1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a}' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: 'b"}' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 't2', type: 'function', function: { name: 'grep_files', arguments: '' } }] }),
        chunk({}, 'tool_calls'),
        chunk(undefined as never, null, { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 }),
      ]),
      (e) => events.push(e)
    );
    // '{"path":"a}' ends in a brace but does not parse: reported once whole; the second call, with no arguments, at the end.
    expect(events).to.deep.equal([
      { type: 'text', text: 'Reading ' },
      { type: 'text', text: 'it.' },
      { type: 'toolCall', call: { id: 't1', name: 'read_file', arguments: { path: 'a}b' } } },
      { type: 'toolCall', call: { id: 't2', name: 'grep_files', arguments: {} } },
    ]);
    expect(completion).to.deep.equal({
      id: 'c1',
      created: 7,
      model: 'm',
      object: 'chat.completion',
      usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 },
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          logprobs: null,
          message: {
            role: 'assistant',
            content: 'Reading it.',
            refusal: null,
            tool_calls: [
              { id: 't1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a}b"}' } },
              { id: 't2', type: 'function', function: { name: 'grep_files', arguments: '' } },
            ],
          },
        },
      ],
    });
  });

  it('a stream that ends without a finish is not an answer', async () => {
    const ended = await gatherStream(chunks([chunk({ content: 'Half' })]), () => undefined).then(
      () => 'answered',
      (error: Error) => error.message
    );
    expect(ended).to.equal('missing finish_reason for choice 0');
  });
});

describe('ollama backend: the context it asks for', () => {
  it('sends num_ctx from /api/show (asked once) and truncate: false, so an overflow is an error, never a shortened prompt', async () => {
    server.reset([{ text: 'one' }, { text: 'two' }]);
    server.discovery = (asked) => (asked === '/api/show test-model' ? ollamaShow(131072) : undefined);
    const backend = make('ollama');
    await backend.generate(input, new AbortController().signal);
    await backend.generate(input, new AbortController().signal);
    expect(server.discoveries).to.deep.equal(['/api/show test-model']);
    for (const r of server.requests) expect([r.body.truncate, r.body.options]).to.deep.equal([false, { num_predict: 256, num_ctx: 131072 }]);
    expect(await backend.reportedWindow!('test-model', new AbortController().signal)).to.deep.equal({ tokens: 131072, source: 'POST /api/show model_info llama.context_length' });
  });

  it("agent.contextWindowTokens wins; the Modelfile's num_ctx is the window when set; no window, no num_ctx", async () => {
    server.reset([{ text: 'one' }]);
    server.discovery = () => ollamaShow(131072);
    await new OllamaBackend({ baseUrl: server.url, requestTimeoutMs: 5000, maxRetries: 0, contextWindowTokens: 8192, errors: providerErrors }).generate(input, new AbortController().signal);
    expect(server.requests[0]!.body.options).to.deep.equal({ num_predict: 256, num_ctx: 8192 });
    expect(windowFromShow(ollamaShow(131072, 'num_ctx 16384\nstop "<|eot_id|>"'))).to.deep.equal({ tokens: 16384, source: 'POST /api/show parameters num_ctx' });
    server.reset([{ text: 'two' }]);
    await make('ollama').generate(input, new AbortController().signal);
    expect(server.requests[0]!.body.options).to.deep.equal({ num_predict: 256 });
  });
});

describe('openai backend: the window a server reports', () => {
  const ask = (model: string) => make('openai').reportedWindow!(model, new AbortController().signal);
  const servers: [string, (path: string) => unknown, { tokens: number; source: string } | undefined][] = [
    ['vLLM', (p) => (p === '/v1/models' ? { object: 'list', data: [{ id: 'm', object: 'model', max_model_len: 32768 }] } : undefined), { tokens: 32768, source: 'GET /v1/models max_model_len' }],
    ['OpenRouter', (p) => (p === '/v1/models' ? { data: [{ id: 'other', context_length: 1 }, { id: 'm', context_length: 131072 }] } : undefined), { tokens: 131072, source: 'GET /v1/models context_length' }],
    ['Groq', (p) => (p === '/v1/models' ? { object: 'list', data: [{ id: 'm', object: 'model', context_window: 131072 }] } : undefined), { tokens: 131072, source: 'GET /v1/models context_window' }],
    ['llama.cpp', (p) => (p === '/props' ? { default_generation_settings: { n_ctx: 8192 }, total_slots: 4 } : p === '/v1/models' ? { data: [{ id: 'm', meta: { n_ctx_train: 131072 } }] } : undefined), { tokens: 8192, source: 'GET /props n_ctx (llama.cpp)' }],
    ['LM Studio', (p) => (p === '/api/v0/models/m' ? { id: 'm', state: 'loaded', max_context_length: 131072, loaded_context_length: 16384 } : undefined), { tokens: 16384, source: 'GET /api/v0/models loaded_context_length (LM Studio)' }],
    ['a server that says nothing', () => undefined, undefined],
  ];
  for (const [name, discovery, expected] of servers) {
    it(`${name}`, async () => {
      server.reset();
      server.discovery = discovery;
      expect(await ask('m')).to.deep.equal(expected);
    });
  }
});

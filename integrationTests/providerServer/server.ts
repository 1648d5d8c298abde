// A provider-compatible server on loopback: speaks OpenAI Chat Completions, Anthropic Messages and Bedrock Converse
// well enough for the official SDKs. Each wire format is decoded to one neutral view, a script (or a responder)
// decides the turn, and the turn is encoded back in that provider's format, errors in its real envelopes.
// Every request body and its byte size is recorded; above `byteLimit` it answers with the provider's
// context-window rejection.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Provider = 'openai' | 'anthropic' | 'bedrock';

export interface NeutralToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

export interface NeutralMessage {
  role: 'user' | 'assistant' | 'tool';
  text: string;
  toolCalls?: NeutralToolCall[];
  toolCallId?: string;
}

export interface NeutralRequest {
  provider: Provider;
  model: string;
  /** Every system prompt the request carries, wherever it was (a correct client sends exactly one). */
  systems: string[];
  messages: NeutralMessage[];
  tools: string[];
  bytes: number;
}

export type Turn =
  | { text: string; usage?: { input: number; output: number } }
  | { toolCalls: { name: string; arguments: unknown }[]; text?: string }
  | { finish: 'length' | 'content_filter'; text?: string }
  /** A raw error response: status, JSON body, extra headers. */
  | { error: { status: number; body: unknown; headers?: Record<string, string> } }
  /** The provider's own context-window rejection, whatever the size. */
  | { contextError: true }
  | { reset: true }
  | { hang: true }
  | { malformed: true };

export type Responder = (request: NeutralRequest) => Turn;

export interface Recorded {
  provider: Provider;
  path: string;
  bytes: number;
  body: any;
  neutral: NeutralRequest;
  rejected: boolean;
  status: number;
}

/** The real context-window envelopes, per provider. */
export function contextWindowError(provider: Provider, bytes: number): { status: number; body: unknown; headers?: Record<string, string> } {
  const tokens = Math.ceil(bytes / 4);
  if (provider === 'openai') {
    return {
      status: 400,
      body: {
        error: {
          message: `This model's maximum context length is 128000 tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
    };
  }
  if (provider === 'anthropic') {
    return { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > 200000 maximum` } } };
  }
  return bedrockError(400, 'ValidationException', 'Input is too long for requested model.');
}

export function bedrockError(status: number, type: string, message: string) {
  return { status, body: { message }, headers: { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` } };
}

function decodeOpenAI(body: any): Omit<NeutralRequest, 'bytes' | 'provider'> {
  const systems: string[] = [];
  const messages: NeutralMessage[] = [];
  for (const m of body.messages ?? []) {
    const text = typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p: any) => p.text ?? '').join('') : '';
    if (m.role === 'system' || m.role === 'developer') systems.push(text);
    else if (m.role === 'tool') messages.push({ role: 'tool', text, toolCallId: m.tool_call_id });
    else if (m.role === 'assistant') {
      messages.push({ role: 'assistant', text, toolCalls: (m.tool_calls ?? []).map((c: any) => ({ id: c.id, name: c.function.name, arguments: JSON.parse(c.function.arguments) })) });
    } else messages.push({ role: 'user', text });
  }
  return { model: body.model, systems, messages, tools: (body.tools ?? []).map((t: any) => t.function.name) };
}

function decodeAnthropic(body: any): Omit<NeutralRequest, 'bytes' | 'provider'> {
  const systems: string[] = [];
  if (typeof body.system === 'string') systems.push(body.system);
  else if (Array.isArray(body.system)) systems.push(body.system.map((b: any) => b.text).join(''));
  const messages: NeutralMessage[] = [];
  for (const m of body.messages ?? []) {
    if (m.role === 'system') {
      systems.push(typeof m.content === 'string' ? m.content : '');
      continue;
    }
    const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    if (m.role === 'assistant') {
      messages.push({
        role: 'assistant',
        text: blocks.filter((b: any) => b.type === 'text').map((b: any) => b.text).join(''),
        toolCalls: blocks.filter((b: any) => b.type === 'tool_use').map((b: any) => ({ id: b.id, name: b.name, arguments: b.input })),
      });
      continue;
    }
    for (const b of blocks) {
      if (b.type === 'tool_result') messages.push({ role: 'tool', toolCallId: b.tool_use_id, text: typeof b.content === 'string' ? b.content : (b.content ?? []).map((c: any) => c.text).join('') });
      else if (b.type === 'text') messages.push({ role: 'user', text: b.text });
    }
  }
  return { model: body.model, systems, messages, tools: (body.tools ?? []).map((t: any) => t.name) };
}

function decodeBedrock(body: any, model: string): Omit<NeutralRequest, 'bytes' | 'provider'> {
  const systems = (body.system ?? []).map((b: any) => b.text);
  const messages: NeutralMessage[] = [];
  for (const m of body.messages ?? []) {
    if (m.role === 'assistant') {
      messages.push({
        role: 'assistant',
        text: m.content.filter((b: any) => b.text !== undefined).map((b: any) => b.text).join(''),
        toolCalls: m.content.filter((b: any) => b.toolUse).map((b: any) => ({ id: b.toolUse.toolUseId, name: b.toolUse.name, arguments: b.toolUse.input })),
      });
      continue;
    }
    for (const b of m.content) {
      if (b.toolResult) messages.push({ role: 'tool', toolCallId: b.toolResult.toolUseId, text: b.toolResult.content.map((c: any) => c.text).join('') });
      else if (b.text !== undefined) messages.push({ role: 'user', text: b.text });
    }
  }
  return { model, systems, messages, tools: (body.toolConfig?.tools ?? []).map((t: any) => t.toolSpec.name) };
}

let counter = 0;
const id = (prefix: string) => `${prefix}_${Date.now().toString(36)}${(counter++).toString(36)}`;

function encode(provider: Provider, model: string, turn: Turn, inputTokens: number): unknown {
  const text = 'text' in turn && typeof turn.text === 'string' ? turn.text : '';
  const calls = 'toolCalls' in turn ? turn.toolCalls.map((c) => ({ ...c, id: id('call') })) : [];
  const finish = 'finish' in turn ? turn.finish : calls.length ? 'tool_calls' : 'stop';
  const outputTokens = 'usage' in turn && turn.usage ? turn.usage.output : Math.ceil(text.length / 4) + calls.length * 10;
  const input = 'usage' in turn && turn.usage ? turn.usage.input : inputTokens;
  if (provider === 'openai') {
    return {
      id: id('chatcmpl'),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: finish === 'content_filter' ? null : text || null,
            refusal: null,
            ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) } })) } : {}),
          },
          finish_reason: finish,
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: input, completion_tokens: outputTokens, total_tokens: input + outputTokens },
    };
  }
  if (provider === 'anthropic') {
    const stop = finish === 'length' ? 'max_tokens' : finish === 'content_filter' ? 'refusal' : finish === 'tool_calls' ? 'tool_use' : 'end_turn';
    return {
      id: id('msg'),
      type: 'message',
      role: 'assistant',
      model,
      content: [...(text ? [{ type: 'text', text }] : []), ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.arguments }))],
      stop_reason: stop,
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: outputTokens },
    };
  }
  const stop = finish === 'length' ? 'max_tokens' : finish === 'content_filter' ? 'content_filtered' : finish === 'tool_calls' ? 'tool_use' : 'end_turn';
  return {
    output: { message: { role: 'assistant', content: [...(text ? [{ text }] : []), ...calls.map((c) => ({ toolUse: { toolUseId: c.id, name: c.name, input: c.arguments } }))] } },
    stopReason: stop,
    usage: { inputTokens: input, outputTokens, totalTokens: input + outputTokens },
    metrics: { latencyMs: 1 },
  };
}

export class ProviderServer {
  readonly requests: Recorded[] = [];
  script: Turn[] = [];
  responder?: Responder;
  /** Requests whose body is over this many bytes get the provider's context-window rejection. */
  byteLimit = Number.POSITIVE_INFINITY;
  /** When set, the first request after a reset sets byteLimit to its own size plus this: a limit measured from the
   * fixed part of every request (system prompt, tool specs, prompt), so a scenario holds however long the tool list is. */
  byteLimitOverFirst?: number;
  /** How long each answer waits, so a run lasts long enough to be watched, cancelled or outlived. */
  delayMs = 0;
  /** Replaces the context-window envelope (to try other servers' wording). */
  contextError?: (provider: Provider, bytes: number) => { status: number; body: unknown; headers?: Record<string, string> };
  /** Answers the GET discovery endpoints self-hosted servers have (vLLM /v1/models, llama.cpp /props, LM Studio
   * /api/v0/models/:id): return the body, or undefined for a 404. */
  discovery?: (path: string) => unknown;
  /** Every GET the server was sent, in order. */
  readonly gets: string[] = [];
  private server?: Server;
  private readonly sockets = new Set<import('node:net').Socket>();
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  reset(script: Turn[] = [], byteLimit = Number.POSITIVE_INFINITY) {
    this.requests.length = 0;
    this.script = script;
    this.byteLimit = byteLimit;
    this.byteLimitOverFirst = undefined;
    this.responder = undefined;
    this.contextError = undefined;
    this.delayMs = 0;
    this.discovery = undefined;
    this.gets.length = 0;
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = req.url ?? '';
    if (req.method === 'GET') {
      this.gets.push(url);
      const answer = this.discovery?.(url);
      res.writeHead(answer === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(answer ?? { error: { message: `no route ${url}` } }));
      return;
    }
    let provider: Provider;
    let model = '';
    if (/\/chat\/completions$/.test(url)) provider = 'openai';
    else if (/\/v1\/messages$/.test(url)) provider = 'anthropic';
    else if (/^\/model\/([^/]+)\/converse$/.test(url)) {
      provider = 'bedrock';
      model = decodeURIComponent(/^\/model\/([^/]+)\/converse$/.exec(url)![1]!);
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no route ${url}` } }));
      return;
    }
    const body = JSON.parse(raw.toString('utf8'));
    const decoded = provider === 'openai' ? decodeOpenAI(body) : provider === 'anthropic' ? decodeAnthropic(body) : decodeBedrock(body, model);
    const neutral: NeutralRequest = { provider, bytes: raw.length, ...decoded };
    const record: Recorded = { provider, path: url, bytes: raw.length, body, neutral, rejected: false, status: 200 };
    this.requests.push(record);
    if (this.byteLimitOverFirst !== undefined && this.requests.length === 1) this.byteLimit = raw.length + this.byteLimitOverFirst;
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      record.status = status;
      res.writeHead(status, { 'content-type': 'application/json', ...(provider === 'anthropic' ? { 'request-id': id('req') } : {}), ...headers }).end(JSON.stringify(payload));
    };
    if (raw.length > this.byteLimit) {
      record.rejected = true;
      const e = (this.contextError ?? contextWindowError)(provider, raw.length);
      return send(e.status, e.body, e.headers);
    }
    const turn = this.script.length ? this.script.shift()! : this.responder?.(neutral) ?? { text: 'ok' };
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    if ('contextError' in turn) {
      record.rejected = true;
      const e = (this.contextError ?? contextWindowError)(provider, raw.length);
      return send(e.status, e.body, e.headers);
    }
    if ('error' in turn) return send(turn.error.status, turn.error.body, turn.error.headers);
    if ('reset' in turn) {
      req.socket.destroy();
      return;
    }
    if ('hang' in turn) return; // never answers; the client's timeout ends it
    if ('malformed' in turn) {
      record.status = 200;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices": [ this is not json');
      return;
    }
    send(200, encode(provider, decoded.model, turn, Math.ceil(raw.length / 4)));
  }
}

// The OpenAI backend: Chat Completions with tools, through the official `openai` SDK. Works with any
// OpenAI-compatible server (OPENAI_BASE_URL or agent.baseUrl).
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { BackendOptions, FinishReason, GenerateInput, GenerateOutput, ModelBackend, ReportedWindow, StreamEvent, ToolCall } from '../../resources/models/types.js';

/** Parses a tool call's JSON arguments; a provider that sends text that is not a JSON object gets null. */
export function parseToolArguments(text: string | undefined | null): Record<string, unknown> | null {
  if (text === undefined || text === null || text.trim() === '') return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

export const OPENAI_DEFAULT_MODEL = 'gpt-4.1-mini';

export function toOpenAIMessages(input: GenerateInput): ChatCompletionMessageParam[] {
  // The system prompt is the one leading system message; the transcript never carries another.
  const out: ChatCompletionMessageParam[] = [{ role: 'system', content: input.system }];
  for (const m of input.messages) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls?.length) {
      out.push({
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
      });
    } else out.push({ role: 'assistant', content: m.content });
  }
  return out;
}

/** The SDK's message, or the server's own when the SDK found none in the places OpenAI uses. */
function errorMessage(sdkMessage: string, rawBody: string | undefined): string {
  if (!/status code \(no body\)/.test(sdkMessage) || !rawBody) return sdkMessage;
  try {
    const body = JSON.parse(rawBody);
    const found = [body?.message, body?.detail, Array.isArray(body) ? body[0]?.error?.message : undefined].find((m) => typeof m === 'string');
    return found ? `${sdkMessage.replace(/ status code \(no body\)/, '')} ${found}` : sdkMessage;
  } catch {
    return `${sdkMessage.replace(/ status code \(no body\)/, '')} ${rawBody.slice(0, 500)}`;
  }
}

export class OpenAIBackend implements ModelBackend {
  readonly provider = 'openai';
  private readonly client: OpenAI;
  /** The raw body of the newest error response. The SDK keeps only its `error` field, and OpenAI-compatible servers
   * (vLLM, Mistral, LM Studio) put their wording elsewhere. A backend serves one run, so requests are sequential. */
  private lastErrorBody: string | undefined;

  constructor(private readonly options: BackendOptions) {
    const send = options.meter?.fetch(fetch) ?? fetch;
    this.client = new OpenAI({
      fetch: async (url: string | URL | Request, init?: RequestInit) => {
        const response = await send(url, init);
        if (!response.ok) this.lastErrorBody = await response.clone().text().catch(() => undefined);
        return response;
      },
      // An OpenAI-compatible server may need no key; the SDK insists on one, and a wrong one gets a clear 401.
      apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? 'no-api-key-set',
      baseURL: options.baseUrl ?? process.env.OPENAI_BASE_URL ?? undefined,
      timeout: options.requestTimeoutMs,
      maxRetries: options.maxRetries,
    });
  }

  /**
   * The window a self-hosted or routing server reports for the model: the model list's own field (vLLM max_model_len,
   * OpenRouter context_length, Groq context_window), llama.cpp's /props n_ctx (per slot, what it will accept), LM
   * Studio's /api/v0/models. OpenAI itself reports none (the catalog knows its models), so it is not asked.
   */
  private isOpenAI(): boolean {
    return /^https:\/\/api\.openai\.com\b/.test(this.client.baseURL);
  }

  async reportedWindow(model: string, signal: AbortSignal): Promise<ReportedWindow | undefined> {
    const base = this.client.baseURL.replace(/\/+$/, '');
    if (this.isOpenAI()) return undefined;
    const root = base.replace(/\/v1$/, '');
    const get = async (url: string): Promise<any> => {
      try {
        const response = await fetch(url, { headers: { authorization: `Bearer ${this.client.apiKey}` }, signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]) });
        return response.ok ? await response.json() : undefined;
      } catch {
        return undefined;
      }
    };
    const tokens = (value: unknown) => (Number.isInteger(value) && (value as number) > 0 ? (value as number) : undefined);
    const listed = ((await get(`${base}/models`))?.data ?? []).find?.((m: { id?: string }) => m?.id === model);
    for (const field of ['max_model_len', 'context_length', 'context_window', 'max_context_length']) {
      if (tokens(listed?.[field])) return { tokens: listed[field], source: `GET ${new URL(base).pathname.replace(/\/$/, '')}/models ${field}` };
    }
    const props = await get(`${root}/props`);
    const nCtx = tokens(props?.default_generation_settings?.n_ctx) ?? tokens(props?.n_ctx);
    if (nCtx) return { tokens: nCtx, source: 'GET /props n_ctx (llama.cpp)' };
    const lmStudio = await get(`${root}/api/v0/models/${encodeURIComponent(model)}`);
    const loaded = tokens(lmStudio?.loaded_context_length) ?? tokens(lmStudio?.max_context_length);
    if (loaded) return { tokens: loaded, source: `GET /api/v0/models ${tokens(lmStudio?.loaded_context_length) ? 'loaded_context_length' : 'max_context_length'} (LM Studio)` };
    return undefined;
  }

  async generate(input: GenerateInput, signal: AbortSignal, onEvent?: (event: StreamEvent) => void): Promise<GenerateOutput> {
    const tools: ChatCompletionTool[] = input.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
    // OpenAI caches a request's longest prefix seen before by itself; the session's key routes a session's requests
    // to the same cache. Only to OpenAI's own API: a compatible server may refuse a field it does not know.
    const cacheKey = input.cache && this.isOpenAI() ? { prompt_cache_key: input.cache.key } : {};
    const params = { model: input.model, messages: toOpenAIMessages(input), max_tokens: input.maxTokens, ...(tools.length ? { tools } : {}), ...cacheKey };
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    this.lastErrorBody = undefined;
    try {
      if (onEvent) {
        // The SDK's stream helper gathers the chunks into the same completion a plain call returns.
        const stream = this.client.chat.completions.stream({ ...params, stream_options: { include_usage: true } }, { signal });
        stream.on('content.delta', ({ delta }) => delta && onEvent({ type: 'text', text: delta }));
        // A call is whole once its arguments parse as a JSON object (nothing can validly follow the closing brace),
        // which is sooner than the SDK's own "done" (the next call or the finish): reported then, once.
        const reported = new Set<number>();
        const report = (index: number, name: string, raw: string) => {
          // Parsed only when it can be whole (it ends in a brace): a parse of every delta's arguments so far was a
          // failed parse per piece, and the pieces of one call grow with its arguments.
          if (reported.has(index) || !raw.trimEnd().endsWith('}')) return;
          const id = stream.currentChatCompletionSnapshot?.choices[0]?.message.tool_calls?.[index]?.id;
          const args = parseToolArguments(raw);
          if (!id || !args) return;
          reported.add(index);
          onEvent({ type: 'toolCall', call: { id, name, arguments: args } });
        };
        stream.on('tool_calls.function.arguments.delta', ({ index, name, arguments: raw }) => report(index, name, raw));
        stream.on('tool_calls.function.arguments.done', ({ index, name, arguments: raw }) => report(index, name, raw || '{}'));
        completion = await stream.finalChatCompletion();
      } else completion = await this.client.chat.completions.create(params, { signal });
    } catch (error) {
      if (this.options.errors.isAbort(error, signal)) throw error;
      // An error event inside a stream is an APIError with no status (the stream began with 200).
      if (error instanceof OpenAI.APIError && !(error instanceof OpenAI.APIConnectionError)) {
        const inStream = error.status === undefined;
        throw this.options.errors.classify('openai', { status: error.status, code: error.code ?? undefined, type: error.type, message: errorMessage(error.message, this.lastErrorBody), body: this.lastErrorBody ?? error.error, inStream });
      }
      throw this.options.errors.network('openai', error, this.options.requestTimeoutMs);
    }
    const choice = completion.choices?.[0];
    if (!choice) throw this.options.errors.classify('openai', { status: 200, message: 'the response had no choices' });
    // prompt_tokens counts the cached ones too.
    const cached = completion.usage?.prompt_tokens_details?.cached_tokens;
    const usage = completion.usage ? { inputTokens: completion.usage.prompt_tokens, outputTokens: completion.usage.completion_tokens, ...(typeof cached === 'number' ? { cacheReadTokens: cached } : {}) } : undefined;
    const toolCalls: ToolCall[] = [];
    for (const call of choice.message.tool_calls ?? []) {
      if (call.type !== 'function') continue;
      const args = parseToolArguments(call.function.arguments);
      if (!args) {
        return { text: '', toolCalls: [], finishReason: 'invalid_tool_call', usage, detail: `arguments of ${call.function.name} are not a JSON object: ${call.function.arguments.slice(0, 200)}` };
      }
      toolCalls.push({ id: call.id, name: call.function.name, arguments: args });
    }
    let finishReason: FinishReason;
    if (choice.message.refusal) finishReason = 'content_filter';
    else if (choice.finish_reason === 'length') finishReason = 'length';
    else if (choice.finish_reason === 'content_filter') finishReason = 'content_filter';
    else finishReason = toolCalls.length ? 'tool_calls' : 'stop';
    return { text: choice.message.content ?? '', toolCalls, finishReason, usage };
  }
}

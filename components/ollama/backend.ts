// The Ollama backend: Ollama's native /api/chat with tools, through the official `ollama` SDK, for operators who keep
// their logs on their own machines. Ollama cuts an over-long prompt silently by default, so every request carries
// num_ctx (the model's window, from /api/show, or agent.contextWindowTokens) and `truncate: false`: an overflow is a
// 400 the agent's classifier reads, never a quietly shortened prompt.
import { randomUUID } from 'node:crypto';
import { Ollama, type ChatRequest, type ChatResponse, type Message as OllamaMessage, type Tool as OllamaTool } from 'ollama';
import type { BackendOptions, FinishReason, GenerateInput, GenerateOutput, ModelBackend, ReportedWindow, StreamEvent, ToolCall } from '../../resources/models/types.js';

export const OLLAMA_DEFAULT_MODEL = 'llama3.1:8b';
const DEFAULT_HOST = 'http://127.0.0.1:11434';

export function toOllamaMessages(input: GenerateInput): OllamaMessage[] {
  // The system prompt is the one leading system message; the transcript never carries another.
  const out: OllamaMessage[] = [{ role: 'system', content: input.system }];
  for (const m of input.messages) {
    if (m.role === 'user') out.push({ role: 'user', content: m.content });
    else if (m.role === 'tool') out.push({ role: 'tool', content: m.content, tool_name: m.name });
    else out.push({ role: 'assistant', content: m.content, ...(m.toolCalls?.length ? { tool_calls: m.toolCalls.map((c) => ({ function: { name: c.name, arguments: c.arguments } })) } : {}) });
  }
  return out;
}

/** The window /api/show gives: the Modelfile's num_ctx when the operator set one, else the model's trained length. */
export function windowFromShow(show: { parameters?: string; model_info?: unknown }): ReportedWindow | undefined {
  const set = /^num_ctx\s+(\d+)\s*$/m.exec(show.parameters ?? '')?.[1];
  if (set && Number(set) > 0) return { tokens: Number(set), source: 'POST /api/show parameters num_ctx' };
  const info = show.model_info instanceof Map ? Object.fromEntries(show.model_info) : ((show.model_info ?? {}) as Record<string, unknown>);
  const key = Object.keys(info).find((k) => k.endsWith('.context_length') && Number.isInteger(info[k]) && (info[k] as number) > 0);
  return key ? { tokens: info[key] as number, source: `POST /api/show model_info ${key}` } : undefined;
}

export class OllamaBackend implements ModelBackend {
  readonly provider = 'ollama';
  /** Chat requests go through the agent's request meter; /api/show, a lookup and not a model call, does not. */
  private readonly client: Ollama;
  private readonly lookups: Ollama;
  /** The signal of the request in flight: the SDK takes none per call, so its fetch reads it here (one run per backend). */
  private signal?: AbortSignal;
  private readonly windows = new Map<string, Promise<ReportedWindow | undefined>>();

  constructor(private readonly options: BackendOptions) {
    const client = (send: typeof fetch) =>
      new Ollama({
        host: options.baseUrl ?? process.env.OLLAMA_HOST ?? DEFAULT_HOST,
        // A proxy in front of Ollama may want a key; Ollama itself ignores it.
        ...(options.apiKey ? { headers: { authorization: `Bearer ${options.apiKey}` } } : {}),
        fetch: (url, init) => send(url, { ...init, signal: AbortSignal.any([AbortSignal.timeout(options.requestTimeoutMs), ...(this.signal ? [this.signal] : []), ...(init?.signal ? [init.signal] : [])]) }),
      });
    this.client = client(options.meter?.fetch(fetch) ?? fetch);
    this.lookups = client(fetch);
  }

  /** The model's window from /api/show, asked once per backend (the agent keeps it per base URL and model). */
  reportedWindow(model: string, signal?: AbortSignal): Promise<ReportedWindow | undefined> {
    if (!this.windows.has(model)) {
      this.windows.set(
        model,
        (async () => {
          this.signal = signal;
          try {
            return windowFromShow(await this.lookups.show({ model }));
          } catch {
            return undefined;
          }
        })()
      );
    }
    return this.windows.get(model)!;
  }

  async generate(input: GenerateInput, signal: AbortSignal, onEvent?: (event: StreamEvent) => void): Promise<GenerateOutput> {
    const tools: OllamaTool[] = input.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters as OllamaTool['function']['parameters'] } }));
    const numCtx = this.options.contextWindowTokens ?? (await this.reportedWindow(input.model, signal))?.tokens;
    const request: ChatRequest & { truncate: boolean } = {
      model: input.model,
      messages: toOllamaMessages(input),
      ...(tools.length ? { tools } : {}),
      stream: false,
      truncate: false,
      options: { num_predict: input.maxTokens, ...(numCtx ? { num_ctx: numCtx } : {}) },
    };
    let response: ChatResponse;
    const toolCalls: ToolCall[] = [];
    const called = (c: { function: { name: string; arguments?: Record<string, unknown> } }): ToolCall => ({ id: `call_${randomUUID()}`, name: c.function.name, arguments: c.function.arguments ?? {} });
    this.signal = signal;
    let streaming = false;
    try {
      if (onEvent) {
        // Ollama streams one JSON object per line: text in pieces, each tool call whole, the counts on the last.
        const parts = await this.client.chat({ ...request, stream: true } as ChatRequest & { stream: true });
        streaming = true;
        let text = '';
        let last: ChatResponse | undefined;
        for await (const part of parts) {
          last = part;
          if (part.message?.content) {
            text += part.message.content;
            onEvent({ type: 'text', text: part.message.content });
          }
          for (const c of part.message?.tool_calls ?? []) {
            const call = called(c);
            toolCalls.push(call);
            onEvent({ type: 'toolCall', call });
          }
        }
        response = { ...last!, message: { role: 'assistant', content: text } };
      } else {
        response = await this.client.chat(request as ChatRequest & { stream: false });
        toolCalls.push(...(response.message?.tool_calls ?? []).map(called));
      }
    } catch (error) {
      if (this.options.errors.isAbort(error, signal)) throw error;
      // The SDK's ResponseError (not exported): the server's status and its `error` text.
      const e = error as { name?: string; status_code?: number; error?: string };
      if (e?.name === 'ResponseError' && e.status_code !== undefined) throw this.options.errors.classify('ollama', { status: e.status_code, message: e.error, body: e.error });
      // An {"error": …} line inside the stream: the SDK throws a plain Error with the server's text.
      if (streaming && error instanceof Error && error.constructor === Error && error.message && !/^Did not receive done/.test(error.message)) {
        throw this.options.errors.classify('ollama', { message: error.message, body: error.message, inStream: true });
      }
      throw this.options.errors.network('ollama', error, this.options.requestTimeoutMs);
    }
    const usage = Number.isInteger(response.prompt_eval_count) ? { inputTokens: response.prompt_eval_count, outputTokens: response.eval_count ?? 0 } : undefined;
    let finishReason: FinishReason = toolCalls.length ? 'tool_calls' : 'stop';
    if (!toolCalls.length && response.done_reason === 'length') finishReason = 'length';
    return { text: response.message?.content ?? '', toolCalls, finishReason, usage };
  }
}

// The Anthropic backend: the Messages API with tools, through the official `@anthropic-ai/sdk`.
import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, MessageParam, TextBlockParam, Tool as AnthropicTool } from '@anthropic-ai/sdk/resources/messages/messages';
import type { BackendOptions, FinishReason, GenerateInput, GenerateOutput, ModelBackend, StreamEvent, ToolCall } from '../../resources/models/types.js';

export const ANTHROPIC_DEFAULT_MODEL = 'claude-sonnet-4-5';

/** The transcript as Messages: tool results are user blocks, and consecutive same-role turns are merged. */
export function toAnthropicMessages(input: GenerateInput): MessageParam[] {
  const out: MessageParam[] = [];
  const push = (role: 'user' | 'assistant', blocks: ContentBlockParam[]) => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role) (last.content as ContentBlockParam[]).push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of input.messages) {
    if (m.role === 'user') push('user', [{ type: 'text', text: m.content }]);
    else if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.toolCallId, content: m.content, ...(m.isError ? { is_error: true } : {}) }]);
    else {
      const blocks: ContentBlockParam[] = m.content ? [{ type: 'text', text: m.content }] : [];
      for (const c of m.toolCalls ?? []) blocks.push({ type: 'tool_use', id: c.id, name: c.name, input: c.arguments });
      push('assistant', blocks.length ? blocks : [{ type: 'text', text: '(no answer)' }]);
    }
  }
  return out;
}

/** Anthropic caches only at marks: one on the system prompt (with the tools before it, the prefix every request of a
 * session shares) and one on the newest block, so each request reads what the one before it wrote. Two of the four
 * marks the API allows. */
export function markForCache(system: string, messages: MessageParam[]): TextBlockParam[] {
  const last = messages.at(-1);
  const blocks = last?.content as ContentBlockParam[] | undefined;
  const end = blocks?.at(-1);
  if (end && end.type !== 'thinking' && end.type !== 'redacted_thinking') (end as { cache_control?: unknown }).cache_control = { type: 'ephemeral' };
  return [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }];
}

export class AnthropicBackend implements ModelBackend {
  readonly provider = 'anthropic';
  private readonly client: Anthropic;

  constructor(private readonly options: BackendOptions) {
    this.client = new Anthropic({
      apiKey: options.apiKey ?? process.env.ANTHROPIC_API_KEY ?? 'no-api-key-set',
      baseURL: options.baseUrl ?? process.env.ANTHROPIC_BASE_URL ?? undefined,
      timeout: options.requestTimeoutMs,
      maxRetries: options.maxRetries,
      ...(options.meter ? { fetch: options.meter.fetch(fetch) } : {}),
    });
  }

  async generate(input: GenerateInput, signal: AbortSignal, onEvent?: (event: StreamEvent) => void): Promise<GenerateOutput> {
    const tools: AnthropicTool[] = input.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters as AnthropicTool['input_schema'] }));
    // The system prompt goes in `system`, once; the messages never carry it.
    const messages = toAnthropicMessages(input);
    const system = input.cache?.marks ? markForCache(input.system, messages) : input.system;
    const params = { model: input.model, max_tokens: input.maxTokens, system, messages, ...(tools.length ? { tools } : {}) };
    let message: Anthropic.Message;
    try {
      if (onEvent) {
        // The SDK's stream helper gathers the events into the same Message a plain call returns.
        const stream = this.client.messages.stream(params, { signal });
        stream.on('text', (delta) => delta && onEvent({ type: 'text', text: delta }));
        stream.on('contentBlock', (block) => {
          if (block.type === 'tool_use') onEvent({ type: 'toolCall', call: { id: block.id, name: block.name, arguments: (block.input ?? {}) as Record<string, unknown> } });
        });
        message = await stream.finalMessage();
      } else message = await this.client.messages.create(params, { signal });
    } catch (error) {
      if (this.options.errors.isAbort(error, signal)) throw error;
      // An `error` event inside a stream is an APIError with no status (the stream began with 200).
      if (error instanceof Anthropic.APIError && !(error instanceof Anthropic.APIConnectionError)) {
        const body = error.error as { error?: { type?: string; message?: string } } | undefined;
        throw this.options.errors.classify('anthropic', { status: error.status, type: body?.error?.type ?? error.type ?? undefined, code: body?.error?.type, message: body?.error?.message ?? error.message, body, inStream: error.status === undefined });
      }
      throw this.options.errors.network('anthropic', error, this.options.requestTimeoutMs);
    }
    // input_tokens leaves out what the cache read and wrote; the agent counts every input token.
    const u = message.usage;
    const usage = u ? { inputTokens: u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0), outputTokens: u.output_tokens, ...(u.cache_read_input_tokens != null ? { cacheReadTokens: u.cache_read_input_tokens } : {}), ...(u.cache_creation_input_tokens != null ? { cacheWriteTokens: u.cache_creation_input_tokens } : {}) } : undefined;
    if (message.stop_reason === 'model_context_window_exceeded') {
      throw this.options.errors.contextWindow('anthropic', 'anthropic stopped: the conversation reached the model context window', 'model_context_window_exceeded');
    }
    let text = '';
    const toolCalls: ToolCall[] = [];
    for (const block of message.content) {
      if (block.type === 'text') text += block.text;
      else if (block.type === 'tool_use') toolCalls.push({ id: block.id, name: block.name, arguments: (block.input ?? {}) as Record<string, unknown> });
    }
    let finishReason: FinishReason;
    if (message.stop_reason === 'max_tokens') finishReason = 'length';
    else if (message.stop_reason === 'refusal') finishReason = 'content_filter';
    else finishReason = toolCalls.length ? 'tool_calls' : 'stop';
    return { text, toolCalls, finishReason, usage };
  }
}

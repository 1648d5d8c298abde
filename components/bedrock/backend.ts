// The Bedrock backend: the Converse API with toolConfig, through `@aws-sdk/client-bedrock-runtime`. Credentials and
// region come from the AWS chain (or agent.region); agent.baseUrl overrides the endpoint.
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, type ContentBlock, type Message as BedrockMessage, type SystemContentBlock, type TokenUsage, type Tool as BedrockTool } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { BackendOptions, FinishReason, GenerateInput, GenerateOutput, ModelBackend, RequestMeter, StreamEvent, ToolCall, Usage } from '../../resources/models/types.js';

export const BEDROCK_DEFAULT_MODEL = 'anthropic.claude-3-5-sonnet-20240620-v1:0';

export function toBedrockMessages(input: GenerateInput): BedrockMessage[] {
  const out: BedrockMessage[] = [];
  const push = (role: 'user' | 'assistant', blocks: ContentBlock[]) => {
    const last = out[out.length - 1];
    if (last && last.role === role) last.content!.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of input.messages) {
    if (m.role === 'user') push('user', [{ text: m.content }]);
    else if (m.role === 'tool') push('user', [{ toolResult: { toolUseId: m.toolCallId, content: [{ text: m.content }], status: m.isError ? 'error' : 'success' } }]);
    else {
      const blocks: ContentBlock[] = m.content ? [{ text: m.content }] : [];
      for (const c of m.toolCalls ?? []) blocks.push({ toolUse: { toolUseId: c.id, name: c.name, input: c.arguments as never } });
      push('assistant', blocks.length ? blocks : [{ text: '(no answer)' }]);
    }
  }
  return out;
}

interface AwsError {
  name?: string;
  message?: string;
  $fault?: string;
  $metadata?: { httpStatusCode?: number };
}

/** The HTTP handler with each request (every attempt of the SDK's retries) passed through the agent's request meter. */
function metered(inner: NodeHttpHandler, meter: RequestMeter | undefined): NodeHttpHandler {
  if (!meter) return inner;
  const handler = Object.create(inner) as NodeHttpHandler;
  handler.handle = async (request, options) => {
    const port = request.port ? `:${request.port}` : '';
    const body = request.body as unknown;
    const bytes = typeof body === 'string' ? Buffer.byteLength(body) : body instanceof Uint8Array ? body.byteLength : 0;
    const done = meter.begin(`${request.protocol}//${request.hostname}${port}${request.path}`, bytes);
    try {
      const out = await inner.handle(request, options);
      done(out.response.statusCode);
      return out;
    } catch (error) {
      done(undefined);
      throw error;
    }
  };
  return handler;
}

/** Bedrock caches only at cachePoint blocks: one after the system prompt (with the tools before it, the prefix every
 * request of a session shares) and one after the newest block, so each request reads what the one before it wrote.
 * Only where the agent asked (input.cache.marks): a model that cannot cache refuses them. */
export function markForCache(system: SystemContentBlock[], messages: BedrockMessage[]): void {
  system.push({ cachePoint: { type: 'default' } });
  messages.at(-1)?.content?.push({ cachePoint: { type: 'default' } });
}

/** Converse's inputTokens leaves out what the cache read and wrote; the agent counts every input token. */
function usageOf(u: TokenUsage | undefined): Usage | undefined {
  if (!u) return undefined;
  const read = u.cacheReadInputTokens;
  const write = u.cacheWriteInputTokens;
  return { inputTokens: (u.inputTokens ?? 0) + (read ?? 0) + (write ?? 0), outputTokens: u.outputTokens ?? 0, ...(read !== undefined ? { cacheReadTokens: read } : {}), ...(write !== undefined ? { cacheWriteTokens: write } : {}) };
}

export class BedrockBackend implements ModelBackend {
  readonly provider = 'bedrock';
  private readonly client: BedrockRuntimeClient;

  constructor(private readonly options: BackendOptions) {
    this.client = new BedrockRuntimeClient({
      region: options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
      ...(options.baseUrl ?? process.env.BEDROCK_ENDPOINT_URL ? { endpoint: options.baseUrl ?? process.env.BEDROCK_ENDPOINT_URL } : {}),
      maxAttempts: options.maxRetries + 1,
      // HTTP/1.1: the client's default HTTP/2 handler exists for bidirectional streams, which Converse does not use,
      // and HTTP/1.1 also reaches Bedrock-compatible proxies.
      requestHandler: metered(new NodeHttpHandler({ requestTimeout: options.requestTimeoutMs, connectionTimeout: Math.min(options.requestTimeoutMs, 10_000) }), options.meter),
    });
  }

  async generate(input: GenerateInput, signal: AbortSignal, onEvent?: (event: StreamEvent) => void): Promise<GenerateOutput> {
    const tools: BedrockTool[] = input.tools.map((t) => ({ toolSpec: { name: t.name, description: t.description, inputSchema: { json: t.parameters as never } } }));
    // The system prompt goes in `system` blocks, once.
    const system: SystemContentBlock[] = [{ text: input.system }];
    const messages = toBedrockMessages(input);
    if (input.cache?.marks) markForCache(system, messages);
    const params = {
      modelId: input.model,
      system,
      messages,
      inferenceConfig: { maxTokens: input.maxTokens },
      ...(tools.length ? { toolConfig: { tools } } : {}),
    };
    let text = '';
    const toolCalls: ToolCall[] = [];
    let stop: string | undefined;
    let usage: Usage | undefined;
    let streaming = false;
    try {
      if (onEvent) {
        // ConverseStream: text in deltas, a tool call's input as JSON text in deltas until its block stops.
        const response = await this.client.send(new ConverseStreamCommand(params), { abortSignal: signal });
        streaming = true;
        let open: { id: string; name: string; input: string } | undefined;
        for await (const event of response.stream ?? []) {
          if (event.contentBlockStart?.start?.toolUse) {
            const t = event.contentBlockStart.start.toolUse;
            open = { id: t.toolUseId!, name: t.name!, input: '' };
          } else if (event.contentBlockDelta?.delta) {
            const d = event.contentBlockDelta.delta;
            if (d.text) {
              text += d.text;
              onEvent({ type: 'text', text: d.text });
            } else if (d.toolUse?.input !== undefined && open) open.input += d.toolUse.input;
          } else if (event.contentBlockStop && open) {
            let args: Record<string, unknown>;
            try {
              args = open.input.trim() ? JSON.parse(open.input) : {};
            } catch {
              return { text: '', toolCalls: [], finishReason: 'invalid_tool_call', detail: `input of ${open.name} is not JSON: ${open.input.slice(0, 200)}` };
            }
            const call = { id: open.id, name: open.name, arguments: args };
            toolCalls.push(call);
            onEvent({ type: 'toolCall', call });
            open = undefined;
          } else if (event.messageStop) stop = event.messageStop.stopReason;
          else if (event.metadata?.usage) usage = usageOf(event.metadata.usage);
        }
      } else {
        const response = await this.client.send(new ConverseCommand(params), { abortSignal: signal });
        usage = usageOf(response.usage);
        for (const block of response.output?.message?.content ?? []) {
          if (block.text !== undefined) text += block.text;
          else if (block.toolUse) toolCalls.push({ id: block.toolUse.toolUseId!, name: block.toolUse.name!, arguments: (block.toolUse.input ?? {}) as Record<string, unknown> });
        }
        stop = response.stopReason;
      }
    } catch (error) {
      if (this.options.errors.isAbort(error, signal)) throw error;
      const e = error as AwsError;
      const status = e.$metadata?.httpStatusCode;
      // An exception event inside the stream (validationException, throttlingException…) has a fault but no status.
      const inStream = streaming && status === undefined;
      if (e.$fault && (status !== undefined || inStream)) {
        // Classified from the SDK error; its raw message is not surfaced to the operator.
        throw this.options.errors.classify('bedrock', { status, code: e.name, message: e.message, inStream }, { surfaceMessage: false, label: e.name });
      }
      throw this.options.errors.network('bedrock', error, this.options.requestTimeoutMs);
    }
    let finishReason: FinishReason;
    if (stop === 'max_tokens') finishReason = 'length';
    else if (stop === 'content_filtered' || stop === 'guardrail_intervened') finishReason = 'content_filter';
    else finishReason = toolCalls.length ? 'tool_calls' : 'stop';
    return { text, toolCalls, finishReason, usage };
  }
}

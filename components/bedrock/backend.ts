// The Bedrock backend: the Converse API with toolConfig, through `@aws-sdk/client-bedrock-runtime`. Credentials and
// region come from the AWS chain (or agent.region); agent.baseUrl overrides the endpoint.
import { BedrockRuntimeClient, ConverseCommand, type ContentBlock, type Message as BedrockMessage, type Tool as BedrockTool } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { BackendOptions, FinishReason, GenerateInput, GenerateOutput, ModelBackend, ToolCall } from '../../resources/models/types.js';

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
      requestHandler: new NodeHttpHandler({ requestTimeout: options.requestTimeoutMs, connectionTimeout: Math.min(options.requestTimeoutMs, 10_000) }),
    });
  }

  async generate(input: GenerateInput, signal: AbortSignal): Promise<GenerateOutput> {
    const tools: BedrockTool[] = input.tools.map((t) => ({ toolSpec: { name: t.name, description: t.description, inputSchema: { json: t.parameters as never } } }));
    let response;
    try {
      response = await this.client.send(
        new ConverseCommand({
          modelId: input.model,
          // The system prompt goes in `system` blocks, once.
          system: [{ text: input.system }],
          messages: toBedrockMessages(input),
          inferenceConfig: { maxTokens: input.maxTokens },
          ...(tools.length ? { toolConfig: { tools } } : {}),
        }),
        { abortSignal: signal }
      );
    } catch (error) {
      if (this.options.errors.isAbort(error, signal)) throw error;
      const e = error as AwsError;
      const status = e.$metadata?.httpStatusCode;
      if (status !== undefined && e.$fault) {
        // Classified from the SDK error; its raw message is not surfaced to the operator.
        throw this.options.errors.classify('bedrock', { status, code: e.name, message: e.message }, { surfaceMessage: false, label: e.name });
      }
      throw this.options.errors.network('bedrock', error, this.options.requestTimeoutMs);
    }
    const usage = response.usage ? { inputTokens: response.usage.inputTokens ?? 0, outputTokens: response.usage.outputTokens ?? 0 } : undefined;
    let text = '';
    const toolCalls: ToolCall[] = [];
    for (const block of response.output?.message?.content ?? []) {
      if (block.text !== undefined) text += block.text;
      else if (block.toolUse) toolCalls.push({ id: block.toolUse.toolUseId!, name: block.toolUse.name!, arguments: (block.toolUse.input ?? {}) as Record<string, unknown> });
    }
    let finishReason: FinishReason;
    const stop = response.stopReason;
    if (stop === 'max_tokens') finishReason = 'length';
    else if (stop === 'content_filtered' || stop === 'guardrail_intervened') finishReason = 'content_filter';
    else finishReason = toolCalls.length ? 'tool_calls' : 'stop';
    return { text, toolCalls, finishReason, usage };
  }
}

// The one backend interface every provider implements, and the transcript shape it reads.

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export type Message =
  | { role: 'user'; content: string; at?: number }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[]; at?: number }
  | {
      role: 'tool';
      toolCallId: string;
      name: string;
      content: string;
      isError?: boolean;
      /** 'cap': cut to agent.maxToolResultBytes when stored; 'context': cut after a context-window rejection. */
      cut?: 'cap' | 'context';
      at?: number;
    };

export type ToolMessage = Extract<Message, { role: 'tool' }>;

export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface GenerateInput {
  /** The system prompt. Backends send it once, in the provider's own system slot, never as a message. */
  system: string;
  messages: Message[];
  tools: ToolSpec[];
  model: string;
  maxTokens: number;
}

export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'invalid_tool_call';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

export interface GenerateOutput {
  text: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage?: Usage;
  /** Set with finishReason 'invalid_tool_call': what could not be parsed. */
  detail?: string;
}

export interface ModelBackend {
  readonly provider: string;
  generate(input: GenerateInput, signal: AbortSignal): Promise<GenerateOutput>;
}

/** What a backend factory receives: the agent config in force. */
export interface BackendOptions {
  model?: string;
  apiKey?: string;
  baseUrl?: string;
  region?: string;
  requestTimeoutMs: number;
  maxRetries: number;
}

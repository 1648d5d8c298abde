// The contract between the agent and its model backends: the transcript shape, the one backend interface, and what
// a backend is handed (its options and the agent's provider-error classifier). Declarations only: a backend package
// (components/<provider>) compiles against this file and imports nothing of the agent at run time, so it works
// whether npm links it into node_modules or copies it there (a packed tarball). See DESIGN.md "Backends as packages".

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export type Message =
  /** followup: the AgentFollowup id when the prompt was a follow-up the model scheduled (schedule_followup); recall:
   * the notes the agent's memory recalled for it, sent after it (agent/memory/recall.ts). */
  | { role: 'user'; content: string; at?: number; followup?: string; recall?: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[]; at?: number }
  | {
      role: 'tool';
      toolCallId: string;
      name: string;
      content: string;
      isError?: boolean;
      /** 'cap': cut to agent.maxToolResultBytes when stored; 'context': cut after a context-window rejection;
       * 'workingSet': cut before a model call, older than agent.workingSetBytes of newest results. */
      cut?: 'cap' | 'context' | 'workingSet';
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
  /**
   * The provider's prompt cache (agent/context/request.ts keeps everything before the newest turn byte-stable).
   * `key`: the session, for an API that takes a cache key (OpenAI prompt_cache_key). `marks`: mark where the stable
   * prefix ends (the system prompt, with the tools before it) and the end of the newest message, for an API that
   * caches only at marks (Anthropic cache_control, Bedrock cachePoint): each request then reads what the one before
   * it wrote.
   */
  cache?: { key: string; marks: boolean };
}

export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'invalid_tool_call';

export interface Usage {
  /** Every input token of the request, cached or not. */
  inputTokens: number;
  outputTokens: number;
  /** Of inputTokens, those read from the provider's prompt cache (billed at its cache-read price). */
  cacheReadTokens?: number;
  /** Of inputTokens, those written to the cache (Anthropic, Bedrock: billed at the cache-write price). */
  cacheWriteTokens?: number;
}

export interface GenerateOutput {
  text: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage?: Usage;
  /** Set with finishReason 'invalid_tool_call': what could not be parsed. */
  detail?: string;
}

/** A context window as a server reported it, and where it was read (e.g. "GET /v1/models max_model_len"). */
export interface ReportedWindow {
  tokens: number;
  source: string;
}

/** What a streaming call reports as it goes: text as the model writes it, each tool call once it is whole. */
export type StreamEvent = { type: 'text'; text: string } | { type: 'toolCall'; call: ToolCall };

export interface ModelBackend {
  readonly provider: string;
  /**
   * One model call. With `onEvent` the backend uses its SDK's streaming API and reports as it goes; the result is the
   * same either way. A failure inside the stream is classified as the same failure answered before it would be.
   */
  generate(input: GenerateInput, signal: AbortSignal, onEvent?: (event: StreamEvent) => void): Promise<GenerateOutput>;
  /** Asks the server for the model's context window (self-hosted servers report it); undefined when it does not say. */
  reportedWindow?(model: string, signal: AbortSignal): Promise<ReportedWindow | undefined>;
}

/** What a backend factory receives: the agent config in force, and the agent's provider-error seam. */
export interface BackendOptions {
  model?: string;
  apiKey?: string;
  baseUrl?: string;
  region?: string;
  requestTimeoutMs: number;
  maxRetries: number;
  /** agent.contextWindowTokens, when the operator set it (Ollama sizes its context from it). */
  contextWindowTokens?: number;
  errors: ProviderErrors;
  /** Records each HTTP request the backend's SDK sends for a model call (retries included): the model-call log. */
  meter?: RequestMeter;
}

/**
 * The agent's request meter (agent/modelCalls.ts). A backend puts it where its SDK sends requests: `fetch` wraps the
 * fetch an SDK takes (OpenAI, Anthropic, Ollama), `begin` is for an SDK with its own HTTP handler (Bedrock).
 */
export interface RequestMeter {
  fetch(inner?: typeof fetch): typeof fetch;
  /** A request is going out; call the result with the response status (undefined: none came). */
  begin(url: string, bytes: number): (status: number | undefined) => void;
}

/** What a backend knows about a failed request, taken from its SDK's error. */
export interface ProviderFailure {
  status?: number;
  code?: string;
  type?: string;
  message?: string;
  /** The response body as the SDK gave it (object or text); searched for codes and wording too. */
  body?: unknown;
  /** An error event inside a stream that began with 200: judged by its body as the rejection it stands for. */
  inStream?: boolean;
}

/** An error the loop reads: it never reads provider wording, only these fields. */
export interface ModelErrorShape extends Error {
  readonly provider: string;
  readonly status: number | undefined;
  readonly contextWindowExceeded: boolean;
  readonly code?: string;
}

/**
 * The agent's one provider-error seam (resources/models/backendHelpers.ts), handed to every backend so that every
 * provider error passes the same classifier, whichever package the backend came from.
 */
export interface ProviderErrors {
  /** `surfaceMessage: false` keeps the provider's raw wording out of the message (Bedrock). */
  classify(provider: string, failure: ProviderFailure, options?: { surfaceMessage?: boolean; label?: string }): ModelErrorShape;
  /** A request that never reached the provider: timeout, refused connection, reset. */
  network(provider: string, error: unknown, timeoutMs: number): ModelErrorShape;
  /** The provider itself said the conversation no longer fits (e.g. a stop reason), without an HTTP error. */
  contextWindow(provider: string, message: string, code: string): ModelErrorShape;
  /** An abort is not a provider failure: the caller cancelled. */
  isAbort(error: unknown, signal?: AbortSignal): boolean;
}

/** What a backend registers: resources/models/models.ts keeps these in a Map on globalThis under REGISTRY_KEY. */
export interface BackendRegistration {
  provider: string;
  defaultModel: string;
  create(options: BackendOptions): ModelBackend;
}

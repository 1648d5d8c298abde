import type { Message, ProviderErrors, ProviderFailure, ToolCall } from './types.js';

// Provider-error classification, shared by every backend: one ModelError shape and one classifier that
// decides whether a rejection means "the request is longer than the model's context window".
// The loop never reads provider wording; it reads `contextWindowExceeded`.

export class ModelError extends Error {
  override readonly name = 'ModelError';
  constructor(
    message: string,
    readonly provider: string,
    readonly status: number | undefined,
    readonly contextWindowExceeded: boolean,
    readonly code?: string
  ) {
    super(message);
  }
}

export function isModelError(error: unknown): error is ModelError {
  return error instanceof Error && error.name === 'ModelError' && 'contextWindowExceeded' in error;
}

/** The signals, checked in this order: structured codes, then wording, then the rate-limit veto. */
export const CONTEXT_WINDOW_SIGNALS = {
  flaggableStatuses: [400, 413, 422],
  statusAlone: [413],
  codes: ['context_length_exceeded', 'request_too_large', 'exceed_context_size_error'],
  phrases: [
    { source: 'OpenAI, OpenRouter', pattern: /maximum context length is \d+ tokens/i },
    { source: 'vLLM', pattern: /longer than the maximum model length/i },
    { source: 'vLLM', pattern: /is too long and exceeds limit of \d+/i },
    { source: 'llama.cpp server', pattern: /exceeds the available context size/i },
    { source: 'LM Studio', pattern: /tokens to keep from the initial prompt is greater than the context length/i },
    { source: 'Groq', pattern: /please reduce the length of the messages or completion/i },
    { source: 'Mistral', pattern: /too large for model with \d+ maximum context length/i },
    { source: 'Gemini (OpenAI-compatible)', pattern: /input token count \(?\d+\)? exceeds the maximum number of tokens allowed/i },
    { source: 'Anthropic', pattern: /prompt is too long/i },
    { source: 'Anthropic', pattern: /input length and `?max_tokens`? exceed context limit/i },
    { source: 'Bedrock', pattern: /input is too long for requested model/i },
    { source: 'Bedrock', pattern: /too many (input )?tokens/i },
    { source: 'generic', pattern: /exceeds? (the )?(model'?s )?(maximum )?context (window|length)/i },
  ],
  rateLimitVeto: [/rate.?limit/i, /per minute/i, /\bTPM\b/, /quota/i],
} as const;

function failureText(failure: ProviderFailure): string {
  let body = '';
  if (typeof failure.body === 'string') body = failure.body;
  else if (failure.body !== undefined) {
    try {
      body = JSON.stringify(failure.body);
    } catch {
      body = '';
    }
  }
  // JSON nested inside a message string is still text: its codes and wording are found as they are.
  return [failure.code, failure.type, failure.message, body].filter(Boolean).join('\n');
}

/** True when the provider rejected the request as longer than the model's context window. */
export function isContextWindowExceeded(failure: ProviderFailure): boolean {
  const s = CONTEXT_WINDOW_SIGNALS;
  if (failure.status === undefined || !(s.flaggableStatuses as readonly number[]).includes(failure.status)) return false;
  const text = failureText(failure);
  if (s.codes.some((code) => new RegExp(`\\b${code}\\b`).test(text))) return true;
  if ((s.statusAlone as readonly number[]).includes(failure.status)) return true;
  if (s.rateLimitVeto.some((veto) => veto.test(text))) return false;
  return s.phrases.some((phrase) => phrase.pattern.test(text));
}

/**
 * The one classifier every provider error passes: builds the ModelError the loop reads.
 * `surfaceMessage: false` keeps the provider's raw wording out of the message (Bedrock).
 */
export function classifyProviderError(
  provider: string,
  failure: ProviderFailure,
  options: { surfaceMessage?: boolean; label?: string } = {}
): ModelError {
  const contextWindowExceeded = isContextWindowExceeded(failure);
  const status = failure.status;
  const where = status === undefined ? '' : ` (HTTP ${status})`;
  const label = options.label ?? failure.code ?? failure.type;
  let detail: string;
  if (options.surfaceMessage === false) {
    detail = contextWindowExceeded ? 'the request is longer than the model context window' : label ? `${label}` : 'request rejected';
  } else {
    detail = failure.message || label || 'request failed';
  }
  let hint = '';
  if (contextWindowExceeded) hint = '';
  else if (status === 401 || status === 403) hint = ' Check the provider credentials (API key or AWS credentials).';
  else if (status === 429) hint = ' The provider is rate limiting; try again later.';
  else if (status !== undefined && status >= 500) hint = ' The provider failed; try again later.';
  else if (status === undefined) hint = ' Check that the provider endpoint is reachable.';
  return new ModelError(`${provider} request failed${where}: ${detail}.${hint}`.replace(/\.\.(\s|$)/g, '.$1'), provider, status, contextWindowExceeded, failure.code);
}

/** An abort is not a provider failure: the caller cancelled. */
export function isAbortError(error: unknown, signal?: AbortSignal): boolean {
  if (signal?.aborted) return true;
  const name = (error as { name?: string } | null)?.name;
  return name === 'AbortError' || name === 'APIUserAbortError';
}

/**
 * The transcript as providers accept it: every tool call answered. A run cancelled (or cut off) between a model's
 * tool calls and their results leaves calls with no result; providers reject that, so each gets a stand-in result.
 */
export function answeredTranscript(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  let open: ToolCall[] = [];
  const close = () => {
    for (const call of open) {
      out.push({ role: 'tool', toolCallId: call.id, name: call.name, content: '{"error":"this tool call did not run: the run ended before it"}', isError: true });
    }
    open = [];
  };
  for (const m of messages) {
    if (m.role === 'tool') {
      open = open.filter((c) => c.id !== m.toolCallId);
      out.push(m);
      continue;
    }
    close();
    out.push(m);
    if (m.role === 'assistant' && m.toolCalls?.length) open = [...m.toolCalls];
  }
  close();
  return out;
}

/** A request that never reached the provider: timeout, refused connection, reset. */
export function networkError(provider: string, error: unknown, timeoutMs: number): ModelError {
  const e = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const timedOut = /timeout|timed out/i.test(`${e.name} ${e.message}`);
  const detail = timedOut ? `no answer within agent.requestTimeoutMs (${timeoutMs} ms)` : `${e.cause?.code ?? e.cause?.message ?? e.message ?? 'connection failed'}`;
  return new ModelError(`${provider} request failed: ${detail}. Check that the provider endpoint is reachable${timedOut ? ', or raise agent.requestTimeoutMs' : ''}.`, provider, undefined, false);
}

/** The seam handed to every backend (BackendOptions.errors): the same classifier for every provider package. */
export const providerErrors: ProviderErrors = {
  classify: classifyProviderError,
  network: networkError,
  contextWindow: (provider, message, code) => new ModelError(message, provider, 400, true, code),
  isAbort: isAbortError,
};

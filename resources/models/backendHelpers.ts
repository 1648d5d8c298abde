import type { Message, ProviderErrors, ProviderFailure, ToolCall } from './types.js';

// Provider-error classification, shared by every backend: one ModelError shape and one classifier that
// decides whether a rejection means "the request is longer than the model's context window".
// The loop never reads provider wording; it reads `contextWindowExceeded`.

export class ModelError extends Error {
  override readonly name = 'ModelError';
  /** What the model-call log records: context_window, rate_limit, auth, client, server, stream, network or timeout. */
  readonly errorClass: string;
  constructor(
    message: string,
    readonly provider: string,
    readonly status: number | undefined,
    readonly contextWindowExceeded: boolean,
    readonly code?: string,
    errorClass?: string
  ) {
    super(message);
    this.errorClass = errorClass ?? (contextWindowExceeded ? 'context_window' : statusErrorClass(status));
  }
}

/** A failed request's class from its status alone (a retried attempt the classifier never saw, or no better cue). */
export function statusErrorClass(status: number | undefined): string {
  if (status === undefined) return 'network';
  if (status === 429) return 'rate_limit';
  if (status === 401 || status === 403) return 'auth';
  if (status >= 500) return 'server';
  return 'client';
}

export function isModelError(error: unknown): error is ModelError {
  return error instanceof Error && error.name === 'ModelError' && 'contextWindowExceeded' in error;
}

/**
 * The signals, as data, checked in this order: a status that can mean it at all; structured codes; a status that
 * means it alone; the vetoes (a rejection cutting tool results cannot fix: rate limits, quotas and billing, an
 * output-size, message-count or header limit); then the family's grammar: a subject that is the input (context,
 * prompt, input, request, messages, token count…) within a few words of a limit (length, window, limit, maximum,
 * exceeds, too long…) in one sentence. Every text in the error is read, JSON nested in a message included.
 */
export const CONTEXT_WINDOW_SIGNALS = {
  flaggableStatuses: [400, 413, 422],
  statusAlone: [413],
  codes: ['context_length_exceeded', 'model_max_prompt_tokens_exceeded', 'exceed_context_size_error', 'request_too_large', 'context_window_exceeded', 'ContextWindowExceededError'],
  vetoes: [
    { why: 'a rate limit', pattern: /rate.?limit|per (minute|min\b|day)|\b[TR]P[MD]\b|too many requests/i },
    { why: 'a quota or billing', pattern: /quota|billing|credit balance|insufficient (balance|funds|credits?)|payment/i },
    { why: 'an output-size limit', pattern: /(^|[.:;]\s*)\W?max_(new_|completion_|output_)?tokens\W?\s*(:|is\b|must\b|should\b|cannot\b|=|>)|\b(output|completion) tokens\b[^.]*\b(at most|maximum allowed)|\b(at most|maximum allowed( number of)?) \d* ?(output|completion) tokens/i },
    { why: 'a message-count limit', pattern: /array too long|array_above_max_length/i },
    { why: 'a header limit', pattern: /(header|cookie)s? too large/i },
  ],
  /** What the input is called. */
  subject: /\b(context(\s+(window|length|size))?|prompts?|inputs?|request|messages|conversation|sequence|(number|count) of tokens|tokens? count|tokens? limit|model (max(imum)? )?length)\b/gi,
  /** What is said of it. */
  limit: /\b(length|window|limit|maximum|exceed(s|ed|ing)?|too (long|large|big|many)|greater than|larger than|more than|must be (<=|less than|at most|no more than)|must have (less|fewer) than)/gi,
  /** How far apart (characters) a subject and a limit may be, in one sentence. */
  nearBy: 60,
};

/** Every text in an error: its code, type and message, and every string in its body, JSON inside a string parsed and
 * walked too (gateways wrap the upstream error as text). Keys are not read: `"type":"invalid_request_error"` says
 * nothing about length. */
function errorTexts(failure: ProviderFailure): string[] {
  const out: string[] = [];
  const walk = (value: unknown, depth: number): void => {
    if (depth > 8 || value === null || value === undefined) return;
    if (typeof value === 'string') {
      out.push(value);
      const at = value.search(/[[{]/); // "upstream said: {...}"
      if (at >= 0) {
        try {
          walk(JSON.parse(value.slice(at)), depth + 1);
        } catch {
          // not JSON after all: read as text
        }
      }
    } else if (Array.isArray(value)) value.forEach((v) => walk(v, depth + 1));
    else if (typeof value === 'object') Object.values(value as Record<string, unknown>).forEach((v) => walk(v, depth + 1));
  };
  for (const part of [failure.code, failure.type, failure.message, failure.body]) walk(part, 0);
  return out;
}

/** The family's grammar: a subject naming the input near a limit word, in one sentence of `text`. */
export function saysInputOverLimit(text: string): boolean {
  const s = CONTEXT_WINDOW_SIGNALS;
  for (const sentence of text.split(/[.!?](?=\s|$)|\n/)) {
    const subjects = [...sentence.matchAll(s.subject)].map((m) => m.index!);
    if (subjects.length === 0) continue;
    const limits = [...sentence.matchAll(s.limit)].map((m) => m.index!);
    if (subjects.some((at) => limits.some((l) => Math.abs(l - at) <= s.nearBy))) return true;
  }
  return false;
}

/** True when the provider rejected the request as longer than the model's context window. */
export function isContextWindowExceeded(failure: ProviderFailure): boolean {
  const s = CONTEXT_WINDOW_SIGNALS;
  // An error event in a stream has no status of its own (the stream began with 200): its body is read as a 400's.
  const status = failure.status ?? (failure.inStream ? 400 : undefined);
  if (status === undefined || !s.flaggableStatuses.includes(status)) return false;
  const texts = errorTexts(failure);
  if (texts.some((text) => s.codes.some((code) => new RegExp(`\\b${code}\\b`).test(text)))) return true;
  if (s.statusAlone.includes(status)) return true;
  if (texts.some((text) => s.vetoes.some((veto) => veto.pattern.test(text)))) return false;
  return texts.some(saysInputOverLimit);
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
  const where = status !== undefined ? ` (HTTP ${status})` : failure.inStream ? ' (an error event in the stream)' : '';
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
  else if (status === undefined && !failure.inStream) hint = ' Check that the provider endpoint is reachable.';
  const errorClass = failure.inStream && !contextWindowExceeded ? 'stream' : undefined;
  return new ModelError(`${provider} request failed${where}: ${detail}.${hint}`.replace(/\.\.(\s|$)/g, '.$1'), provider, status, contextWindowExceeded, failure.code, errorClass);
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

/**
 * What went wrong with a connection, the same whether it failed before the answer began or in the middle of a
 * stream: the deepest system code in the cause chain (ECONNREFUSED, UND_ERR_SOCKET…), named when it is a dropped
 * connection, else the innermost message.
 */
export function connectionDetail(error: unknown): string {
  const { code, message, host } = innermost(error);
  if (droppedConnection(code)) return `the connection closed before the answer was complete (${code})`;
  // Which host: an operator reading ENOTFOUND alone cannot tell a typo in agent.baseUrl from a machine offline.
  if (host && (code === 'ENOTFOUND' || code === 'EAI_AGAIN')) return `${host} does not resolve (${code})`;
  if (host && code === 'ECONNREFUSED') return `${host} refused the connection (${code})`;
  if (host && code) return `${host}: ${code}`;
  return code ?? message ?? 'connection failed';
}

/** The deepest system code and message in an error's cause chain. */
function innermost(error: unknown): { code?: string; message?: string; host?: string } {
  let code: string | undefined;
  let message: string | undefined;
  let host: string | undefined;
  for (let e = error as { code?: unknown; message?: unknown; cause?: unknown; hostname?: unknown; address?: unknown; port?: unknown } | undefined, depth = 0; e && typeof e === 'object' && depth < 8; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && /^[A-Z_]+$/.test(e.code)) code = e.code;
    if (typeof e.message === 'string' && e.message) message = e.message;
    // Node's system errors carry the name they looked up, or the address and port they connected to.
    if (typeof e.hostname === 'string' && e.hostname) host = e.hostname;
    else if (typeof e.address === 'string' && e.address) host = typeof e.port === 'number' ? `${e.address}:${e.port}` : e.address;
  }
  return { code, message, host };
}

const droppedConnection = (code: string | undefined) => code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';

/** A request that never reached the provider, or whose answer stopped coming: timeout, refused connection, reset. */
export function networkError(provider: string, error: unknown, timeoutMs: number): ModelError {
  const e = error as { name?: string; message?: string };
  // Smithy names a reset connection TimeoutError: its code says what happened.
  const timedOut = !droppedConnection(innermost(error).code) && /timeout|timed out/i.test(`${e.name} ${e.message}`);
  const detail = timedOut ? `no answer within agent.requestTimeoutMs (${timeoutMs} ms)` : connectionDetail(error);
  return new ModelError(`${provider} request failed: ${detail}. Check that the provider endpoint is reachable${timedOut ? ', or raise agent.requestTimeoutMs' : ''}.`, provider, undefined, false, undefined, timedOut ? 'timeout' : 'network');
}

/** The seam handed to every backend (BackendOptions.errors): the same classifier for every provider package. */
export const providerErrors: ProviderErrors = {
  classify: classifyProviderError,
  network: networkError,
  contextWindow: (provider, message, code) => new ModelError(message, provider, 400, true, code),
  isAbort: isAbortError,
};

/** In a compaction summary cut inside a turn, the heading under which the prompt being answered is restated whole. */
export const CURRENT_PROMPT_HEADING = "The operator's prompt being answered, kept whole";

/** The line a prompt is sent with: when the operator sent it (agent/context/request.ts). In the prompt, not the system
 * prompt, so the time never changes a byte of what came before it. */
/** Opens what the agent's memory recalled for a prompt (agent/memory/memory.ts), sent between it and its sent line. */
export const RECALL_HEADING = 'Notes about this instance from earlier sessions (agent memory; check before relying on one):';
export const sentLine = (at: number) => `\n\n[sent ${new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z')}]`;
const SENT_LINE = /\n\n\[sent \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\]$/;

/** What a user message asks: itself (without the line saying when it was sent) or, for a compaction summary that
 * restates the prompt being answered, that prompt. */
export function promptText(content: string): string {
  const sent = content.replace(SENT_LINE, '');
  // What the agent's memory recalled for it is context, not the question.
  const recalled = sent.indexOf(`\n\n${RECALL_HEADING}`);
  const asked = recalled < 0 ? sent : sent.slice(0, recalled);
  const at = asked.lastIndexOf(`\n\n${CURRENT_PROMPT_HEADING}`);
  if (at < 0) return asked;
  const body = asked.slice(at + 2);
  return body.slice(body.indexOf(':\n') + 2);
}

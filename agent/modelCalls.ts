// The model-call log: one AgentModelCall record per HTTP request a backend's SDK sends for a model call (its retries
// each count), with the session, provider, host, model, request bytes, the tokens the provider reported, latency,
// status, error class and cost; and what the spending limits (agent.maxCostUsd, agent.maxSessionCostUsd) read back.
import type { WriteBehind } from './writeBehind.js';
import { millisOf, RecordLog, type LogTable as CallTable } from './recordLog.js';
import { randomUUID } from 'node:crypto';
import { statusErrorClass } from '../resources/models/backendHelpers.js';
import type { RequestMeter, Usage } from '../resources/models/types.js';
import type { AgentConfig } from './agent.js';
import { catalogPrice, type Price } from './modelCatalog.js';

export interface ModelCallRecord {
  id: string;
  session_id: string;
  /** When the request went out (ms). */
  at: number;
  node: string | null;
  provider: string;
  /** The host the request went to (host:port), never the path or a key. */
  host: string;
  model: string;
  requestBytes: number;
  /** The response's HTTP status; null when none came (refused, reset, timed out). */
  status: number | null;
  /** As the provider reported them; null when it did not (a failed request, a server that reports none). Input counts
   * every input token, cached or not. */
  inputTokens: number | null;
  outputTokens: number | null;
  /** Of the input, those read from and written to the provider's prompt cache; null when it did not say. */
  cacheReadTokens: number | null;
  cacheWriteTokens: number | null;
  /** From the request going out to the answer's last byte (a failed attempt: to its response). */
  latencyMs: number;
  /** For a failed request: context_window, rate_limit, auth, client, server, stream, network or timeout. */
  errorClass: string | null;
  /** What the request cost at the price in force; null when no price is known. */
  costUsd: number | null;
  /** Counted from the pre-flight estimate because the provider reported no tokens. */
  tokensEstimated: boolean;
  streamed: boolean;
  /** What the call was for: a turn of the conversation, or a compaction summary. */
  purpose: 'turn' | 'compaction';
}

/** One request as the meter saw it go out. */
interface Sent {
  url: string;
  bytes: number;
  started: number;
  status?: number;
  respondedAt?: number;
}

const bodyBytes = (body: unknown): number => {
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (body instanceof ArrayBuffer) return body.byteLength;
  if (ArrayBuffer.isView(body)) return body.byteLength;
  return 0;
};

/**
 * A run's meter, handed to its backend: every request the SDK sends is noted as it goes out and when its response
 * starts; `take` hands the model call's requests to the loop, which completes them with what the call returned.
 */
export class RunMeter implements RequestMeter {
  private sent: Sent[] = [];

  fetch(inner: typeof fetch = fetch): typeof fetch {
    return async (url, init) => {
      const done = this.begin(url instanceof Request ? url.url : String(url), bodyBytes(init?.body));
      try {
        const response = await inner(url, init);
        done(response.status);
        return response;
      } catch (error) {
        done(undefined);
        throw error;
      }
    };
  }

  begin(url: string, bytes: number): (status: number | undefined) => void {
    const sent: Sent = { url, bytes, started: Date.now() };
    this.sent.push(sent);
    return (status) => {
      sent.status = status;
      sent.respondedAt = Date.now();
    };
  }

  /** The requests since the last take, oldest first. */
  take(): Sent[] {
    const out = this.sent;
    this.sent = [];
    return out;
  }
}

/** The price per million tokens in force for a model: agent.prices (by model, or provider:model) first, then the catalog. */
export function priceOf(config: Pick<AgentConfig, 'prices'>, provider: string, model: string): { price: Price; source: string } | undefined {
  const set = config.prices?.[`${provider}:${model}`] ?? config.prices?.[model];
  if (set) return { price: set, source: 'agent.prices' };
  return catalogPrice(provider, model);
}

/** Dollars as operators read them: cents, or four places under a cent. */
export const usd = (n: number) => `$${n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;

/** Tokens as a provider bills them: input (cached or not), output, and of the input those read from and written to its
 * prompt cache. */
export interface Billed {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

/** What tokens cost: the uncached input at the input price, cache reads and writes at theirs (the input price where
 * none is known), the output at the output price. */
export function costOf(price: Price, t: Billed): number {
  const read = t.cacheRead ?? 0;
  const write = t.cacheWrite ?? 0;
  const uncached = Math.max(0, t.input - read - write);
  return (uncached * price.inputPerMTokens + read * (price.cacheReadPerMTokens ?? price.inputPerMTokens) + write * (price.cacheWritePerMTokens ?? price.inputPerMTokens) + t.output * price.outputPerMTokens) / 1_000_000;
}

/** How a model call ended, for its last request. */
export interface CallEnd {
  usage?: Usage;
  /** The request's estimated input tokens (the pre-flight's), used when the provider reports none. */
  estimate: number;
  /** The output's estimated tokens, used when the provider reports none. */
  outputEstimate?: number;
  errorClass?: string;
}

/** The records of one model call's requests: only the last one can have succeeded; earlier ones were retried. */
export function callRecords(
  sent: Sent[],
  end: CallEnd,
  context: { session_id: string; node: string | null; provider: string; model: string; price?: Price; streamed: boolean; purpose?: 'turn' | 'compaction'; now?: number }
): ModelCallRecord[] {
  const now = context.now ?? Date.now();
  return sent.map((s, i) => {
    const last = i === sent.length - 1;
    const ok = last && !end.errorClass;
    const reported = ok ? end.usage : undefined;
    const estimated = ok && !reported;
    // Cost counts the estimate where a successful call reported no tokens: a limit must not go blind on such servers.
    const costInput = reported?.inputTokens ?? (estimated ? end.estimate : null);
    const costOutput = reported?.outputTokens ?? (estimated ? (end.outputEstimate ?? 0) : null);
    let host = '';
    try {
      host = new URL(s.url).host;
    } catch {
      host = s.url.slice(0, 200);
    }
    return {
      id: randomUUID(),
      session_id: context.session_id,
      at: s.started,
      node: context.node,
      provider: context.provider,
      host,
      model: context.model,
      requestBytes: s.bytes,
      status: s.status ?? null,
      inputTokens: reported ? reported.inputTokens : null,
      outputTokens: reported ? reported.outputTokens : null,
      latencyMs: (last ? now : (s.respondedAt ?? now)) - s.started,
      errorClass: last ? (end.errorClass ?? null) : statusErrorClass(s.status),
      cacheReadTokens: reported?.cacheReadTokens ?? null,
      cacheWriteTokens: reported?.cacheWriteTokens ?? null,
      costUsd: context.price ? (costInput !== null ? costOf(context.price, { input: costInput, output: costOutput ?? 0, cacheRead: reported?.cacheReadTokens, cacheWrite: reported?.cacheWriteTokens }) : 0) : null,
      tokensEstimated: estimated,
      streamed: context.streamed,
      purpose: context.purpose ?? 'turn',
    };
  });
}

/** Where the log is kept: `agent.AgentModelCall` in Harper, a map in unit tests. */
export type { LogTable as CallTable } from './recordLog.js';

const plain = (r: ModelCallRecord): ModelCallRecord => ({
  id: r.id,
  session_id: r.session_id,
  at: millisOf(r.at),
  node: r.node ?? null,
  provider: r.provider,
  host: r.host,
  model: r.model,
  requestBytes: r.requestBytes,
  status: r.status ?? null,
  inputTokens: r.inputTokens ?? null,
  outputTokens: r.outputTokens ?? null,
  cacheReadTokens: r.cacheReadTokens ?? null,
  cacheWriteTokens: r.cacheWriteTokens ?? null,
  latencyMs: r.latencyMs,
  errorClass: r.errorClass ?? null,
  costUsd: r.costUsd ?? null,
  tokensEstimated: r.tokensEstimated === true,
  streamed: r.streamed === true,
  purpose: r.purpose === 'compaction' ? 'compaction' : 'turn',
});

export interface CallTotals {
  requests: number;
  failed: number;
  inputTokens: number;
  outputTokens: number;
  /** Of inputTokens, read from and written to the provider's prompt cache. */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** cacheReadTokens / inputTokens: the share of the input billed at the cache-read price. */
  cacheShare: number;
  costUsd: number;
  latencyMs: number;
}

export function totals(calls: readonly ModelCallRecord[]): CallTotals {
  const t: CallTotals = { requests: calls.length, failed: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cacheShare: 0, costUsd: 0, latencyMs: 0 };
  for (const c of calls) {
    if (c.errorClass) t.failed++;
    t.inputTokens += c.inputTokens ?? 0;
    t.outputTokens += c.outputTokens ?? 0;
    t.cacheReadTokens += c.cacheReadTokens ?? 0;
    t.cacheWriteTokens += c.cacheWriteTokens ?? 0;
    t.costUsd += c.costUsd ?? 0;
    t.latencyMs += c.latencyMs;
  }
  t.cacheShare = t.inputTokens ? Math.round((t.cacheReadTokens / t.inputTokens) * 1000) / 1000 : 0;
  return t;
}

/** The model-call log: one record per provider request (agent/recordLog.ts keeps, pages and expires it). */
export class ModelCallLog extends RecordLog<ModelCallRecord> {
  constructor(table?: () => CallTable | undefined, behind?: WriteBehind) {
    super(table, plain, behind);
  }
}

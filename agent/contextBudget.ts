// The pre-flight context budget: how many tokens a request may hold for a provider, server and model, a conservative
// estimate of a request's tokens, and what servers reported and rejections taught (kept in a small Harper table).
// The window comes from, in order: agent.contextWindowTokens; the server itself (self-hosted servers report it:
// vLLM, llama.cpp, LM Studio, OpenRouter; asked once per provider, base URL and model); the model catalog
// (agent/modelCatalog.ts). A rejection the estimate let through lowers it.
import type { AgentConfig } from './agent.js';
import type { GenerateInput, ReportedWindow } from '../resources/models/types.js';
import { answerTokens } from './context/window.js';
import { catalogWindow } from './modelCatalog.js';
import type { TokenCounter } from './tokenCount.js';

/** Tokens per byte of the request JSON, over-counted on purpose: see DESIGN.md ("Estimating tokens"). */
export const BYTES_PER_TOKEN = 3;
/** After a rejection the estimate let through, requests stay under this share of the size that failed. */
export const LEARNED_MARGIN = 0.9;

/** What a wire format adds around the content: the request envelope, and per message and per tool. */
const ENVELOPE_BYTES = 512;
const PER_ITEM_BYTES = 64;
/** The same in tokens, for a tokenizer's count: an envelope, and a role/separator per message and tool. */
const ENVELOPE_TOKENS = 200;
const PER_ITEM_TOKENS = 8;

/**
 * A request's tokens: counted with the model's tokenizer when there is one (agent/tokenCount.ts): the system prompt and
 * tools as JSON, then each message's text and tool calls as the model reads them (a tool result's JSON once, not
 * quoted again: counting the message's own JSON doubled a page's escapes and filled half a small window with nothing),
 * plus a few tokens per message for the chat template; else the request's JSON bytes / 3. See DESIGN.md ("Estimating
 * tokens").
 */
export function estimateTokens(input: Pick<GenerateInput, 'system' | 'messages' | 'tools'>, counter?: TokenCounter): number {
  const items = input.messages.length + input.tools.length;
  if (counter) {
    // Part by part, so the counter's memo serves every part a turn re-sends; the separators between parts are in
    // PER_ITEM_TOKENS.
    let tokens = fixedTokens(input, counter) + ENVELOPE_TOKENS + PER_ITEM_TOKENS * items;
    for (const m of input.messages) {
      tokens += counter.count(m.content);
      if (m.role === 'assistant' && m.toolCalls?.length) tokens += counter.count(JSON.stringify(m.toolCalls));
    }
    return tokens;
  }
  const json = JSON.stringify({ system: input.system, tools: input.tools, messages: input.messages });
  return Math.ceil((Buffer.byteLength(json) + ENVELOPE_BYTES + PER_ITEM_BYTES * items) / BYTES_PER_TOKEN);
}

/**
 * estimateTokens's count, or a bound above it when that is all a caller needs: a part the counter has not counted
 * before is taken at its UTF-8 size (a token covers at least one byte) instead of tokenized, unless the bounded total
 * passes `exactAbove`, when every part is counted. Never below the exact count (unitTests/properties.test.ts); a turn
 * far from its budget then tokenizes nothing new. A counter that cannot bound (none, or no memo) counts as before.
 */
export function boundedTokens(input: Pick<GenerateInput, 'system' | 'messages' | 'tools'>, counter: TokenCounter | undefined, exactAbove: number): { tokens: number; exact: boolean } {
  if (!counter?.known || !counter.perByte) return { tokens: estimateTokens(input, counter), exact: true };
  let tokens = fixedTokens(input, counter) + ENVELOPE_TOKENS + PER_ITEM_TOKENS * (input.messages.length + input.tools.length);
  let bound = 0;
  const pending: string[] = [];
  const part = (text: string) => {
    const known = text.length < 1024 ? counter.count(text) : counter.known!(text);
    if (known !== undefined) return void (tokens += known);
    pending.push(text);
    bound += Math.ceil(Buffer.byteLength(text) * counter.perByte!);
  };
  for (const m of input.messages) {
    part(m.content);
    if (m.role === 'assistant' && m.toolCalls?.length) part(JSON.stringify(m.toolCalls));
  }
  if (tokens + bound <= exactAbove) return { tokens: tokens + bound, exact: pending.length === 0 };
  for (const text of pending) tokens += counter.count(text);
  return { tokens, exact: true };
}

/** The system prompt's and tool list's count, kept per tool list (a run's list is one array for all its requests):
 * serializing 20 KB of tool specs for the memo's key cost more than the rest of a turn's count. */
const fixedCounts = new WeakMap<object, { system: string; counter: TokenCounter; tokens: number }>();
function fixedTokens(input: Pick<GenerateInput, 'system' | 'tools'>, counter: TokenCounter): number {
  const known = fixedCounts.get(input.tools);
  if (known && known.system === input.system && known.counter === counter) return known.tokens;
  const tokens = counter.count(JSON.stringify({ system: input.system, tools: input.tools }));
  fixedCounts.set(input.tools, { system: input.system, counter, tokens });
  return tokens;
}

/** Where limits are kept: `agent.AgentContextLimit` in Harper, a map in unit tests. */
export interface LimitTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
  delete?(id: string): unknown;
  search?(query: Record<string, unknown>): AsyncIterable<unknown>;
}

/** Which model on which server: what a server reports or rejects holds for that server only. */
export interface ModelTarget {
  provider: string;
  /** agent.baseUrl, or undefined for the provider's own default endpoint. */
  baseUrl?: string;
  model: string;
}

export interface LimitRow {
  key: string;
  provider: string;
  baseUrl: string | null;
  model: string;
  /** The smallest request (estimated tokens) the server rejected. */
  failedTokens?: number | null;
  /** The window the server reported, and where. */
  windowTokens?: number | null;
  windowSource?: string | null;
  updatedAt?: Date;
}

/** A row as plain data: Harper's records expose their attributes as getters, which a spread does not copy. */
function plainRow(r: LimitRow | undefined | null): LimitRow | null {
  if (!r) return null;
  return { key: r.key, provider: r.provider, baseUrl: r.baseUrl ?? null, model: r.model, failedTokens: r.failedTokens ?? null, windowTokens: r.windowTokens ?? null, windowSource: r.windowSource ?? null, updatedAt: r.updatedAt };
}

/** How long a server that did not say its window is left unasked (per thread). */
const UNREPORTED_RETRY_MS = 10 * 60_000;

export class ContextLimits {
  private readonly rows = new Map<string, LimitRow>();
  private readonly unreported = new Map<string, number>();
  constructor(private readonly table?: () => LimitTable | undefined) {}

  static key(t: ModelTarget): string {
    return `${t.provider}|${t.baseUrl ?? 'default'}|${t.model}`;
  }

  // Read from the table on each use (a local read), not cached: a limit forgotten or learned on one worker thread
  // holds on every thread at once. The map stands in for the table where there is none (unit tests).
  private async row(t: ModelTarget): Promise<LimitRow | null> {
    const key = ContextLimits.key(t);
    const table = this.table?.();
    if (!table) return this.rows.get(key) ?? null;
    return plainRow((await table.get(key)) as LimitRow | undefined);
  }

  private async save(t: ModelTarget, change: Partial<LimitRow>): Promise<void> {
    const key = ContextLimits.key(t);
    const row: LimitRow = { ...((await this.row(t)) ?? { key, provider: t.provider, baseUrl: t.baseUrl ?? null, model: t.model }), ...change, updatedAt: new Date() };
    const table = this.table?.();
    if (table) await table.put(key, row as unknown as Record<string, unknown>);
    else this.rows.set(key, row);
  }

  /** The smallest request (estimated tokens) the server has rejected for the model, if any. */
  async failedAt(t: ModelTarget): Promise<number | undefined> {
    return (await this.row(t))?.failedTokens ?? undefined;
  }

  async learn(t: ModelTarget, failedTokens: number): Promise<void> {
    const known = await this.failedAt(t);
    if (known !== undefined && known <= failedTokens) return;
    await this.save(t, { failedTokens });
  }

  /** The window the server reported for the model: kept once asked; a server that does not say is asked again later. */
  async reported(t: ModelTarget, ask?: () => Promise<ReportedWindow | undefined>): Promise<ReportedWindow | undefined> {
    const row = await this.row(t);
    if (row?.windowTokens) return { tokens: row.windowTokens, source: row.windowSource ?? 'the server' };
    const key = ContextLimits.key(t);
    if (!ask || (this.unreported.get(key) ?? 0) > Date.now()) return undefined;
    const got = await ask().catch(() => undefined);
    if (!got) {
      this.unreported.set(key, Date.now() + UNREPORTED_RETRY_MS);
      return undefined;
    }
    await this.save(t, { windowTokens: got.tokens, windowSource: got.source });
    return got;
  }

  /** Every kept limit, for list_agent_context_limits. */
  async list(): Promise<LimitRow[]> {
    const table = this.table?.();
    const out: LimitRow[] = [];
    if (table?.search) for await (const row of table.search({ conditions: [] })) out.push(plainRow(row as LimitRow)!);
    else out.push(...this.rows.values());
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }

  /** Forgets kept limits (all, or those keys): the next request asks the server again and nothing learned holds. */
  async forget(keys?: string[]): Promise<string[]> {
    const kept = new Set((await this.list()).map((r) => r.key));
    const gone = (keys ?? [...kept]).filter((key) => kept.has(key));
    const table = this.table?.();
    for (const key of gone) {
      this.unreported.delete(key);
      if (table?.delete) await table.delete(key);
      else this.rows.delete(key);
    }
    return gone;
  }
}

export interface Budget {
  /** Tokens the request (system prompt, tools, transcript) may hold. */
  tokens: number;
  /** How it was decided, naming where the window came from. */
  source: string;
}

/** The model's window and where it came from: the operator, the server, or the catalog. */
export async function windowOf(config: AgentConfig, t: ModelTarget, limits?: ContextLimits, ask?: () => Promise<ReportedWindow | undefined>): Promise<{ tokens: number; from: string } | undefined> {
  if (config.contextWindowTokens !== undefined) return { tokens: config.contextWindowTokens, from: 'agent.contextWindowTokens' };
  const reported = await limits?.reported(t, ask);
  if (reported) return { tokens: reported.tokens, from: `the server (${reported.source})` };
  const known = await catalogWindow(t.provider, t.model);
  if (known) return { tokens: known.tokens, from: `the model catalog (${known.source})` };
  return undefined;
}

/**
 * The budget for a request, or null when the context window is unknown (no pre-flight). `ask` lets the server be asked
 * for its window (a run passes its backend's reportedWindow; a status view passes none and reads what is kept).
 */
export async function contextBudget(config: AgentConfig, t: ModelTarget, limits?: ContextLimits, ask?: () => Promise<ReportedWindow | undefined>): Promise<Budget | null> {
  const window = await windowOf(config, t, limits, ask);
  const failed = await limits?.failedAt(t);
  const answer = answerTokens(config.maxTokens, window?.tokens);
  const fromWindow = window !== undefined ? window.tokens - answer : undefined;
  const fromFailure = failed !== undefined ? Math.floor(failed * LEARNED_MARGIN) : undefined;
  if (fromWindow === undefined && fromFailure === undefined) return null;
  if (fromFailure !== undefined && (fromWindow === undefined || fromFailure < fromWindow)) {
    return { tokens: fromFailure, source: `learned: ${t.provider} rejected a request of about ${failed} tokens for ${t.model}` };
  }
  const answerFrom = config.maxTokens !== undefined ? 'agent.maxTokens' : 'the answer (agent.maxTokens unset)';
  return { tokens: fromWindow!, source: `${window!.from} (${window!.tokens}) less ${answerFrom} (${answer})` };
}

// The pre-flight context budget: how many tokens a request may hold for a provider and model, a conservative
// estimate of a request's tokens, and what earlier rejections taught (kept in a small Harper table).
import type { AgentConfig } from './agent.js';
import type { GenerateInput } from '../resources/models/types.js';

/** Tokens per byte of the request JSON, over-counted on purpose: see DESIGN.md ("Estimating tokens"). */
export const BYTES_PER_TOKEN = 3;
/** After a rejection the estimate let through, requests stay under this share of the size that failed. */
export const LEARNED_MARGIN = 0.9;

/** Context windows of the models the backends name by default. */
export const KNOWN_CONTEXT_WINDOWS: Record<string, number> = {
  'gpt-4.1-mini': 1_047_576,
  'claude-sonnet-4-5': 200_000,
  'anthropic.claude-3-5-sonnet-20240620-v1:0': 200_000,
};

/** What a wire format adds around the content: the request envelope, and per message and per tool. */
const ENVELOPE_BYTES = 512;
const PER_ITEM_BYTES = 64;

export function estimateTokens(input: Pick<GenerateInput, 'system' | 'messages' | 'tools'>): number {
  const content = Buffer.byteLength(JSON.stringify({ system: input.system, tools: input.tools, messages: input.messages }));
  const bytes = content + ENVELOPE_BYTES + PER_ITEM_BYTES * (input.messages.length + input.tools.length);
  return Math.ceil(bytes / BYTES_PER_TOKEN);
}

/** Where learned limits are kept: `agent.AgentContextLimit` in Harper, a map in unit tests. */
export interface LimitTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
}

export class ContextLimits {
  private readonly learned = new Map<string, number>();
  constructor(private readonly table?: () => LimitTable | undefined) {}

  private key(provider: string, model: string) {
    return `${provider}:${model}`;
  }

  /** The smallest request (estimated tokens) a provider has rejected for a model, if any. */
  async failedAt(provider: string, model: string): Promise<number | undefined> {
    const key = this.key(provider, model);
    if (!this.learned.has(key)) {
      const row = (await this.table?.()?.get(key)) as { failedTokens?: number } | undefined;
      if (row?.failedTokens) this.learned.set(key, row.failedTokens);
    }
    return this.learned.get(key);
  }

  async learn(provider: string, model: string, failedTokens: number): Promise<void> {
    const key = this.key(provider, model);
    const known = await this.failedAt(provider, model);
    if (known !== undefined && known <= failedTokens) return;
    this.learned.set(key, failedTokens);
    await this.table?.()?.put(key, { key, failedTokens, updatedAt: new Date() });
  }
}

export interface Budget {
  /** Tokens the request (system prompt, tools, transcript) may hold. */
  tokens: number;
  /** How it was decided. */
  source: string;
}

/** The budget for a request, or null when the context window is unknown (no pre-flight). */
export async function contextBudget(config: AgentConfig, provider: string, model: string, limits?: ContextLimits): Promise<Budget | null> {
  const window = config.contextWindowTokens ?? KNOWN_CONTEXT_WINDOWS[model];
  const failed = await limits?.failedAt(provider, model);
  const fromWindow = window !== undefined ? window - config.maxTokens : undefined;
  const fromFailure = failed !== undefined ? Math.floor(failed * LEARNED_MARGIN) : undefined;
  if (fromWindow === undefined && fromFailure === undefined) return null;
  if (fromFailure !== undefined && (fromWindow === undefined || fromFailure < fromWindow)) {
    return { tokens: fromFailure, source: `learned: ${provider} rejected a request of about ${failed} tokens for ${model}` };
  }
  const where = config.contextWindowTokens !== undefined ? 'agent.contextWindowTokens' : `the known window of ${model}`;
  return { tokens: fromWindow!, source: `${where} (${window}) less agent.maxTokens (${config.maxTokens})` };
}

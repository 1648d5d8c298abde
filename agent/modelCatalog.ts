// Context windows and prices from a maintained model catalog: tokenlens (built on models.dev), its bundled static
// catalog, read offline. Looked up by the provider's catalog name and the model id, then by the model id alone.
import { getContextWindow, getModelRaw } from 'tokenlens';

/** Our provider names as the catalog names them. */
const CATALOG_PROVIDER: Record<string, string> = { openai: 'openai', anthropic: 'anthropic', bedrock: 'amazon-bedrock', ollama: 'ollama' };

/**
 * Models the backends name by default that are newer than the catalog's bundled copy (tokenlens 1.3.1 predates
 * claude-sonnet-4-5), with the window and the price per million tokens their provider publishes. Each goes when the
 * catalog lists it; unit-tested so a catalog update shows which can go.
 */
export const NEWER_THAN_CATALOG: Record<string, { window: number; price: Price }> = {
  'claude-sonnet-4-5': { window: 200_000, price: { inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 } },
};

/** US dollars per million tokens; prompt-cache reads and writes at the input price where none is given. */
export interface Price {
  inputPerMTokens: number;
  outputPerMTokens: number;
  cacheReadPerMTokens?: number;
  cacheWritePerMTokens?: number;
}

const catalogIds = (provider: string, model: string) => [CATALOG_PROVIDER[provider] ? `${CATALOG_PROVIDER[provider]}:${model}` : undefined, model].filter((id): id is string => !!id);

/** `look` once per provider and model: the catalog is static, and a lookup scans its providers (a turn asks twice). */
function memo<T>(look: (provider: string, model: string) => T): (provider: string, model: string) => T {
  const found = new Map<string, T>();
  return (provider, model) => {
    const key = `${provider}\u0000${model}`;
    if (!found.has(key)) found.set(key, look(provider, model));
    return found.get(key)!;
  };
}

/** The catalog's context window for a model (its combined input and output maximum), and the id it was found under. */
export async function catalogWindow(provider: string, model: string): Promise<{ tokens: number; source: string } | undefined> {
  return windowIn(provider, model);
}

const windowIn = memo((provider: string, model: string): { tokens: number; source: string } | undefined => {
  for (const id of catalogIds(provider, model)) {
    const found = getContextWindow(id);
    const tokens = found.combinedMax ?? found.totalMax ?? found.inputMax;
    if (tokens && tokens > 0) return { tokens, source: `tokenlens ${id}` };
  }
  const newer = NEWER_THAN_CATALOG[model];
  return newer ? { tokens: newer.window, source: `${model}, newer than the catalog` } : undefined;
});

/** The catalog's price for a model, and where it was found; undefined for a model it does not price (local models). */
export function catalogPrice(provider: string, model: string): { price: Price; source: string } | undefined {
  const found = priceIn(provider, model);
  // A copy: callers may adjust what they are given.
  return found && { price: { ...found.price }, source: found.source };
}

const priceIn = memo((provider: string, model: string): { price: Price; source: string } | undefined => {
  for (const id of catalogIds(provider, model)) {
    const pricing = (getModelRaw(id) as { pricing?: Partial<Price> } | undefined)?.pricing;
    if (pricing && typeof pricing.inputPerMTokens === 'number' && typeof pricing.outputPerMTokens === 'number') {
      const price: Price = { inputPerMTokens: pricing.inputPerMTokens, outputPerMTokens: pricing.outputPerMTokens };
      if (typeof pricing.cacheReadPerMTokens === 'number') price.cacheReadPerMTokens = pricing.cacheReadPerMTokens;
      if (typeof pricing.cacheWritePerMTokens === 'number') price.cacheWritePerMTokens = pricing.cacheWritePerMTokens;
      return { price, source: `tokenlens ${id}` };
    }
  }
  const newer = NEWER_THAN_CATALOG[model];
  return newer ? { price: newer.price, source: `${model}, newer than the catalog` } : undefined;
});

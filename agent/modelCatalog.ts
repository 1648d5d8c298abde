// Context windows from a maintained model catalog: tokenlens (built on models.dev), its bundled static catalog, read
// offline. Looked up by the provider's catalog name and the model id, then by the model id alone.
import { getContextWindow } from 'tokenlens';

/** Our provider names as the catalog names them. */
const CATALOG_PROVIDER: Record<string, string> = { openai: 'openai', anthropic: 'anthropic', bedrock: 'amazon-bedrock', ollama: 'ollama' };

/**
 * Models the backends name by default that are newer than the catalog's bundled copy (tokenlens 1.3.1 predates
 * claude-sonnet-4-5). Each goes when the catalog lists it; unit-tested so a catalog update shows which can go.
 */
export const NEWER_THAN_CATALOG: Record<string, number> = { 'claude-sonnet-4-5': 200_000 };

/** The catalog's context window for a model (its combined input and output maximum), and the id it was found under. */
export async function catalogWindow(provider: string, model: string): Promise<{ tokens: number; source: string } | undefined> {
  const ids = [CATALOG_PROVIDER[provider] ? `${CATALOG_PROVIDER[provider]}:${model}` : undefined, model].filter((id): id is string => !!id);
  for (const id of ids) {
    const found = getContextWindow(id);
    const tokens = found.combinedMax ?? found.totalMax ?? found.inputMax;
    if (tokens && tokens > 0) return { tokens, source: `tokenlens ${id}` };
  }
  const newer = NEWER_THAN_CATALOG[model];
  return newer ? { tokens: newer, source: `${model}, newer than the catalog` } : undefined;
}

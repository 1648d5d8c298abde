// Token counts for the pre-flight estimate: a real tokenizer where one exists as a package for the model (OpenAI's
// models, through gpt-tokenizer, which ships one module per model naming its encoding), else none and the estimate
// falls back to bytes / 3 (agent/contextBudget.ts). Loaded on first use, per model, and kept.

export interface TokenCounter {
  /** Which tokenizer, for contextBudget's source and the bench. */
  name: string;
  count(text: string): number;
}

const counters = new Map<string, Promise<TokenCounter | undefined>>();

/** The tokenizer for a model id, or undefined when no package has one (Claude, Llama, Qwen…: bytes / 3 then). */
export function tokenCounter(model: string): Promise<TokenCounter | undefined> {
  if (!counters.has(model)) counters.set(model, load(model));
  return counters.get(model)!;
}

async function load(model: string): Promise<TokenCounter | undefined> {
  // A model id is operator input and becomes a module path: only plain ids are looked up.
  if (!/^[a-z0-9][a-z0-9.\-]*$/i.test(model)) return undefined;
  try {
    const m = (await import(`gpt-tokenizer/model/${model}`)) as { countTokens(text: string): number };
    if (typeof m.countTokens !== 'function') return undefined;
    return { name: `gpt-tokenizer ${model}`, count: (text) => m.countTokens(text) };
  } catch {
    return undefined;
  }
}

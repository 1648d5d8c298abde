// Token counts for the pre-flight estimate: a real tokenizer where one exists as a package for the model (OpenAI's
// models, through gpt-tokenizer, which ships one module per model naming its encoding), else none and the estimate
// falls back to bytes / 3 (agent/contextBudget.ts). Loaded on first use, per model, and kept. A request is counted
// part by part (agent/contextBudget.ts) and a part seen before is not tokenized again: a turn late in a long session
// re-sends the same messages, and tokenizing them all again cost about 13 ms per 170 KB, twice a request.

export interface TokenCounter {
  /** Which tokenizer, for contextBudget's source and the bench. */
  name: string;
  count(text: string): number;
  /** The count of a text counted before (the memo), without tokenizing; undefined when it was not. */
  known?(text: string): number | undefined;
  /** Tokens per UTF-8 byte at most: a byte-level BPE token covers at least one byte (1); a stand-in's margin on top.
   * What lets a part not counted yet be bounded by its size (agent/contextBudget.ts boundedTokens). */
  perByte?: number;
}

/** Set by scripts/bundle.ts: the bundle has gpt-tokenizer's ES modules beside it (./gpt-tokenizer/), not the package. */
declare const BUNDLED_TOKENIZER: boolean | undefined;

/** The module of a model's tokenizer: beside the bundle when bundled; the package when run from tsc's output (tests). */
function modelModule(model: string): string {
  return typeof BUNDLED_TOKENIZER !== 'undefined' ? new URL(`./gpt-tokenizer/model/${model}.js`, import.meta.url).href : `gpt-tokenizer/model/${model}`;
}

const counters = new Map<string, Promise<TokenCounter | undefined>>();

/** Parts shorter than this are counted each time (cheaper than keeping them). */
const MEMO_MIN_CHARS = 1024;
/** A thread keeps the counts of its most recent parts up to this many characters (the memo holds the text as its key). */
const MEMO_MAX_CHARS = 16 * 1024 * 1024;

/** A count per text, the least recently used dropped first: a Map keeps insertion order, a hit is re-inserted.
 * `known` looks a text up without counting it. */
export function memoized(count: (text: string) => number, maxChars = MEMO_MAX_CHARS): ((text: string) => number) & { known(text: string): number | undefined } {
  const memo = new Map<string, number>();
  let chars = 0;
  const counted = (text: string) => {
    if (text.length < MEMO_MIN_CHARS) return count(text);
    const known = memo.get(text);
    if (known !== undefined) {
      memo.delete(text);
      memo.set(text, known);
      return known;
    }
    const n = count(text);
    memo.set(text, n);
    chars += text.length;
    for (const [old] of memo) {
      if (chars <= maxChars) break;
      memo.delete(old);
      chars -= old.length;
    }
    return n;
  };
  return Object.assign(counted, { known: (text: string) => memo.get(text) });
}

/** Providers whose models may run on the operator's own server, in a small window, where bytes / 3 is not safe. */
const SELF_HOSTED = new Set(['ollama', 'openai']);
/** The stand-in's tokenizer (o200k_base) and margin: Llama's and Qwen's tokenizers split text about as finely as
 * o200k (Qwen finer on digits); 15% over covers what was measured (DESIGN.md "Estimating tokens"). */
const STAND_IN_MODEL = 'gpt-4o';
export const STAND_IN_MARGIN = 1.15;

/**
 * What a request to `model` on `provider` is counted with: the model's own tokenizer where a package has one; for a
 * model without one on a server that may be the operator's own (Ollama, an OpenAI-compatible server), o200k_base
 * with a margin, since logs tokenize at about 2 bytes a token and bytes / 3 would let a small window overflow; else
 * none (Claude: bytes / 3, and a rejection teaches the rest).
 */
export async function counterFor(provider: string, model: string): Promise<TokenCounter | undefined> {
  const own = await tokenCounter(model);
  if (own || !SELF_HOSTED.has(provider)) return own;
  const base = await tokenCounter(STAND_IN_MODEL);
  if (!base) return undefined;
  const scaled = (n: number | undefined) => (n === undefined ? undefined : Math.ceil(n * STAND_IN_MARGIN));
  return { name: `gpt-tokenizer o200k_base × ${STAND_IN_MARGIN} (a stand-in: none for ${model})`, count: (text) => scaled(base.count(text))!, known: (text) => scaled(base.known?.(text)), perByte: STAND_IN_MARGIN };
}

/** The tokenizer for a model id, or undefined when no package has one (Claude, Llama, Qwen…). */
export function tokenCounter(model: string): Promise<TokenCounter | undefined> {
  if (!counters.has(model)) counters.set(model, load(model));
  return counters.get(model)!;
}

async function load(model: string): Promise<TokenCounter | undefined> {
  // A model id is operator input and becomes a module path: only plain ids are looked up.
  if (!/^[a-z0-9][a-z0-9.\-]*$/i.test(model)) return undefined;
  try {
    const m = (await import(modelModule(model))) as { countTokens(text: string): number };
    if (typeof m.countTokens !== 'function') return undefined;
    const count = memoized((text) => m.countTokens(text));
    return { name: `gpt-tokenizer ${model}`, count, known: count.known, perByte: 1 };
  } catch {
    return undefined;
  }
}

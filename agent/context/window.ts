// How a model's context window is shared out, decided here for every request of a run (DESIGN.md "A small window is
// shared out, not refused"). A large window changes nothing: the answer gets agent.maxTokens (4,096 when unset), a
// tool result agent.maxToolResultBytes, the working set agent.workingSetBytes, and every tool its full description.
// A small one (an 8k local model) scales them down so the fixed part (system prompt and tool list), a page and an
// answer fit with room for the transcript to grow until compaction:
// - the answer: an eighth of the window when agent.maxTokens is unset (never under 256 tokens);
// - the tool list: the first tier whose fixed part fits FIXED_SHARE of the budget (full descriptions; short ones with
//   Harper's operations folded into harper_operation; short ones for the core tools only);
// - a tool result (so a page, half of it): RESULT_SHARE of the budget at the bytes per token of the densest text a
//   page holds; the working set a page and a half; a result older than the working set cut to an eighth of a result.
// What the operator set is never raised: these are upper bounds under the keys in force.
import type { AgentConfig } from '../agent.js';
import { SHRINK_THRESHOLD_BYTES } from '../session.js';

export const DEFAULT_ANSWER_TOKENS = 4096;
const MIN_ANSWER_TOKENS = 256;
/** The fixed part of a request (system prompt and tools) may take this share of the budget. */
export const FIXED_SHARE = 0.4;
/** A tool result may take this share of the budget; a page is half of a result (tools/paging.ts). */
const RESULT_SHARE = 0.5;
/** Logs (timestamps, ids, numbers) tokenize at about 2 bytes a token with a BPE tokenizer (o200k: 2.04 on a log of
 * request lines), prose at about 4: results are sized for the dense case. */
const DENSE_BYTES_PER_TOKEN = 2;
/** The working set holds this share of a result: a page and a half (a page is half a result), so the page before the
 * newest is cut to its head once the next one comes, and the heads, not the pages, build up until compaction. */
const WORKING_SET_SHARE = 0.75;
/** The smallest tool result a run may be given (agent.maxToolResultBytes's own minimum). */
const MIN_RESULT_BYTES = 1024;

/** Which tool list a request carries: all with full descriptions, short ones with Harper's operations folded into
 * harper_operation, or short ones for the core tools only. */
export type ToolTier = 'full' | 'brief' | 'core';
export const TIERS: readonly ToolTier[] = ['full', 'brief', 'core'];

/** The answer's tokens: agent.maxTokens when set, else 4,096, or an eighth of a window under 32,768 tokens. */
export function answerTokens(maxTokens: number | undefined, windowTokens: number | undefined): number {
  if (maxTokens !== undefined) return maxTokens;
  if (!windowTokens) return DEFAULT_ANSWER_TOKENS;
  return Math.max(MIN_ANSWER_TOKENS, Math.min(DEFAULT_ANSWER_TOKENS, Math.floor(windowTokens / 8)));
}

/** The config a run goes by: the one in force with its sizes fitted to the window (the answer's tokens always set). */
export type FittedConfig = AgentConfig & { maxTokens: number };

/** A run's shape for its window: the config in force with its sizes fitted, the tool tier, and the head an older
 * result is cut to (2 KiB; an eighth of a result in a small window, so old pages cost little and a compaction makes
 * room for several more). */
export interface WindowFit {
  config: FittedConfig;
  tier: ToolTier;
  headBytes: number;
}

/** The head a result is cut to for the working set or a context shrink, outside a small window. */
const HEAD_BYTES = SHRINK_THRESHOLD_BYTES;
const MIN_HEAD_BYTES = 384;

/**
 * Fits a config to a window: `fixedTokens(tier)` is the fixed part of a request with that tier's tool list. With no
 * window known, only the answer's default is filled in.
 */
export function fitToWindow(config: AgentConfig, windowTokens: number | undefined, fixedTokens: (tier: ToolTier) => number): WindowFit {
  const maxTokens = answerTokens(config.maxTokens, windowTokens);
  if (!windowTokens) return { config: { ...config, maxTokens }, tier: 'full', headBytes: HEAD_BYTES };
  const budget = windowTokens - maxTokens;
  const tier = TIERS.find((t) => fixedTokens(t) <= budget * FIXED_SHARE) ?? 'core';
  const resultBytes = Math.max(MIN_RESULT_BYTES, Math.floor(budget * RESULT_SHARE * DENSE_BYTES_PER_TOKEN));
  return {
    config: {
      ...config,
      maxTokens,
      maxToolResultBytes: Math.min(config.maxToolResultBytes, resultBytes),
      workingSetBytes: config.workingSetBytes && Math.min(config.workingSetBytes, Math.floor(resultBytes * WORKING_SET_SHARE)),
    },
    tier,
    headBytes: Math.max(MIN_HEAD_BYTES, Math.min(HEAD_BYTES, Math.floor(resultBytes / 8))),
  };
}

/**
 * The smallest window (a multiple of 256 tokens) whose budget holds the core tier's fixed part within FIXED_SHARE,
 * with the answer as agent.maxTokens (or its share of the window when unset) gives it.
 */
export function smallestWindow(maxTokens: number | undefined, coreFixedTokens: number): number {
  const fits = (w: number) => coreFixedTokens <= (w - answerTokens(maxTokens, w)) * FIXED_SHARE;
  let w = 256;
  while (!fits(w)) w += 256;
  return w;
}

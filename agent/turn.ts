// A turn's request made to fit, then sent: the working set, compaction when due, the pre-flight against the budget, and
// the one shrink-and-retry after a context-window rejection. agent/context/request.ts decides what a request holds and
// agent/compaction.ts where a compaction cuts; here the cuts are stored (through the locked mutator) and the calls made.
import { errorInfo } from '../resources/models/agentLoop.js';
import { isAbortError, isModelError } from '../resources/models/backendHelpers.js';
import type { GenerateInput, GenerateOutput } from '../resources/models/types.js';
import { COMPACTION_SYSTEM, compactionContent, compactionSizes, digest, planCompaction, segmentBlocks, splitParts, summaryPrompt, type CompactionPlan, type CompactionRecord, type CompactionSizes, type StoredMessage } from './compaction.js';
import { boundedTokens, estimateTokens, LEARNED_MARGIN, type Budget } from './contextBudget.js';
import { CONTEXT_ADVICE, RunError, type LoopDeps } from './loopDeps.js';
import { budgetOf, buildInput, callModel, checkSpend, lazily, target, tokensOf, type Estimate, type TurnRequest } from './modelCall.js';
import { RunSupersededError, workingSetCuts, type RunGuard, type Session } from './session.js';

/** A model's answer and the session as it was sent. */
export interface Turn {
  out: GenerateOutput;
  sent: Session;
}

/**
 * One model call. Before it: the working set, then compaction when the request would pass agent.compactAtPercent of
 * the budget, then the pre-flight. A context-window rejection (or a silent overflow) cuts the newest group of large
 * tool results to 2 KiB heads (persisted) or, with none left, compacts, and retries once; a second rejection ends the
 * run with what to do.
 */
export async function generateTurn(deps: LoopDeps, current: Session, req: TurnRequest): Promise<Turn> {
  const id = current.session_id;
  const budget = await budgetOf(deps, req);
  const kept = await compactWhenDue(deps, await keepWorkingSet(deps, current, req), req, budget);
  const { session } = await fitBudget(deps, kept.session, req, budget, kept.estimate);
  const input = buildInput(deps, session, req);
  // The fit was decided on a bound where that sufficed (boundedTokens); the count itself is made when something asks
  // for it: a spending limit, a call the provider reported no usage for, a rejection to learn from.
  const estimateOf: Estimate = lazily(() => estimateTokens(input, req.counter));
  await checkSpend(deps, session, req, estimateOf);
  try {
    return { out: await callModel(deps, session, req, input, estimateOf), sent: session };
  } catch (error) {
    if (!isModelError(error) || !error.contextWindowExceeded || req.signal.aborted) throw error;
    // The estimate let this request through and the provider still rejected it: remember the size that failed.
    const estimate = tokensOf(estimateOf);
    await deps.limits?.learn(target(req), estimate).catch(() => undefined);
    deps.log?.(`harper-agent: session ${id}: ${error.message}; cutting the newest tool results (or compacting) and retrying once`);
    const cut = await deps.store.shrinkNewestToolResults(id, req.guard, req.headBytes);
    let shrunk: Session | null = cut > 0 ? (await deps.store.get(id))! : null;
    if (!shrunk && req.config.compaction) {
      // Nothing left to cut: compact against what the rejection taught (the budget it leaves).
      const learned = { tokens: Math.floor(estimate * LEARNED_MARGIN), source: 'the rejected request' };
      shrunk = await compact(deps, session, req, sizesFor(deps, session, req, learned).sizes, false);
    }
    if (!shrunk) {
      throw new RunError(
        req.config.compaction
          ? `The prompt being answered does not fit the model's context window even alone (${error.message}): no tool result is left to cut, and everything before the prompt is already a summary. To continue: shorten the prompt, or use a model with a larger window.`
          : `The conversation is longer than the model's context window and no tool result is left to cut (${error.message}). To continue: ${CONTEXT_ADVICE}, or turn agent.compaction on.`
      );
    }
    if (req.signal.aborted) throw new DOMException('cancelled', 'AbortError');
    const smaller = estimateTokens(buildInput(deps, shrunk, req), req.counter);
    await checkSpend(deps, shrunk, req, smaller);
    try {
      return { out: await callModel(deps, shrunk, req, buildInput(deps, shrunk, req), smaller), sent: shrunk };
    } catch (retryError) {
      if (isModelError(retryError) && retryError.contextWindowExceeded && !req.signal.aborted) {
        throw new RunError(
          `The conversation is still longer than the model's context window after ${cut ? `cutting ${cut} tool result(s) to ${req.headBytes === 2048 ? '2 KiB' : `${req.headBytes} bytes`}` : 'compacting it'} (${retryError.message}). To continue: ${CONTEXT_ADVICE}.`
        );
      }
      throw retryError;
    }
  }
}

/** Before each model call: results older than the working set are cut (stored, so the transcript stays what was sent). */
async function keepWorkingSet(deps: LoopDeps, current: Session, req: TurnRequest): Promise<Session> {
  const budget = req.config.workingSetBytes;
  // Decided on the run's own copy first: the store reads the transcript only when there is something to cut.
  if (!budget || workingSetCuts(current.messages, budget, req.headBytes).length === 0) return current;
  const cut = await deps.store.trimToWorkingSet(current.session_id, budget, req.guard, req.headBytes);
  return cut ? (await deps.store.get(current.session_id))! : current;
}

/**
 * Pre-flight: while the request's estimate is over the budget, apply the same shrink as after a rejection, group by
 * group from the newest, then compaction; when neither is left and it still does not fit, end the run without sending.
 */
async function fitBudget(deps: LoopDeps, current: Session, req: TurnRequest, budget: Budget | null, known?: number): Promise<{ session: Session }> {
  const id = current.session_id;
  let session = current;
  const counter = req.counter;
  // No budget: nothing to fit, and the count waits until something asks for it.
  if (!budget) return { session };
  let estimate = known ?? boundedTokens(buildInput(deps, session, req), counter, budget.tokens).tokens;
  while (budget && estimate > budget.tokens) {
    const cut = await deps.store.shrinkNewestToolResults(id, req.guard, req.headBytes);
    const next = cut > 0 ? (await deps.store.get(id))! : req.config.compaction ? await compact(deps, session, req, sizesFor(deps, session, req, budget).sizes, false) : null;
    if (!next) {
      throw new RunError(
        req.config.compaction
          ? `The prompt being answered does not fit the model's context window even alone: about ${estimate} tokens (the system prompt and tool list, the summary of everything before, the prompt and its newest results) against a budget of ${budget.tokens} (${budget.source}), and no tool result is left to cut. Nothing was sent. To continue: shorten the prompt, or use a model with a larger window (agent.model, agent.contextWindowTokens).`
          : `The conversation does not fit the model's context window: about ${estimate} tokens against a budget of ${budget.tokens} (${budget.source}), and no tool result is left to cut. Nothing was sent. To continue: ${CONTEXT_ADVICE}, or turn agent.compaction on.`
      );
    }
    session = next;
    estimate = estimateTokens(buildInput(deps, session, req), counter);
  }
  return { session };
}

// ------------------------------------------------------------------------------------------------------------
// Compaction (agent/compaction.ts decides where to cut and what the summary reads; here the call is made and the
// record written, through the locked mutator like any other change)

/** The compaction sizes for a budget, from this request's own fixed part (the system prompt and tool list, counted once
 * a run) and bytes per token; and the request's estimate. */
export function sizesFor(deps: LoopDeps, session: Session, req: TurnRequest, budget: Budget): { sizes: CompactionSizes; estimate: number } {
  const input = buildInput(deps, session, req);
  const fixed = (req.fixedTokens ??= estimateTokens({ ...input, messages: [] }, req.counter));
  const estimate = estimateTokens(input, req.counter);
  const bytes = messagesBytes(input.messages);
  const bytesPerToken = estimate > fixed ? Math.min(4, Math.max(1.5, bytes / (estimate - fixed))) : 3;
  return { sizes: compactionSizes(budget.tokens, req.config.compactAtPercent, fixed, bytesPerToken), estimate };
}

/** The messages' JSON bytes, each message's kept with it: a turn re-sends the same message objects, and serializing
 * the whole transcript every turn was a measurable share of a turn's own time. */
const jsonBytes = new WeakMap<object, number>();
function messagesBytes(messages: readonly object[]): number {
  let bytes = 2 + Math.max(0, messages.length - 1);
  for (const m of messages) {
    let b = jsonBytes.get(m);
    if (b === undefined) jsonBytes.set(m, (b = Buffer.byteLength(JSON.stringify(m))));
    bytes += b;
  }
  return bytes;
}

/** Compacts when the next request would pass agent.compactAtPercent of the budget (a known budget only). Answers the
 * session, and the request's estimate when nothing changed. */
async function compactWhenDue(deps: LoopDeps, session: Session, req: TurnRequest, budget: Budget | null): Promise<{ session: Session; estimate?: number }> {
  if (!req.config.compaction || !budget) return { session };
  // Far below the threshold, a bound says so without tokenizing the new pages (contextBudget.ts boundedTokens).
  const threshold = Math.floor((budget.tokens * req.config.compactAtPercent) / 100);
  const bounded = boundedTokens(buildInput(deps, session, req), req.counter, threshold);
  if (bounded.tokens <= threshold) return { session, estimate: bounded.tokens };
  const { sizes, estimate } = sizesFor(deps, session, req, budget);
  if (estimate <= sizes.threshold) return { session, estimate };
  return { session: (await compact(deps, session, req, sizes, false)) ?? session };
}

/**
 * Replaces the older part of what the model sees with a summary: the model writes it (in parts when the segment is
 * larger than one call), or a digest stands in. One guarded append of the record: a cancel before it leaves nothing
 * written. Returns the session with the record, or null when there was nothing to compact.
 */
export async function compact(deps: LoopDeps, session: Session, req: TurnRequest, sizes: CompactionSizes, all: boolean, focus?: string, digestOnly?: string): Promise<Session | null> {
  const plan = planCompaction(session.messages, sizes.keepBytes, all);
  if (!plan) return null;
  const written = await writeSummary(deps, session, req, plan, sizes, focus, digestOnly);
  if (req.signal.aborted) throw new DOMException('cancelled', 'AbortError');
  const record: CompactionRecord = { role: 'compaction', content: compactionContent(session.messages, plan, written.summary, written.by, sizes.stateBytes), keepFrom: plan.keepFrom, compactedBy: written.by };
  if (written.detail) record.detail = written.detail;
  await appendToRun(deps, session, [record], req.guard);
  deps.log?.(`harper-agent: session ${session.session_id}: messages #0-#${plan.keepFrom - 1} compacted into a ${Buffer.byteLength(record.content)}-byte ${written.by === 'model' ? 'summary' : 'digest'}${written.detail ? ` (${written.detail})` : ''}`);
  return session;
}

type Written = { summary: string; by: 'model' | 'digest'; detail?: string };

/** The summary of what a plan covers: the model's, through the same backend, call log, spending limits and classifier;
 * the digest when the provider is local or the call is refused, fails or overflows. */
async function writeSummary(deps: LoopDeps, session: Session, req: TurnRequest, plan: CompactionPlan, sizes: CompactionSizes, focus?: string, digestOnly?: string): Promise<Written> {
  const fallback = (why: string): Written => ({ summary: digest(session.messages, plan, sizes.digestBytes), by: 'digest', detail: why });
  if (digestOnly) return fallback(digestOnly);
  if (req.backend.provider === 'local') return fallback('the local backend is not a model');
  const parts = splitParts(segmentBlocks(session.messages, plan), sizes.partBytes);
  const maxTokens = Math.min(req.config.maxTokens, sizes.summaryTokens);
  let soFar: string | undefined;
  try {
    for (const part of parts) {
      const input: GenerateInput = { system: COMPACTION_SYSTEM, messages: [{ role: 'user', content: summaryPrompt(part, soFar, Math.floor(maxTokens * 0.6), focus) }], tools: [], model: req.model, maxTokens };
      const estimate = estimateTokens(input, req.counter);
      await checkSpend(deps, session, req, estimate);
      const out = await callModel(deps, session, req, input, estimate, 'compaction');
      if (!out.text.trim() || out.finishReason === 'content_filter') throw new Error(`the model's summary was empty (finish: ${out.finishReason})`);
      soFar = out.text.trim();
    }
  } catch (error) {
    if (isAbortError(error, req.signal) || error instanceof RunSupersededError) throw error;
    deps.log?.(`harper-agent: session ${session.session_id}: the compaction summary call failed (${errorInfo(error)}); a digest stands in`);
    return fallback(`the summary call failed: ${errorInfo(error)}`);
  }
  return { summary: soFar!, by: 'model', ...(parts.length > 1 ? { detail: `summarized in ${parts.length} parts` } : {}) };
}

/** Appends a run's messages and keeps its own copy of the transcript in step (the run is the session's only writer). */
export async function appendToRun(deps: LoopDeps, session: Session, messages: StoredMessage[], guard: RunGuard): Promise<void> {
  await deps.store.append(session.session_id, messages, guard);
  session.messages.push(...messages);
}

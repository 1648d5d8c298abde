// The run loop: owns a run from prompt to its end status. Every tool call goes through invokeTool, every
// observation through capObservation, every session change through the store's locked mutator (guarded by the
// run's token, so nothing is written once a run is cancelled).
import { randomUUID } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { errorInfo, toolResultText, truncateWithMarker } from '../resources/models/agentLoop.js';
import { answeredTranscript, isAbortError, isModelError, ModelError, providerErrors } from '../resources/models/backendHelpers.js';
import { Models } from '../resources/models/models.js';
import type { GenerateInput, GenerateOutput, Message, ModelBackend, ToolCall, ToolMessage } from '../resources/models/types.js';
import type { AgentConfig } from './agent.js';
import { COMPACTION_SYSTEM, compactionContent, compactionSizes, digest, planCompaction, requestMessages, segmentBlocks, splitParts, summaryPrompt, type CompactionPlan, type CompactionRecord, type CompactionSizes, type StoredMessage } from './compaction.js';
import { contextBudget, estimateTokens, LEARNED_MARGIN, type Budget, type ContextLimits, type ModelTarget } from './contextBudget.js';
import { callRecords, costOf, priceOf, RunMeter, totals, usd, type Billed, type ModelCallLog } from './modelCalls.js';
import { LiveWriter, type LiveEvent } from './sessionFeed.js';
import { tokenCounter, type TokenCounter } from './tokenCount.js';
import { RunSupersededError, SessionNotFoundError, workingSetCuts, type RunGuard, type Session, type SessionHeader, type SessionStore } from './session.js';
import type { ToolRegistry } from './tools/index.js';
import type { Scopes } from './tools/scopes.js';
import { isDestructive, ToolError, type ToolContext } from './tools/types.js';
import { type HostEnvironment } from './environment.js';
import { buildRequest, cacheMarksFor } from './context/request.js';
import { dueTime, FollowupError, type FireOutcome, type Followup, type Followups } from './followups.js';
import { workerIndex } from './threadProbe.js';

export interface LoopDeps {
  store: SessionStore;
  /** When this thread's agent loaded (default: when this module did): follow-ups wait for their backend until
   * BACKEND_LOAD_GRACE_MS after it. */
  loadedAt?: number;
  tools: ToolRegistry;
  scopes: Scopes;
  /** Harper's `databases` (absent in unit tests that need no data tools). */
  databases?: Record<string, unknown>;
  /** Runs Harper operations as a user (absent in unit tests that need no operation tools). */
  operationsAs?: (username: string) => (body: Record<string, unknown>) => Promise<unknown>;
  /** This Harper's own HTTP and operations origins on loopback: what http_fetch may reach when agent.fetchAllow is unset. */
  ownOrigins?: string[];
  /** What provider rejections taught about context limits (pre-flight budget). */
  limits?: ContextLimits;
  /** The model-call log (AgentModelCall): one record per provider request; the spending limits read it. */
  calls?: ModelCallLog;
  /** Shows a streaming call's pieces to the session's followers (AgentLiveText's publish); never stored. */
  publishLive?: (sessionId: string, event: LiveEvent) => void;
  /** The config in force; read once when a run starts. */
  config: () => AgentConfig;
  /** Scheduled follow-ups (AgentFollowup): schedule_followup stores them, this node fires its own (absent: none). */
  followups?: Followups;
  /** Where the agent runs: Harper's version, the node, threads, OS, Node, the agent's version (absent in unit tests). */
  environment?: HostEnvironment;
  log?: (message: string) => void;
}

/** A run's end that the operator can act on: becomes lastError. */
export class RunError extends Error {}

export const CONTEXT_ADVICE = 'shorten the prompt, or start a new session';

// ------------------------------------------------------------------------------------------------------------
// Observations

/** The one seam every observation passes: a tool result, error or refusal becomes a tool message within the cap. */
export function capObservation(call: ToolCall, value: unknown, isError: boolean, maxBytes: number, advice?: string): ToolMessage {
  const full = toolResultText(value);
  const content = truncateWithMarker(full, maxBytes, advice);
  const message: ToolMessage = { role: 'tool', toolCallId: call.id, name: call.name, content };
  if (isError) message.isError = true;
  if (content !== full) message.cut = 'cap';
  return message;
}

/** Runs one tool call: unknown tools, bad arguments and thrown errors all come back as capped error observations. */
export async function invokeTool(tools: ToolRegistry, call: ToolCall, ctx: ToolContext): Promise<ToolMessage> {
  const tool = tools.get(call.name);
  if (!tool) {
    return capObservation(call, { error: `unknown tool ${JSON.stringify(call.name)}; the tools are ${tools.names().join(', ')}` }, true, ctx.maxResultBytes);
  }
  const problem = tools.validate(tool, call.arguments);
  if (problem) return capObservation(call, { error: problem }, true, ctx.maxResultBytes, tool.advice);
  try {
    const value = await tool.handler(call.arguments, ctx);
    return capObservation(call, value, false, ctx.maxResultBytes, tool.advice);
  } catch (error) {
    if (isAbortError(error, ctx.signal)) throw error;
    return capObservation(call, { error: errorInfo(error) }, true, ctx.maxResultBytes, tool.advice);
  }
}

// ------------------------------------------------------------------------------------------------------------
// One model call, with the context-window recovery

export interface TurnRequest {
  backend: ModelBackend;
  model: string;
  config: AgentConfig;
  guard: RunGuard;
  signal: AbortSignal;
  /** The requests the backend's SDK sends (handed to it when the run made it). */
  meter: RunMeter;
  /** The model's tokenizer, if a package has one. */
  counter?: TokenCounter;
  /** The system prompt's and tool list's tokens: the part of every request compaction cannot shrink (counted once). */
  fixedTokens?: number;
  /** Mark the cached prefix (cacheMarksFor: the API caches only at marks, and the model can). */
  cacheMarks?: boolean;
}

/** The model on the server this run talks to: what is reported or learned about a window is kept per server. */
const target = (req: TurnRequest): ModelTarget => ({ provider: req.backend.provider, baseUrl: req.config.baseUrl, model: req.model });

/** The run's context budget, the server asked for its window where the backend can ask. */
const budgetOf = (deps: LoopDeps, req: TurnRequest) =>
  contextBudget(req.config, target(req), deps.limits, req.backend.reportedWindow && (() => req.backend.reportedWindow!(req.model, req.signal)));

/** The next request for a session: agent/context/request.ts decides what it holds. */
function buildInput(deps: LoopDeps, session: Session, req: TurnRequest): GenerateInput {
  return buildRequest(session.messages, { config: req.config, model: req.model, tools: deps.tools.specs(), environment: deps.environment, sessionId: session.session_id, cacheMarks: req.cacheMarks });
}

/** A conversation at least this large that gets a `length` finish with nothing produced is taken as overflowed. */
export const SILENT_OVERFLOW_MIN_BYTES = 32 * 1024;

/**
 * Servers that truncate the prompt instead of rejecting it (Ollama), or stop at `length` with no output, overflow
 * silently. Returns why this answer looks like one, or null.
 */
export function silentOverflow(out: GenerateOutput, config: AgentConfig, conversationBytes: number): string | null {
  const window = config.contextWindowTokens;
  if (window && out.usage && out.usage.inputTokens >= window) {
    return `the provider reported ${out.usage.inputTokens} input tokens, all of agent.contextWindowTokens (${window}): it most likely cut the conversation (a silent overflow)`;
  }
  if (out.finishReason === 'length' && !out.text.trim() && out.toolCalls.length === 0 && conversationBytes >= SILENT_OVERFLOW_MIN_BYTES) {
    return `the model stopped at its length limit having produced nothing while the conversation is ${conversationBytes} bytes: the server most likely ran out of context (a silent overflow)`;
  }
  return null;
}

/** What a model call is for: a turn of the conversation, or writing a compaction summary. */
export type CallPurpose = 'turn' | 'compaction';

/**
 * One model call: a turn is streamed to the session's followers when agent.stream is on (a summary call streams too,
 * unseen); each of its requests is recorded in the model-call log whatever the outcome (the records are written before
 * the call's result is acted on).
 */
async function callModel(deps: LoopDeps, session: Session, req: TurnRequest, input: GenerateInput, estimate: number, purpose: CallPurpose = 'turn'): Promise<GenerateOutput> {
  const id = session.session_id;
  const live = req.config.stream && deps.publishLive && purpose === 'turn' ? new LiveWriter((event) => deps.publishLive!(id, event), randomUUID(), session.messages.length) : undefined;
  const onEvent = live?.onEvent ?? (req.config.stream ? () => undefined : undefined);
  req.meter.take(); // only this call's requests are its records
  let out: GenerateOutput | undefined;
  let failure: unknown;
  try {
    // A signal per request: SDKs add an abort listener per call, and a run makes many calls on one run signal.
    out = await req.backend.generate(input, AbortSignal.any([req.signal]), onEvent);
    const silent = silentOverflow(out, req.config, Buffer.byteLength(JSON.stringify(input.messages)));
    if (silent) throw new ModelError(silent, req.backend.provider, 400, true, 'silent_overflow');
    return out;
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    live?.close(failure !== undefined);
    await recordCalls(deps, session, req, estimate, out, failure, purpose).catch((error) => deps.log?.(`harper-agent: session ${id}: could not record its model calls: ${errorInfo(error)}`));
  }
}

/** The call's requests into the model-call log, the last one with what the call returned or why it failed. */
async function recordCalls(deps: LoopDeps, session: Session, req: TurnRequest, estimate: number, out: GenerateOutput | undefined, failure: unknown, purpose: CallPurpose): Promise<void> {
  const sent = req.meter.take();
  if (!deps.calls || sent.length === 0) return;
  const errorClass = failure === undefined ? undefined : isAbortError(failure, req.signal) ? 'cancelled' : isModelError(failure) ? failure.errorClass : 'internal';
  const outputEstimate = out ? Math.ceil(Buffer.byteLength(out.text + JSON.stringify(out.toolCalls)) / 3) : undefined;
  await deps.calls.record(
    callRecords(sent, { usage: out?.usage, estimate, outputEstimate, errorClass }, {
      session_id: session.session_id,
      node: deps.store.node,
      provider: req.backend.provider,
      model: req.model,
      price: priceOf(req.config, req.backend.provider, req.model)?.price,
      streamed: req.config.stream,
      purpose,
    })
  );
}

/**
 * The spending limits, before each model call: what the prompt (and the session) has spent, from the model-call log,
 * plus what this call could cost (its estimated input, and agent.maxTokens of output), against agent.maxCostUsd and
 * agent.maxSessionCostUsd. A call that could cross one is not sent: the run ends here, every tool call answered.
 */
export async function checkSpend(deps: LoopDeps, session: Session, req: TurnRequest, estimate: number): Promise<void> {
  const { maxCostUsd, maxSessionCostUsd } = req.config;
  if (maxCostUsd === undefined && maxSessionCostUsd === undefined) return;
  const priced = priceOf(req.config, req.backend.provider, req.model);
  if (!priced) {
    throw new RunError(
      `A spending limit is set (agent.${maxCostUsd !== undefined ? 'maxCostUsd' : 'maxSessionCostUsd'}) but no price is known for ${req.backend.provider} model ${req.model}, so nothing was sent. Set its price in agent.prices (e.g. {"${req.model}":{"inputPerMTokens":0,"outputPerMTokens":0}}), or unset the limit.`
    );
  }
  const sessionCalls = deps.calls ? await deps.calls.list({ session_id: session.session_id }) : [];
  const next = costOf(priced.price, nextCallTokens(sessionCalls, estimate, req.config.maxTokens));
  // The prompt's calls: those since its message was accepted (an approval resumes the same prompt).
  const promptAt = [...session.messages].reverse().find((m) => m.role === 'user')?.at ?? 0;
  const promptCalls = sessionCalls.filter((c) => c.at >= promptAt);
  const limits = [
    { key: 'agent.maxCostUsd', limit: maxCostUsd, calls: promptCalls, what: 'This prompt' },
    { key: 'agent.maxSessionCostUsd', limit: maxSessionCostUsd, calls: sessionCalls, what: 'This session' },
  ];
  for (const { key, limit, calls, what } of limits) {
    const spent = totals(calls).costUsd;
    const requests = calls.length;
    if (limit === undefined || spent + next <= limit) continue;
    throw new RunError(
      `${what} has spent ${usd(spent)} in ${requests} model request(s); the next call could cost up to ${usd(next)} (about ${estimate} input tokens and up to agent.maxTokens ${req.config.maxTokens} output tokens at ${priced.source} prices), which would cross ${key} (${usd(limit)}). Nothing more was sent. To go on: raise ${key} (harper-agent config ${key.slice(6)}=<dollars>) and send a new prompt.`
    );
  }
}

/**
 * What the next call could be billed, for the spending limits: its estimated input, and agent.maxTokens of output.
 * Where this session's provider has reported cache reads, the input the previous request sent is taken as read from
 * the cache (the request repeats it byte for byte unless a cut or a compaction came between) and the rest as written
 * to it (the dearer of the two where the API charges writes); otherwise all of it at the input price.
 */
export function nextCallTokens(sessionCalls: readonly { inputTokens: number | null; cacheReadTokens: number | null; errorClass: string | null }[], estimate: number, maxTokens: number): Billed {
  const caching = sessionCalls.some((c) => (c.cacheReadTokens ?? 0) > 0);
  const previous = [...sessionCalls].reverse().find((c) => !c.errorClass && c.inputTokens !== null);
  if (!caching || !previous) return { input: estimate, output: maxTokens };
  const cacheRead = Math.min(previous.inputTokens!, estimate);
  return { input: estimate, output: maxTokens, cacheRead, cacheWrite: estimate - cacheRead };
}

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
  const { session, estimate } = await fitBudget(deps, kept.session, req, budget, kept.estimate);
  await checkSpend(deps, session, req, estimate);
  try {
    return { out: await callModel(deps, session, req, buildInput(deps, session, req), estimate), sent: session };
  } catch (error) {
    if (!isModelError(error) || !error.contextWindowExceeded || req.signal.aborted) throw error;
    // The estimate let this request through and the provider still rejected it: remember the size that failed.
    await deps.limits?.learn(target(req), estimate).catch(() => undefined);
    deps.log?.(`harper-agent: session ${id}: ${error.message}; cutting the newest tool results (or compacting) and retrying once`);
    const cut = await deps.store.shrinkNewestToolResults(id, req.guard);
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
          `The conversation is still longer than the model's context window after ${cut ? `cutting ${cut} tool result(s) to 2 KiB` : 'compacting it'} (${retryError.message}). To continue: ${CONTEXT_ADVICE}.`
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
  if (!budget || workingSetCuts(current.messages, budget).length === 0) return current;
  const cut = await deps.store.trimToWorkingSet(current.session_id, budget, req.guard);
  return cut ? (await deps.store.get(current.session_id))! : current;
}

/**
 * Pre-flight: while the request's estimate is over the budget, apply the same shrink as after a rejection, group by
 * group from the newest, then compaction; when neither is left and it still does not fit, end the run without sending.
 */
async function fitBudget(deps: LoopDeps, current: Session, req: TurnRequest, budget: Budget | null, known?: number): Promise<{ session: Session; estimate: number }> {
  const id = current.session_id;
  let session = current;
  const counter = req.counter;
  let estimate = known ?? estimateTokens(buildInput(deps, session, req), counter);
  while (budget && estimate > budget.tokens) {
    const cut = await deps.store.shrinkNewestToolResults(id, req.guard);
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
  return { session, estimate };
}

// ------------------------------------------------------------------------------------------------------------
// Compaction (agent/compaction.ts decides where to cut and what the summary reads; here the call is made and the
// record written, through the locked mutator like any other change)

/** The compaction sizes for a budget, from this request's own fixed part (the system prompt and tool list, counted once
 * a run) and bytes per token; and the request's estimate. */
function sizesFor(deps: LoopDeps, session: Session, req: TurnRequest, budget: Budget): { sizes: CompactionSizes; estimate: number } {
  const input = buildInput(deps, session, req);
  const fixed = (req.fixedTokens ??= estimateTokens({ ...input, messages: [] }, req.counter));
  const estimate = estimateTokens(input, req.counter);
  const bytes = Buffer.byteLength(JSON.stringify(input.messages));
  const bytesPerToken = estimate > fixed ? Math.min(4, Math.max(1.5, bytes / (estimate - fixed))) : 3;
  return { sizes: compactionSizes(budget.tokens, req.config.compactAtPercent, fixed, bytesPerToken), estimate };
}

/** Compacts when the next request would pass agent.compactAtPercent of the budget (a known budget only). Answers the
 * session, and the request's estimate when nothing changed. */
async function compactWhenDue(deps: LoopDeps, session: Session, req: TurnRequest, budget: Budget | null): Promise<{ session: Session; estimate?: number }> {
  if (!req.config.compaction || !budget) return { session };
  const { sizes, estimate } = sizesFor(deps, session, req, budget);
  if (estimate <= sizes.threshold) return { session, estimate };
  return { session: (await compact(deps, session, req, sizes, false)) ?? session };
}

/**
 * Replaces the older part of what the model sees with a summary: the model writes it (in parts when the segment is
 * larger than one call), or a digest stands in. One guarded append of the record: a cancel before it leaves nothing
 * written. Returns the session with the record, or null when there was nothing to compact.
 */
export async function compact(deps: LoopDeps, session: Session, req: TurnRequest, sizes: CompactionSizes, all: boolean): Promise<Session | null> {
  const plan = planCompaction(session.messages, sizes.keepBytes, all);
  if (!plan) return null;
  const written = await writeSummary(deps, session, req, plan, sizes);
  if (req.signal.aborted) throw new DOMException('cancelled', 'AbortError');
  const record: CompactionRecord = { role: 'compaction', content: compactionContent(plan, written.summary, written.by), keepFrom: plan.keepFrom, compactedBy: written.by };
  if (written.detail) record.detail = written.detail;
  await appendToRun(deps, session, [record], req.guard);
  deps.log?.(`harper-agent: session ${session.session_id}: messages #0-#${plan.keepFrom - 1} compacted into a ${Buffer.byteLength(record.content)}-byte ${written.by === 'model' ? 'summary' : 'digest'}${written.detail ? ` (${written.detail})` : ''}`);
  return session;
}

type Written = { summary: string; by: 'model' | 'digest'; detail?: string };

/** The summary of what a plan covers: the model's, through the same backend, call log, spending limits and classifier;
 * the digest when the provider is local or the call is refused, fails or overflows. */
async function writeSummary(deps: LoopDeps, session: Session, req: TurnRequest, plan: CompactionPlan, sizes: CompactionSizes): Promise<Written> {
  const fallback = (why: string): Written => ({ summary: digest(session.messages, plan, sizes.digestBytes), by: 'digest', detail: why });
  if (req.backend.provider === 'local') return fallback('the local backend is not a model');
  const parts = splitParts(segmentBlocks(session.messages, plan), sizes.partBytes);
  const maxTokens = Math.min(req.config.maxTokens, sizes.summaryTokens);
  let soFar: string | undefined;
  try {
    for (const part of parts) {
      const input: GenerateInput = { system: COMPACTION_SYSTEM, messages: [{ role: 'user', content: summaryPrompt(part, soFar, Math.floor(maxTokens * 0.6)) }], tools: [], model: req.model, maxTokens };
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

// ------------------------------------------------------------------------------------------------------------
// Runs

interface ActiveRun {
  controller: AbortController;
  runner: string;
  done: Promise<void>;
}

const active = new Map<string, ActiveRun>();

/** When this module loaded: Harper loads the backends as sibling components after the agent (agent/boot.ts). */
const MODULE_LOADED_AT = Date.now();
/** How long after load a follow-up waits for its provider's backend to register before it fires anyway. */
export const BACKEND_LOAD_GRACE_MS = 60_000;

/** A run's token: the node, process and thread (Harper's worker index, and the thread's id) that run it, so a restart's
 * recovery on one node never ends another's, and a worker Harper restarted is told from one still running. */
export function newRunner(node: string | null): string {
  return `${node ?? ''}:${process.pid}:${workerIndex() ?? 'main'}.${threadId}:${randomUUID()}`;
}

/**
 * Could the run a token names still be alive? Not when another process of this node ran it (Harper restarted), nor
 * when an earlier thread of this thread's worker index did (Harper restarted the worker threads: restart_service, a
 * component deployed); a run of another worker of this process may be. A token from before the worker index was in it
 * counts as alive when it is from this process.
 */
export function runnerMayBeAlive(runner: string | null, node: string | null, self: ThreadIdentity = thisThread()): boolean {
  const prefix = `${node ?? ''}:${process.pid}:`;
  if (!runner?.startsWith(prefix)) return false;
  const [index, thread] = runner.slice(prefix.length).split(':')[0]!.split('.');
  return thread === undefined || index !== String(self.index) || thread === String(self.thread);
}

/** Which thread this is: Harper's worker index (null off a worker) and Node's thread id. */
export interface ThreadIdentity {
  index: number | null;
  thread: number;
}
const thisThread = (): ThreadIdentity => ({ index: workerIndex(), thread: threadId });

export function activeRun(id: string): ActiveRun | undefined {
  return active.get(id);
}

/** Tool calls of the newest assistant message that have no result yet (in order). */
export function unansweredToolCalls(messages: readonly StoredMessage[]): ToolCall[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'assistant') {
      const answered = new Set(messages.slice(i + 1).flatMap((r) => (r.role === 'tool' ? [r.toolCallId] : [])));
      return (m.toolCalls ?? []).filter((c) => !answered.has(c.id));
    }
    if (m.role === 'user') return [];
  }
  return [];
}

function userMessages(messages: readonly StoredMessage[]): number {
  return messages.filter((m) => m.role === 'user').length;
}

function modelCallsSincePrompt(messages: readonly StoredMessage[]): number {
  let n = 0;
  for (let i = messages.length - 1; i >= 0 && messages[i]!.role !== 'user'; i--) if (messages[i]!.role === 'assistant') n++;
  return n;
}

export interface Resume {
  toolCallId: string;
  approved: boolean;
}

/** Starts a run on a session already marked running with `runner` (agent_prompt or approve_agent_action did). */
export function startRun(deps: LoopDeps, id: string, runner: string, resume?: Resume, acceptedAt = 0): ActiveRun {
  return launch(deps, id, runner, acceptedAt, (signal) => runSession(deps, id, { runner }, signal, resume));
}

/** Starts compact_agent_session's work on a session already marked running with `runner`: it compacts everything,
 * then puts back the status the session had. Cancelled like a run (cancel_agent_run). */
export function startCompaction(deps: LoopDeps, id: string, runner: string, acceptedAt: number, before: { status: SessionHeader['status']; lastError: string | null }): ActiveRun {
  return launch(deps, id, runner, acceptedAt, (signal) => runCompaction(deps, id, { runner }, signal, before));
}

/** A follow-up's prompt as the model sees it: what it asked to be told, and when it asked. */
export function followupPrompt(f: Followup): string {
  return `Follow-up you scheduled at ${new Date(f.createdAt).toISOString()}: ${f.message}`;
}

/** Nothing to write: the follow-up was settled already, or the session is busy (abort the change, write nothing). */
class NotNow extends Error {}

/**
 * Fires a due follow-up. Under the session's lock the follow-up is read again (another worker thread may have fired
 * it, an operator cancelled it), marked fired, and its message appended as a prompt that starts a run, as agent_prompt
 * does. A session that is running or awaiting approval, or whose provider has not registered yet, is left for later
 * ('busy'). The prompt is written first and the row marked fired after it, in the same lock: a firing cut off between
 * the two (a worker restarted: seen in bench/stress.ts) left the row pending, and the next firing finds the prompt it
 * stored and only marks the row (before, the row was marked first and such a cut lost the follow-up).
 */
export async function fireFollowup(deps: LoopDeps, f: Followup): Promise<FireOutcome> {
  const followups = deps.followups!;
  const config = deps.config();
  // One due while Harper was down fires at boot, possibly before the backend it needs has loaded (seen under load:
  // the run failed with "not registered"): until the grace ends it waits, as for a busy session; then it fires and a
  // provider still missing ends the run with the error that says so.
  if (!Models.get(config.provider) && Date.now() - (deps.loadedAt ?? MODULE_LOADED_AT) < BACKEND_LOAD_GRACE_MS) return 'busy';
  const runner = newRunner(deps.store.node);
  let outcome: FireOutcome = 'done';
  try {
    let current: Followup | undefined;
    const header = await deps.store.mutate(f.session_id, async (s) => {
      current = await followups.get(f.followup_id);
      if (!current || current.status !== 'pending') throw new NotNow();
      if ((await deps.store.get(f.session_id))?.messages.some((m) => m.role === 'user' && m.followup === current!.followup_id)) {
        await followups.settle(current, 'fired');
        throw new NotNow();
      }
      if (s.status === 'running' || s.status === 'awaiting_approval') {
        outcome = 'busy';
        throw new NotNow();
      }
      outcome = 'fired';
      s.status = 'running';
      s.lastError = null;
      s.runner = runner;
      s.node ??= deps.store.node;
      s.provider = config.provider;
      s.model = config.model ?? Models.get(config.provider)?.defaultModel ?? s.model;
      return [{ role: 'user', content: followupPrompt(current), followup: current.followup_id }];
    }, undefined, () => followups.settle(current!, 'fired'));
    startRun(deps, f.session_id, runner, undefined, header.updatedAt);
  } catch (error) {
    if (error instanceof NotNow) return outcome;
    if (error instanceof SessionNotFoundError) {
      await followups.settle(f, 'cancelled', 'the session is gone');
      return 'done';
    }
    throw error;
  }
  return outcome;
}

function launch(deps: LoopDeps, id: string, runner: string, acceptedAt: number, work: (signal: AbortSignal) => Promise<void>): ActiveRun {
  const controller = new AbortController();
  const run: ActiveRun = { controller, runner, done: Promise.resolve() };
  // A cancel answered by another worker thread writes the row; its event reaches this thread at once and stops the
  // run here, between writes as well as inside a model or tool call. Only a cancel, or another run taking the session,
  // written since this run was accepted counts: a subscription can still deliver the row's earlier writes.
  const unwatch = deps.store.watch(id, (header) => {
    if (header.updatedAt < acceptedAt) return;
    if (header.status === 'aborted' || (header.status === 'running' && header.runner !== runner)) controller.abort();
  });
  run.done = work(controller.signal)
    .finally(() => unwatch.then((close) => close()))
    .then(() => (controller.signal.aborted ? reassertCancel(deps, id, runner) : undefined))
    .catch((error) => deps.log?.(`harper-agent: session ${id}: ${errorInfo(error)}`))
    .finally(() => {
      if (active.get(id) === run) active.delete(id);
    });
  active.set(id, run);
  return run;
}

/**
 * After a cancelled run stops: if a write of its own, in flight while the cancel landed, put the row back to running
 * under its token (rows are last-writer-wins across threads), the cancel is written again, so nothing stays running.
 */
async function reassertCancel(deps: LoopDeps, id: string, runner: string): Promise<void> {
  const stillMine = (s: SessionHeader) => s.status === 'running' && s.runner === runner;
  const header = await deps.store.header(id);
  if (!header || !stillMine(header)) return;
  await deps.store.mutate(id, (s) => {
    if (!stillMine(s)) return;
    s.status = 'aborted';
    s.lastError = 'Cancelled with cancel_agent_run.';
    s.runner = null;
    s.pendingApprovals = [];
  });
}

function cutShort(out: GenerateOutput, config: AgentConfig): string | null {
  switch (out.finishReason) {
    case 'length':
      return `The model's answer was cut short at agent.maxTokens (${config.maxTokens}) tokens. Raise agent.maxTokens, or ask for less in one prompt.`;
    case 'content_filter':
      return "The provider's content filter stopped the model's answer. Rephrase the prompt.";
    case 'invalid_tool_call':
      return `The model produced a tool call that could not be parsed${out.detail ? ` (${out.detail})` : ''}. Send the prompt again.`;
  }
  if (!out.text.trim() && out.toolCalls.length === 0) return 'The model returned an empty answer. Send the prompt again, or rephrase it.';
  return null;
}

/** Appends a run's messages and keeps its own copy of the transcript in step (the run is the session's only writer). */
async function appendToRun(deps: LoopDeps, session: Session, messages: StoredMessage[], guard: RunGuard): Promise<void> {
  await deps.store.append(session.session_id, messages, guard);
  session.messages.push(...messages);
}

/** A run's backend (metered for the call log) and what its model calls need. */
async function turnRequest(deps: LoopDeps, config: AgentConfig, guard: RunGuard, signal: AbortSignal): Promise<TurnRequest> {
  const registration = Models.get(config.provider);
  if (!registration) {
    throw new RunError(`agent.provider ${JSON.stringify(config.provider)} is not registered (available: ${Models.providers().join(', ') || 'none'}). Set agent.provider to one of them.`);
  }
  const model = config.model ?? registration.defaultModel;
  const meter = new RunMeter();
  const backend = registration.create({
    model,
    apiKey: config.apiKey,
    baseUrl: config.baseUrl,
    region: config.region,
    requestTimeoutMs: config.requestTimeoutMs,
    maxRetries: config.maxRetries,
    contextWindowTokens: config.contextWindowTokens,
    errors: providerErrors,
    meter,
  });
  const cacheMarks = cacheMarksFor(registration.provider, priceOf(config, registration.provider, model)?.price.cacheReadPerMTokens !== undefined);
  return { backend, model, config, guard, signal, meter, counter: await tokenCounter(model), cacheMarks };
}

/** compact_agent_session: everything the model sees becomes one summary (the newest prompt's turn too: the session is
 * between runs), then the session's status is put back. A failure of the summary call falls back to the digest. */
async function runCompaction(deps: LoopDeps, id: string, guard: RunGuard, signal: AbortSignal, before: { status: SessionHeader['status']; lastError: string | null }): Promise<void> {
  const restore = (lastError: string | null, status = before.status) =>
    deps.store.mutate(
      id,
      (s) => {
        s.status = status;
        s.lastError = lastError;
        s.runner = null;
      },
      guard
    );
  try {
    const config = deps.config();
    const req = await turnRequest(deps, config, guard, signal);
    const session = (await deps.store.get(id))!;
    const budget = (await budgetOf(deps, req)) ?? { tokens: ON_DEMAND_BUDGET_TOKENS, source: 'no window known' };
    await compact(deps, session, req, sizesFor(deps, session, req, budget).sizes, true);
    await restore(before.lastError);
  } catch (error) {
    if (error instanceof RunSupersededError || isAbortError(error, signal)) return;
    deps.log?.(`harper-agent: session ${id}: compaction failed: ${errorInfo(error)}`);
    await restore(`Compaction failed: ${errorInfo(error)}`, 'error').catch(() => undefined);
  }
}

/** The budget an on-demand compaction sizes its summary for when no window is known. */
export const ON_DEMAND_BUDGET_TOKENS = 32_000;

async function runSession(deps: LoopDeps, id: string, guard: RunGuard, signal: AbortSignal, resume?: Resume): Promise<void> {
  const config = deps.config();
  const finish = async (status: 'completed' | 'error', lastError: string | null) => {
    if (signal.aborted) return; // cancel_agent_run wrote 'aborted'; nothing more is written
    await deps.store.setStatus(id, status, lastError, guard);
  };
  try {
    const req = await turnRequest(deps, config, guard, signal);
    const ctx: ToolContext = { scopes: deps.scopes, maxResultBytes: config.maxToolResultBytes, signal, databases: deps.databases, fetchAllow: config.fetchAllow ?? deps.ownOrigins ?? [], allowOperations: config.allowOperations ?? [] };
    let session = (await deps.store.get(id))!;
    // Harper's operations run as agent.user when it is set, else as the user who owns the session, with that user's
    // permissions; no user, no operations.
    const actingUser = config.user ?? session.user;
    if (actingUser && deps.operationsAs) ctx.operation = deps.operationsAs(actingUser);
    const followups = deps.followups;
    if (followups) {
      ctx.scheduleFollowup = async (args) => {
        if (config.maxFollowups === 0) throw new ToolError('follow-ups are turned off here (agent.maxFollowups is 0)');
        try {
          return await followups.schedule(id, session.node ?? deps.store.node, args.message, dueTime(args, config), config);
        } catch (error) {
          throw error instanceof FollowupError ? new ToolError(error.message) : error;
        }
      };
    }
    for (;;) {
      if (signal.aborted) return;
      const pending = unansweredToolCalls(session.messages);
      if (pending.length > 0) {
        for (const call of pending) {
          const tool = deps.tools.get(call.name);
          let observation: ToolMessage;
          if (resume?.toolCallId === call.id) {
            observation = resume.approved
              ? await invokeTool(deps.tools, call, ctx)
              : capObservation(call, { error: `the operator denied ${call.name}; do not retry it unless asked` }, true, ctx.maxResultBytes);
            resume = undefined;
          } else if (isDestructive(tool, call.arguments) && tool!.refuse?.(call.arguments, ctx)) {
            // Refused before any approval is asked for: the operator is not asked about what could never run.
            observation = capObservation(call, { error: tool!.refuse!(call.arguments, ctx) }, true, ctx.maxResultBytes);
          } else if (isDestructive(tool, call.arguments) && !config.autoApprove) {
            await deps.store.mutate(
              id,
              (s) => {
                s.status = 'awaiting_approval';
                s.runner = null;
                s.pendingApprovals = [{ approval_id: randomUUID(), toolCallId: call.id, name: call.name, arguments: call.arguments, createdAt: Date.now() }];
              },
              guard
            );
            return;
          } else {
            observation = await invokeTool(deps.tools, call, ctx);
          }
          if (signal.aborted) return;
          await appendToRun(deps, session, [observation], guard);
        }
        continue;
      }
      if (modelCallsSincePrompt(session.messages) >= config.maxTurns) {
        throw new RunError(`The run reached agent.maxTurns (${config.maxTurns}) model calls before the model answered. Raise agent.maxTurns, or ask for less in one prompt.`);
      }
      const { out, sent } = await generateTurn(deps, session, req);
      // A shrink rewrote stored results: carry on from what was sent.
      if (sent !== session) session = sent;
      if (signal.aborted) return;
      const problem = cutShort(out, config);
      if (problem) return await finish('error', problem);
      const message: Message = { role: 'assistant', content: out.text };
      if (out.toolCalls.length) message.toolCalls = out.toolCalls;
      if (out.toolCalls.length === 0) {
        if (signal.aborted) return;
        // Two threads that accepted a prompt at once both keep theirs; the run that owns the session answers again
        // if a prompt landed after the transcript it sent.
        if (userMessages(((await deps.store.get(id))!).messages) > userMessages(sent.messages)) {
          await deps.store.append(id, [message], guard);
          session = (await deps.store.get(id))!;
          continue;
        }
        // The answer and 'completed' in one write: a cancel cannot land between them.
        await deps.store.mutate(
          id,
          (s) => {
            s.status = 'completed';
            s.lastError = null;
            s.runner = null;
            return [message];
          },
          guard
        );
        return;
      }
      await appendToRun(deps, session, [message], guard);
    }
  } catch (error) {
    if (error instanceof RunSupersededError || isAbortError(error, signal)) return;
    deps.log?.(`harper-agent: session ${id} ended with an error: ${errorInfo(error)}`);
    await finish('error', errorInfo(error)).catch(() => undefined);
  }
}

/** Marks this node's runs that a restart cut off (their runner is from another process of this node) as error, so
 * none stays running. Runs owned by other nodes are theirs to recover. */
export async function recoverInterruptedRuns(store: SessionStore, self: ThreadIdentity = thisThread()): Promise<number> {
  let recovered = 0;
  const interrupted = (s: SessionHeader) => s.status === 'running' && (s.node ?? store.node) === store.node && !runnerMayBeAlive(s.runner, store.node, self);
  for (const s of await store.list(Number.MAX_SAFE_INTEGER)) {
    if (!interrupted(s)) continue;
    await store
      .mutate(s.session_id, (row) => {
        if (!interrupted(row)) return;
        row.status = 'error';
        row.lastError = 'The run was interrupted by a Harper restart. Send a new prompt to continue the session.';
        row.runner = null;
        recovered++;
      })
      .catch(() => undefined);
  }
  return recovered;
}

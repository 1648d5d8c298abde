// One model call: the run's backend (metered), the request the context module builds, the spending limits' pre-check,
// the silent-overflow check, and the call's records in the model-call log whatever the outcome.
import type { User } from './operations.js';
import { policyOf } from './toolPolicy.js';
import { randomUUID } from 'node:crypto';
import { errorInfo } from '../resources/models/agentLoop.js';
import { isAbortError, isModelError, ModelError, providerErrors } from '../resources/models/backendHelpers.js';
import { Models } from '../resources/models/models.js';
import type { GenerateInput, GenerateOutput, ModelBackend, ReportedWindow, ToolSpec } from '../resources/models/types.js';
import type { AgentConfig } from './agent.js';
import { buildRequest, cacheMarksFor, systemText } from './context/request.js';
import { answerTokens, FIXED_SHARE, fitToWindow, smallestWindow, type FittedConfig, type ToolTier } from './context/window.js';
import { contextBudget, estimateTokens, windowOf, type ModelTarget } from './contextBudget.js';
import { RunError, type LoopDeps } from './loopDeps.js';
import { callRecords, costOf, priceOf, RunMeter, totals, usd, type Billed } from './modelCalls.js';
import type { RunGuard, Session } from './session.js';
import type { Capabilities } from './tools/types.js';
import { LiveWriter } from './sessionFeed.js';
import { counterFor, type TokenCounter } from './tokenCount.js';

export interface TurnRequest extends RunShape {
  backend: ModelBackend;
  model: string;
  guard: RunGuard;
  signal: AbortSignal;
  /** The requests the backend's SDK sends (handed to it when the run made it). */
  meter: RunMeter;
  /** The system prompt's and tool list's tokens: the part of every request compaction cannot shrink (counted once). */
  fixedTokens?: number;
  /** Mark the cached prefix (cacheMarksFor: the API caches only at marks, and the model can). */
  cacheMarks?: boolean;
}

/** The model on the server this run talks to: what is reported or learned about a window is kept per server. */
export const target = (req: TurnRequest): ModelTarget => ({ provider: req.backend.provider, baseUrl: req.config.baseUrl, model: req.model });

/** The run's context budget, the server asked for its window where the backend can ask. */
export const budgetOf = (deps: LoopDeps, req: TurnRequest) =>
  contextBudget(req.config, target(req), deps.limits, req.backend.reportedWindow && (() => req.backend.reportedWindow!(req.model, req.signal)));

/** What a run on `session` can do under `config`: Harper's operations only as a user (agent.user, else the session's
 * owner), data tools only with Harper's databases, follow-ups only where they are stored and not turned off. */
export function capabilities(deps: Pick<LoopDeps, 'operationsAs' | 'databases' | 'followups' | 'memory'>, config: Pick<AgentConfig, 'user' | 'maxFollowups'>, owner: string | null | undefined): Capabilities {
  return { operations: !!deps.operationsAs && !!(config.user ?? owner), data: !!deps.databases, followups: !!deps.followups && config.maxFollowups !== 0, memory: !!deps.memory };
}

/** What a run's requests are shaped by besides the transcript: the config with its sizes fitted to the window, the
 * tool tier and list (agent/context/window.ts), and the tokenizer the estimates count with. */
export interface RunShape {
  config: FittedConfig;
  tier: ToolTier;
  /** The head an older result is cut to (agent/context/window.ts). */
  headBytes: number;
  tools: ToolSpec[];
  /** The model's tokenizer, or a stand-in for a self-hosted model (agent/tokenCount.ts); none: bytes / 3. */
  counter?: TokenCounter;
  /** Harper's user the session belongs to (its role decides the tool policy and the file scopes), looked up once. */
  owner?: User;
}

/**
 * The shape of the requests of a run on `owner`'s session for `t`: the one place the loop, get_agent_session's
 * estimate and preview_agent_request take it from. `ask` lets the server be asked for its window (a run passes its
 * backend's); without it what is kept or configured decides.
 */
export async function runShape(deps: Pick<LoopDeps, 'operationsAs' | 'databases' | 'followups' | 'memory' | 'tools' | 'environment' | 'limits' | 'userOf'>, config: AgentConfig, t: ModelTarget, owner: string | null | undefined, ask?: () => Promise<ReportedWindow | undefined>): Promise<RunShape> {
  const counter = await counterFor(t.provider, t.model);
  const window = await windowOf(config, t, deps.limits, ask);
  const can = capabilities(deps, config, owner);
  // A tool agent.toolPolicy denies the owner's role is not offered (agent/toolPolicy.ts).
  const user = owner ? await deps.userOf?.(owner) : undefined;
  const role = user?.role?.role;
  const offered = (tier: ToolTier) => deps.tools.specs(can, tier).filter((spec) => policyOf(config, role, deps.tools.get(spec.name)!) !== 'deny');
  const fixed = (tier: ToolTier) => estimateTokens({ system: systemText({ config, environment: deps.environment, tier }), tools: offered(tier), messages: [] }, counter);
  const fit = fitToWindow(config, window?.tokens, fixed);
  return { ...fit, tools: offered(fit.tier), counter, owner: user };
}

/**
 * Whether a config's window can hold a run at all: the brief system prompt and the core tool list (every capability
 * on) within FIXED_SHARE of what the window leaves after the answer. A problem naming the key and the smallest value
 * that works, or null (set_agent_config refuses with it; boot logs it).
 */
export async function windowProblem(deps: Pick<LoopDeps, 'tools' | 'environment'>, config: AgentConfig): Promise<string | null> {
  const window = config.contextWindowTokens;
  if (window === undefined) return null;
  const model = config.model ?? Models.get(config.provider)?.defaultModel ?? '';
  const counter = await counterFor(config.provider, model);
  const all: Capabilities = { operations: true, data: true, followups: true, memory: true };
  const fixed = estimateTokens({ system: systemText({ config, environment: deps.environment, tier: 'core' }), tools: deps.tools.specs(all, 'core'), messages: [] }, counter);
  const smallest = smallestWindow(config.maxTokens, fixed);
  if (window >= smallest) return null;
  const answer = config.maxTokens !== undefined ? `agent.maxTokens ${config.maxTokens}` : `an answer of ${answerTokens(undefined, window)} tokens (an eighth of it)`;
  return (
    `agent.contextWindowTokens ${window} is too small: the system prompt and the smallest tool list take about ${fixed} tokens, ` +
    `and with ${answer} they must fit in ${FIXED_SHARE * 100}% of the rest, leaving room for a page and the transcript. ` +
    `The smallest that works is ${smallest}${config.maxTokens !== undefined ? ' (or lower agent.maxTokens)' : ''}.`
  );
}

/** The next request for a session: agent/context/request.ts decides what it holds. */
export function buildInput(deps: LoopDeps, session: Session, req: TurnRequest): GenerateInput {
  return buildRequest(session.messages, { config: req.config, model: req.model, tools: req.tools, tier: req.tier, environment: deps.environment, sessionId: session.session_id, cacheMarks: req.cacheMarks });
}

/** A conversation at least this large that gets a `length` finish with nothing produced is taken as overflowed. */
export const SILENT_OVERFLOW_MIN_BYTES = 32 * 1024;

/**
 * Servers that truncate the prompt instead of rejecting it (Ollama), or stop at `length` with no output, overflow
 * silently. Returns why this answer looks like one, or null.
 */
export function silentOverflow(out: GenerateOutput, config: AgentConfig, bytes: number | (() => number)): string | null {
  const window = config.contextWindowTokens;
  if (window && out.usage && out.usage.inputTokens >= window) {
    return `the provider reported ${out.usage.inputTokens} input tokens, all of agent.contextWindowTokens (${window}): it most likely cut the conversation (a silent overflow)`;
  }
  // The conversation's size only when it can matter (an empty answer cut at the length limit): not on every call.
  const conversationBytes = out.finishReason === 'length' && !out.text.trim() && out.toolCalls.length === 0 ? (typeof bytes === 'number' ? bytes : bytes()) : 0;
  if (conversationBytes >= SILENT_OVERFLOW_MIN_BYTES) {
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
/** A request's estimated tokens, or how to count them: a turn with no budget to fit and no spending limit counts only
 * when something asks (a call the provider reported no usage for, a rejection to learn from), so the tokenizer does
 * not run on every new page for nothing. */
export type Estimate = number | (() => number);
export const tokensOf = (e: Estimate): number => (typeof e === 'number' ? e : e());

/** `count` once, the first time it is asked. */
export function lazily(count: () => number): () => number {
  let n: number | undefined;
  return () => (n ??= count());
}

export async function callModel(deps: LoopDeps, session: Session, req: TurnRequest, input: GenerateInput, estimate: Estimate, purpose: CallPurpose = 'turn'): Promise<GenerateOutput> {
  const id = session.session_id;
  // A run cancelled while it prepared this call sends nothing (a backend may not look at a signal already aborted).
  req.signal.throwIfAborted();
  const live = req.config.stream && deps.publishLive && purpose === 'turn' ? new LiveWriter((event) => deps.publishLive!(id, event), randomUUID(), session.messages.length) : undefined;
  const onEvent = live?.onEvent ?? (req.config.stream ? () => undefined : undefined);
  req.meter.take(); // only this call's requests are its records
  let out: GenerateOutput | undefined;
  let failure: unknown;
  try {
    // A signal per request: SDKs add an abort listener per call, and a run makes many calls on one run signal.
    out = await req.backend.generate(input, AbortSignal.any([req.signal]), onEvent);
    const silent = silentOverflow(out, req.config, () => Buffer.byteLength(JSON.stringify(input.messages)));
    if (silent) throw new ModelError(silent, req.backend.provider, 400, true, 'silent_overflow');
    return out;
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    live?.close(failure !== undefined);
    // Not waited for: the records are queued before the run's next write (agent/recordLog.ts).
    void recordCalls(deps, session, req, estimate, out, failure, purpose).catch((error) => deps.log?.(`harper-agent: session ${id}: could not record its model calls: ${errorInfo(error)}`));
  }
}

/** The call's requests into the model-call log, the last one with what the call returned or why it failed. */
async function recordCalls(deps: LoopDeps, session: Session, req: TurnRequest, estimated: Estimate, out: GenerateOutput | undefined, failure: unknown, purpose: CallPurpose): Promise<void> {
  const sent = req.meter.take();
  if (!deps.calls || sent.length === 0) return;
  const errorClass = failure === undefined ? undefined : isAbortError(failure, req.signal) ? 'cancelled' : isModelError(failure) ? failure.errorClass : 'internal';
  const outputEstimate = out ? Math.ceil(Buffer.byteLength(out.text + JSON.stringify(out.toolCalls)) / 3) : undefined;
  await deps.calls.record(
    // The estimate is counted only for a successful call the provider reported no tokens for.
    callRecords(sent, { usage: out?.usage, estimate: out && !out.usage ? tokensOf(estimated) : 0, outputEstimate, errorClass }, {
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

/** When the prompt being answered was accepted: the model calls since are the prompt's (an approval resumes the same
 * prompt). */
export function promptStart(messages: readonly { role: string; at?: number }[]): number {
  return [...messages].reverse().find((m) => m.role === 'user')?.at ?? 0;
}

/**
 * The spending limits, before each model call: what the prompt (and the session) has spent, from the model-call log,
 * plus what this call could cost (its estimated input, and agent.maxTokens of output), against agent.maxCostUsd and
 * agent.maxSessionCostUsd. A call that could cross one is not sent: the run ends here, every tool call answered.
 */
export async function checkSpend(deps: LoopDeps, session: Session, req: TurnRequest, estimated: Estimate): Promise<void> {
  const { maxCostUsd, maxSessionCostUsd } = req.config;
  if (maxCostUsd === undefined && maxSessionCostUsd === undefined) return;
  const estimate = tokensOf(estimated);
  const priced = priceOf(req.config, req.backend.provider, req.model);
  if (!priced) {
    throw new RunError(
      `A spending limit is set (agent.${maxCostUsd !== undefined ? 'maxCostUsd' : 'maxSessionCostUsd'}) but no price is known for ${req.backend.provider} model ${req.model}, so nothing was sent. Set its price in agent.prices (e.g. {"${req.model}":{"inputPerMTokens":0,"outputPerMTokens":0}}), or unset the limit.`
    );
  }
  const sessionCalls = deps.calls ? await deps.calls.list({ session_id: session.session_id }) : [];
  const next = costOf(priced.price, nextCallTokens(sessionCalls, estimate, req.config.maxTokens));
  const promptCalls = sessionCalls.filter((c) => c.at >= promptStart(session.messages));
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

/** A run's backend (metered for the call log) and what its model calls need. */
export async function turnRequest(deps: LoopDeps, config: AgentConfig, owner: string | null | undefined, guard: RunGuard, signal: AbortSignal): Promise<TurnRequest> {
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
  const shape = await runShape(deps, config, { provider: registration.provider, baseUrl: config.baseUrl, model }, owner, backend.reportedWindow && (() => backend.reportedWindow!(model, signal)));
  return { ...shape, backend, model, guard, signal, meter, cacheMarks };
}

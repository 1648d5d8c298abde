// The run loop: owns a run from prompt to its end status. Every tool call goes through invokeTool, every
// observation through capObservation, every session change through the store's locked mutator (guarded by the
// run's token, so nothing is written once a run is cancelled). A turn's request and call are agent/turn.ts's; the
// run registry is agent/runs.ts's; follow-ups fire in agent/followupFiring.ts.
import { auditRecord, type Decision } from './toolCalls.js';
import { deniedMessage, policyOf } from './toolPolicy.js';
import { scopesFor } from './access.js';
import { randomUUID } from 'node:crypto';
import { errorInfo } from '../resources/models/agentLoop.js';
import { isAbortError } from '../resources/models/backendHelpers.js';
import type { GenerateOutput, Message, ToolCall, ToolMessage } from '../resources/models/types.js';
import type { AgentConfig } from './agent.js';
import type { StoredMessage } from './compaction.js';
import type { FittedConfig } from './context/window.js';
import { dueTime, FollowupError } from './followups.js';
import { RunError, type LoopDeps } from './loopDeps.js';
import { budgetOf, promptStart, turnRequest } from './modelCall.js';
import { capObservation, invokeTool } from './observation.js';
import { launch, type ActiveRun } from './runs.js';
import { RunSupersededError, type RunGuard, type SessionHeader } from './session.js';
import { isDestructive, ToolError, type ToolContext } from './tools/types.js';
import { compact, generateTurn, sizesFor } from './turn.js';
import { callsThisTurn, repeatNotice, repeats, REPEAT_NOTICE, REPEAT_STOP } from './repeats.js';
import { totals, usd } from './modelCalls.js';

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
export function startCompaction(deps: LoopDeps, id: string, runner: string, acceptedAt: number, before: { status: SessionHeader['status']; lastError: string | null }, focus?: string): ActiveRun {
  return launch(deps, id, runner, acceptedAt, (signal) => runCompaction(deps, id, { runner }, signal, before, focus));
}

/** A repeated call's result with the notice first, within the cap (the notice is short; the result gives way). */
function withNotice(observation: ToolMessage, notice: string, maxBytes: number): ToolMessage {
  const call = { id: observation.toolCallId, name: observation.name, arguments: {} };
  let value: unknown = observation.content;
  try {
    value = JSON.parse(observation.content);
  } catch {
    // a result cut by the cap: kept as its text
  }
  const noticed = value && typeof value === 'object' && !Array.isArray(value) ? { notice, ...value } : { notice, result: value };
  return capObservation(call, noticed, observation.isError === true, maxBytes);
}

/** Why a run stopped on a repeated call, with what this prompt's model calls cost (the call log). */
async function repeatStopMessage(deps: LoopDeps, session: { session_id: string; messages: readonly StoredMessage[] }, call: ToolCall, times: number): Promise<string> {
  const calls = deps.calls ? (await deps.calls.list({ session_id: session.session_id }).catch(() => [])).filter((c) => c.at >= promptStart(session.messages)) : [];
  const spent = calls.length ? ` This prompt's ${calls.length} model request(s) cost ${usd(totals(calls).costUsd)} (list_agent_model_calls).` : '';
  return `The model repeated the same call, ${call.name} ${JSON.stringify(call.arguments)}, ${times} times in a row after being told its results do not change, so the run was stopped before running it again.${spent} To go on: send a prompt that says what to do differently (another file, a cursor, a narrower question).`;
}

function cutShort(out: GenerateOutput, config: FittedConfig): string | null {
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

/** compact_agent_session: everything the model sees becomes one summary (the newest prompt's turn too: the session is
 * between runs), then the session's status is put back. A failure of the summary call falls back to the digest. */
async function runCompaction(deps: LoopDeps, id: string, guard: RunGuard, signal: AbortSignal, before: { status: SessionHeader['status']; lastError: string | null }, focus?: string): Promise<void> {
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
    // The digest needs no provider: one that cannot be used (not registered) gives the digest, never an error.
    let digestOnly: string | undefined;
    const session = (await deps.store.get(id))!;
    const req = await turnRequest(deps, config, session.user, guard, signal).catch((error) => {
      if (!(error instanceof RunError)) throw error;
      digestOnly = `no summary call could be made: ${error.message}`;
      return turnRequest(deps, { ...config, provider: 'local', model: undefined }, session.user, guard, signal);
    });
    const budget = (await budgetOf(deps, req)) ?? { tokens: ON_DEMAND_BUDGET_TOKENS, source: 'no window known' };
    await compact(deps, session, req, sizesFor(deps, session, req, budget).sizes, true, focus, digestOnly);
    await restore(before.lastError);
  } catch (error) {
    if (error instanceof RunSupersededError || isAbortError(error, signal)) return;
    deps.log?.(`harper-agent: session ${id}: compaction failed: ${errorInfo(error)}`);
    await restore(`Compaction failed: ${errorInfo(error)}`, 'error').catch(() => undefined);
  }
}

/** How long a tool may run before the call it answers is stored on its own (see `hold` in runSession). */
export const SLOW_TOOL_MS = 250;

/** The budget an on-demand compaction sizes its summary for when no window is known. */
export const ON_DEMAND_BUDGET_TOKENS = 32_000;

async function runSession(deps: LoopDeps, id: string, guard: RunGuard, signal: AbortSignal, resume?: Resume): Promise<void> {
  const config = deps.config();
  const finish = async (status: 'completed' | 'error', lastError: string | null) => {
    if (signal.aborted) return; // cancel_agent_run wrote 'aborted'; nothing more is written
    await deps.store.setStatus(id, status, lastError, guard);
  };
  try {
    let session = (await deps.store.get(id))!;
    const req = await turnRequest(deps, config, session.user, guard, signal);
    // A result (so a page) sized for the window: agent.maxToolResultBytes, or less for a small window. The file scopes
    // the session's user's role opens (agent/access.ts).
    const owner = req.owner;
    const role = owner?.role?.role;
    // Every settled call in the audit (agent/toolCalls.ts); a failed write is logged, never the run's end.
    const audit = (call: ToolCall, decision: Decision, result?: ToolMessage) =>
      deps.toolCalls?.record([auditRecord({ session_id: id, user: session.user, node: session.node }, call, decision, result)]).catch((error) => deps.log?.(`harper-agent: session ${id}: could not audit ${call.name}: ${errorInfo(error)}`));
    const ctx: ToolContext = { scopes: scopesFor(deps.scopes, config, owner), maxResultBytes: req.config.maxToolResultBytes, signal, databases: deps.databases, fetchAllow: config.fetchAllow ?? deps.ownOrigins ?? [], allowOperations: config.allowOperations ?? [] };
    // Harper's operations run as agent.user when it is set, else as the user who owns the session, with that user's
    // permissions; no user, no operations.
    const actingUser = config.user ?? session.user;
    if (actingUser && deps.operationsAs) ctx.operation = deps.operationsAs(actingUser);
    if (deps.memory) ctx.memory = { memory: deps.memory, user: session.user, session_id: id };
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
    // The assistant message whose tool calls run is held, not written: it is stored with its first result, one write
    // a tool turn. A tool that may change something, or one still running after SLOW_TOOL_MS, has it stored first, so
    // followers and the record show the call before its effect; a pause for approval stores it with the pause.
    const held: StoredMessage[] = [];
    const hold = (message: StoredMessage) => {
      session.messages.push(message);
      held.push(message);
    };
    const takeHeld = () => held.splice(0);
    const write = async (messages: StoredMessage[]) => {
      const all = [...takeHeld(), ...messages];
      session.messages.push(...messages);
      if (all.length) await deps.store.append(id, all, guard);
    };
    const invokeHeld = async (call: ToolCall) => {
      if (held.length && isDestructive(deps.tools.get(call.name), call.arguments)) await write([]);
      let early: Promise<void> | undefined;
      const slow = held.length
        ? setTimeout(() => {
            early = write([]);
            early.catch(() => undefined); // awaited below, once the tool is done; not unhandled meanwhile
          }, SLOW_TOOL_MS)
        : undefined;
      try {
        return await invokeTool(deps.tools, call, ctx);
      } finally {
        clearTimeout(slow);
        await early;
      }
    };
    for (;;) {
      if (signal.aborted) return;
      const pending = unansweredToolCalls(session.messages);
      if (pending.length > 0) {
        for (const call of pending) {
          const tool = deps.tools.get(call.name);
          const policy = tool ? policyOf(config, role, tool, call.arguments) : 'allow';
          let observation: ToolMessage;
          let decision: Decision = 'allowed';
          if (policy === 'deny') {
            decision = 'denied';
            // Not offered (runShape); a call to it anyway is refused, the operator never asked.
            observation = capObservation(call, { error: deniedMessage(call.name, role) }, true, ctx.maxResultBytes);
          } else if (resume?.toolCallId === call.id) {
            decision = resume.approved ? 'approved' : 'rejected';
            observation = resume.approved
              ? await invokeTool(deps.tools, call, ctx)
              : capObservation(call, { error: `the operator denied ${call.name}; do not retry it unless asked` }, true, ctx.maxResultBytes);
            resume = undefined;
          } else if (isDestructive(tool, call.arguments) && tool!.refuse?.(call.arguments, ctx)) {
            // Refused before any approval is asked for: the operator is not asked about what could never run.
            decision = 'refused';
            observation = capObservation(call, { error: tool!.refuse!(call.arguments, ctx) }, true, ctx.maxResultBytes);
          } else if (policy === 'ask' && !session.approvedTools?.includes(call.name)) {
            await deps.store.mutate(
              id,
              (s) => {
                s.status = 'awaiting_approval';
                s.runner = null;
                s.pendingApprovals = [{ approval_id: randomUUID(), toolCallId: call.id, name: call.name, arguments: call.arguments, createdAt: Date.now() }];
                return takeHeld();
              },
              guard
            );
            await audit(call, 'asked');
            return;
          } else {
            const times = repeats(callsThisTurn(session.messages, call));
            if (times >= REPEAT_STOP) throw new RunError(await repeatStopMessage(deps, session, call, times));
            observation = await invokeHeld(call);
            if (times === REPEAT_NOTICE) observation = withNotice(observation, repeatNotice(call, times), ctx.maxResultBytes);
          }
          if (signal.aborted) return;
          await write([observation]);
          // Not waited for: the audit record is queued before the run's next write (agent/recordLog.ts).
          void audit(call, decision, observation);
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
      const problem = cutShort(out, req.config);
      if (problem) return await finish('error', problem);
      const message: Message = { role: 'assistant', content: out.text };
      if (out.toolCalls.length) message.toolCalls = out.toolCalls;
      if (out.toolCalls.length === 0) {
        if (signal.aborted) return;
        // Two threads that accepted a prompt at once both keep theirs; the run that owns the session answers again
        // if a prompt landed after the transcript it sent. The row's count says whether anything did; only then is the
        // transcript read.
        const stored = (await deps.store.header(id))?.messageCount ?? 0;
        if (stored > sent.messages.length && userMessages(((await deps.store.get(id))!).messages) > userMessages(sent.messages)) {
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
      hold(message);
    }
  } catch (error) {
    if (error instanceof RunSupersededError || isAbortError(error, signal)) return;
    deps.log?.(`harper-agent: session ${id} ended with an error: ${errorInfo(error)}`);
    await finish('error', errorInfo(error)).catch(() => undefined);
  }
}

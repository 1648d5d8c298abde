// The agent's operations, answered on Harper's operations API (agent/http.ts routes them here). Each is its input
// schema and its handler; errors carry the HTTP status the operator gets.
import AjvModule from 'ajv';
import { threadId } from 'node:worker_threads';
import { environmentBlock } from './environment.js';
import { publicConfig } from './agent.js';
import { ConfigChangeError, type ConfigChangeResult } from './configStore.js';
import { contextBudget, estimateTokens } from './contextBudget.js';
import { newestCompaction, planCompaction, requestMessages } from './compaction.js';
import { tokenCounter } from './tokenCount.js';
import { systemPrompt } from './systemPrompt.js';
import { activeRun, newRunner, startCompaction, startRun, type LoopDeps } from './loop.js';
import { messageView } from './sessionFeed.js';
import { Models } from '../resources/models/models.js';
import { sessionSummary, SessionNotFoundError, type SessionHeader } from './session.js';
import { totals } from './modelCalls.js';
import type { Cluster, Via } from './cluster.js';
import type { FollowupStatus } from './followups.js';

const Ajv = AjvModule.default ?? AjvModule;

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export interface OperationsDeps extends LoopDeps {
  /** Persists a set_agent_config change and puts it in force (agent/configStore.ts). */
  changeConfig(change: Record<string, unknown>, user: string | null): Promise<ConfigChangeResult>;
  /** set_agent_config's changes in force (the API key as "(set)"). */
  persistedConfig(): Record<string, unknown>;
  /** Reads the persisted changes again, so a prompt right after set_agent_config on another worker thread runs with
   * it (the table subscription that carries it to this thread can land moments later). */
  refreshConfig?(): Promise<void>;
  /** This component's version and when this thread loaded it. */
  instance: { version: string; startedAt: string };
  /** This node, and the way to the node that owns a session (absent in unit tests: every session is local). */
  cluster?: Cluster;
}

export interface User {
  username?: string;
  role?: { permission?: { super_user?: boolean } };
}

/** Largest agent_prompt message, in UTF-8 bytes. */
export const MAX_MESSAGE_BYTES = 256 * 1024;
const sessionId = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' };

interface Operation {
  schema: Record<string, unknown>;
  handle(input: Record<string, unknown>, user: User, via?: Via): Promise<unknown>;
}

function object(properties: Record<string, unknown>, required: string[] = []) {
  return { type: 'object', properties: { operation: { type: 'string' }, ...properties }, required, additionalProperties: false };
}


export function createOperations(deps: OperationsDeps): Record<string, Operation> {
  const { store } = deps;
  const node = deps.cluster?.node ?? null;
  const found = <T>(s: T | undefined, id: string): T => {
    if (!s) throw new HttpError(404, `session ${JSON.stringify(id)} not found`);
    return s;
  };
  const mustGet = async (id: string) => found(await store.get(id), id);
  /** The session's row only (no transcript), or 404. */
  const mustGetHeader = async (id: string) => found(await store.header(id), id);
  /** A session another node owns is run, cancelled and approved there: the operation goes to that node. */
  const ownedElsewhere = (s: SessionHeader) => !!deps.cluster && !!s.node && s.node !== node;

  return {
    agent_prompt: {
      schema: object({ message: { type: 'string', minLength: 1 }, session_id: sessionId }, ['message']),
      async handle(input, user, via = {}) {
        const message = input.message as string;
        const bytes = Buffer.byteLength(message);
        if (bytes > MAX_MESSAGE_BYTES) throw new HttpError(413, `message is ${bytes} bytes; agent_prompt accepts at most ${MAX_MESSAGE_BYTES}`);
        await deps.refreshConfig?.();
        const config = deps.config();
        const registration = Models.get(config.provider);
        if (!registration) {
          throw new HttpError(503, `agent.provider ${JSON.stringify(config.provider)} is not registered (available: ${Models.providers().join(', ')}); set agent.provider with set_agent_config`);
        }
        if (input.session_id !== undefined) {
          const existing = await mustGetHeader(input.session_id as string);
          if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        }
        const id = (input.session_id as string | undefined) ?? (await store.create({ user: user.username ?? null, provider: config.provider, model: config.model ?? registration.defaultModel })).session_id;
        const runner = newRunner(node);
        const session = await store
          .mutate(id, (s) => {
            if (s.status === 'running' || s.status === 'awaiting_approval') {
              throw new HttpError(409, `session ${id} is ${s.status}${s.node && s.node !== node ? ` on node ${s.node}` : ''}: wait for it to finish${s.status === 'awaiting_approval' ? ', answer its approval' : ''} or cancel it with cancel_agent_run`);
            }
            s.status = 'running';
            s.lastError = null;
            s.runner = runner;
            s.node ??= node;
            s.provider = config.provider;
            s.model = config.model ?? registration.defaultModel;
            return [{ role: 'user', content: message }];
          })
          .catch((error) => {
            if (error instanceof SessionNotFoundError) throw new HttpError(404, error.message);
            throw error;
          });
        startRun(deps, id, runner, undefined, session.updatedAt);
        // messageIndex: where this prompt's messages start, so a follower (the CLI) can ask for just those.
        return { session_id: id, status: 'running', messageIndex: session.messageCount - 1, node: session.node };
      },
    },

    get_agent_session: {
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input) {
        const s = await mustGet(input.session_id as string);
        // How close the session is to its model's context window: the estimate the pre-flight uses, and the budget.
        const model = s.model ?? '';
        const budget = await contextBudget(deps.config(), { provider: s.provider, baseUrl: deps.config().baseUrl, model }, deps.limits);
        const counter = await tokenCounter(model);
        const environment = deps.environment && environmentBlock(deps.environment, new Date());
        const estimatedContextTokens = estimateTokens({ system: systemPrompt(deps.config().systemPromptAppend, environment), tools: deps.tools.specs(), messages: requestMessages(s.messages) }, counter);
        // What its model calls used and cost so far (list_agent_model_calls has each request).
        const modelCalls = totals((await deps.calls?.list({ session_id: s.session_id })) ?? []);
        // Follow-ups still to come (list_agent_followups has the fired and cancelled ones too).
        const followups = (await deps.followups?.list({ session_id: s.session_id, status: 'pending' })) ?? [];
        return { ...s, estimatedContextTokens, estimatedWith: counter?.name ?? 'bytes / 3', contextBudget: budget, modelCalls, followups };
      },
    },

    list_agent_sessions: {
      schema: object({ limit: { type: 'integer', minimum: 1, maximum: 1000 } }),
      async handle(input) {
        return (await store.list((input.limit as number | undefined) ?? 50)).map(sessionSummary);
      },
    },

    cancel_agent_run: {
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input, _user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGetHeader(id);
        if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        let followupsCancelled = 0;
        const session = await store.mutate(id, async (s) => {
          if (s.status !== 'running' && s.status !== 'awaiting_approval') throw new HttpError(409, `session ${id} is ${s.status}: there is no run to cancel`);
          s.status = 'aborted';
          s.lastError = 'Cancelled with cancel_agent_run.';
          s.runner = null;
          s.pendingApprovals = [];
          // Under the session's lock, so none of them fires in between.
          followupsCancelled = (await deps.followups?.cancelSession(id, 'cancel_agent_run')) ?? 0;
        });
        // A run on another worker thread stops on this write's event (startRun watches the row).
        activeRun(id)?.controller.abort();
        return { session_id: id, status: session.status, followupsCancelled };
      },
    },

    approve_agent_action: {
      schema: object({ session_id: sessionId, approval_id: { type: 'string', minLength: 1, maxLength: 128 }, approved: { type: 'boolean' } }, ['session_id', 'approval_id', 'approved']),
      async handle(input, _user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGetHeader(id);
        if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        const runner = newRunner(node);
        let toolCallId = '';
        const session = await store.mutate(id, (s) => {
          if (s.status !== 'awaiting_approval') throw new HttpError(409, `session ${id} is ${s.status}: it is not waiting for an approval`);
          const pending = s.pendingApprovals.find((p) => p.approval_id === input.approval_id);
          if (!pending) throw new HttpError(404, `approval ${JSON.stringify(input.approval_id)} is not pending on session ${id}`);
          toolCallId = pending.toolCallId;
          s.pendingApprovals = s.pendingApprovals.filter((p) => p !== pending);
          s.status = 'running';
          s.runner = runner;
        });
        startRun(deps, id, runner, { toolCallId, approved: input.approved as boolean }, session.updatedAt);
        return { session_id: id, status: 'running', approved: input.approved, messageIndex: session.messageCount };
      },
    },

    compact_agent_session: {
      // Compacts on demand (agent.compaction aside): everything the model sees becomes one summary, written by the
      // model (the digest when it cannot be), on the node that owns the session. Answers once it is stored.
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input, _user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGet(id);
        if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        if (!planCompaction(existing.messages, 0, true)) throw new HttpError(409, `session ${id} has nothing to compact${existing.messageCount ? ' since its last compaction' : ''}`);
        await deps.refreshConfig?.();
        const runner = newRunner(node);
        let before = { status: existing.status, lastError: existing.lastError };
        const accepted = await store.mutate(id, (s) => {
          if (s.status === 'running' || s.status === 'awaiting_approval') {
            throw new HttpError(409, `session ${id} is ${s.status}: compact it once the run ends, or cancel the run with cancel_agent_run`);
          }
          before = { status: s.status, lastError: s.lastError };
          s.status = 'running';
          s.lastError = null;
          s.runner = runner;
        });
        await startCompaction(deps, id, runner, accepted.updatedAt, before).done;
        const s = await mustGet(id);
        const c = newestCompaction(s.messages);
        return { session_id: id, status: s.status, lastError: s.lastError, compaction: c >= accepted.messageCount ? messageView(s.messages[c]!, c) : null };
      },
    },

    list_agent_followups: {
      // Follow-ups the model scheduled (schedule_followup), soonest first: pending, fired and cancelled.
      schema: object({ session_id: sessionId, status: { type: 'string', enum: ['pending', 'fired', 'cancelled'] } }),
      async handle(input) {
        if (!deps.followups) throw new HttpError(503, 'follow-ups are not available on this node');
        return { followups: await deps.followups.list({ session_id: input.session_id as string | undefined, status: input.status as FollowupStatus | undefined }) };
      },
    },

    cancel_agent_followup: {
      // Cancels a pending follow-up on the node that owns its session (the one that would fire it), under the
      // session's lock, so it is either fired already (409) or never fires.
      schema: object({ followup_id: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' } }, ['followup_id']),
      async handle(input, _user, via = {}) {
        const followups = deps.followups;
        if (!followups) throw new HttpError(503, 'follow-ups are not available on this node');
        const fid = input.followup_id as string;
        const f = await followups.get(fid);
        if (!f) throw new HttpError(404, `follow-up ${JSON.stringify(fid)} not found`);
        if (deps.cluster && f.node && f.node !== node) return deps.cluster.forward(f.node, input, via);
        return store.underLock(f.session_id, async () => {
          const current = (await followups.get(fid))!;
          if (current.status !== 'pending') throw new HttpError(409, `follow-up ${fid} is ${current.status}: only a pending follow-up can be cancelled`);
          return followups.settle(current, 'cancelled', 'cancel_agent_followup');
        });
      },
    },

    get_agent_status: {
      // Which backends registered, which thread answered and the config in force there: what an operator checks after
      // a deploy, an upgrade or a restart.
      schema: object({}),
      async handle() {
        return {
          version: deps.instance.version,
          providers: Models.providers(),
          node,
          pid: process.pid,
          threadId,
          startedAt: deps.instance.startedAt,
          environment: deps.environment ?? null,
          config: publicConfig(deps.config()),
          persisted: deps.persistedConfig(),
        };
      },
    },

    list_agent_model_calls: {
      // The model-call log: one record per provider request (retries included), oldest first, with totals. For one
      // session (404 when there is no such session), or the newest `limit` records of every session.
      schema: object({ session_id: sessionId, limit: { type: 'integer', minimum: 1, maximum: 10000 } }),
      async handle(input) {
        const id = input.session_id as string | undefined;
        if (id !== undefined) await mustGetHeader(id);
        const all = (await deps.calls?.list(id ? { session_id: id } : {})) ?? [];
        const calls = all.slice(-((input.limit as number | undefined) ?? 1000));
        return { calls, totals: totals(all) };
      },
    },

    list_agent_context_limits: {
      // What servers reported and rejections taught about context windows, per provider, base URL and model.
      schema: object({}),
      async handle() {
        return { limits: (await deps.limits?.list()) ?? [] };
      },
    },

    forget_agent_context_limits: {
      // Forgets them (all, or the keys named): the next run asks the server again and learns afresh.
      schema: object({ keys: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1, maxItems: 1000 } }),
      async handle(input) {
        return { forgotten: (await deps.limits?.forget(input.keys as string[] | undefined)) ?? [] };
      },
    },

    get_agent_config: {
      schema: object({}),
      async handle() {
        return publicConfig(deps.config());
      },
    },

    set_agent_config: {
      // Keys are checked against schema/config.schema.json, all or nothing; a null takes a key's change back.
      // The answer is the config in force and, under `persisted`, what this request stored.
      schema: { type: 'object', properties: { operation: { type: 'string' } } },
      async handle(input, user) {
        const { operation: _op, ...change } = input;
        if (Object.keys(change).length === 0) throw new HttpError(400, 'set_agent_config needs at least one agent.* key to change');
        try {
          const result = await deps.changeConfig(change, user.username ?? null);
          return { ...publicConfig(result.config), persisted: result.persisted };
        } catch (error) {
          if (error instanceof ConfigChangeError) throw new HttpError(400, error.message);
          throw error;
        }
      },
    },
  };
}

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = new WeakMap<Operation, ReturnType<typeof ajv.compile>>();

/** Checks `input` against the operation's schema; the message names the field. */
export function checkInput(op: Operation, input: Record<string, unknown>): void {
  let validate = validators.get(op);
  if (!validate) validators.set(op, (validate = ajv.compile(op.schema)));
  if (validate(input)) return;
  const e = validate.errors![0]!;
  const field = e.keyword === 'required' ? (e.params as { missingProperty: string }).missingProperty : e.keyword === 'additionalProperties' ? (e.params as { additionalProperty: string }).additionalProperty : e.instancePath.slice(1);
  const what = e.keyword === 'required' ? 'is required' : e.keyword === 'additionalProperties' ? 'is not a known field' : e.message;
  throw new HttpError(400, `${input.operation}: "${field}" ${what}`);
}

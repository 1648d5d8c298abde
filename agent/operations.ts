// The agent's operations, answered on Harper's operations API (agent/http.ts routes them here). Each is its input
// schema and its handler; errors carry the HTTP status the operator gets.
import type { LogRecord, RecordLog } from './recordLog.js';
import { authorize, isSuperUser, openScopes, sees } from './access.js';
import AjvModule from 'ajv';
import { threadId } from 'node:worker_threads';
import { buildRequest, cacheMarksFor, describeRequest, withWorkingSet } from './context/request.js';
import { publicConfig, type AgentConfig } from './agent.js';
import { ConfigChangeError, type ConfigChangeResult } from './configStore.js';
import { contextBudget, estimateTokens } from './contextBudget.js';
import { newestCompaction, planCompaction, type StoredMessage } from './compaction.js';
import { trace, tracing } from './trace.js';
import { startCompaction, startRun } from './loop.js';
import type { LoopDeps } from './loopDeps.js';
import { activeRun, newRunner } from './runs.js';
import { messageView } from './sessionFeed.js';
import { Models } from '../resources/models/models.js';
import { sessionSummary, SessionNotFoundError, type SessionHeader } from './session.js';
import { priceOf, totals } from './modelCalls.js';
import { capabilities, runShape, windowProblem } from './modelCall.js';
import { policiesFor } from './toolPolicy.js';
import { promptWithRecall } from './memory/recall.js';
import { configWarnings } from './configWarnings.js';
import { memoryOperations } from './memory/operations.js';
import { watchOperations, type WatchOperationsDeps } from './watches/operations.js';
import type { Cluster, Via } from './cluster.js';
import type { FollowupStatus } from './followups.js';
import { Lifecycle } from './lifecycle.js';
import { exportJson, exportMarkdown, EXPORT_FORMATS } from './export.js';

const Ajv = AjvModule.default ?? AjvModule;

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** An answer sent as it is produced (export_agent_session), not as one JSON body. */
export class StreamedAnswer {
  constructor(readonly contentType: string, readonly chunks: AsyncIterable<string>) {}
}

/** A list's cursor: the sort key of the last item it returned, opaque to the caller. */
const cursorOf = (at: number, id: string) => Buffer.from(JSON.stringify([at, id])).toString('base64url');
function readCursor(cursor: unknown): { at: number; id: string } | undefined {
  if (cursor === undefined) return undefined;
  try {
    const [at, id] = JSON.parse(Buffer.from(String(cursor), 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof at === 'number' && typeof id === 'string') return { at, id };
  } catch {
    // fall through
  }
  throw new HttpError(400, 'cursor is not one this operation returned (pass nextCursor back as it is)');
}

export interface OperationsDeps extends LoopDeps {
  /** Persists a set_agent_config change and puts it in force (agent/configStore.ts). */
  changeConfig(change: Record<string, unknown>, user: string | null, combined?: (next: AgentConfig) => Promise<string | null>): Promise<ConfigChangeResult>;
  /** set_agent_config's changes in force (the API key as "(set)"). */
  persistedConfig(): Record<string, unknown>;
  /** Reads the persisted changes again, so a prompt right after set_agent_config on another worker thread runs with
   * it (the table subscription that carries it to this thread can land moments later). */
  refreshConfig?(): Promise<void>;
  /** This component's version and when this thread loaded it. */
  instance: { version: string; startedAt: string };
  /** This node, and the way to the node that owns a session (absent in unit tests: every session is local). */
  cluster?: Cluster;
  /** Deleting, expiring and exporting sessions (agent/lifecycle.ts); built from the store when absent. */
  lifecycle?: Lifecycle;
  /** The watches' tables (agent/watches/); absent, there are no watch operations. */
  watches?: Omit<WatchOperationsDeps, 'loop' | 'node'>;
}

export interface User {
  username?: string;
  /** Harper's role: its name, and whether it is a super_user (agent/access.ts). */
  role?: { role?: string; permission?: { super_user?: boolean } };
}

/** Largest agent_prompt message, in UTF-8 bytes. */
export const MAX_MESSAGE_BYTES = 256 * 1024;
const sessionId = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' };

interface Operation {
  schema: Record<string, unknown>;
  handle(input: Record<string, unknown>, user: User, via?: Via): Promise<unknown>;
}

/** An operation's input schema: these properties (and `operation`), these required, nothing else. */
export function object(properties: Record<string, unknown>, required: string[] = []) {
  return { type: 'object', properties: { operation: { type: 'string' }, ...properties }, required, additionalProperties: false };
}


export function createOperations(deps: OperationsDeps): Record<string, Operation> {
  const { store } = deps;
  const node = deps.cluster?.node ?? null;
  // Another user's session is not found, exactly as an unknown one (agent/access.ts): no existence leak.
  const found = <T extends { user: string | null }>(user: User, s: T | undefined, id: string): T => {
    if (!s || !sees(user, s.user)) throw new HttpError(404, `session ${JSON.stringify(id)} not found`);
    return s;
  };
  const mustGet = async (user: User, id: string) => found(user, await store.get(id), id);
  /** The session's row only (no transcript), or 404. */
  const mustGetHeader = async (user: User, id: string) => found(user, await store.header(id), id);
  /** A session another node owns is run, cancelled and approved there: the operation goes to that node. */
  const ownedElsewhere = (s: SessionHeader) => !!deps.cluster && !!s.node && s.node !== node;
  const lifecycle = deps.lifecycle ?? new Lifecycle(store, deps.calls, deps.followups, deps.log, deps.toolCalls);
  /**
   * A log's records as its list operation answers them: one session's, oldest first, the newest `limit` of them (404
   * when the user cannot see it; `whole` has them all); or a page of every session's the user sees, newest first from
   * the `at` index. For a user who sees only their own, the log is read on past others' records until the page is full,
   * up to LOG_SCAN_PAGES raw pages a request: a page comes back short only then, its cursor where the reading stopped.
   */
  const readLog = async <T extends LogRecord>(log: RecordLog<T> | undefined, input: Record<string, unknown>, user: User): Promise<{ records: T[]; whole: T[]; nextCursor?: string | null }> => {
    const id = input.session_id as string | undefined;
    const limit = (input.limit as number | undefined) ?? 1000;
    if (id === undefined) {
      const records: T[] = [];
      let cursor = readCursor(input.cursor);
      let next: { at: number; id: string } | null = null;
      for (let read = 0; log && read < LOG_SCAN_PAGES; read++) {
        const page = await log.page(limit, cursor);
        const seen = await ownedOnly(user, page.calls);
        const room = limit - records.length;
        records.push(...seen.slice(0, room));
        // Full: the next page starts after the last one kept (records read past it are read again then).
        if (seen.length >= room) {
          const last = records.at(-1)!;
          next = seen.length > room || page.next ? { at: last.at, id: last.id } : null;
          break;
        }
        next = page.next;
        if (!next) break;
        cursor = next;
      }
      return { records, whole: records, nextCursor: next ? cursorOf(next.at, next.id) : null };
    }
    if (input.cursor !== undefined) throw new HttpError(400, 'cursor pages the log of every session; a session_id answers its records whole');
    await mustGetHeader(user, id);
    const whole = (await log?.list({ session_id: id })) ?? [];
    return { records: whole.slice(-limit), whole };
  };
  /** Records of sessions `user` sees (all, for a super_user): each session's owner read once. */
  const ownedOnly = async <T extends { session_id: string }>(user: User, records: T[]): Promise<T[]> => {
    if (isSuperUser(user)) return records;
    const owners = new Map<string, string | null | undefined>();
    for (const r of records) if (!owners.has(r.session_id)) owners.set(r.session_id, (await store.header(r.session_id))?.user);
    return records.filter((r) => { const owner = owners.get(r.session_id); return owner !== undefined && sees(user, owner); });
  };

  /** The raw pages one list request reads at most for a user who sees only their own records. */
  const LOG_SCAN_PAGES = 20;

  const operations: Record<string, Operation> = {
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
          const existing = await mustGetHeader(user, input.session_id as string);
          if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        }
        const runner = newRunner(node);
        const prompt = await promptWithRecall(deps, message);
        const model = config.model ?? registration.defaultModel;
        const accept = (s: SessionHeader) => {
          if (s.status === 'running' || s.status === 'awaiting_approval') {
            throw new HttpError(409, `session ${s.session_id} is ${s.status}${s.node && s.node !== node ? ` on node ${s.node}` : ''}: wait for it to finish${s.status === 'awaiting_approval' ? ', answer its approval' : ''} or cancel it with cancel_agent_run`);
          }
          s.status = 'running';
          s.lastError = null;
          s.runner = runner;
          s.node ??= node;
          s.provider = config.provider;
          s.model = model;
          return [prompt];
        };
        // A new session is created with its prompt accepted, in one write.
        const session =
          input.session_id === undefined
            ? await store.create({ user: user.username ?? null, provider: config.provider, model }, accept)
            : await store.mutate(input.session_id as string, accept).catch((error) => {
                if (error instanceof SessionNotFoundError) throw new HttpError(404, error.message);
                throw error;
              });
        const id = session.session_id;
        startRun(deps, id, runner, undefined, session.updatedAt);
        if (tracing) trace({ op: 'accepted', id, message: message.slice(0, 40), seq: session.messageCount - 1, forwardedBy: via.forwardedBy ?? null });
        // messageIndex: where this prompt's messages start, so a follower (the CLI) can ask for just those.
        return { session_id: id, status: 'running', messageIndex: session.messageCount - 1, node: session.node };
      },
    },

    get_agent_session: {
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input, user, via = {}) {
        const s = await mustGet(user, input.session_id as string);
        // A copy replication has not caught up with is read from the node that owns the session (when it answers).
        if (s.behind && ownedElsewhere(s)) {
          const owned = await deps.cluster!.forward(s.node!, input, via).catch(() => undefined);
          if (owned) return owned;
        }
        // How close the session is to its model's context window: the estimate the pre-flight uses, and the budget.
        const model = s.model ?? '';
        const target = { provider: s.provider, baseUrl: deps.config().baseUrl, model };
        const { config, tier, tools, counter } = await runShape(deps, deps.config(), target, s.user);
        const budget = await contextBudget(config, target, deps.limits);
        const estimatedContextTokens = estimateTokens(buildRequest(s.messages, { config, model, tools, tier, environment: deps.environment }), counter);
        // What its model calls used and cost so far (list_agent_model_calls has each request).
        const modelCalls = totals((await deps.calls?.list({ session_id: s.session_id })) ?? []);
        // Follow-ups still to come (list_agent_followups has the fired and cancelled ones too).
        const followups = (await deps.followups?.list({ session_id: s.session_id, status: 'pending' })) ?? [];
        return { ...s, estimatedContextTokens, estimatedWith: counter?.name ?? 'bytes / 3', contextBudget: budget, modelCalls, followups };
      },
    },

    preview_agent_request: {
      // The request the loop would send next, built by the same module (agent/context/request.ts): for a session as it
      // is stored, with `message` as its next prompt (sent now), or for a new session. Each part's size, where the
      // stable prefix ends, what is cut, and the request itself.
      schema: object({ session_id: sessionId, message: { type: 'string', minLength: 1 } }, []),
      async handle(input, user) {
        const s = input.session_id === undefined ? null : await mustGet(user, input.session_id as string);
        const provider = deps.config().provider;
        const model = deps.config().model ?? Models.get(provider)?.defaultModel ?? s?.model ?? '';
        const target = { provider, baseUrl: deps.config().baseUrl, model };
        const { config, tier, tools, counter, headBytes } = await runShape(deps, deps.config(), target, s ? s.user : user.username);
        const stored: StoredMessage[] = [...(s?.messages ?? [])];
        if (input.message !== undefined) stored.push({ role: 'user', content: input.message as string, at: Date.now() });
        const priced = priceOf(config, provider, model);
        const request = buildRequest(withWorkingSet(stored, config.workingSetBytes, headBytes), {
          config,
          model,
          tools,
          tier,
          environment: deps.environment,
          sessionId: s?.session_id ?? '(new session)',
          cacheMarks: cacheMarksFor(provider, priced?.price.cacheReadPerMTokens !== undefined),
        });
        const estimatedTokens = estimateTokens(request, counter);
        const budget = await contextBudget(config, target, deps.limits);
        return {
          session_id: s?.session_id ?? null,
          provider,
          model,
          ...describeRequest(request),
          estimatedTokens,
          estimatedWith: counter?.name ?? 'bytes / 3',
          contextBudget: budget,
          // Past agent.compactAtPercent of the budget: the loop compacts before sending (a summary call comes first).
          compactionDue: !!(config.compaction && budget && estimatedTokens > Math.floor((budget.tokens * config.compactAtPercent) / 100)),
          cacheMarks: request.cache?.marks ?? false,
          request: { system: request.system, tools: request.tools.map((t) => t.name), messages: request.messages, maxTokens: request.maxTokens },
        };
      },
    },

    list_agent_sessions: {
      // Newest first, a page at a time: pass nextCursor back as cursor for the next one. Filters: status, user (exact)
      // and title (a case-insensitive part of the first prompt).
      schema: object({
        limit: { type: 'integer', minimum: 1, maximum: 1000 },
        cursor: { type: 'string', minLength: 1, maxLength: 512 },
        status: { type: 'string', enum: ['idle', 'running', 'awaiting_approval', 'completed', 'aborted', 'error'] },
        user: { type: 'string', minLength: 1, maxLength: 256 },
        title: { type: 'string', minLength: 1, maxLength: 256 },
      }),
      async handle(input, user) {
        const limit = (input.limit as number | undefined) ?? 50;
        const title = (input.title as string | undefined)?.toLowerCase();
        // Whose: a super_user's `user` filter or all; anyone else only their own (asking for another's is an empty page).
        const asked = input.user as string | undefined;
        if (!isSuperUser(user) && asked !== undefined && asked !== user.username) return { sessions: [], nextCursor: null };
        const owner = isSuperUser(user) ? asked : (user.username ?? '');
        const keep = (s: SessionHeader) => (!input.status || s.status === input.status) && (!title || (s.title ?? '').toLowerCase().includes(title));
        const { sessions, more } = await store.page(limit, { owner, cursor: readCursor(input.cursor), keep });
        const last = sessions.at(-1);
        // What each cost, from the call log's session index: a page reads its own sessions' calls.
        const costs = await Promise.all(sessions.map(async (s) => (deps.calls ? totals(await deps.calls.list({ session_id: s.session_id })).costUsd : null)));
        return { sessions: sessions.map((s, i) => ({ ...sessionSummary(s), costUsd: costs[i] })), nextCursor: more && last ? cursorOf(last.updatedAt, last.session_id) : null };
      },
    },

    find_agent_session: {
      // The session an id or a unique beginning of one names (as the admin page shows them, 8 characters): what the CLI
      // sends first for every id it is given. 404 for none, 409 naming them for several.
      schema: object({ prefix: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' } }, ['prefix']),
      async handle(input, user) {
        const prefix = input.prefix as string;
        const exact = await store.header(prefix);
        if (exact && sees(user, exact.user)) return sessionSummary(exact);
        const found = await store.byPrefix(prefix, 6, (s) => sees(user, s.user));
        if (found.length === 1) return sessionSummary(found[0]!);
        if (found.length === 0) throw new HttpError(404, `session ${JSON.stringify(prefix)} not found`);
        throw new HttpError(409, `${JSON.stringify(prefix)} begins ${found.length > 5 ? 'more than 5' : found.length} sessions (${found.slice(0, 5).map((s) => s.session_id).join(', ')}): give more of the id`);
      },
    },

    delete_agent_session: {
      // The session and everything of it (messages, model calls, follow-ups, approvals), on the node that owns it, in a
      // step a crash cannot leave half done (agent/lifecycle.ts). A running session is refused: cancel it first.
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input, user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGetHeader(user, id);
        if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        try {
          const deleted = await lifecycle.deleteSession(id, (s) => {
            if (s.status === 'running' || s.status === 'awaiting_approval') throw new HttpError(409, `session ${id} is ${s.status}: cancel it with cancel_agent_run first`);
          });
          return { ...deleted, deleted: true };
        } catch (error) {
          if (error instanceof SessionNotFoundError) throw new HttpError(404, error.message);
          throw error;
        }
      },
    },

    expire_agent_data: {
      // Runs the retention now (each node also runs it hourly): finished sessions older than agent.retainSessionsDays
      // with all of theirs, and model calls older than agent.retainModelCallsDays. Answers what it removed.
      schema: object({}),
      async handle() {
        const config = deps.config();
        return { retainSessionsDays: config.retainSessionsDays ?? null, retainModelCallsDays: config.retainModelCallsDays ?? null, ...(await lifecycle.expire(config)) };
      },
    },

    export_agent_session: {
      // The whole transcript (cut marks, compaction summaries, follow-up prompts), pending approvals, follow-ups and the
      // model-call totals, as Markdown (default) or JSON, streamed message by message.
      schema: object({ session_id: sessionId, format: { type: 'string', enum: EXPORT_FORMATS } }, ['session_id']),
      async handle(input, user) {
        const header = await mustGetHeader(user, input.session_id as string);
        const parts = {
          header,
          messages: store.messages(header.session_id, header.messageCount),
          modelCalls: totals((await deps.calls?.list({ session_id: header.session_id })) ?? []),
          followups: (await deps.followups?.list({ session_id: header.session_id })) ?? [],
        };
        return input.format === 'json'
          ? new StreamedAnswer('application/json', exportJson(parts))
          : new StreamedAnswer('text/markdown; charset=utf-8', exportMarkdown(parts));
      },
    },

    cancel_agent_run: {
      schema: object({ session_id: sessionId }, ['session_id']),
      async handle(input, user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGetHeader(user, id);
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
      // forSession: the tool is approved for the rest of the session too (agent/toolPolicy.ts: its later calls run).
      schema: object({ session_id: sessionId, approval_id: { type: 'string', minLength: 1, maxLength: 128 }, approved: { type: 'boolean' }, forSession: { type: 'boolean' } }, ['session_id', 'approval_id', 'approved']),
      async handle(input, user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGetHeader(user, id);
        if (ownedElsewhere(existing)) return deps.cluster!.forward(existing.node!, input, via);
        const runner = newRunner(node);
        let toolCallId = '';
        const session = await store.mutate(id, (s) => {
          if (s.status !== 'awaiting_approval') throw new HttpError(409, `session ${id} is ${s.status}: it is not waiting for an approval`);
          const pending = s.pendingApprovals.find((p) => p.approval_id === input.approval_id);
          if (!pending) throw new HttpError(404, `approval ${JSON.stringify(input.approval_id)} is not pending on session ${id}`);
          toolCallId = pending.toolCallId;
          if (input.approved === true && input.forSession === true) s.approvedTools = [...new Set([...(s.approvedTools ?? []), pending.name])];
          s.pendingApprovals = s.pendingApprovals.filter((p) => p !== pending);
          s.status = 'running';
          s.runner = runner;
        });
        startRun(deps, id, runner, { toolCallId, approved: input.approved as boolean }, session.updatedAt);
        return { session_id: id, status: 'running', approved: input.approved, ...(input.forSession === true && input.approved === true ? { approvedTools: session.approvedTools ?? [] } : {}), messageIndex: session.messageCount };
      },
    },

    compact_agent_session: {
      // Compacts on demand (agent.compaction aside): everything the model sees becomes one summary, written by the
      // model (the digest when it cannot be), on the node that owns the session. In the background like agent_prompt:
      // answers `running` at once (the session reads `running` until the record is stored; a summary call takes as
      // long as the model does); with `wait: true`, once it is stored, with the record.
      // `instructions`: what the summary must keep in focus (the operator's words, passed to the summary call).
      schema: object({ session_id: sessionId, instructions: { type: 'string', minLength: 1, maxLength: 2000 }, wait: { type: 'boolean' } }, ['session_id']),
      async handle(input, user, via = {}) {
        const id = input.session_id as string;
        const existing = await mustGet(user, id);
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
        const started = startCompaction(deps, id, runner, accepted.updatedAt, before, input.instructions as string | undefined);
        if (input.wait !== true) return { session_id: id, status: 'running', messageIndex: accepted.messageCount, node: accepted.node };
        await started.done;
        const s = await mustGet(user, id);
        const c = newestCompaction(s.messages);
        return { session_id: id, status: s.status, lastError: s.lastError, compaction: c >= accepted.messageCount ? messageView(s.messages[c]!, c) : null };
      },
    },

    list_agent_followups: {
      // Follow-ups the model scheduled (schedule_followup), soonest first: pending, fired and cancelled.
      schema: object({ session_id: sessionId, status: { type: 'string', enum: ['pending', 'fired', 'cancelled'] } }),
      async handle(input, user) {
        if (!deps.followups) throw new HttpError(503, 'follow-ups are not available on this node');
        if (input.session_id !== undefined) await mustGetHeader(user, input.session_id as string);
        const listed = await deps.followups.list({ session_id: input.session_id as string | undefined, status: input.status as FollowupStatus | undefined });
        return { followups: await ownedOnly(user, listed) };
      },
    },

    cancel_agent_followup: {
      // Cancels a pending follow-up on the node that owns its session (the one that would fire it), under the
      // session's lock, so it is either fired already (409) or never fires.
      schema: object({ followup_id: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' } }, ['followup_id']),
      async handle(input, user, via = {}) {
        const followups = deps.followups;
        if (!followups) throw new HttpError(503, 'follow-ups are not available on this node');
        const fid = input.followup_id as string;
        const f = await followups.get(fid);
        if (!f || (await ownedOnly(user, [f])).length === 0) throw new HttpError(404, `follow-up ${JSON.stringify(fid)} not found`);
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
      async handle(_input, user) {
        const config = deps.config();
        const role = user.role?.role;
        const tools = deps.tools.specs(capabilities(deps, config, user.username)).map((spec) => deps.tools.get(spec.name)!);
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
          warnings: configWarnings(config),
          // What the caller's runs may do: the file scopes their role opens and each tool's policy (agent/toolPolicy.ts).
          access: { user: user.username ?? null, role: role ?? null, superUser: isSuperUser(user), scopes: openScopes(config, user, deps.scopes), toolPolicy: policiesFor(config, role, tools) },
        };
      },
    },

    list_agent_model_calls: {
      // The model-call log: one record per provider request (retries included), oldest first, with totals. For one
      // session (404 when there is no such session), or the newest `limit` records of every session.
      schema: object({ session_id: sessionId, limit: { type: 'integer', minimum: 1, maximum: 10000 }, cursor: { type: 'string', minLength: 1, maxLength: 512 } }),
      async handle(input, user) {
        const read = await readLog(deps.calls, input, user);
        // Totals of the page, or of the whole session.
        return read.nextCursor === undefined ? { calls: read.records, totals: totals(read.whole) } : { calls: read.records, totals: totals(read.records), nextCursor: read.nextCursor };
      },
    },

    list_agent_tool_calls: {
      // The audit: one record per tool call (who, the tool, its arguments redacted, the result's size, the decision),
      // oldest first for one session (404 when there is none, or it is another user's), or the newest `limit` of
      // every session a page at a time (pass nextCursor back as cursor).
      schema: object({ session_id: sessionId, limit: { type: 'integer', minimum: 1, maximum: 10000 }, cursor: { type: 'string', minLength: 1, maxLength: 512 } }),
      async handle(input, user) {
        const read = await readLog(deps.toolCalls, input, user);
        return { toolCalls: read.records, ...(read.nextCursor !== undefined ? { nextCursor: read.nextCursor } : {}) };
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
      async handle(input, user) {
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
          // The window, the answer and the fixed part checked together (agent/context/window.ts).
          const result = await deps.changeConfig(change, user.username ?? null, (next) => windowProblem(deps, next));
          return { ...publicConfig(result.config), persisted: result.persisted, warnings: configWarnings(result.config) };
        } catch (error) {
          if (error instanceof ConfigChangeError) throw new HttpError(400, error.message);
          throw error;
        }
      },
    },
  };
  if (deps.watches) Object.assign(operations, watchOperations({ ...deps.watches, loop: deps, node }));
  if (deps.memory) Object.assign(operations, memoryOperations(deps.memory));
  // Every operation checks who calls it first (agent/access.ts): agent.roles, and the admin operations for a
  // super_user only. A forwarded request is checked again on the owner, with the caller's own credentials.
  for (const [name, op] of Object.entries(operations)) {
    const handle = op.handle;
    op.handle = async (input, user, via) => handle(input, authorize(user, name, deps.config()), via);
  }
  return operations;
}

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = new WeakMap<Operation, ReturnType<typeof ajv.compile>>();

/** Checks `input` against the operation's schema; the message names the field. */
export function checkInput(op: Operation, input: Record<string, unknown>): void {
  let validate = validators.get(op);
  if (!validate) validators.set(op, (validate = ajv.compile(op.schema)));
  if (validate(input)) return;
  const e = validate.errors![0]!;
  // A nested field by its dotted path (trigger.pattern).
  const at = e.instancePath.slice(1).replace(/\//g, '.');
  const leaf = e.keyword === 'required' ? (e.params as { missingProperty: string }).missingProperty : e.keyword === 'additionalProperties' ? (e.params as { additionalProperty: string }).additionalProperty : '';
  const field = [at, leaf].filter(Boolean).join('.');
  const what = e.keyword === 'required' ? 'is required' : e.keyword === 'additionalProperties' ? 'is not a known field' : e.message;
  throw new HttpError(400, `${input.operation}: "${field}" ${what}`);
}

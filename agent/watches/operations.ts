// The operations on watches: create, list, get, update (pause, resume), delete and test-fire. Any node answers them:
// the definition is a replicated row, and the node that owns the watch (the one it was created on, or `node`) reads it
// at its next tick. A user sees and changes their own watches; a super_user every one (agent/access.ts).
import { randomUUID } from 'node:crypto';
import { scopesFor, sees } from '../access.js';
import type { LoopDeps } from '../loopDeps.js';
import { HttpError, object, type User } from '../operations.js';
import { openScoped } from '../tools/scopes.js';
import type { DeliveryLog } from './delivery.js';
import type { WatchTable } from './watcher.js';
import { LOG_LEVELS, normalizeLimits, normalizeTrigger, normalizeWebhook, publicWatch, toState, toWatch, watchRow, WatchError, type Watch } from './watch.js';

export interface WatchOperationsDeps {
  loop: LoopDeps;
  watches: () => WatchTable | undefined;
  states: () => WatchTable | undefined;
  deliveries: DeliveryLog;
  node: string | null;
}

const TRIGGER = {
  type: 'object',
  properties: {
    type: { type: 'string', enum: ['log', 'metric', 'schedule', 'cluster'] },
    path: { type: 'string', minLength: 1, maxLength: 512 },
    level: { type: 'string', enum: LOG_LEVELS },
    pattern: { type: 'string', minLength: 1, maxLength: 512 },
    debounceSeconds: { type: 'number', minimum: 0.1, maximum: 3600 },
    maxWaitSeconds: { type: 'number', minimum: 1, maximum: 86400 },
    metric: { type: 'string', minLength: 1, maxLength: 128 },
    attribute: { type: 'string', minLength: 1, maxLength: 128 },
    above: { type: 'number' },
    below: { type: 'number' },
    forSeconds: { type: 'number', minimum: 0, maximum: 86400 },
    where: { type: 'object', additionalProperties: { type: ['string', 'number'] } },
    everySeconds: { type: 'number', minimum: 1, maximum: 31 * 86400 },
    cron: { type: 'string', minLength: 1, maxLength: 128 },
  },
  required: ['type'],
  additionalProperties: false,
};
const LIMITS = {
  type: 'object',
  properties: {
    runsPerHour: { type: 'integer', minimum: 1, maximum: 60 },
    maxCostUsd: { type: 'number', exclusiveMinimum: 0, maximum: 100 },
    coolDownSeconds: { type: 'number', minimum: 0, maximum: 86400 },
  },
  additionalProperties: false,
};
const DELIVERY = {
  type: 'object',
  properties: {
    webhook: {
      type: 'object',
      properties: {
        url: { type: 'string', minLength: 1, maxLength: 2048 },
        secretHeader: { type: 'object', properties: { name: { type: 'string', pattern: '^[A-Za-z0-9-]{1,64}$' }, value: { type: 'string', minLength: 1, maxLength: 1024 } }, required: ['name', 'value'], additionalProperties: false },
        maxAttempts: { type: 'integer', minimum: 1, maximum: 20 },
        retrySeconds: { type: 'number', minimum: 0.1, maximum: 3600 },
      },
      required: ['url'],
      additionalProperties: false,
    },
  },
  additionalProperties: false,
};
const watchId = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' };
const DEFINITION = {
  name: { type: 'string', minLength: 1, maxLength: 128 },
  trigger: TRIGGER,
  prompt: { type: 'string', minLength: 1, maxLength: 16384 },
  limits: LIMITS,
  delivery: DELIVERY,
};

export function watchOperations(deps: WatchOperationsDeps) {
  const table = () => {
    const t = deps.watches();
    if (!t) throw new HttpError(503, 'the agent.AgentWatch table is not there yet');
    return t;
  };
  /** The watch, or 404 (another user's too, as for sessions). */
  const mustGet = async (user: User, id: string): Promise<Watch> => {
    const w = toWatch(await table().get(id));
    if (!w || !sees(user, w.user)) throw new HttpError(404, `watch ${JSON.stringify(id)} not found`);
    return w;
  };
  /** The definition's parts with their defaults, checked; a log trigger's file must open in the user's logs scope. */
  const checked = async (user: User, input: Record<string, unknown>, base?: Watch): Promise<Partial<Watch>> => {
    try {
      const out: Partial<Watch> = {};
      if (input.trigger !== undefined) out.trigger = normalizeTrigger(input.trigger as Record<string, unknown>);
      if (input.limits !== undefined) out.limits = normalizeLimits(input.limits as Record<string, unknown>);
      if (input.delivery !== undefined) {
        const webhook = (input.delivery as { webhook?: Record<string, unknown> }).webhook;
        out.delivery = webhook ? { webhook: await normalizeWebhook(webhook) } : {};
      }
      const trigger = out.trigger ?? base?.trigger;
      if (trigger?.type === 'log' && out.trigger) {
        const owner = (base?.user ?? user.username) ? await deps.loop.userOf?.((base?.user ?? user.username)!) : undefined;
        try {
          const { handle } = await openScoped(scopesFor(deps.loop.scopes, deps.loop.config(), owner ?? user), 'logs', trigger.path);
          await handle.close();
        } catch (error) {
          throw new WatchError(`trigger.path: ${(error as Error).message}`);
        }
      }
      return out;
    } catch (error) {
      if (error instanceof WatchError) throw new HttpError(400, error.message);
      throw error;
    }
  };
  const withState = async (w: Watch) => publicWatch(w, toState(await deps.states()?.get(w.watch_id)));

  return {
    create_agent_watch: {
      // A trigger, a prompt, limits and an optional webhook; fired by `node` (default: the node that answers).
      schema: object({ ...DEFINITION, node: { type: 'string', minLength: 1, maxLength: 256 }, status: { type: 'string', enum: ['active', 'paused'] } }, ['name', 'trigger', 'prompt']),
      async handle(input: Record<string, unknown>, user: User) {
        const parts = await checked(user, { limits: {}, delivery: {}, ...input });
        const now = Date.now();
        const w: Watch = {
          watch_id: randomUUID(),
          name: input.name as string,
          user: user.username ?? null,
          node: (input.node as string | undefined) ?? deps.node,
          status: (input.status as 'active' | 'paused' | undefined) ?? 'active',
          stoppedReason: null,
          trigger: parts.trigger!,
          prompt: input.prompt as string,
          limits: parts.limits!,
          delivery: parts.delivery!,
          testRequestedAt: null,
          createdAt: now,
          updatedAt: now,
        };
        await table().put(w.watch_id, watchRow(w));
        return publicWatch(w);
      },
    },

    list_agent_watches: {
      // Every watch the caller sees, with its last firing, report and delivery.
      schema: object({}),
      async handle(_input: Record<string, unknown>, user: User) {
        const out: Record<string, unknown>[] = [];
        for await (const row of table().search({ conditions: [] })) {
          const w = toWatch(row)!;
          if (sees(user, w.user)) out.push(await withState(w));
        }
        return { watches: out.sort((a, b) => Number(b.createdAt) - Number(a.createdAt)) };
      },
    },

    get_agent_watch: {
      // The watch, its state, and every delivery attempt of its last run.
      schema: object({ watch_id: watchId }, ['watch_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const w = await mustGet(user, input.watch_id as string);
        const shown = await withState(w);
        const attempts = shown.lastSessionId ? await deps.deliveries.list({ session_id: shown.lastSessionId as string }) : [];
        return { ...shown, deliveryAttempts: attempts };
      },
    },

    update_agent_watch: {
      // Any part of the definition; status paused or active (active resumes a watch that stopped itself).
      schema: object({ watch_id: watchId, ...DEFINITION, status: { type: 'string', enum: ['active', 'paused'] } }, ['watch_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const w = await mustGet(user, input.watch_id as string);
        const parts = await checked(user, input, w);
        const next: Watch = {
          ...w,
          ...parts,
          ...(input.name !== undefined ? { name: input.name as string } : {}),
          ...(input.prompt !== undefined ? { prompt: input.prompt as string } : {}),
          ...(input.status !== undefined ? { status: input.status as 'active' | 'paused', stoppedReason: null } : {}),
          updatedAt: Date.now(),
        };
        await table().put(w.watch_id, watchRow(next));
        return withState(next);
      },
    },

    delete_agent_watch: {
      // The watch and its state; its runs' sessions stay (they are sessions like any other).
      schema: object({ watch_id: watchId }, ['watch_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const w = await mustGet(user, input.watch_id as string);
        await table().delete!(w.watch_id);
        await deps.states()?.delete?.(w.watch_id);
        return { watch_id: w.watch_id, deleted: true };
      },
    },

    test_agent_watch: {
      // Fires the watch once now, as if its trigger had (its limits' cool-down aside); the owner node runs it at its
      // next tick. Follow lastSessionId with get_agent_watch.
      schema: object({ watch_id: watchId }, ['watch_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const w = await mustGet(user, input.watch_id as string);
        const testRequestedAt = Date.now();
        await table().put(w.watch_id, watchRow({ ...w, testRequestedAt, updatedAt: testRequestedAt }));
        return { watch_id: w.watch_id, node: w.node, testRequestedAt, firing: true };
      },
    },
  };
}


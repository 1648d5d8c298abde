// A watch: a trigger, a prompt, limits and a delivery (DESIGN.md "Watches start investigations"). Its definition is a
// row in AgentWatch, written by the operations from any node; what its owner node has seen and done (log offset, a
// burst being gathered, runs, the delivery in progress) is a row in AgentWatchState, written by the owner alone, so an
// edit from another node never races the owner's bookkeeping. This module owns both shapes, their defaults and the
// checks a definition passes before it is stored.
import { Cron } from 'croner';
import { checkUrl, type Resolve } from '../tools/httpFetch.js';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'notify'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type Trigger =
  /** Lines of a log in the logs scope (Harper's own hdb.log by default) at `level` or above and/or matching `pattern`. */
  | { type: 'log'; path: string; level?: LogLevel; pattern?: string; debounceSeconds: number; maxWaitSeconds: number }
  /** A get_analytics metric's newest sample above or below a threshold for `forSeconds`. */
  | { type: 'metric'; metric: string; attribute: string; above?: number; below?: number; forSeconds: number; where?: Record<string, string | number> }
  /** Every `everySeconds`, or at each time of a cron expression (croner). */
  | { type: 'schedule'; everySeconds?: number; cron?: string }
  /** cluster_status showing a database connection down for `forSeconds`. */
  | { type: 'cluster'; forSeconds: number };

export interface WatchLimits {
  runsPerHour: number;
  maxCostUsd?: number;
  coolDownSeconds: number;
}

export interface Webhook {
  url: string;
  /** Sent with every delivery, e.g. a shared secret the receiver checks. */
  secretHeader?: { name: string; value: string };
  maxAttempts: number;
  /** The first retry's delay; each next one doubles, up to a minute. */
  retrySeconds: number;
}

export type WatchStatus = 'active' | 'paused' | 'stopped';

export interface Watch {
  watch_id: string;
  name: string;
  /** Whose sessions its runs are: the user who created it (their role bounds the run's tools and scopes). */
  user: string | null;
  /** The node that fires it. */
  node: string | null;
  status: WatchStatus;
  /** Why it stopped itself (runs per hour reached), or null. */
  stoppedReason: string | null;
  trigger: Trigger;
  prompt: string;
  limits: WatchLimits;
  delivery: { webhook?: Webhook };
  /** A test fire asked for at this time (test_agent_watch); the owner fires once per new value. */
  testRequestedAt: number | null;
  createdAt: number;
  updatedAt: number;
}

/** One matching log line, where it is. */
export interface LinePosition {
  line: number;
  offset: number;
  text: string;
}

/** What fired a run, as its prompt and its report say it. */
export interface Evidence {
  kind: Trigger['type'] | 'test';
  summary: string;
  log?: { path: string; count: number; first: LinePosition; last: LinePosition };
  metric?: { metric: string; attribute: string; value: number; at: number; since: number };
  cluster?: { down: string[]; since: number };
}

export interface Delivery {
  session_id: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  nextAt: number | null;
}

export interface WatchState {
  watch_id: string;
  node: string | null;
  /** The trigger this state was gathered for (its JSON): a changed trigger starts afresh. */
  key?: string;
  /** Log: the byte offset read to (a whole line's end) and the line number there. */
  offset?: number;
  line?: number;
  /** Log: matching lines gathered into one burst, not fired yet. */
  burst?: { first: LinePosition; last: LinePosition; count: number; startedAt: number; lastAt: number } | null;
  /** Metric, cluster: since when the condition has held (null: it does not). */
  since?: number | null;
  /** Schedule: when it is next due. */
  nextDue?: number | null;
  /** Times of the runs fired in the last hour. */
  runs: number[];
  /** How many runs it fired in all (a run's session id counts with it). */
  fired: number;
  /** Matching lines or firings skipped in a cool-down. */
  suppressed: number;
  coolUntil: number | null;
  /** The run in progress (written before its session is, so a restart neither loses nor repeats it). */
  firing: { session_id: string; at: number; evidence: Evidence } | null;
  lastFiredAt: number | null;
  lastSessionId: string | null;
  lastReport: Record<string, unknown> | null;
  delivery: Delivery | null;
  testHandledAt: number | null;
  updatedAt: number;
}

export class WatchError extends Error {}

export const WATCH_DEFAULTS = { debounceSeconds: 10, maxWaitSeconds: 60, forSeconds: 60, runsPerHour: 4, coolDownSeconds: 600, maxAttempts: 5, retrySeconds: 5 } as const;

/** A definition's trigger with its defaults, after the checks JSON Schema cannot make: a pattern that compiles, a
 * cron expression croner parses, exactly one threshold or schedule. Throws WatchError naming the field. */
export function normalizeTrigger(input: Record<string, unknown>): Trigger {
  switch (input.type) {
    case 'log': {
      const pattern = input.pattern as string | undefined;
      if (pattern !== undefined) {
        try {
          new RegExp(pattern);
        } catch (error) {
          throw new WatchError(`trigger.pattern does not compile: ${(error as Error).message}`);
        }
      }
      if (pattern === undefined && input.level === undefined) throw new WatchError('trigger: a log trigger needs a level, a pattern or both');
      return {
        type: 'log',
        path: (input.path as string | undefined) ?? 'hdb.log',
        ...(input.level !== undefined ? { level: input.level as LogLevel } : {}),
        ...(pattern !== undefined ? { pattern } : {}),
        debounceSeconds: (input.debounceSeconds as number | undefined) ?? WATCH_DEFAULTS.debounceSeconds,
        maxWaitSeconds: (input.maxWaitSeconds as number | undefined) ?? WATCH_DEFAULTS.maxWaitSeconds,
      };
    }
    case 'metric':
      if ((input.above === undefined) === (input.below === undefined)) throw new WatchError('trigger: a metric trigger needs exactly one of above or below');
      return {
        type: 'metric',
        metric: input.metric as string,
        attribute: input.attribute as string,
        ...(input.above !== undefined ? { above: input.above as number } : { below: input.below as number }),
        forSeconds: (input.forSeconds as number | undefined) ?? WATCH_DEFAULTS.forSeconds,
        ...(input.where ? { where: input.where as Record<string, string | number> } : {}),
      };
    case 'schedule': {
      if ((input.everySeconds === undefined) === (input.cron === undefined)) throw new WatchError('trigger: a schedule needs exactly one of everySeconds or cron');
      if (input.cron !== undefined) {
        try {
          new Cron(input.cron as string, { paused: true });
        } catch (error) {
          throw new WatchError(`trigger.cron does not parse: ${(error as Error).message}`);
        }
        return { type: 'schedule', cron: input.cron as string };
      }
      return { type: 'schedule', everySeconds: input.everySeconds as number };
    }
    case 'cluster':
      return { type: 'cluster', forSeconds: (input.forSeconds as number | undefined) ?? WATCH_DEFAULTS.forSeconds };
    default:
      throw new WatchError(`trigger.type must be log, metric, schedule or cluster`);
  }
}

/** A webhook with its defaults, its URL checked by http_fetch's SSRF rules (no private, link-local or metadata
 * address; http or https; no credentials). */
export async function normalizeWebhook(input: Record<string, unknown>, resolve?: Resolve): Promise<Webhook> {
  let url: URL;
  try {
    url = new URL(input.url as string);
  } catch {
    throw new WatchError(`delivery.webhook.url is not a URL: ${JSON.stringify(input.url)}`);
  }
  try {
    await checkUrl(url, resolve);
  } catch (error) {
    throw new WatchError(`delivery.webhook.url is refused: ${(error as Error).message}`);
  }
  return {
    url: url.href,
    ...(input.secretHeader ? { secretHeader: input.secretHeader as Webhook['secretHeader'] } : {}),
    maxAttempts: (input.maxAttempts as number | undefined) ?? WATCH_DEFAULTS.maxAttempts,
    retrySeconds: (input.retrySeconds as number | undefined) ?? WATCH_DEFAULTS.retrySeconds,
  };
}

export function normalizeLimits(input: Record<string, unknown> = {}): WatchLimits {
  return {
    runsPerHour: (input.runsPerHour as number | undefined) ?? WATCH_DEFAULTS.runsPerHour,
    ...(input.maxCostUsd !== undefined ? { maxCostUsd: input.maxCostUsd as number } : {}),
    coolDownSeconds: (input.coolDownSeconds as number | undefined) ?? WATCH_DEFAULTS.coolDownSeconds,
  };
}

/** The next time a schedule is due after `from`. */
export function nextDue(trigger: Extract<Trigger, { type: 'schedule' }>, from: number): number {
  if (trigger.everySeconds !== undefined) return from + trigger.everySeconds * 1000;
  return new Cron(trigger.cron!, { paused: true }).nextRun(new Date(from))?.getTime() ?? Number.MAX_SAFE_INTEGER;
}

/** A trigger in a few words, for lists and prompts. */
export function describeTrigger(t: Trigger): string {
  switch (t.type) {
    case 'log':
      return `lines of logs/${t.path}${t.level ? ` at ${t.level} or above` : ''}${t.pattern ? ` matching /${t.pattern}/` : ''}`;
    case 'metric':
      return `${t.metric}.${t.attribute} ${t.above !== undefined ? `above ${t.above}` : `below ${t.below}`} for ${t.forSeconds} s`;
    case 'schedule':
      return t.cron ? `the schedule ${t.cron}` : `every ${t.everySeconds} s`;
    case 'cluster':
      return `a cluster connection down for ${t.forSeconds} s`;
  }
}

const millis = (v: unknown): number | null => (v === undefined || v === null ? null : v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : Number(v));
/** Harper's records expose nested objects through getters: a plain copy. */
const plain = <T>(v: unknown): T => (v === undefined || v === null ? (v as T) : (JSON.parse(JSON.stringify(v)) as T));

export function toWatch(row: unknown): Watch | undefined {
  if (!row) return undefined;
  const r = row as Record<string, unknown>;
  return {
    watch_id: String(r.watch_id),
    name: String(r.name ?? ''),
    user: (r.user as string | null) ?? null,
    node: (r.node as string | null) ?? null,
    status: (r.status as WatchStatus) ?? 'active',
    stoppedReason: (r.stoppedReason as string | null) ?? null,
    trigger: plain<Trigger>(r.trigger),
    prompt: String(r.prompt ?? ''),
    limits: plain<WatchLimits>(r.limits),
    delivery: plain<Watch['delivery']>(r.delivery) ?? {},
    testRequestedAt: millis(r.testRequestedAt),
    createdAt: millis(r.createdAt) ?? 0,
    updatedAt: millis(r.updatedAt) ?? 0,
  };
}

export function watchRow(w: Watch): Record<string, unknown> {
  return { ...w, createdAt: new Date(w.createdAt), updatedAt: new Date(w.updatedAt), testRequestedAt: w.testRequestedAt === null ? null : new Date(w.testRequestedAt) };
}

export function freshState(watch_id: string, node: string | null): WatchState {
  return { watch_id, node, runs: [], fired: 0, suppressed: 0, coolUntil: null, firing: null, lastFiredAt: null, lastSessionId: null, lastReport: null, delivery: null, testHandledAt: null, updatedAt: Date.now() };
}

export function toState(row: unknown): WatchState | undefined {
  if (!row) return undefined;
  const r = plain<WatchState>(row);
  return { ...freshState(r.watch_id, r.node), ...r, runs: r.runs ?? [] };
}

/** A watch as operations answer it: the webhook's secret value never leaves. */
export function publicWatch(w: Watch, state?: WatchState): Record<string, unknown> {
  const webhook = w.delivery.webhook;
  return {
    ...w,
    trigger: { ...w.trigger, description: describeTrigger(w.trigger) },
    delivery: webhook ? { webhook: { ...webhook, ...(webhook.secretHeader ? { secretHeader: { name: webhook.secretHeader.name, value: '(set)' } } : {}) } } : {},
    ...(state
      ? {
          lastFiredAt: state.lastFiredAt,
          lastSessionId: state.lastSessionId,
          firing: state.firing?.session_id ?? null,
          runsLastHour: state.runs.length,
          fired: state.fired,
          suppressed: state.suppressed,
          coolUntil: state.coolUntil,
          pending: state.burst ? { count: state.burst.count, first: state.burst.first, last: state.burst.last } : null,
          offset: state.offset ?? null,
          lastReport: state.lastReport,
          lastDelivery: state.delivery,
        }
      : {}),
  };
}

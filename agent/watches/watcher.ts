// The watcher: on the node that owns a watch, one worker thread looks at each active watch once a tick (a second),
// lets its trigger read what is new, and fires a run when it is due, within the watch's limits. Firing is written to
// the watch's state before the run's session exists (its id is the watch's and the firing's number), so a restart
// finds the run it had started, or starts the one it had not, and never a second. When the run settles its report is
// stored and delivered (agent/watches/delivery.ts), attempts kept, pending ones resumed after a restart.
// Every write to a state goes through `change`, one at a time per watch: the tick and a run's end never overwrite
// each other.
import { Models } from '../../resources/models/models.js';
import type { AgentConfig } from '../agent.js';
import { scopesFor } from '../access.js';
import { startRun } from '../loop.js';
import type { LoopDeps } from '../loopDeps.js';
import { totals } from '../modelCalls.js';
import { newRunner, runnerMayBeAlive } from '../runs.js';
import { settled as plainAnswer } from '../tools/harperOps.js';
import { afterAttempt, attemptDelivery, attemptRecord, type DeliveryLog } from './delivery.js';
import { buildReport, deliveryBody, watchPrompt } from './report.js';
import { promptWithRecall } from '../memory/recall.js';
import { burstReady, downConnections, held, logEvidence, metricHolds, newestSample, readLog, scheduleDue } from './triggers.js';
import { describeTrigger, freshState, toState, toWatch, watchRow, type Evidence, type Watch, type WatchState } from './watch.js';

export interface WatchTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
  delete?(id: string): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
}

export interface WatcherDeps {
  loop: LoopDeps;
  watches: () => WatchTable | undefined;
  states: () => WatchTable | undefined;
  deliveries: DeliveryLog;
  node: string | null;
  now?: () => number;
  log?: (message: string) => void;
}

const HOUR_MS = 3600_000;
/** How far back a metric's samples are read (Harper aggregates analytics every minute by default). */
const METRIC_LOOKBACK_MS = 180_000;
/** How often a run's settling is checked. */
const SETTLE_POLL_MS = 250;

/** A watch's run ends when its session is neither running nor being started. */
const settled = (status: string | undefined) => status !== 'running';

/** The run's id: the watch's, and which firing of it. */
export const runSessionId = (watchId: string, n: number) => `watch-${watchId}-${n}`;

/** The trigger's identity: a change to it starts its state afresh (a new log, a new threshold). */
const triggerKey = (w: Watch) => JSON.stringify(w.trigger);

export class Watcher {
  private timer?: ReturnType<typeof setInterval>;
  private ticking = false;
  private readonly chains = new Map<string, Promise<unknown>>();
  /** Watches with a run or a delivery in progress on this thread. */
  private readonly busy = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly deps: WatcherDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(tickMs = 1000): void {
    this.timer = setInterval(() => void this.tick(), tickMs);
    this.timer.unref?.();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Reads the watch's state, lets `edit` change a copy, writes it: one at a time per watch, on this thread. */
  async change(id: string, edit: (s: WatchState) => Promise<WatchState> | WatchState): Promise<WatchState> {
    const run = (this.chains.get(id) ?? Promise.resolve()).then(async () => {
      const table = this.deps.states()!;
      const before = toState(await table.get(id)) ?? freshState(id, this.deps.node);
      const after = await edit(before);
      // Written only when something changed: an idle watch costs no write a tick.
      if (JSON.stringify({ ...after, updatedAt: 0 }) !== JSON.stringify({ ...before, updatedAt: 0 })) await table.put(id, { ...after, updatedAt: this.now() });
      return after;
    });
    this.chains.set(id, run.catch(() => undefined));
    return run;
  }

  /** One look at every watch this node owns. */
  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const table = this.deps.watches();
      if (!table) return;
      const ids = new Set<string>();
      for await (const row of table.search({ conditions: [] })) {
        const w = toWatch(row)!;
        ids.add(w.watch_id);
        if (w.node !== this.deps.node) continue;
        await this.step(w).catch((error) => this.deps.log?.(`harper-agent: watch ${w.name} (${w.watch_id}): ${(error as Error).message}`));
      }
      // States of watches deleted (from any node) go too.
      for await (const row of this.deps.states()?.search({ conditions: [] }) ?? []) {
        const s = toState(row)!;
        if (!ids.has(s.watch_id) && s.node === this.deps.node && !this.busy.has(s.watch_id)) await this.deps.states()!.delete!(s.watch_id);
      }
    } finally {
      this.ticking = false;
    }
  }

  /** One watch's tick: its run or delivery resumed, a test fire, then its trigger. */
  async step(w: Watch): Promise<void> {
    const state = await this.change(w.watch_id, async (s) => {
      const now = this.now();
      let next: WatchState = { ...s, runs: s.runs.filter((t) => now - t < HOUR_MS) };
      if (next.key !== triggerKey(w)) next = { ...next, key: triggerKey(w), offset: undefined, line: undefined, burst: null, since: null, nextDue: null };
      if (w.testRequestedAt !== null && w.testRequestedAt !== next.testHandledAt && !next.firing) {
        next = { ...next, testHandledAt: w.testRequestedAt };
        return this.fire(w, next, { kind: 'test', summary: `a test fire asked for at ${new Date(w.testRequestedAt).toISOString()}` }, now);
      }
      if (w.status !== 'active') return next;
      const { state: seen, evidence } = await this.look(w, next, now);
      if (!evidence) return seen;
      const cleared: WatchState = { ...seen, burst: null, since: null };
      if (seen.firing || (seen.coolUntil !== null && now < seen.coolUntil)) return { ...cleared, suppressed: seen.suppressed + (evidence.log?.count ?? 1) };
      if (seen.runs.length >= w.limits.runsPerHour) {
        await this.stopItself(w, `fired ${seen.runs.length} times in the last hour (limits.runsPerHour is ${w.limits.runsPerHour}) and was due again: stopped; update it, or set status active to resume`);
        return cleared;
      }
      return this.fire(w, cleared, evidence, now);
    });
    if (state.firing && !this.busy.has(w.watch_id)) void this.settle(w, state.firing);
    else if (state.delivery?.status === 'pending' && !this.busy.has(w.watch_id)) void this.deliver(w, state.delivery.session_id);
  }

  /** What the trigger sees now: its state, and evidence when it is due. */
  private async look(w: Watch, s: WatchState, now: number): Promise<{ state: WatchState; evidence?: Evidence }> {
    const t = w.trigger;
    switch (t.type) {
      case 'log': {
        const owner = w.user ? await this.deps.loop.userOf?.(w.user) : undefined;
        const read = await readLog(scopesFor(this.deps.loop.scopes, this.deps.loop.config(), owner), t, s, now);
        return burstReady(t, read, now) ? { state: read, evidence: logEvidence(t, read.burst!) } : { state: read };
      }
      case 'metric': {
        const records = await this.operation(w, { operation: 'get_analytics', metric: t.metric, start_time: now - METRIC_LOOKBACK_MS, end_time: now });
        const sample = newestSample(records, t);
        const { state, due } = held(s, !!sample && metricHolds(t, sample.value), t.forSeconds, now);
        if (!due) return { state };
        return { state, evidence: { kind: 'metric', summary: `${t.metric}.${t.attribute} was ${sample!.value} at ${new Date(sample!.at).toISOString()}, ${describeTrigger(t)}`, metric: { metric: t.metric, attribute: t.attribute, value: sample!.value, at: sample!.at, since: state.since! } } };
      }
      case 'cluster': {
        const down = downConnections(await this.operation(w, { operation: 'cluster_status' }));
        const { state, due } = held(s, down.length > 0, t.forSeconds, now);
        if (!due) return { state };
        return { state, evidence: { kind: 'cluster', summary: `${down.length} database connection(s) down for ${Math.round((now - state.since!) / 1000)} s: ${down.join(', ')}`, cluster: { down, since: state.since! } } };
      }
      case 'schedule': {
        const { state, due } = scheduleDue(t, s, now);
        return due ? { state, evidence: { kind: 'schedule', summary: `its schedule (${describeTrigger(t)}) came due` } } : { state };
      }
    }
  }

  /** A Harper operation as the watch's user (their role bounds it). */
  private async operation(w: Watch, body: Record<string, unknown>): Promise<unknown> {
    const as = this.deps.loop.operationsAs;
    const user = w.user ?? this.deps.loop.config().user;
    if (!as || !user) throw new Error(`${body.operation} needs a user to run as: the watch has none and agent.user is unset`);
    // Some operations (get_analytics) answer with an iterable of records: read as the operation tools read them.
    return plainAnswer(await as(user)(body));
  }

  /** Records the firing (before its session exists) and starts the cool-down. */
  private fire(w: Watch, s: WatchState, evidence: Evidence, now: number): WatchState {
    const n = s.fired + 1;
    const session_id = runSessionId(w.watch_id, n);
    this.deps.log?.(`harper-agent: watch ${w.name} fired (${evidence.summary}); session ${session_id}`);
    return { ...s, fired: n, runs: [...s.runs, now], lastFiredAt: now, lastSessionId: session_id, firing: { session_id, at: now, evidence }, coolUntil: now + w.limits.coolDownSeconds * 1000, delivery: null };
  }

  private async stopItself(w: Watch, reason: string): Promise<void> {
    this.deps.log?.(`harper-agent: watch ${w.name} (${w.watch_id}) ${reason}`);
    const current = toWatch(await this.deps.watches()!.get(w.watch_id));
    if (current) await this.deps.watches()!.put(w.watch_id, watchRow({ ...current, status: 'stopped', stoppedReason: reason, updatedAt: this.now() }));
  }

  /** Runs a fired watch's session to its end (starting it if a restart came first), then stores and delivers the
   * report. */
  private async settle(w: Watch, firing: NonNullable<WatchState['firing']>): Promise<void> {
    this.busy.add(w.watch_id);
    try {
      const { store } = this.deps.loop;
      if (!(await store.header(firing.session_id))) await this.startSession(w, firing);
      // A run on this node's threads is waited for; one a restart cut off (its runner gone) is reported as it stands.
      let header = await store.header(firing.session_id);
      while (header && !settled(header.status) && runnerMayBeAlive(header.runner, store.node)) {
        await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
        header = await store.header(firing.session_id);
      }
      const session = await store.get(firing.session_id);
      const interrupted = session?.status === 'running';
      const answer = session?.status === 'completed' ? (session.messages.filter((m) => m.role === 'assistant').at(-1)?.content ?? null) : null;
      const calls = (await this.deps.loop.calls?.list({ session_id: firing.session_id })) ?? [];
      const report = buildReport(w, this.deps.node, firing.evidence, {
        session_id: firing.session_id,
        status: interrupted ? 'interrupted' : (session?.status ?? 'gone'),
        answer,
        lastError: interrupted ? 'The run was interrupted by a Harper restart.' : (session?.lastError ?? (session ? null : 'the session was deleted before it settled')),
        firedAt: firing.at,
        finishedAt: this.now(),
        totals: totals(calls),
      });
      const webhook = w.delivery.webhook;
      await this.change(w.watch_id, (s) => ({ ...s, firing: null, lastReport: report, delivery: webhook ? { session_id: firing.session_id, status: 'pending', attempts: 0, lastStatus: null, lastError: null, nextAt: this.now() } : null }));
    } finally {
      this.busy.delete(w.watch_id);
    }
    if (w.delivery.webhook) await this.deliver(w, firing.session_id);
  }

  /** The run's session: the operator's prompt after what fired, run as the watch's user, within its cost limit. */
  private async startSession(w: Watch, firing: NonNullable<WatchState['firing']>): Promise<void> {
    const loop = this.deps.loop;
    const config = loop.config();
    const registration = Models.get(config.provider);
    const model = config.model ?? registration?.defaultModel ?? null;
    const { store } = loop;
    await store.create({ user: w.user, provider: config.provider, model, session_id: firing.session_id }).catch((error) => {
      if (!/already exists/.test(String(error))) throw error;
    });
    const runner = newRunner(store.node);
    const prompt = await promptWithRecall(loop, watchPrompt(w, firing.evidence, firing.at));
    const header = await store.mutate(firing.session_id, (s) => {
      if (s.messageCount > 0) return; // started before a restart
      s.status = 'running';
      s.lastError = null;
      s.runner = runner;
      s.node ??= store.node;
      return [prompt];
    });
    if (header.runner !== runner) return;
    const limited: LoopDeps = { ...loop, config: () => withCostLimit(loop.config(), w.limits.maxCostUsd) };
    if (!registration) {
      await store.mutate(firing.session_id, (s) => {
        s.status = 'error';
        s.runner = null;
        s.lastError = `agent.provider ${JSON.stringify(config.provider)} is not registered (available: ${Models.providers().join(', ')}); set agent.provider with set_agent_config`;
      });
      return;
    }
    await startRun(limited, firing.session_id, runner, undefined, header.updatedAt).done;
  }

  /** Delivers the stored report, attempt by attempt, each recorded; the state says where it stands. */
  private async deliver(w: Watch, sessionId: string): Promise<void> {
    const webhook = w.delivery.webhook;
    if (!webhook || this.busy.has(w.watch_id)) return;
    this.busy.add(w.watch_id);
    try {
      for (;;) {
        const s = toState(await this.deps.states()!.get(w.watch_id));
        const d = s?.delivery;
        if (!s || !d || d.session_id !== sessionId || d.status !== 'pending' || !s.lastReport) return;
        const wait = (d.nextAt ?? 0) - this.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (!toWatch(await this.deps.watches()!.get(w.watch_id))) return; // deleted meanwhile
        const result = await attemptDelivery(webhook, deliveryBody(s.lastReport));
        await this.deps.deliveries.record([attemptRecord(w.watch_id, sessionId, d.attempts + 1, result)]);
        const after = await this.change(w.watch_id, (cur) => (cur.delivery?.session_id === sessionId ? { ...cur, delivery: afterAttempt(webhook, cur.delivery, result, this.now()) } : cur));
        if (after.delivery?.status !== 'pending') {
          if (after.delivery?.status === 'failed') this.deps.log?.(`harper-agent: watch ${w.name}: its report was not delivered after ${after.delivery.attempts} attempt(s): ${after.delivery.lastError}`);
          return;
        }
      }
    } finally {
      this.busy.delete(w.watch_id);
    }
  }
}

/** The run's config with the watch's cost limit for the prompt, where it is lower than agent.maxCostUsd. */
function withCostLimit(config: AgentConfig, maxCostUsd: number | undefined): AgentConfig {
  if (maxCostUsd === undefined) return config;
  return { ...config, maxCostUsd: Math.min(maxCostUsd, config.maxCostUsd ?? Number.POSITIVE_INFINITY) };
}

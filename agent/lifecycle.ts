// The agent's data has a lifecycle: a session is deleted with everything that belongs to it (its messages, its model
// calls, its follow-ups; its approvals live in its row), finished sessions and old model calls expire after the
// retention the operator sets, and a session can be exported whole for an incident report. The store owns the
// tables; this module owns what a delete and an expiry cover, and in what order.
import type { ToolCallLog } from './toolCalls.js';
import type { AgentConfig } from './agent.js';
import type { Followups } from './followups.js';
import type { ModelCallLog } from './modelCalls.js';
import { SessionNotFoundError, type SessionHeader, type SessionStore } from './session.js';

export interface Deleted {
  session_id: string;
  messages: number;
  modelCalls: number;
  followups: number;
}

export interface Expired {
  sessions: number;
  messages: number;
  modelCalls: number;
  followups: number;
  /** Calls removed by agent.retainModelCallsDays (besides those of expired sessions). */
  oldModelCalls: number;
}

const DAY_MS = 86_400_000;
const FINISHED = new Set(['idle', 'completed', 'aborted', 'error']);

export class Lifecycle {
  constructor(
    private readonly store: SessionStore,
    private readonly calls?: ModelCallLog,
    private readonly followups?: Followups,
    private readonly log: (message: string) => void = () => undefined,
    private readonly toolCalls?: ToolCallLog
  ) {}

  /**
   * Deletes a session in one step that cannot leave half of it: the row becomes a tombstone first (reads treat it as
   * gone; `refuse` may throw before, for a running session), then its follow-ups, model calls and messages go, the row
   * last. A crash in between leaves the tombstone, and `finishInterrupted` (at boot) completes the delete.
   */
  async deleteSession(id: string, refuse?: (header: SessionHeader) => void): Promise<Deleted> {
    await this.store.markDeleting(id, refuse);
    return this.finish(id);
  }

  private async finish(id: string): Promise<Deleted> {
    const followups = (await this.followups?.deleteSession(id)) ?? 0;
    const modelCalls = (await this.calls?.deleteSession(id)) ?? 0;
    await this.toolCalls?.deleteSession(id);
    const messages = await this.store.purge(id);
    return { session_id: id, messages, modelCalls, followups };
  }

  /** At boot: completes the deletes a crash interrupted. Answers how many. */
  async finishInterrupted(): Promise<number> {
    const ids = await this.store.deleting();
    for (const id of ids) await this.finish(id);
    return ids.length;
  }

  /**
   * Expires what is older than the retention: finished sessions not changed for agent.retainSessionsDays (with all
   * that belongs to them), then model calls older than agent.retainModelCallsDays. Unset keeps them. Idempotent, so
   * every node may run it; one session at a time, so requests are never held for long.
   */
  async expire(config: Pick<AgentConfig, 'retainSessionsDays' | 'retainModelCallsDays'>, now = Date.now()): Promise<Expired> {
    const out: Expired = { sessions: 0, messages: 0, modelCalls: 0, followups: 0, oldModelCalls: 0 };
    if (config.retainSessionsDays !== undefined) {
      const cutoff = now - config.retainSessionsDays * DAY_MS;
      // From the time index, older than the cutoff only (a page that starts at it).
      const { sessions } = await this.store.page(Number.MAX_SAFE_INTEGER, { cursor: { at: cutoff, id: '' }, keep: (s) => FINISHED.has(s.status) });
      for (const s of sessions) {
        const gone = await this.deleteSession(s.session_id, (h) => {
          // Changed since it was listed (a new prompt): kept.
          if (!FINISHED.has(h.status) || h.updatedAt >= cutoff) throw new KeptError();
        }).catch((error) => {
          if (error instanceof KeptError || error instanceof SessionNotFoundError) return null;
          throw error;
        });
        if (!gone) continue;
        out.sessions++;
        out.messages += gone.messages;
        out.modelCalls += gone.modelCalls;
        out.followups += gone.followups;
      }
    }
    if (config.retainModelCallsDays !== undefined && this.calls) out.oldModelCalls = await this.calls.expireBefore(now - config.retainModelCallsDays * DAY_MS);
    // The audit is kept as long as the model-call log.
    if (config.retainModelCallsDays !== undefined) await this.toolCalls?.expireBefore(now - config.retainModelCallsDays * DAY_MS);
    if (out.sessions || out.oldModelCalls) {
      this.log(
        `harper-agent: retention removed ${out.sessions} session(s) older than ${config.retainSessionsDays} day(s) (${out.messages} messages, ${out.modelCalls} model calls, ${out.followups} follow-ups) ` +
          `and ${out.oldModelCalls} model call(s) older than ${config.retainModelCallsDays ?? '(unset)'} day(s)`
      );
    }
    return out;
  }
}

class KeptError extends Error {}

/** How often each node runs the expiry on its own. */
export const EXPIRY_INTERVAL_MS = 3_600_000;

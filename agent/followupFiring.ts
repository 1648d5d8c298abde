// Firing a due follow-up: its prompt appended and a run started under the session's lock, exactly once.
import { Models } from '../resources/models/models.js';
import { type FireOutcome, type Followup } from './followups.js';
import { startRun } from './loop.js';
import { promptWithRecall } from './memory/recall.js';
import type { LoopDeps } from './loopDeps.js';
import { newRunner } from './runs.js';
import { SessionNotFoundError } from './session.js';

/** When this module loaded: Harper loads the backends as sibling components after the agent (agent/boot.ts). */
const MODULE_LOADED_AT = Date.now();

/** How long after load a follow-up waits for its provider's backend to register before it fires anyway. */
export const BACKEND_LOAD_GRACE_MS = 60_000;

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
      return [await promptWithRecall(deps, followupPrompt(current), { followup: current.followup_id })];
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

// The run registry: which runs this thread has going, the token that names a run's node, process and thread, the
// cancel that reaches a run from any thread, and the recovery of runs a restart cut off.
import { randomUUID } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { errorInfo } from '../resources/models/agentLoop.js';
import type { LoopDeps } from './loopDeps.js';
import type { SessionHeader, SessionStore } from './session.js';
import { workerIndex } from './threadProbe.js';

export interface ActiveRun {
  controller: AbortController;
  runner: string;
  done: Promise<void>;
}

const active = new Map<string, ActiveRun>();

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

export function launch(deps: LoopDeps, id: string, runner: string, acceptedAt: number, work: (signal: AbortSignal) => Promise<void>): ActiveRun {
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

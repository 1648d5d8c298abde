// A look inside one of Harper's worker threads without opening a port: each worker serves probes on a
// BroadcastChannel (every thread of the process sees it), and answers a CPU profile or its heap statistics from inside
// itself through Node's in-process inspector session. No inspector port is opened and threads_debug is not needed; the
// main thread serves none, so it is never profiled. Harper's own thread messaging (onMessageByType) is not part of its
// public API in 4.7; a BroadcastChannel is Node's and reaches the same threads.
import { Session } from 'node:inspector/promises';
import v8 from 'node:v8';
import { isMainThread, workerData } from 'node:worker_threads';
import { randomUUID } from 'node:crypto';

const CHANNEL = 'harper-agent:thread-probe';

export type ProbeRequest = { kind: 'profile'; durationMs: number; topN: number } | { kind: 'heap' };

interface Envelope {
  id: string;
  to?: number;
  from?: number;
  request?: ProbeRequest;
  result?: unknown;
  error?: string;
}

export interface ProfileResult {
  thread: number;
  durationMs: number;
  sampleCount: number;
  /** Sampled time not idle. */
  busyMs: number;
  topFunctions: { function: string; url: string; line: number; selfMs: number; percent: number }[];
}

/** This thread's Harper worker index, or null on the main thread (or outside Harper). */
export function workerIndex(): number | null {
  const index = (workerData as { workerIndex?: unknown } | null)?.workerIndex;
  return !isMainThread && typeof index === 'number' ? index : null;
}

/** Harper's worker thread count, as this thread was told it. */
export function workerCount(): number | null {
  const count = (workerData as { workerCount?: unknown } | null)?.workerCount;
  return typeof count === 'number' ? count : null;
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

/** Self time per function (name, url, line), largest first; idle time left out. */
export function topBySelfTime(profile: CpuProfile, topN: number): { busyMs: number; sampleCount: number; top: ProfileResult['topFunctions'] } {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<string, { frame: CpuProfile['nodes'][number]['callFrame']; us: number }>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  let busyUs = 0;
  samples.forEach((id, i) => {
    const frame = byNode.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') return;
    // A sample's time is the delta to the next one (V8's own convention for self time).
    const us = Math.max(0, deltas[i + 1] ?? 0);
    busyUs += us;
    const key = `${frame.functionName}\u0000${frame.url}\u0000${frame.lineNumber}`;
    const entry = selfUs.get(key) ?? { frame, us: 0 };
    entry.us += us;
    selfUs.set(key, entry);
  });
  const top = [...selfUs.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, topN)
    .map(({ frame, us }) => ({
      function: frame.functionName || '(anonymous)',
      url: frame.url,
      line: frame.lineNumber + 1,
      selfMs: Math.round(us / 100) / 10,
      percent: busyUs ? Math.round((us / busyUs) * 1000) / 10 : 0,
    }));
  return { busyMs: Math.round(busyUs / 100) / 10, sampleCount: samples.length, top };
}

/** A CPU profile of this thread, sampled every `intervalUs` while `work` runs (node:inspector in-process: no port). */
export async function cpuProfileOf(work: () => Promise<unknown>, intervalUs: number): Promise<CpuProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
    await session.post('Profiler.start');
    let profile: CpuProfile;
    try {
      await work();
    } finally {
      profile = ((await session.post('Profiler.stop')) as { profile: CpuProfile }).profile;
    }
    return profile;
  } finally {
    await session.post('Profiler.disable').catch(() => undefined);
    session.disconnect();
  }
}

async function profileHere(durationMs: number, topN: number, thread: number): Promise<ProfileResult> {
  const profile = await cpuProfileOf(() => new Promise((resolve) => setTimeout(resolve, durationMs)), 1000);
  const { busyMs, sampleCount, top } = topBySelfTime(profile, topN);
  return { thread, durationMs: Math.round((profile.endTime - profile.startTime) / 1000), sampleCount, busyMs, topFunctions: top };
}

function heapHere(thread: number) {
  const heap = v8.getHeapStatistics();
  return {
    thread,
    heap,
    spaces: v8.getHeapSpaceStatistics().map((s) => ({ name: s.space_name, size: s.space_size, used: s.space_used_size, available: s.space_available_size })),
  };
}

let serving: BroadcastChannel | undefined;

/** Called once per thread at boot: a worker answers the probes sent to its index. */
export function serveThreadProbes(): void {
  const index = workerIndex();
  if (index === null || serving) return;
  serving = new BroadcastChannel(CHANNEL);
  (serving as unknown as { unref?: () => void }).unref?.();
  serving.onmessage = async (event) => {
    const message = (event as MessageEvent<Envelope>).data;
    if (!message?.request || message.to !== index) return;
    let reply: Envelope;
    try {
      const request = message.request;
      const result = request.kind === 'profile' ? await profileHere(request.durationMs, request.topN, index) : heapHere(index);
      reply = { id: message.id, from: index, result };
    } catch (error) {
      reply = { id: message.id, from: index, error: error instanceof Error ? error.message : String(error) };
    }
    serving!.postMessage(reply);
  };
}

export class ProbeError extends Error {}

/** Sends `request` to worker `thread` and waits for its answer (at most `timeoutMs`, or until `signal` aborts). */
export function probeThread(thread: number, request: ProbeRequest, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
  const channel = new BroadcastChannel(CHANNEL);
  const id = randomUUID();
  return new Promise<unknown>((resolve, reject) => {
    const done = (settle: () => void) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      channel.close();
      settle();
    };
    const timer = setTimeout(() => done(() => reject(new ProbeError(`worker thread ${thread} did not answer within ${timeoutMs} ms`))), timeoutMs);
    const onAbort = () => done(() => reject(signal!.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
    channel.onmessage = (event) => {
      const message = (event as MessageEvent<Envelope>).data;
      if (message?.id !== id || message.request) return;
      done(() => (message.error !== undefined ? reject(new ProbeError(message.error)) : resolve(message.result)));
    };
    channel.postMessage({ id, to: thread, request } satisfies Envelope);
  });
}

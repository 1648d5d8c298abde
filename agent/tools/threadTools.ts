// profile_cpu and heap_usage: one of Harper's worker threads looked at from inside itself (agent/threadProbe.ts), no
// inspector port opened. Threads are Harper's worker indexes, 0 to the worker count less one (the environment block
// says how many there are); the main thread is not one of them.
import { probeThread, ProbeError, workerCount, type ProbeRequest } from '../threadProbe.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

/** How long past the profile's own duration a worker has to answer (a worker busy for longer is not answering). */
const ANSWER_GRACE_MS = 10_000;

const threadParam = { type: 'integer', minimum: 0, description: "Harper worker thread index, 0 to the worker thread count less one (see 'Where you run')." };

/** The worker count this thread knows, or an error naming why none can be probed. */
function checkThread(thread: unknown, count = workerCount()): number {
  if (count === null) throw new ToolError('this agent is not running in a Harper worker thread, so there are no worker threads to look at');
  if (typeof thread !== 'number' || !Number.isInteger(thread) || thread < 0 || thread >= count) {
    throw new ToolError(`unknown thread ${JSON.stringify(thread)}: Harper has ${count} worker thread${count === 1 ? '' : 's'}, 0${count > 1 ? ` to ${count - 1}` : ''}`);
  }
  return thread;
}

async function ask(thread: number, request: ProbeRequest, timeoutMs: number, ctx: ToolContext) {
  try {
    return await probeThread(thread, request, timeoutMs, ctx.signal);
  } catch (error) {
    if (error instanceof ProbeError) throw new ToolError(error.message);
    throw error;
  }
}

export const profileCpuTool: Tool = {
  name: 'profile_cpu',
  description:
    "Takes a CPU profile of one of Harper's worker threads from inside it (no inspector port, the thread is not paused) " +
    'for durationMs, and answers the functions with the most self time: function, url, line, selfMs and percent of the ' +
    'sampled busy time (a small hot function V8 inlined is listed under its caller). Use it when a worker is slow or ' +
    'busy; heap_usage answers its memory.',
  parameters: {
    type: 'object',
    properties: {
      thread: threadParam,
      durationMs: { type: 'integer', minimum: 100, maximum: 30_000, description: 'How long to sample (100 to 30,000; default 2,000).' },
      topN: { type: 'integer', minimum: 1, maximum: 50, description: 'How many functions to answer (1 to 50; default 15).' },
    },
    required: ['thread'],
    additionalProperties: false,
  },
  advice: 'ask for a smaller topN',
  async handler(args, ctx) {
    const thread = checkThread(args.thread);
    const durationMs = (args.durationMs as number | undefined) ?? 2000;
    return ask(thread, { kind: 'profile', durationMs, topN: (args.topN as number | undefined) ?? 15 }, durationMs + ANSWER_GRACE_MS, ctx);
  },
};

export const heapUsageTool: Tool = {
  name: 'heap_usage',
  description: "V8's heap statistics of one of Harper's worker threads (total, used, limit, external) and the size of each heap space, read from inside it.",
  parameters: { type: 'object', properties: { thread: threadParam }, required: ['thread'], additionalProperties: false },
  async handler(args, ctx) {
    return ask(checkThread(args.thread), { kind: 'heap' }, ANSWER_GRACE_MS, ctx);
  },
};

export const threadTools: Tool[] = [profileCpuTool, heapUsageTool];
export { checkThread };

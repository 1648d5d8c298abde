// Harper's own operations as tools, so the model can investigate the instance (its logs, config, replication,
// components, jobs, users) and not only its files. Each call runs through Harper's operations as the user the run acts
// for (`ctx.operation`, with Harper's own permission check: never more than that user's role allows; no user, no
// call). Results pass the loop's cap like every tool; read_log pages by start/limit within half the cap; secret config
// values, password hashes and logged private keys are never served. Descriptions are written for the model.
import { holdsArmorLine } from './keyMaterial.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

/** Runs one Harper operation as the run's user; rejects with Harper's status and message. */
export type RunOperation = (body: Record<string, unknown>) => Promise<unknown>;

/** The part of Harper's `server` global the operation tools use. */
export interface OperationServer {
  getUser(username: string, password: null): Promise<unknown> | unknown;
  operation(body: Record<string, unknown>, context: { user: unknown }, authorize: boolean): Promise<unknown>;
}

/** Harper's refusal as the model should read it: the status and Harper's own words. */
function refusal(operation: unknown, error: unknown): ToolError {
  const e = error as { statusCode?: number; http_resp_msg?: unknown; message?: unknown };
  const detail = e?.http_resp_msg ?? e?.message;
  const text = typeof detail === 'string' ? detail : ((detail as { error?: string })?.error ?? JSON.stringify(detail));
  return new ToolError(`${operation}: Harper refused it${e?.statusCode ? ` (${e.statusCode})` : ''}: ${text}`);
}

/** Runs operations as `username`, looked up afresh on each call, through Harper's own permission check. */
export function operationsAs(server: OperationServer): (username: string) => RunOperation {
  return (username) => async (body) => {
    const user = await Promise.resolve(server.getUser(username, null)).catch(() => null);
    if (!user) throw new ToolError(`${body.operation} is off: the session's user ${username} is not a Harper user`);
    try {
      return await server.operation({ ...body }, { user }, true);
    } catch (error) {
      throw refusal(body.operation, error);
    }
  };
}

/** The most entries read from an operation that answers with a stream (get_analytics, searches). */
const MAX_STREAMED = 10_000;

async function run(ctx: ToolContext, body: Record<string, unknown>): Promise<unknown> {
  if (!ctx.operation) throw new ToolError(`${body.operation} is off: this run acts for no Harper user (the session has none)`);
  return settled(await ctx.operation(body));
}

/** An operation's answer as plain data: Harper answers some operations with an iterable of (promised) records, which
 * its HTTP layer would serialise; read here up to MAX_STREAMED entries, then a note saying to narrow the question. */
export async function settled(value: unknown): Promise<unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || Buffer.isBuffer(value)) return value;
  if (!(Symbol.asyncIterator in value) && !(Symbol.iterator in value)) return value;
  const out: unknown[] = [];
  for await (const entry of value as AsyncIterable<unknown>) {
    if (out.length === MAX_STREAMED) {
      out.push(`[more entries not read: over ${MAX_STREAMED}; narrow the question]`);
      break;
    }
    out.push(await entry);
  }
  return out;
}

const WITHHELD = '[withheld: key material]';
const REDACTED = '[redacted]';
/** Config keys whose values are secrets (passwords, tokens, private keys, the agent's API key), by how they end:
 * `operationTokenTimeout` is not a secret, `refreshToken` is. */
const SECRET_KEY = /(pass(word|phrase)?|secret|token|api_?key|private_?key|credentials?)$/i;

/** A copy with every secret-looking value redacted, and any PEM private key anywhere withheld. */
export function redactSecrets(value: unknown, key = ''): unknown {
  if (value === null || value === undefined) return value;
  if (SECRET_KEY.test(key) && typeof value !== 'object') return REDACTED;
  if (typeof value === 'string') return holdsArmorLine(Buffer.from(value)) ? WITHHELD : value;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, key));
  if (typeof value === 'object') return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redactSecrets(v, k)]));
  return value;
}

/** Users without their password hashes or tokens. */
function withoutHashes(users: unknown): unknown {
  if (!Array.isArray(users)) return users;
  return users.map((u) => {
    const { password: _p, hash: _h, hash_function: _f, refresh_token: _r, ...rest } = u as Record<string, unknown>;
    return rest;
  });
}

interface LogEntry {
  timestamp?: string;
  level?: string;
  message?: unknown;
  [key: string]: unknown;
}

/** A log entry as served: one that holds a PEM private key keeps its place, not its text. */
function servedEntry(entry: LogEntry): LogEntry {
  const text = typeof entry.message === 'string' ? entry.message : JSON.stringify(entry.message ?? '');
  return holdsArmorLine(Buffer.from(text)) ? { ...entry, message: WITHHELD } : entry;
}

/** Offered even in the smallest window's tool list. */
const CORE_OPERATIONS = new Set(['cluster_status', 'get_configuration']);

const operationTool = (name: string, description: string, properties: Record<string, unknown> = {}, shape: (result: unknown) => unknown = (r) => r, required: string[] = []): Tool => ({
  name,
  description,
  needs: 'operations',
  core: CORE_OPERATIONS.has(name),
  parameters: { type: 'object', properties, required, additionalProperties: false },
  async handler(args, ctx) {
    return shape(redactSecrets(await run(ctx, { operation: name, ...args })));
  },
});

const readLog: Tool = {
  name: 'read_log',
  needs: 'operations',
  core: true,
  brief: "Read Harper's log as entries, a page at a time from start, filtered by level and from/until; pass nextStart back as start.",
  description:
    "Read Harper's own log (hdb.log) as entries {timestamp, thread, level, tags, message}, oldest first, a page at a " +
    'time: from start (default 0), at most limit (default 100) entries, filtered by level (error, warn, notify, info, ' +
    'debug, trace) and a time window (from/until, ISO dates). While more entries may follow the result has nextStart: ' +
    'pass it back as start. Use a level and a window to find what matters in a long log; read_file on root "logs" ' +
    'reads the raw file.',
  parameters: {
    type: 'object',
    properties: {
      start: { type: 'integer', minimum: 0 },
      limit: { type: 'integer', minimum: 1, maximum: 1000 },
      level: { type: 'string', enum: ['error', 'warn', 'notify', 'info', 'debug', 'trace'] },
      from: { type: 'string', minLength: 1 },
      until: { type: 'string', minLength: 1 },
    },
    additionalProperties: false,
  },
  advice: 'ask for fewer entries (limit), a level or a narrower from/until window',
  async handler(args, ctx) {
    const start = (args.start as number | undefined) ?? 0;
    const limit = (args.limit as number | undefined) ?? 100;
    const body: Record<string, unknown> = { operation: 'read_log', start, limit, order: 'asc' };
    for (const key of ['level', 'from', 'until'] as const) if (args[key] !== undefined) body[key] = args[key];
    const got = await run(ctx, body);
    const entries = (Array.isArray(got) ? got : []).map((e) => servedEntry(e as LogEntry));
    // A page within half the cap, measured as the model gets it, so the loop never cuts one: fewer entries, and an
    // entry too long for a page alone keeps its head.
    const budget = Math.floor(ctx.maxResultBytes / 2);
    const page = (list: LogEntry[]) => ({ start, count: list.length, entries: list, ...(list.length < entries.length || entries.length === limit ? { nextStart: start + list.length } : {}) });
    let kept = entries;
    while (kept.length > 1 && Buffer.byteLength(JSON.stringify(page(kept))) > budget) kept = kept.slice(0, Math.max(1, Math.floor(kept.length / 2)));
    if (kept.length === 1 && Buffer.byteLength(JSON.stringify(page(kept))) > budget) {
      const text = String(kept[0]!.message);
      const room = Math.max(64, budget - (Buffer.byteLength(JSON.stringify(page([{ ...kept[0]!, message: '' }]))) + 64));
      kept = [{ ...kept[0]!, message: `${Buffer.from(text).subarray(0, room).toString('utf8').replace(/\uFFFD$/, '')}…[entry cut: ${Buffer.byteLength(text)} bytes]` }];
    }
    return page(kept);
  },
};

/** Operations that change the instance: run only when agent.allowOperations names them, and only once approved. */
const changeOperation: Tool = {
  name: 'harper_operation',
  needs: 'operations',
  description:
    'Run a Harper operation that changes the instance (for example restart_service, drop_table, set_configuration), ' +
    'with its arguments. Only the operations the operator named in agent.allowOperations can run, and each waits for ' +
    "the operator's approval. Prefer the read tools to find out what to change first.",
  parameters: {
    type: 'object',
    properties: { operation: { type: 'string', pattern: '^[a-z_]+$' }, arguments: { type: 'object' } },
    required: ['operation'],
    additionalProperties: false,
  },
  destructive: true,
  refuse(args, ctx) {
    const allowed = ctx.allowOperations ?? [];
    return allowed.includes(args.operation as string) ? null : `${args.operation} is not in agent.allowOperations (allowed: ${allowed.join(', ') || 'none'}); only the operator can add it`;
  },
  async handler(args, ctx) {
    const why = changeOperation.refuse!(args, ctx);
    if (why) throw new ToolError(why);
    return redactSecrets(await run(ctx, { ...((args.arguments as Record<string, unknown>) ?? {}), operation: args.operation }));
  },
};

export const harperOperationTools: Tool[] = [
  operationTool(
    'system_information',
    "This Harper's system: time, cpu, memory, disk, network, harperdb_processes, table_size, metrics, threads, " +
      'replication. Ask for only the attributes you need (each can be large).',
    { attributes: { type: 'array', items: { type: 'string', enum: ['system', 'time', 'cpu', 'memory', 'disk', 'network', 'harperdb_processes', 'table_size', 'metrics', 'threads', 'replication'] }, minItems: 1 } }
  ),
  readLog,
  operationTool('describe_all', 'Every database and table of this Harper with their attributes and record counts. For one database, describe_database is smaller.'),
  operationTool('describe_database', 'One database: its tables, their attributes, primary keys and record counts.', { database: { type: 'string', minLength: 1 } }, (r) => r, ['database']),
  operationTool('cluster_status', "Replication: this node's connections to the other nodes, per database, whether each is connected, its latency and back-pressure."),
  operationTool('get_components', 'The components installed in this Harper (their folders and files) and whether each loaded.'),
  operationTool('get_configuration', "This Harper's configuration (harperdb-config.yaml as in force). Secret values (passwords, tokens, private keys, API keys) are redacted."),
  operationTool('get_status', 'Status records set on this Harper (set_status), e.g. a maintenance flag; one by id, or all.', { id: { type: 'string', minLength: 1 } }),
  operationTool('list_metrics', 'The names of the analytics metrics get_analytics can read (builtin ones; custom ones with metric_types).', {
    metric_types: { type: 'array', items: { type: 'string', enum: ['builtin', 'custom'] }, minItems: 1 },
  }),
  operationTool(
    'get_analytics',
    "One metric's samples over time (e.g. duration, success, cache-hit, memory, utilization, replication-latency; " +
      'list_metrics names them). Always pass a window: start_time and end_time in epoch milliseconds, as narrow as the ' +
      'question; get_attributes picks the fields of each sample. A wide window is cut at the result cap.',
    {
      metric: { type: 'string', minLength: 1 },
      start_time: { type: 'integer', minimum: 0 },
      end_time: { type: 'integer', minimum: 0 },
      get_attributes: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1 },
    },
    (r) => r,
    ['metric']
  ),
  operationTool('get_job', 'One background job (export, import, delete) by id: its status, progress and message.', { id: { type: 'string', minLength: 1 } }, (r) => r, ['id']),
  operationTool(
    'search_jobs_by_start_date',
    'Background jobs started in a window (from_date, to_date: ISO dates), with their status.',
    { from_date: { type: 'string', minLength: 1 }, to_date: { type: 'string', minLength: 1 } },
    (r) => r,
    ['from_date', 'to_date']
  ),
  operationTool('list_users', "Harper's users with their roles and whether each is active (never their password hashes).", {}, withoutHashes),
  operationTool('list_roles', "Harper's roles and their permissions."),
  changeOperation,
];

// The integration harness: boots the real Harper with the built component on free ports in a temp root, drives
// the operations API over HTTP, and stops Harper by PID. Every integration test goes through it.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort, startHarper, type HarperOptions, type RunningHarper } from '../scripts/harper.js';
import { copyTemplate, LANE_SETUP, templateRoot } from './templateRoot.js';

export interface OpResult<T = any> {
  status: number;
  body: T;
}

export type Auth = 'admin' | 'none' | { username: string; password: string };

export class TestHarper {
  constructor(readonly harper: RunningHarper, readonly options: HarperOptions) {}

  get rootPath() {
    return this.harper.rootPath;
  }
  get logsDir() {
    return path.join(this.rootPath, 'log');
  }
  get componentsDir() {
    return path.join(this.rootPath, 'components');
  }

  /** The admin's Basic authorization header. */
  authHeader(): string {
    const { username, password } = this.harper.admin;
    return 'Basic ' + Buffer.from(`${username}:${password}`).toString('base64');
  }

  /** The env that points the CLI (harper-agent) at this Harper as its admin. */
  cliEnv(): Record<string, string> {
    return { HARPER_AGENT_URL: this.harper.opsUrl, HARPER_AGENT_USER: this.harper.admin.username, HARPER_AGENT_PASSWORD: this.harper.admin.password };
  }

  async op<T = any>(body: unknown, auth: Auth = 'admin'): Promise<OpResult<T>> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const creds = auth === 'admin' ? this.harper.admin : auth === 'none' ? null : auth;
    if (creds) headers.authorization = 'Basic ' + Buffer.from(`${creds.username}:${creds.password}`).toString('base64');
    const res = await fetch(this.harper.opsUrl, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, body: parsed as T };
  }

  /** One operation on a connection of its own: Harper hands each new connection to a worker thread, so a series of
   * these reaches every thread (fetch keeps one connection, and so one thread). */
  opOnNewConnection<T = any>(body: unknown): Promise<OpResult<T>> {
    const { username, password } = this.harper.admin;
    const payload = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = httpRequest(this.harper.opsUrl, { method: 'POST', agent: false, auth: `${username}:${password}`, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T });
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** get_agent_status from each worker thread: batches of requests at once, each on a new connection (Harper hands
   * an idle instance's connections to its least busy thread), until `threads` have answered. */
  async statusPerThread(threads: number, batches = 20): Promise<Map<number, any>> {
    const seen = new Map<number, any>();
    for (let i = 0; i < batches && seen.size < threads; i++) {
      for (const r of await Promise.all(Array.from({ length: 8 }, () => this.opOnNewConnection<{ threadId: number }>({ operation: 'get_agent_status' })))) {
        if (r.status !== 200) throw new Error(`get_agent_status ${r.status}: ${JSON.stringify(r.body)}`);
        seen.set(r.body.threadId, r.body);
      }
    }
    return seen;
  }

  /**
   * After a deploy or a restart: waits until `threads` worker threads answer get_agent_status, each loaded after
   * `since` (a deploy answers before Harper replaces its threads, one at a time). Returns one thread's status.
   */
  async waitForAgent(since: number, threads = 1, timeoutMs = 120_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      const statuses = await this.statusPerThread(threads, 4).catch((error) => (last = String(error), new Map()));
      const fresh = [...statuses.values()].filter((s) => Date.parse(s.startedAt) >= since);
      if (statuses.size) last = [...statuses.values()];
      if (statuses.size === threads && fresh.length === threads) return fresh[0];
      await new Promise((res) => setTimeout(res, 250));
    }
    throw new Error(`${threads} thread(s) loaded after ${new Date(since).toISOString()} did not answer within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
  }

  /** Polls get_agent_session until its status is not running (or one of `until`). */
  async waitForSession(id: string, until: string[] = ['completed', 'error', 'aborted', 'awaiting_approval', 'idle'], timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.op({ operation: 'get_agent_session', session_id: id });
      if (r.status !== 200) throw new Error(`get_agent_session ${r.status}: ${JSON.stringify(r.body)}`);
      if (until.includes(r.body.status)) return r.body;
      if (Date.now() > deadline) throw new Error(`session ${id} still ${r.body.status} after ${timeoutMs} ms`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  /** Prompts and waits for the run to end, polling only the session's row (cheap however long the transcript is);
   * answers the row's status and lastError. */
  async promptLight(message: string, session_id?: string, timeoutMs = 60_000): Promise<{ session_id: string; status: string; lastError: string | null }> {
    const r = await this.op({ operation: 'agent_prompt', message, ...(session_id ? { session_id } : {}) });
    if (r.status !== 200) throw new Error(`agent_prompt ${r.status}: ${JSON.stringify(r.body)}`);
    const id = r.body.session_id as string;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = await this.op({ operation: 'search_by_id', database: 'agent', table: 'AgentSession', ids: [id], get_attributes: ['status', 'lastError'] });
      const { status, lastError } = row.body[0] ?? {};
      if (status && status !== 'running') return { session_id: id, status, lastError: lastError ?? null };
      if (Date.now() > deadline) throw new Error(`session ${id} still ${status} after ${timeoutMs} ms`);
      await new Promise((res) => setTimeout(res, 10));
    }
  }

  /** Prompts and waits for the run to end. */
  async prompt(message: string, session_id?: string): Promise<any> {
    const r = await this.op({ operation: 'agent_prompt', message, ...(session_id ? { session_id } : {}) });
    if (r.status !== 200) throw new Error(`agent_prompt ${r.status}: ${JSON.stringify(r.body)}`);
    return this.waitForSession(r.body.session_id);
  }

  /** The AgentSession row as Harper's own search_by_id returns it (not through the agent's operations), with
   * `messages`: its AgentMessage records, as Harper's search_by_value returns them, in key order. */
  async row(id: string): Promise<any> {
    const r = await this.op({ operation: 'search_by_id', database: 'agent', table: 'AgentSession', ids: [id], get_attributes: ['*'] });
    if (r.status !== 200) throw new Error(`search_by_id ${r.status}: ${JSON.stringify(r.body)}`);
    const m = await this.op({ operation: 'search_by_value', database: 'agent', table: 'AgentMessage', search_attribute: 'session_id', search_value: id, get_attributes: ['*'] });
    if (m.status !== 200) throw new Error(`search_by_value ${m.status}: ${JSON.stringify(m.body)}`);
    // Times are Date attributes (ISO text over JSON): as epoch milliseconds here, as the agent's operations answer them.
    const millis = (t: unknown) => (typeof t === 'string' ? Date.parse(t) : t);
    const messages = (m.body as any[])
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map(({ id: _key, session_id: _s, seq: _q, __createdtime__, __updatedtime__, ...message }) => (message.at === undefined ? message : { ...message, at: millis(message.at) }));
    const row = r.body[0];
    return row && { ...row, createdAt: millis(row.createdAt), updatedAt: millis(row.updatedAt), messages: row.messages ?? messages };
  }

  async setConfig(change: Record<string, unknown>): Promise<OpResult> {
    return this.op({ operation: 'set_agent_config', ...change });
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM', keepRoot = false) {
    await this.harper.stop(signal);
    if (!keepRoot && !process.env.KEEP_HARPER_ROOT) {
      rmSync(this.rootPath, { recursive: true, force: true });
      if (this.options.output && this.options.output !== 'inherit') rmSync(this.options.output, { force: true });
    }
  }

  /** Boots again on the same root and ports (after a stop or a kill). */
  async restart(extra: Partial<HarperOptions> = {}): Promise<TestHarper> {
    const options = { ...this.options, ...extra, env: { ...this.options.env, ...extra.env } };
    return new TestHarper(await startHarper(options), options);
  }
}

/** `prepare` writes into the root before Harper boots on it (a component of the test's own). */
export async function bootHarper({ prepare, ...extra }: Partial<HarperOptions> & { prepare?: (rootPath: string) => void } = {}): Promise<TestHarper> {
  const rootPath = extra.rootPath ?? mkdtempSync(path.join(os.tmpdir(), 'harper-agent-it-'));
  // The default boot starts from the run's installed template root (templateRoot.ts), not from nothing.
  const plain = !extra.rootPath && (extra.mode ?? 'dev') === 'dev' && !extra.admin && !extra.env?.REPLICATION_HOSTNAME;
  const template = plain ? await templateRoot() : undefined;
  if (template) copyTemplate(template, rootPath);
  prepare?.(rootPath);
  const options: HarperOptions = {
    rootPath,
    httpPort: await freePort(),
    opsPort: await freePort(),
    output: path.join(os.tmpdir(), `${path.basename(rootPath)}.out`),
    ...extra,
    // The Bedrock backend reads the AWS chain: give it test credentials, and never let it ask an instance
    // metadata service.
    env: { AWS_ACCESS_KEY_ID: 'test-access-key', AWS_SECRET_ACCESS_KEY: 'test-secret-key', AWS_REGION: 'us-east-1', AWS_EC2_METADATA_DISABLED: 'true', ...extra.env },
  };
  return new TestHarper(await startHarper(options), options);
}

let shared: Promise<TestHarper> | undefined;

/** One Harper shared by the tests that need no special boot; stopped by hooks.ts after the last test. Its boot is
 * the lane's setup, not the time of the file that happened to ask first (the reporter's LANE_SETUP event). */
export function sharedHarper(): Promise<TestHarper> {
  shared ??= (async () => {
    (process as NodeJS.EventEmitter).emit(LANE_SETUP, 'start');
    try {
      return await bootHarper();
    } finally {
      (process as NodeJS.EventEmitter).emit(LANE_SETUP, 'end');
    }
  })();
  return shared;
}

export async function stopShared() {
  if (shared) await (await shared).stop();
  shared = undefined;
}

/** The TCP ports a process listens on, from /proc: its socket inodes matched against the kernel's listen table. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed while we looked
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9]!)) ports.add(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

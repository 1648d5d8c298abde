// Boots the harperdb from node_modules with this component loaded (Harper loads its backends from node_modules, as
// config.yaml says), or a plain Harper with none, and stops it by PID. Used by `npm start`, `npm run demo`, the
// integration harness and the bench.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';

/** The repository root (this file runs from dist/scripts/). */
export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const DEV_ADMIN = { username: 'admin', password: 'harper-agent' };

/** Ports this process has handed out: a port is free only until its Harper binds it, so one never goes twice
 * (seen: an operations port equal to another instance's MQTT port). */
const handedOut = new Set<number>();

/** A port nothing listens on. Under `npm test` each lane has its own range below the kernel's ephemeral ports
 * (TEST_PORTS, "from-to", set by scripts/test.ts): a port the OS picked for listen(0) is free only until it is bound,
 * and in that gap another lane's listen(0), or any outgoing connection's local port, could take it. */
export async function freePort(): Promise<number> {
  const range = /^(\d+)-(\d+)$/.exec(process.env.TEST_PORTS ?? '');
  for (let next = range ? Number(range[1]) : 0; ; next += range ? 1 : 0) {
    if (range && next > Number(range[2])) throw new Error(`no free port left in TEST_PORTS ${process.env.TEST_PORTS}`);
    if (next && handedOut.has(next)) continue;
    const port = await new Promise<number>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(0));
      // No host: the wildcard address, which fails if anything listens on the port at any address.
      s.listen(next, () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    if (!port || handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

export interface HarperOptions {
  rootPath: string;
  httpPort: number;
  opsPort: number;
  /** Extra env (AGENT_* keys, provider endpoints). */
  env?: Record<string, string>;
  /** Extra CLI args after `run <component>` (e.g. --AGENT_MAXTOOLRESULTBYTES 2048). */
  args?: string[];
  /** Where Harper's stdout/stderr go: 'inherit' or a file path. */
  output?: 'inherit' | string;
  admin?: { username: string; password: string };
  /** Harper's own defaults mode for a first boot: dev (authorizeLocal on) or prod. */
  mode?: 'dev' | 'prod';
  /** `run` (default), or `dev`: Harper reloads the component when its files change and opens an inspector. */
  command?: 'run' | 'dev';
  /** The component folder Harper runs (default: this repository); null runs a plain Harper with only the
   * components installed in its root, as an operator's instance before deploy_component. */
  component?: string | null;
  /** What "ready" means: the agent answers get_agent_config (default), or Harper answers describe_all (a plain
   * Harper, default when component is null). */
  readyWhen?: 'agent' | 'harper';
}

export interface RunningHarper {
  process: ChildProcess;
  pid: number;
  opsUrl: string;
  httpUrl: string;
  rootPath: string;
  admin: { username: string; password: string };
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function harperEnv(o: HarperOptions): NodeJS.ProcessEnv {
  const admin = o.admin ?? DEV_ADMIN;
  return {
    ...process.env,
    ROOTPATH: o.rootPath,
    // Harper keeps a boot-properties file under $HOME/.harperdb naming the last install: a HOME per root keeps
    // instances (a test's, the operator's) from finding each other's install.
    HOME: path.join(o.rootPath, '.home'),
    TC_AGREEMENT: 'yes',
    HDB_ADMIN_USERNAME: admin.username,
    HDB_ADMIN_PASSWORD: admin.password,
    DEFAULTS_MODE: o.mode ?? 'dev',
    REPLICATION_HOSTNAME: 'localhost',
    HTTP_PORT: String(o.httpPort),
    OPERATIONSAPI_NETWORK_PORT: String(o.opsPort),
    ...o.env,
  };
}

/** Turns trust in local requests (`authentication.authorizeLocal`) and the inspector (`threads.debug`) on or off in a
 * root's config file; false when there is no file yet (DEFAULTS_MODE decides) or nothing changed. Not as env vars:
 * Harper 4.7.29 reads AUTHENTICATION_AUTHORIZELOCAL=false or THREADS_DEBUG=false as the text "false", which is truthy. */
export function setModeInConfig(file: string, on: boolean): boolean {
  if (!existsSync(file)) return false; // a first boot: DEFAULTS_MODE decides
  const doc = parseDocument(readFileSync(file, 'utf8'));
  if (doc.getIn(['authentication', 'authorizeLocal']) === on && doc.getIn(['threads', 'debug']) === on) return false;
  doc.setIn(['authentication', 'authorizeLocal'], on);
  doc.setIn(['threads', 'debug'], on);
  writeFileSync(file, doc.toString());
  return true;
}

export async function startHarper(o: HarperOptions, readyTimeoutMs = 60_000): Promise<RunningHarper> {
  mkdirSync(o.rootPath, { recursive: true });
  const admin = o.admin ?? DEV_ADMIN;
  // Harper opens these too; give each instance its own so two never collide. No plain REPLICATION_PORT: with one
  // set, Harper 4.7.29 registers its node-certificate check on that port only, and a peer connecting to the secure
  // port is refused ("No authorization provided").
  const extraPorts = {
    MQTT_NETWORK_PORT: String(await freePort()),
    MQTT_NETWORK_SECUREPORT: String(await freePort()),
    REPLICATION_SECUREPORT: String(await freePort()),
  };
  const env = { ...harperEnv(o), ...extraPorts, ...o.env };
  const out = o.output === undefined || o.output === 'inherit' ? 'inherit' : openSync(o.output, 'a');
  const component = o.component === undefined ? REPO : o.component;
  const child = spawn(process.execPath, [path.join(REPO, 'node_modules/harperdb/bin/harperdb.js'), o.command ?? 'run', ...(component ? [component] : []), ...(o.args ?? [])], {
    env,
    stdio: ['ignore', out, out],
  });
  const opsUrl = `http://127.0.0.1:${o.opsPort}/`;
  const running: RunningHarper = {
    process: child,
    pid: child.pid!,
    opsUrl,
    httpUrl: `http://127.0.0.1:${o.httpPort}/`,
    rootPath: o.rootPath,
    admin,
    stop: (signal = 'SIGTERM') => ((stopping = true), stopHarper(child, signal)),
  };
  // A Harper that dies on its own fails every test after it with ECONNREFUSED, and its output file goes with its
  // root: say why while the file is there.
  let stopping = false;
  child.once('exit', (code, signal) => {
    if (stopping || out === 'inherit') return;
    const tail = readFileSync(o.output!, 'utf8').split('\n').slice(-40).join('\n');
    process.stderr.write(`Harper PID ${child.pid} (root ${o.rootPath}) exited (${signal ?? `code ${code}`}) without being stopped; the end of its output:\n${tail}\n`);
  });
  const readyWhen = o.readyWhen ?? (component ? 'agent' : 'harper');
  const probe = JSON.stringify({ operation: readyWhen === 'agent' ? 'get_agent_config' : 'describe_all' });
  const deadline = Date.now() + readyTimeoutMs;
  const auth = 'Basic ' + Buffer.from(`${admin.username}:${admin.password}`).toString('base64');
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`Harper exited with code ${child.exitCode} before it was ready`);
    try {
      const res = await fetch(opsUrl, { method: 'POST', headers: { 'content-type': 'application/json', authorization: auth }, body: probe });
      if (res.status === 200) return running;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  await running.stop('SIGKILL');
  throw new Error(`Harper was not ready on ${opsUrl} within ${readyTimeoutMs} ms`);
}

/** Stops Harper by PID: the signal, then SIGKILL if it has not exited in 10 s. */
export function stopHarper(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

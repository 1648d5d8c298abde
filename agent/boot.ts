// The component's entry, loaded by Harper (config.yaml jsResource): reads agent.* config, fixes the tool scopes,
// registers the embedded backend, serves the agent's operations on the operations API port and the admin page at /agent/.
import { ToolCallLog } from './toolCalls.js';
import type { LogTable } from './recordLog.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parentPort } from 'node:worker_threads';
import { localBackend } from '../resources/models/localBackend.js';
import { Models } from '../resources/models/models.js';
import { adminListener, challengeOnRejection } from './adminPage.js';
import { mcpListener } from './mcp.js';
import { loadAgentConfig } from './agent.js';
import { ConfigStore, type SettingTable } from './configStore.js';
import { ANNOUNCE_INTERVAL_MS, Cluster, harperNodeName, operationsUrl, type NodeTable } from './cluster.js';
import { ContextLimits, type LimitTable } from './contextBudget.js';
import { ModelCallLog, type CallTable } from './modelCalls.js';
import { windowProblem } from './modelCall.js';
import { operationsListener } from './http.js';
import { fireFollowup } from './followupFiring.js';
import { recoverInterruptedRuns } from './runs.js';
import { Followups, type FollowupTable } from './followups.js';
import { hostEnvironment } from './environment.js';
import { serveThreadProbes, workerIndex } from './threadProbe.js';
import { EXPIRY_INTERVAL_MS, Lifecycle } from './lifecycle.js';
import { createOperations, type OperationsDeps, type User } from './operations.js';
import { endEventStreams, type SubscribableTable } from './sessionFeed.js';
import { SessionStore, type SessionTable, type ThreadLock } from './session.js';
import { inWriteOrder, stampAfterAll, type StampableTable } from './writeOrder.js';
import { WriteBehind } from './writeBehind.js';
import { createToolRegistry, defaultTools } from './tools/index.js';
import { operationsAs, type OperationServer } from './tools/harperOps.js';
import { DeliveryLog } from './watches/delivery.js';
import { Memory, type MemoryTable } from './memory/memory.js';
import { RUNBOOK_SYNC_MS, shippedRunbooks } from './memory/componentRunbooks.js';
import { Watcher, type WatchTable } from './watches/watcher.js';
import type { Scopes } from './tools/scopes.js';

interface HarperGlobals {
  server: OperationServer & {
    config: Record<string, any>;
    http(listener: unknown, options?: Record<string, unknown>): void;
  };
  databases: Record<string, Record<string, unknown>>;
  logger: { warn(message: string): void; info(message: string): void; error(message: string): void };
  /** Harper's transaction: writes given its context are committed together when `work` is done. */
  transaction<T>(context: object, work: () => Promise<T>): Promise<T>;
}
const { server, databases, logger, transaction } = globalThis as unknown as HarperGlobals;

const harper = server.config;
const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
const rootPath: string = harper.rootPath;
/** A table of the agent database, its writes stamped after each record's version (agent/writeOrder.ts). */
const agentTable = (name: string) => inWriteOrder(databases.agent?.[name] as unknown as StampableTable | undefined);
const warn = (m: string) => logger.warn(m);
// The boot config, with set_agent_config's persisted changes over it once they are read (before any operation is
// answered: see `ready` below), and again whenever another thread or node changes them.
const configs = new ConfigStore(loadAgentConfig(harper.agent, process.env, process.argv, warn), () => agentTable('AgentSetting') as SettingTable | undefined, warn);
const ready = configs.reload().then(
  () => configs.follow(),
  (error) => warn(`harper-agent: could not read agent settings (using the boot config): ${error}`)
);

const scopes: Scopes = {
  components: harper.componentsRoot ?? path.join(rootPath, 'components'),
  logs: harper.logging?.root ?? path.join(rootPath, 'log'),
  config: process.env.HDB_CONFIG ?? path.join(rootPath, 'harperdb-config.yaml'),
  rootPath,
};

Models.register(localBackend);
// This worker answers profile_cpu and heap_usage sent to its index (the main thread answers none).
serveThreadProbes();
const network = harper.operationsApi?.network ?? {};
const port = network.port ?? undefined;
const securePort = port ? undefined : network.securePort;
const node = harperNodeName(harper);
const cluster = new Cluster(node, operationsUrl(node, { port, securePort }), () => agentTable('AgentNode') as NodeTable | undefined);
const announce = () => cluster.announce(PACKAGE.version).catch((error) => warn(`harper-agent: could not record this node in agent.AgentNode: ${error}`));
void announce();
// Again every 30 s, from one thread: a node joined to a cluster after its boot, or whose row missed the first sync
// (seen once on a loaded machine: 60 s after add_node one node still lacked the other's row), is known to the others
// within that, and the row's updatedAt says the node's agent is alive.
if (workerIndex() === 0) setInterval(announce, ANNOUNCE_INTERVAL_MS).unref();
const sessionTable = () => databases.agent!.AgentSession;
// The call log's and the audit's records, committed with the thread's next transaction (agent/writeBehind.ts).
const behind = new WriteBehind((work) => {
  const context = {};
  return transaction(context, () => work(context));
});
const store = new SessionStore({
  sessions: () => agentTable('AgentSession') as SessionTable,
  messages: () => agentTable('AgentMessage') as SessionTable,
  node,
  // The session table's LMDB store: its lock table is shared by every worker thread (Harper's tables have no lock of
  // their own: Table.lock() is "not yet implemented" in 4.7).
  threadLock: () => threadLockOf(sessionTable()),
  together: (writes, work) => {
    const stamp = stampAfterAll(writes as unknown as { table: StampableTable; id: string }[]);
    const context = stamp === undefined ? {} : { timestamp: stamp };
    const riders = behind.take();
    const done = transaction(context, () => {
      riders.write(context);
      return work(context);
    });
    riders.settle(done);
    return done;
  },
  log: (m) => logger.warn(m),
});
// Follow-ups this node owns fire here (one timer each; firing re-reads the row under the session's lock).
const followups = new Followups(() => agentTable('AgentFollowup') as FollowupTable | undefined, node, (m) => logger.warn(m));
const calls = new ModelCallLog(() => agentTable('AgentModelCall') as CallTable | undefined, behind);
const toolCalls = new ToolCallLog(() => agentTable('AgentToolCall') as LogTable | undefined, behind);
const deliveries = new DeliveryLog(() => agentTable('AgentWatchDelivery') as LogTable | undefined);
const lifecycle = new Lifecycle(store, calls, followups, (m) => logger.info(m), toolCalls);
const deps: OperationsDeps = {
  store,
  followups,
  lifecycle,
  tools: createToolRegistry(defaultTools),
  scopes,
  databases,
  operationsAs: operationsAs(server),
  userOf: async (name) => (await Promise.resolve(server.getUser(name, null)).catch(() => undefined)) as User | undefined,
  ownOrigins: [harper.http?.port, port].filter(Boolean).flatMap((p) => [`http://127.0.0.1:${p}`, `http://localhost:${p}`]),
  limits: new ContextLimits(() => agentTable('AgentContextLimit') as LimitTable | undefined),
  calls,
  toolCalls,
  // Harper's publish: an audit-log entry every subscriber on every thread sees, the record itself untouched.
  publishLive: (id, event) => void (databases.agent!.AgentLiveText as unknown as { publish(id: string, message: unknown): unknown }).publish(id, event),
  config: () => configs.current(),
  changeConfig: (change, user, combined) => configs.set(change, user, combined),
  persistedConfig: () => configs.persisted(),
  refreshConfig: () => configs.reload(),
  instance: { version: PACKAGE.version, startedAt: new Date().toISOString() },
  environment: hostEnvironment(PACKAGE.version, node),
  cluster,
  log: (m) => logger.warn(m),
  watches: { watches: () => agentTable('AgentWatch') as WatchTable | undefined, states: () => agentTable('AgentWatchState') as WatchTable | undefined, deliveries },
  memory: new Memory(() => agentTable('AgentNote') as MemoryTable | undefined, () => agentTable('AgentRunbook') as MemoryTable | undefined, shippedRunbooks(scopes.components, warn), node),
};
const operations = afterReady(createOperations(deps));
// Watches this node owns fire from one worker thread (agent/watches/watcher.ts), once the config is in force.
if (workerIndex() === 0) {
  const watcher = new Watcher({ loop: deps, ...deps.watches!, node, log: (m) => logger.warn(m) });
  void ready.then(() => watcher.start());
}
// Runbooks the components ship (<component>/runbooks/*.md): synced into AgentRunbook by one thread per node, at boot and
// every RUNBOOK_SYNC_MS, and by list_agent_runbooks (agent/memory/componentRunbooks.ts). Every node ships the same
// files, so their writes agree.
if (workerIndex() === 0) {
  const sync = () =>
    deps.memory!.refreshShipped().then(
      (r) => r && (r.written || r.removed) && logger.info(`harper-agent: component runbooks: ${r.written} written, ${r.removed} removed`),
      (error) => warn(`harper-agent: could not sync the components' runbooks: ${error}`)
    );
  void ready.then(sync);
  setInterval(sync, RUNBOOK_SYNC_MS).unref();
}
// A window too small for any run, from harperdb-config.yaml, env or a flag (set_agent_config refuses one): said once.
if (workerIndex() === 0) void ready.then(() => windowProblem(deps, configs.current())).then((problem) => problem && warn(`harper-agent: ${problem} Runs will end saying so until it is changed.`));
followups.onDue = (f) => fireFollowup(deps, f);

/** lmdb-js's tryLock/unlock on a table's primary store, when this Harper has them. */
function threadLockOf(table: unknown): ThreadLock | undefined {
  type Store = { tryLock?: (key: string, cb: () => void) => boolean; unlock?: (key: string, version?: number) => unknown; resetReadTxn?: () => void };
  const primary = (table as { primaryStore?: Store } | undefined)?.primaryStore;
  if (typeof primary?.tryLock !== 'function' || typeof primary.unlock !== 'function') return undefined;
  return {
    tryLock: (key, released) => primary.tryLock!(key, released),
    unlock: (key) => primary.unlock!(key, undefined),
    refresh: () => primary.resetReadTxn?.(),
  };
}

/** Every operation (from the operations port or the admin page) waits until the persisted config is in force. */
function afterReady(ops: ReturnType<typeof createOperations>): ReturnType<typeof createOperations> {
  const wrapped: ReturnType<typeof createOperations> = {};
  for (const [name, op] of Object.entries(ops)) {
    wrapped[name] = { schema: op.schema, handle: async (input, user, via) => (await ready, op.handle(input, user, via)) };
  }
  return wrapped;
}

server.http(operationsListener(operations, (m) => logger.error(m)), { port, securePort });

// The agent over MCP, on Harper's HTTP port (before the admin page, which answers everything else under /agent/).
server.http(mcpListener({ operations, version: PACKAGE.version, log: (m) => logger.error(m), config: () => configs.current() }));

// The admin page on Harper's HTTP port; on the operations port too, where the CLI follows a run's events.
const admin = adminListener({
  operations,
  store,
  table: () => sessionTable() as unknown as SubscribableTable,
  liveTable: () => databases.agent!.AgentLiveText as unknown as SubscribableTable,
  pageDir: path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../admin'),
  config: () => configs.current(),
  log: (m) => logger.error(m),
});
server.http(admin);
// A wrong password: Harper answers 401 before the page's listener runs, without the challenge a browser needs to ask
// again. This one runs first, and adds it to a 401 under /agent/.
server.http(challengeOnRejection, { runFirst: true } as never);
server.http(admin, { port, securePort });
// Harper asks a worker to shut down (to restart it) with this message, then waits for its connections to end.
parentPort?.on('message', (message: { type?: string } | undefined) => {
  if (message?.type === 'shutdown') endEventStreams();
});

// A delete a crash interrupted finishes first (agent/lifecycle.ts), then interrupted runs are marked.
ready
  .then(() => lifecycle.finishInterrupted())
  .then(
    (n) => n && logger.warn(`harper-agent: finished ${n} session delete(s) a restart interrupted`),
    (error) => logger.warn(`harper-agent: could not finish interrupted deletes: ${error}`)
  )
  .then(() => recoverInterruptedRuns(store))
  .then(
    (n) => n && logger.warn(`harper-agent: marked ${n} run(s) interrupted by a restart as error`),
    (error) => logger.warn(`harper-agent: could not check for interrupted runs: ${error}`)
  )
  // Rows from before the owner+time index get their key, once, on one thread (lists read the index).
  .then(() => (workerIndex() === 0 ? store.indexOlderRows() : 0))
  .then(
    (n) => n && logger.info(`harper-agent: indexed ${n} session(s) stored before the owner+time index`),
    (error) => logger.warn(`harper-agent: could not index older sessions: ${error}`)
  )
  // Then this node's pending follow-ups (one due while Harper was down fires now), on one worker thread: a follow-up
  // has one timer (a new one is armed by the thread that scheduled it); the session's lock guards the rest.
  .then(() => (workerIndex() === 0 ? ready.then(() => followups.armAll()) : 0))
  .then(
    (n) => n && logger.info(`harper-agent: armed ${n} pending follow-up(s)`),
    (error) => logger.warn(`harper-agent: could not arm pending follow-ups: ${error}`)
  );

// Retention (agent.retainSessionsDays, agent.retainModelCallsDays): one worker thread per node runs it a minute after
// boot and hourly; it is idempotent, so every node may run it.
if (workerIndex() === 0) {
  const expire = () =>
    lifecycle.expire(configs.current()).catch((error) => logger.warn(`harper-agent: retention could not run: ${error}`));
  setTimeout(expire, 60_000).unref();
  setInterval(expire, EXPIRY_INTERVAL_MS).unref();
}

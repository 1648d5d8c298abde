// A Harper cluster on this machine for the integration tests: plain Harper 4.7.29 nodes, each its own root, HOME and
// ports, named by a loopback address (127.0.0.2, 127.0.0.3, ...: Linux routes all of 127/8 to loopback; not
// 127.0.0.1, which every node's own certificate names), the packed
// agent deployed on each with deploy_component, then joined with add_node so the agent database replicates.
import { readFileSync, writeFileSync } from 'node:fs';
import { freePort } from '../scripts/harper.js';
import { bootHarper, type TestHarper } from './harness.js';
import { packedTarball } from './pack.js';

export interface ClusterNode {
  name: string;
  h: TestHarper;
  replicationSecurePort: number;
}

const THREADS = 2;

/** Boots one node: a plain Harper with production defaults and two worker threads, named `name`. */
async function bootNode(name: string, env: Record<string, string>): Promise<ClusterNode> {
  const replicationSecurePort = await freePort();
  const h = await bootHarper({
    component: null,
    mode: 'prod',
    env: { THREADS_COUNT: String(THREADS), REPLICATION_HOSTNAME: name, REPLICATION_SECUREPORT: String(replicationSecurePort), REPLICATION_URL: `wss://${name}:${replicationSecurePort}`, ...env },
  });
  return { name, h, replicationSecurePort };
}

/** Deploys the agent on a node and waits for both of its new threads. Harper 4.7.29 now and then answers a payload
 * deploy with 500 "did not load any modules" (seen with two deploys at once on this 2-core machine, the tarball's
 * `package/` folder left unmoved): one retry. */
async function deploy(node: ClusterNode, payload: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const since = Date.now();
    const deployed = await node.h.op({ operation: 'deploy_component', project: 'harper-agent', payload, restart: true });
    if (deployed.status === 200) {
      if (deployed.body.message !== 'Successfully deployed: harper-agent, restarting HarperDB') throw new Error(`deploy_component on ${node.name}: ${JSON.stringify(deployed.body)}`);
      return void (await node.h.waitForAgent(since, THREADS));
    }
    if (attempt === 2 || !/did not load any modules/.test(JSON.stringify(deployed.body))) {
      throw new Error(`deploy_component on ${node.name}: ${deployed.status} ${JSON.stringify(deployed.body)}`);
    }
  }
}

/** Waits until `check` passes (it throws until then), or fails with its last error. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * `count` nodes (127.0.0.2, 127.0.0.3, ...), the agent deployed on each from the packed tarball (a payload: each
 * node gets its own copy), node 1 joined to every other with add_node; ready when every node holds every node's
 * AgentNode row (each writes its own at boot): a write that crossed, not a `connected` flag, which flaps.
 */
export async function bootCluster(count: number, env: Record<string, string> = {}): Promise<ClusterNode[]> {
  let at = Date.now();
  const phases: string[] = [];
  const phase = (name: string) => {
    phases.push(`${name} ${((Date.now() - at) / 1000).toFixed(1)} s`);
    at = Date.now();
  };
  const payload = readFileSync(await packedTarball()).toString('base64');
  phase('pack');
  const booted = await Promise.allSettled(Array.from({ length: count }, (_, i) => bootNode(`127.0.0.${i + 2}`, env)));
  phase('boot');
  const nodes = booted.flatMap((b) => (b.status === 'fulfilled' ? [b.value] : []));
  try {
    const failed = booted.find((b) => b.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    // At once: each deploy is mostly Harper's own npm install of the component; `deploy` retries the one failure
    // two deploys at once were seen to cause.
    await Promise.all(nodes.map((node) => deploy(node, payload)));
    phase('deploy');
    await join(nodes);
    phase('join');
    console.log(`      cluster of ${count} ready: ${phases.join(', ')}`);
    return nodes;
  } catch (error) {
    // Never leave a node running: the caller gets no handle to stop it.
    await stopCluster(nodes);
    throw error;
  }
}

async function join(nodes: ClusterNode[]): Promise<void> {
  if (process.env.CLUSTER_INFO) writeFileSync(process.env.CLUSTER_INFO, JSON.stringify(nodes.map((n) => ({ name: n.name, ops: n.h.harper.opsUrl, root: n.h.rootPath, pid: n.h.harper.pid }))));
  const [first, ...others] = nodes;
  for (const other of others) {
    const added = await first!.h.op({
      operation: 'add_node',
      url: `wss://${other.name}:${other.replicationSecurePort}`,
      verify_tls: false,
      // Used once, to have the other node sign this node's certificate; from then on the nodes know each other by
      // certificate (verify_tls: false only because each node's own CA signed its server certificate).
      authorization: other.h.harper.admin,
    });
    if (added.status !== 200) throw new Error(`add_node ${other.name}: ${added.status} ${JSON.stringify(added.body)}`);
  }
  // A healthy join shows every row within a few seconds even under load.
  for (const node of nodes) await ensureReplicating(node, nodes, () => holdsEveryRow(node, nodes, 0).then(() => true, () => false));
}

/**
 * Waits until `ready` passes on `node`. Harper 4.7.29 now and then leaves a node's `agent` database socket unconnected
 * (after add_node, and after a restart: `connected: false`, nothing received, while the other node received from it;
 * seen in about a third of the joins under load since deploys got fast). A link that never came up is told from a
 * slow one by cluster_status: down at two looks 2 s apart, from 3 s on; then the node is restarted, which connects it
 * again from the routes it stored.
 */
export async function ensureReplicating(node: ClusterNode, nodes: ClusterNode[], ready: () => Promise<boolean>): Promise<void> {
  if (await readyOrStuck(node, nodes, ready)) return;
  if (agentSocketDown((await clusterStatus(nodes)).get(node.name))) {
    console.log(`      ${node.name}: its agent database socket did not connect; restarting it`);
    await node.h.stop('SIGTERM', true);
    const since = Date.now();
    node.h = await node.h.restart();
    await node.h.waitForAgent(since, THREADS);
  }
  await eventually(async () => {
    if (!(await ready())) throw new Error(`${node.name} is not replicating the agent database`);
  }, 60_000, 250).catch(async (error) => {
    throw withStatus(error, await clusterStatus(nodes));
  });
}

/** Within 10 s: true once `ready` passes; false when the node's agent socket is still down 2 s after it was first seen
 * down (from 3 s on), or at 10 s. */
async function readyOrStuck(node: ClusterNode, nodes: ClusterNode[], ready: () => Promise<boolean>): Promise<boolean> {
  const start = Date.now();
  let downSince = 0;
  while (Date.now() - start < 10_000) {
    if (await ready()) return true;
    if (Date.now() - start >= 3_000) {
      const down = agentSocketDown((await clusterStatus(nodes)).get(node.name));
      if (!down) downSince = 0;
      else if (!downSince) downSince = Date.now();
      else if (Date.now() - downSince >= 2_000) return false;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

/** Whether a node's `agent` database socket to every other node is connected. */
export async function agentSocketUp(node: ClusterNode, nodes: ClusterNode[]): Promise<boolean> {
  const status = (await clusterStatus(nodes)).get(node.name);
  const sockets = (status?.connections ?? []).flatMap((c) => c.database_sockets ?? []).filter((d) => d.database === 'agent');
  return sockets.length === nodes.length - 1 && sockets.every((d) => d.connected === true);
}

/** Waits until `node` holds every node's AgentNode row. */
function holdsEveryRow(node: ClusterNode, nodes: ClusterNode[], timeoutMs: number): Promise<void> {
  return eventually(async () => {
    const r = await node.h.op({ operation: 'search_by_value', database: 'agent', table: 'AgentNode', search_attribute: 'name', search_value: '*', get_attributes: ['name'] });
    const names = (r.body as { name: string }[]).map((x) => x.name).sort();
    if (names.join() !== nodes.map((n) => n.name).join()) throw new Error(`${node.name} holds AgentNode rows ${names.join(', ')}`);
  }, timeoutMs, 250);
}

type ClusterStatus = { connections?: { database_sockets?: { database: string; connected: boolean }[] }[] };

/** What each node says of its connections: the one thing that tells a slow sync from a link that never came up. */
export async function clusterStatus(nodes: ClusterNode[]): Promise<Map<string, ClusterStatus>> {
  return new Map(await Promise.all(nodes.map(async (n) => [n.name, (await n.h.op({ operation: 'cluster_status' })).body as ClusterStatus] as const)));
}

function agentSocketDown(status: ClusterStatus | undefined): boolean {
  return !!status?.connections?.some((c) => c.database_sockets?.some((d) => d.database === 'agent' && d.connected === false));
}

export function withStatus(error: unknown, status: Map<string, ClusterStatus>): Error {
  return new Error(`${(error as Error).message}\ncluster_status:\n${[...status].map(([name, s]) => `${name}: ${JSON.stringify(s)}`).join('\n')}`);
}

export async function stopCluster(nodes: ClusterNode[] | undefined): Promise<void> {
  await Promise.all((nodes ?? []).map((n) => n.h.stop()));
}

// This node in a Harper cluster: its name (Harper's node name), where its operations API answers, and how an
// operation on a session owned by another node is sent to that node. A session is run, and its transcript written,
// only by the node that owns it; every node can read it (the agent database replicates).
import os from 'node:os';
import { HttpError } from './operations.js';

/** Marks a request one node sent another: it is answered where it lands, never sent on again. */
export const FORWARDED_HEADER = 'x-harper-agent-forwarded-by';
const FORWARD_TIMEOUT_MS = 30_000;

/** How the caller reached this node: what a forwarded request carries on. */
export interface Via {
  authorization?: string;
  forwardedBy?: string;
}

export interface NodeTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
}

/** Harper's name for this node: `replication.hostname` (env REPLICATION_HOSTNAME), as Harper itself decides it. */
export function harperNodeName(harperConfig: Record<string, any>): string {
  const replication = harperConfig.replication ?? {};
  if (replication.hostname) return String(replication.hostname);
  if (replication.url) return new URL(String(replication.url)).hostname;
  return os.hostname();
}

/** This node's operations API as other nodes reach it: its node name (which they already reach for replication)
 * and its configured port. */
export function operationsUrl(node: string, network: { port?: number; securePort?: number }): string {
  const host = node.includes(':') ? `[${node}]` : node;
  return network.port ? `http://${host}:${network.port}/` : `https://${host}:${network.securePort}/`;
}

/** How often a node records itself in agent.AgentNode again (agent/boot.ts). */
export const ANNOUNCE_INTERVAL_MS = 30_000;

export class Cluster {
  constructor(readonly node: string, private readonly url: string, private readonly table: () => NodeTable | undefined) {}

  /** Records where this node's operations answer (AgentNode replicates, so every node learns it). */
  async announce(version: string): Promise<void> {
    await this.table()?.put(this.node, { name: this.node, operationsUrl: this.url, version, updatedAt: new Date() });
  }

  /** Sends an operation to the node that owns its session, with the caller's credentials; answers what that node
   * answered (status and body), or 503 when it cannot be reached. */
  async forward(owner: string, input: Record<string, unknown>, via: Via): Promise<unknown> {
    const what = `session ${JSON.stringify(input.session_id)} belongs to node ${owner}`;
    if (via.forwardedBy) throw new HttpError(409, `${what}, not to ${this.node}, which ${via.forwardedBy} sent this request to`);
    const row = (await this.table()?.get(owner)) as { operationsUrl?: string } | undefined;
    if (!row?.operationsUrl) throw new HttpError(503, `${what}, which has not recorded its operations URL in agent.AgentNode: is the agent running there?`);
    const headers: Record<string, string> = { 'content-type': 'application/json', [FORWARDED_HEADER]: this.node };
    if (via.authorization) headers.authorization = via.authorization;
    let response: Response;
    try {
      response = await fetch(row.operationsUrl, { method: 'POST', headers, body: JSON.stringify(input), signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
      throw new HttpError(503, `${what}, whose operations API at ${row.operationsUrl} did not answer (${cause}). Any node can read the session; to run or cancel it, bring ${owner} back, or start a new session here.`);
    }
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    if (response.status === 200) return body;
    const message = (body as { error?: string })?.error ?? text;
    throw new HttpError(response.status, `node ${owner}: ${message}`);
  }
}

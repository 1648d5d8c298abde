// A tool is its schema, its handler and its result shape in one place (see fsTools.ts). This is the shared shape.
import type { Followup } from '../followups.js';
import type { RunMemory } from './memoryTools.js';
import type { Scopes } from './scopes.js';

export interface ToolContext {
  scopes: Scopes;
  /** agent.maxToolResultBytes in force for this run: tools size their pages from it. */
  maxResultBytes: number;
  signal: AbortSignal;
  /** Harper's `databases`, for the data tools. */
  databases?: Record<string, unknown>;
  /** Runs a Harper operation as the user the run acts for (the operation tools); absent: no user, no operations. */
  operation?: (body: Record<string, unknown>) => Promise<unknown>;
  /** Origins http_fetch may reach (agent.fetchAllow, or this Harper's own ports on loopback). */
  fetchAllow?: string[];
  /** Harper operations that change the instance the operator allows (agent.allowOperations); each waits for approval. */
  allowOperations?: string[];
  /** Stores a follow-up for the run's session (schedule_followup); absent: follow-ups are not available. */
  scheduleFollowup?: (args: { delaySeconds?: unknown; at?: unknown; message: string }) => Promise<Followup>;
  /** The agent's memory, with the run's user and session (remember, search_memory, read_runbook). */
  memory?: RunMemory;
}

export interface Tool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** Destructive tools (or calls, when a function of the call's arguments: http_fetch's POST) pause the run for
   * approve_agent_action unless agent.autoApprove. */
  destructive?: boolean | ((args: Record<string, unknown>) => boolean);
  /** What the cap's marker tells the model to do when this tool's result is cut. */
  advice?: string;
  handler(args: Record<string, unknown>, ctx: ToolContext): Promise<unknown>;
  /** Why this call can never run (checked before a destructive call waits for approval), or null. */
  refuse?(args: Record<string, unknown>, ctx: ToolContext): string | null;
  /** What the tool needs to run at all; without it the tool is not offered (registry.specs). */
  needs?: keyof Capabilities;
  /** The description a small window's request carries (agent/context/window.ts): the first sentence when unset; a
   * paging tool's says how to page. */
  brief?: string;
  /** Offered even in the smallest window's tool list (the file tools, the log, the config, replication). */
  core?: boolean;
}

/** What a run can do: a tool that needs what the run lacks is not offered (its spec would cost every request its
 * bytes and could only fail). */
export interface Capabilities {
  /** Harper's operations, as agent.user or the session's owner. */
  operations: boolean;
  /** Harper's databases (describe_tables, search_table). */
  data: boolean;
  /** Follow-ups can be stored and agent.maxFollowups is not 0. */
  followups: boolean;
  /** The agent's memory (notes and runbooks: agent/memory/memory.ts) is there. */
  memory?: boolean;
}

/** A refusal or bad input the model can act on: its message becomes the error observation. */
export class ToolError extends Error {
  override readonly name = 'ToolError';
}

/** Whether this call waits for the operator's approval. */
export function isDestructive(tool: Tool | undefined, args: Record<string, unknown>): boolean {
  return typeof tool?.destructive === 'function' ? tool.destructive(args) : tool?.destructive === true;
}

// What a run needs from its host (the store, tools, scopes, config, logs), and the error a run ends with for the operator.
import type { ToolCallLog } from './toolCalls.js';
import type { User } from './operations.js';
import type { ContextLimits } from './contextBudget.js';
import type { HostEnvironment } from './environment.js';
import type { Followups } from './followups.js';
import type { Memory } from './memory/memory.js';
import type { ModelCallLog } from './modelCalls.js';
import type { LiveEvent } from './sessionFeed.js';
import type { SessionStore } from './session.js';
import type { ToolRegistry } from './tools/index.js';
import type { Scopes } from './tools/scopes.js';
import type { AgentConfig } from './agent.js';

export interface LoopDeps {
  store: SessionStore;
  /** When this thread's agent loaded (default: when this module did): follow-ups wait for their backend until
   * BACKEND_LOAD_GRACE_MS after it. */
  loadedAt?: number;
  tools: ToolRegistry;
  scopes: Scopes;
  /** Harper's `databases` (absent in unit tests that need no data tools). */
  databases?: Record<string, unknown>;
  /** Runs Harper operations as a user (absent in unit tests that need no operation tools). */
  operationsAs?: (username: string) => (body: Record<string, unknown>) => Promise<unknown>;
  /** Harper's user of that name (its role decides the run's file scopes: agent/access.ts); absent: every scope. */
  userOf?: (username: string) => Promise<User | undefined>;
  /** This Harper's own HTTP and operations origins on loopback: what http_fetch may reach when agent.fetchAllow is unset. */
  ownOrigins?: string[];
  /** What provider rejections taught about context limits (pre-flight budget). */
  limits?: ContextLimits;
  /** The model-call log (AgentModelCall): one record per provider request; the spending limits read it. */
  calls?: ModelCallLog;
  /** The audit of tool calls (agent/toolCalls.ts); absent, nothing is audited. */
  toolCalls?: ToolCallLog;
  /** Shows a streaming call's pieces to the session's followers (AgentLiveText's publish); never stored. */
  publishLive?: (sessionId: string, event: LiveEvent) => void;
  /** The config in force; read once when a run starts. */
  config: () => AgentConfig;
  /** Scheduled follow-ups (AgentFollowup): schedule_followup stores them, this node fires its own (absent: none). */
  followups?: Followups;
  /** Notes and runbooks (agent/memory/memory.ts): recalled into prompts, searched and written by the memory tools
   * (absent: no memory). */
  memory?: Memory;
  /** Where the agent runs: Harper's version, the node, threads, OS, Node, the agent's version (absent in unit tests). */
  environment?: HostEnvironment;
  log?: (message: string) => void;
}

/** A run's end that the operator can act on: becomes lastError. */
export class RunError extends Error {}

export const CONTEXT_ADVICE = 'shorten the prompt, or start a new session';

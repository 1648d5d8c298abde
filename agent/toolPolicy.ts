// What each tool may do in a run (DESIGN.md "A policy per tool"): `allow` runs it, `ask` pauses the run for
// approve_agent_action (approved for one call, or for the rest of the session), `deny` leaves it out of the request
// (a call to it anyway is refused). agent.toolPolicy gives, by Harper role name or "*" for every role, a policy per
// tool or the preset "readOnly" (every tool that writes or changes anything denied). Which wins: the role's own entry,
// then "*", then the default: a tool that writes asks (allows, with agent.autoApprove), any other is allowed.
import type { AgentConfig } from './agent.js';
import { isDestructive, type Tool } from './tools/types.js';

export type Policy = 'allow' | 'ask' | 'deny';
export type RolePolicy = 'readOnly' | Record<string, Policy>;

/** A tool's policy for a role; `args` for a call (a tool whose writing depends on its arguments: http_fetch's POST),
 * none for the tool list, where such a tool counts as reading. */
export function policyOf(config: Pick<AgentConfig, 'toolPolicy' | 'autoApprove'>, role: string | undefined, tool: Tool, args?: Record<string, unknown>): Policy {
  const writes = args ? isDestructive(tool, args) : tool.destructive === true;
  for (const entry of [role !== undefined ? config.toolPolicy?.[role] : undefined, config.toolPolicy?.['*']]) {
    if (entry === 'readOnly') return writes ? 'deny' : 'allow';
    const own = entry?.[tool.name];
    if (own) return own;
  }
  return writes && !config.autoApprove ? 'ask' : 'allow';
}

/** The refusal a denied call gets as its observation. */
export function deniedMessage(tool: string, role: string | undefined): string {
  return `${tool} is denied here by agent.toolPolicy${role ? ` (role ${role})` : ''}: use another tool, or ask the operator`;
}

/** The policy in force for a role, tool by tool, as get_agent_status and the admin page show it. */
export function policiesFor(config: Pick<AgentConfig, 'toolPolicy' | 'autoApprove'>, role: string | undefined, tools: Tool[]): Record<string, Policy> {
  return Object.fromEntries(tools.map((tool) => [tool.name, policyOf(config, role, tool)]));
}

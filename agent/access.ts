// Who may use the agent, and whose sessions they see (DESIGN.md "A team uses the agent"). A super_user may do
// everything, as before. A user whose Harper role is named in agent.roles may use the agent's operations, the CLI, the
// admin page and MCP, on their own sessions only: another user's session answers 404 exactly as an unknown one does,
// and lists hold only their own. The agent's own config, retention and learned limits stay super_user only. Their
// file tools open the scopes agent.roleScopes gives their role (`logs` when it names none); their Harper operation tools
// run with their own permissions (tools/harperOps.ts), as everyone's do.
import type { AgentConfig } from './agent.js';
import { HttpError, type User } from './operations.js';
import { SCOPE_NAMES, type ScopeName, type Scopes } from './tools/scopes.js';

/** Operations on the agent itself, not on a user's sessions: super_user only. */
export const ADMIN_OPERATIONS: ReadonlySet<string> = new Set(['get_agent_config', 'set_agent_config', 'expire_agent_data', 'forget_agent_context_limits']);

export const isSuperUser = (user: User | undefined): boolean => user?.role?.permission?.super_user === true;

/** The scopes a role's file tools open when agent.roleScopes does not name it. */
export const DEFAULT_ROLE_SCOPES: readonly ScopeName[] = ['logs'];

/** Whether `user` may use the agent at all: a super_user, or a role agent.roles names. */
export function mayUse(user: User | undefined, config: Pick<AgentConfig, 'roles'>): boolean {
  if (isSuperUser(user)) return true;
  const role = user?.role?.role;
  return !!role && (config.roles ?? []).includes(role);
}

/** 401 without a user, 403 for one who may not use `what` (an admin operation needs a super_user). */
export function authorize(user: User | undefined, what: string, config: Pick<AgentConfig, 'roles'>): User {
  if (!user) throw new HttpError(401, 'authentication required: send Basic credentials or an operation token');
  if (ADMIN_OPERATIONS.has(what) && !isSuperUser(user)) throw new HttpError(403, `${what} needs a super_user role`);
  if (!mayUse(user, config)) {
    throw new HttpError(403, `${what} needs a super_user role or a role named in agent.roles${user.role?.role ? ` (the role ${user.role.role} is not)` : ''}`);
  }
  return user;
}

/** Whether `user` sees a session of `owner`: a super_user sees every session, anyone else only their own. */
export const sees = (user: User | undefined, owner: string | null | undefined): boolean => isSuperUser(user) || (!!user?.username && owner === user.username);

/** The scopes a run's file tools open for the user it acts for: all for a super_user (or no user: a follow-up of an
 * older session); else those agent.roleScopes gives the user's role, each other one closed with a reason. */
export function scopesFor(scopes: Scopes, config: Pick<AgentConfig, 'roleScopes'>, user: User | undefined): Scopes {
  if (!user || isSuperUser(user)) return scopes;
  const role = user.role?.role ?? '(none)';
  const open = config.roleScopes?.[role] ?? DEFAULT_ROLE_SCOPES;
  const closed: Partial<Record<ScopeName, string>> = {};
  for (const name of SCOPE_NAMES) if (!open.includes(name)) closed[name] = `the ${name} scope is not open to role ${role} (agent.roleScopes opens ${open.join(', ') || 'none'} to it)`;
  return { ...scopes, closed };
}

/** The scopes `user`'s file tools may open, by name (get_agent_status shows them). */
export function openScopes(config: Pick<AgentConfig, 'roleScopes'>, user: User | undefined, scopes: Scopes): ScopeName[] {
  const closed = scopesFor(scopes, config, user).closed ?? {};
  return SCOPE_NAMES.filter((name) => !closed[name]);
}

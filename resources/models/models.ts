// The backend registry. Backend packages (components/<provider>) register into it when Harper loads them, the loop
// looks a backend up when a run starts. Harper loads the agent and its backends as separate components in one realm,
// in no fixed order, and a backend imports nothing of the agent at run time: so the registry is a Map on globalThis
// under REGISTRY_KEY, created by whichever side comes first (see resources/models/types.d.ts).
import type { BackendRegistration } from './types.js';

export type { BackendRegistration };

/** The key every backend package spells out as Symbol.for('harper-agent.models'). */
export const REGISTRY_KEY = Symbol.for('harper-agent.models');

function registry(): Map<string, BackendRegistration> {
  const g = globalThis as Record<symbol, unknown>;
  return (g[REGISTRY_KEY] ??= new Map()) as Map<string, BackendRegistration>;
}

export const Models = {
  register(registration: BackendRegistration): void {
    registry().set(registration.provider, registration);
  },
  get(provider: string): BackendRegistration | undefined {
    return registry().get(provider);
  },
  providers(): string[] {
    return [...registry().keys()].sort();
  },
  unregister(provider: string): void {
    registry().delete(provider);
  },
};

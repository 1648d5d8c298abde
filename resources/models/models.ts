// The backend registry. Sibling components (components/<provider>) register into it at load time,
// the loop looks a backend up when a run starts. Harper loads every component into the same realm,
// but each may hold its own copy of this module, so the registry lives on globalThis.
import type { BackendOptions, ModelBackend } from './types.js';

export interface BackendRegistration {
  provider: string;
  defaultModel: string;
  create(options: BackendOptions): ModelBackend;
}

const KEY = Symbol.for('harper-agent.models');
type Registry = Map<string, BackendRegistration>;
const registry: Registry = ((globalThis as Record<symbol, unknown>)[KEY] as Registry) ?? new Map();
(globalThis as Record<symbol, unknown>)[KEY] = registry;

export const Models = {
  register(registration: BackendRegistration): void {
    registry.set(registration.provider, registration);
  },
  get(provider: string): BackendRegistration | undefined {
    return registry.get(provider);
  },
  providers(): string[] {
    return [...registry.keys()].sort();
  },
  unregister(provider: string): void {
    registry.delete(provider);
  },
};

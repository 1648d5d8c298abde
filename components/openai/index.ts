// Harper loads this package as a component of the agent (the root config.yaml names it): it registers the
// OpenAI backend in the agent's registry, a Map on globalThis that whichever of the two loads first creates.
import type { BackendRegistration } from '../../resources/models/types.js';
import { OPENAI_DEFAULT_MODEL, OpenAIBackend } from './backend.js';

const registry = ((globalThis as Record<symbol, unknown>)[Symbol.for('harper-agent.models')] ??= new Map()) as Map<string, BackendRegistration>;
registry.set('openai', { provider: 'openai', defaultModel: OPENAI_DEFAULT_MODEL, create: (options) => new OpenAIBackend(options) });

// Harper loads this package as a component of the agent (the root config.yaml names it): it registers the
// Ollama backend in the agent's registry, a Map on globalThis that whichever of the two loads first creates.
import type { BackendRegistration } from '../../resources/models/types.js';
import { OLLAMA_DEFAULT_MODEL, OllamaBackend } from './backend.js';

const registry = ((globalThis as Record<symbol, unknown>)[Symbol.for('harper-agent.models')] ??= new Map()) as Map<string, BackendRegistration>;
registry.set('ollama', { provider: 'ollama', defaultModel: OLLAMA_DEFAULT_MODEL, create: (options) => new OllamaBackend(options) });

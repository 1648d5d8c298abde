// What in the config in force cannot work, said before a prompt fails on it: get_agent_status and set_agent_config
// answer these as `warnings`, and the admin page shows them. Each names the key to set.
import { Models } from '../resources/models/models.js';
import type { AgentConfig } from './agent.js';

/** Providers whose hosted API needs a key, and the environment variable their SDK reads it from. */
const KEY_VARIABLES: Record<string, string> = { openai: 'OPENAI_API_KEY', anthropic: 'ANTHROPIC_API_KEY' };

export function configWarnings(config: Pick<AgentConfig, 'provider' | 'apiKey' | 'baseUrl' | 'model'>, env: NodeJS.ProcessEnv = process.env): string[] {
  const warnings: string[] = [];
  const registered = Models.get(config.provider);
  if (!registered) warnings.push(`agent.provider ${JSON.stringify(config.provider)} is not registered (available: ${Models.providers().join(', ')}): prompts fail until it is set to one of them`);
  const variable = KEY_VARIABLES[config.provider];
  // A base URL of one's own (a proxy, a compatible local server) may need no key; the provider's own API does.
  if (variable && !config.apiKey && !env[variable] && !config.baseUrl) {
    warnings.push(`agent.provider is ${config.provider} but no API key is set: set agent.apiKey (set_agent_config) or ${variable} in Harper's environment, or agent.baseUrl for a compatible server`);
  }
  if (config.provider === 'bedrock' && !env.AWS_REGION && !env.AWS_DEFAULT_REGION && !(config as { region?: string }).region) {
    warnings.push('agent.provider is bedrock but no region is set: set agent.region or AWS_REGION');
  }
  return warnings;
}

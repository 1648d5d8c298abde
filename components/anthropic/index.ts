// Harper loads this sibling component (components/anthropic/config.yaml): it registers the Anthropic backend.
import { Models } from '../../resources/models/models.js';
import { ANTHROPIC_DEFAULT_MODEL, AnthropicBackend } from './backend.js';

Models.register({ provider: 'anthropic', defaultModel: ANTHROPIC_DEFAULT_MODEL, create: (options) => new AnthropicBackend(options) });

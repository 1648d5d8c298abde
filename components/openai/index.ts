// Harper loads this sibling component (components/openai/config.yaml): it registers the OpenAI backend.
import { Models } from '../../resources/models/models.js';
import { OPENAI_DEFAULT_MODEL, OpenAIBackend } from './backend.js';

Models.register({ provider: 'openai', defaultModel: OPENAI_DEFAULT_MODEL, create: (options) => new OpenAIBackend(options) });

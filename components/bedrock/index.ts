// Harper loads this sibling component (components/bedrock/config.yaml): it registers the Bedrock backend.
import { Models } from '../../resources/models/models.js';
import { BEDROCK_DEFAULT_MODEL, BedrockBackend } from './backend.js';

Models.register({ provider: 'bedrock', defaultModel: BEDROCK_DEFAULT_MODEL, create: (options) => new BedrockBackend(options) });

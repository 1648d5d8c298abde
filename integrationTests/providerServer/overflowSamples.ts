// Error bodies real OpenAI-compatible servers answer when a request is longer than the model's context window
// (and some they answer for other reasons, which must not be taken for it). The classifier's unit tests and the
// per-server integration tests both use them.

export interface ErrorSample {
  server: string;
  status: number;
  body: unknown;
}

export const OVERFLOW_SAMPLES: ErrorSample[] = [
  {
    server: 'OpenAI',
    status: 400,
    body: { error: { message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } },
  },
  {
    server: 'OpenRouter',
    status: 400,
    body: { error: { message: "This endpoint's maximum context length is 131072 tokens. However, you requested about 140211 tokens (136115 of text input, 4096 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.", code: 400, metadata: { provider_name: null } } },
  },
  {
    server: 'vLLM (max model length)',
    status: 400,
    body: { object: 'error', message: "This model's maximum context length is 32768 tokens. However, you requested 40960 tokens (36864 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.", type: 'BadRequestError', param: null, code: 400 },
  },
  {
    server: 'vLLM (input prompt)',
    status: 400,
    body: { object: 'error', message: 'Input prompt (36864 tokens) is too long and exceeds limit of 32768', type: 'BadRequestError', param: null, code: 400 },
  },
  {
    server: 'vLLM (longer than the maximum model length)',
    status: 400,
    body: { object: 'error', message: 'The decoder prompt (length 36864) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.', type: 'BadRequestError', param: null, code: 400 },
  },
  {
    server: 'llama.cpp server',
    status: 400,
    body: { error: { code: 400, message: 'the request exceeds the available context size, try increasing it', type: 'exceed_context_size_error', n_prompt_tokens: 9210, n_ctx: 8192 } },
  },
  {
    server: 'LM Studio',
    status: 400,
    body: { error: 'Trying to keep the first 9210 tokens when context the overflows. However, the model is loaded with context length of only 8192 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input', message: 'The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input' },
  },
  {
    server: 'Groq',
    status: 400,
    body: { error: { message: 'Please reduce the length of the messages or completion.', type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } },
  },
  {
    server: 'Mistral',
    status: 400,
    body: { object: 'error', message: 'Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length', type: 'invalid_request_message_error', param: null, code: '3051' },
  },
  {
    server: 'Gemini (OpenAI-compatible endpoint)',
    status: 400,
    body: [{ error: { code: 400, message: 'The input token count (1310720) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' } }],
  },
  {
    server: 'Anthropic (through an OpenAI-compatible proxy)',
    status: 400,
    body: { error: { message: JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` and try again' } }), type: 'invalid_request_error' } },
  },
  {
    server: 'xAI',
    status: 400,
    body: { code: 'Client specified an invalid argument', error: "This model's maximum prompt length is 131072 but the request contains 136973 tokens." },
  },
  {
    server: 'GitHub Copilot',
    status: 400,
    body: { error: { message: 'prompt token count of 138898 exceeds the limit of 64000', code: 'model_max_prompt_tokens_exceeded' } },
  },
  {
    server: 'GitHub Copilot (no code)',
    status: 400,
    body: { error: { message: 'prompt token count of 93854 exceeds the limit of 90000', param: '', code: '', type: '' } },
  },
  {
    server: 'Moonshot (Kimi)',
    status: 400,
    body: { error: { message: 'Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)', type: 'invalid_request_error' } },
  },
  {
    server: 'MiniMax',
    status: 400,
    body: { type: 'error', error: { type: 'bad_request_error', message: 'invalid params, context window exceeds limit (2013)', http_code: '400' }, request_id: '06340988ef34a8f048d8267af65d3228' },
  },
  {
    server: 'LiteLLM proxy',
    status: 400,
    body: { error: { message: 'litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: VertexAIException - Request payload size exceeds the limit', type: null, param: null, code: '400' } },
  },
  {
    server: 'Cerebras',
    status: 400,
    body: { message: 'Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000', type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' },
  },
  {
    server: 'Cerebras (no code)',
    status: 400,
    body: { message: 'Please reduce the length of the messages or completion. Current length is 69553 while limit is 65536', type: 'invalid_request_error' },
  },
  {
    server: 'DeepSeek',
    status: 400,
    body: { error: { message: "This model's maximum context length is 65536 tokens. However, you requested 70123 tokens (66027 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.", type: 'invalid_request_error', param: null, code: 'invalid_request_error' } },
  },
  {
    server: 'Azure OpenAI',
    status: 400,
    body: { error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9211 tokens. Please reduce the length of the messages.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } },
  },
  {
    server: 'Together (TGI)',
    status: 400,
    body: { error: { message: 'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32769. Given: 33000 `inputs` tokens and 512 `max_new_tokens`', type: 'invalid_request_error', param: 'max_tokens', code: null } },
  },
  {
    server: 'Hugging Face TGI',
    status: 422,
    body: { error: 'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`', error_type: 'validation' },
  },
  {
    server: 'Fireworks',
    status: 400,
    body: { error: { object: 'error', type: 'invalid_request_error', message: 'The prompt is too long: 140000, model maximum context length: 131072' } },
  },
  {
    server: 'Vertex AI (Gemini)',
    status: 400,
    body: { error: { code: 400, message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' } },
  },
  {
    server: 'Bedrock (Titan, through a gateway)',
    status: 400,
    body: { message: 'Malformed input request: Too many input tokens. Max input tokens: 8192, request input token count: 9000' },
  },
  {
    server: 'Writer (Palmyra)',
    status: 400,
    body: { errors: [{ description: 'Total number of tokens (prompt+generation) exceeded the service limit of 2048 tokens. Please make the prompt shorter or reduce the number of tokens to generate.', key: 'invalid_request' }] },
  },
];

export const NOT_OVERFLOW_SAMPLES: ErrorSample[] = [
  { server: 'OpenAI rate limit (tokens per minute)', status: 429, body: { error: { message: 'Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 4000. Please try again in 6s.', type: 'tokens', param: null, code: 'rate_limit_exceeded' } } },
  { server: 'Groq rate limit as a 400-style body', status: 429, body: { error: { message: 'Rate limit reached for model llama-3.3 on tokens per minute (TPM): Limit 6000, Requested 9000. Please reduce the length of the messages or completion.', type: 'tokens', code: 'rate_limit_exceeded' } } },
  { server: 'OpenAI bad key', status: 401, body: { error: { message: 'Incorrect API key provided: sk-xx. You can find your API key at https://platform.openai.com/account/api-keys.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } } },
  { server: 'OpenRouter no credits', status: 403, body: { error: { message: 'Key limit exceeded: this request would exceed the maximum context length budget of your key', code: 403 } } },
  { server: 'vLLM crash', status: 500, body: { object: 'error', message: 'Internal server error: maximum context length is 4096 tokens exceeded in KV cache', type: 'InternalServerError', code: 500 } },
  { server: 'overloaded', status: 503, body: { error: { message: 'The server is overloaded, please reduce the length of the messages or completion and retry later', type: 'server_error' } } },
  { server: 'ordinary 400', status: 400, body: { error: { message: "Invalid value for 'tools[0].function.name': string does not match pattern.", type: 'invalid_request_error', param: 'tools[0].function.name', code: 'invalid_value' } } },
  { server: 'a 400 that mentions a per-minute token quota', status: 400, body: { error: { message: 'Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000. The input or output tokens must be reduced in order to run successfully.', type: 'tokens', code: 'rate_limit_exceeded' } } },
  { server: 'Anthropic output limit (max_tokens over the model maximum)', status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4' } } },
  { server: 'OpenAI max_tokens too large', status: 400, body: { error: { message: 'max_tokens is too large: 50000. This model supports at most 16384 completion tokens, whereas you provided 50000.', type: 'invalid_request_error', param: 'max_tokens', code: null } } },
  { server: 'OpenAI too many messages', status: 400, body: { error: { message: "Invalid 'messages': array too long. Expected an array with maximum length 2048, but got an array with length 3000 instead.", type: 'invalid_request_error', param: 'messages', code: 'array_above_max_length' } } },
  { server: 'Anthropic credit balance', status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.' } } },
  { server: 'nginx header too large', status: 400, body: '<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n' },
];

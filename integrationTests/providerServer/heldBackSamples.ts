// Error bodies gathered after the classifier's rules were written (backendHelpers.ts), to score them on wording they
// were not written against; DESIGN.md ("Recognising a context-window rejection") gives the first score. Each is a real
// server's answer, from public issue threads.
import type { ErrorSample } from './overflowSamples.js';

export const HELD_BACK_OVERFLOW: ErrorSample[] = [
  {
    server: 'Alibaba Cloud Model Studio (DashScope, Qwen)',
    status: 400,
    body: { error: { code: 'invalid_parameter_error', message: '<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 983616]', param: null, type: 'invalid_request_error' }, request_id: '81a373d6-28bd-9968-8335-e22a2127c41b' },
  },
  {
    server: 'Cohere',
    status: 400,
    body: { message: 'too many tokens: total number of tokens (prompt and prediction) cannot exceed 2048 - received 6354. Try using a shorter prompt or a smaller max_tokens value.' },
  },
  {
    server: 'ds4 server',
    status: 400,
    body: { error: { message: 'Prompt tokens (40210) exceeds context size (32768)', type: 'context_exceeded', n_prompt_tokens: 40210, n_ctx: 32768 } },
  },
  {
    server: 'Together (older TGI wording)',
    status: 400,
    body: { error: { message: 'Input validation error: `inputs` must have less than 1024 tokens. Given: 1244', type: 'invalid_request_error' } },
  },
  {
    server: 'Moonshot (older wording)',
    status: 400,
    body: { error: { message: 'model max length exceeded, max length:8192', type: 'invalid_request_error' } },
  },
  {
    server: 'Anthropic (1M beta past 200K)',
    status: 400,
    body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 215350 tokens > 200000 maximum' }, request_id: 'req_011CV2WBvuYjXioipfPoNryB' },
  },
];

export const HELD_BACK_NOT_OVERFLOW: ErrorSample[] = [
  { server: 'Perplexity max_tokens too small', status: 400, body: { error: { message: 'max_tokens must be at least 16 for sonar.', type: 'invalid_parameter', code: 400 } } },
  { server: 'Groq max_tokens over the model output limit', status: 400, body: { error: { message: '`max_tokens` must be less than or equal to `16384`, the maximum value for `max_tokens` is less than the `context_window` for this model', type: 'invalid_request_error' } } },
  { server: 'Moonshot request rate', status: 429, body: { error: { message: 'Your account request reached max request: 3, please try again after 1 seconds', type: 'rate_limit_reached_error' } } },
  { server: 'Perplexity temperature', status: 400, body: { error: { message: 'temperature must be between 0 and 2 (exclusive of 2)', type: 'invalid_parameter', code: 400 } } },
];

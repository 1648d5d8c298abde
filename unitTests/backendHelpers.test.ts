import { expect } from 'chai';
import { createServer, type AddressInfo } from 'node:net';
import { HELD_BACK_NOT_OVERFLOW, HELD_BACK_OVERFLOW } from '../integrationTests/providerServer/heldBackSamples.js';
import { NOT_OVERFLOW_SAMPLES, OVERFLOW_SAMPLES } from '../integrationTests/providerServer/overflowSamples.js';
import { classifyProviderError, isContextWindowExceeded, networkError } from '../resources/models/backendHelpers.js';

const failureOf = (s: { status: number; body: unknown }) => {
  const err = (s.body as { error?: { message?: string; code?: unknown; type?: string } })?.error;
  return { status: s.status, message: typeof err?.message === 'string' ? err.message : undefined, code: typeof err?.code === 'string' ? err.code : undefined, body: s.body };
};

describe('isContextWindowExceeded', () => {
  for (const sample of [...OVERFLOW_SAMPLES, ...HELD_BACK_OVERFLOW]) {
    it(`flags ${sample.server}`, () => expect(isContextWindowExceeded(failureOf(sample))).to.equal(true));
  }
  for (const sample of [...NOT_OVERFLOW_SAMPLES, ...HELD_BACK_NOT_OVERFLOW]) {
    it(`does not flag ${sample.server} (${sample.status})`, () => expect(isContextWindowExceeded(failureOf(sample))).to.equal(false));
  }
  it('flags 413 alone and 422 with wording; never other statuses, whatever the wording', () => {
    expect(isContextWindowExceeded({ status: 413, message: 'Payload Too Large' })).to.equal(true);
    expect(isContextWindowExceeded({ status: 422, message: 'Input prompt (9000 tokens) is too long and exceeds limit of 8192' })).to.equal(true);
    for (const status of [401, 403, 404, 429, 500, 502, 503]) {
      expect(isContextWindowExceeded({ status, message: 'prompt is too long', code: 'context_length_exceeded' })).to.equal(false);
    }
    expect(isContextWindowExceeded({ message: 'maximum context length is 10 tokens' })).to.equal(false);
  });
  it('reads the family, not a list of phrases: subject near a limit in one sentence, vetoes first', () => {
    const at400 = (message: string) => isContextWindowExceeded({ status: 400, message });
    expect(at400('Your conversation is longer than this deployment allows (window 8192)')).to.equal(true);
    expect(at400('input tokens exceed the configured limit')).to.equal(true);
    // A subject and a limit in different sentences, or too far apart, are not a claim.
    expect(at400(`The request was malformed. ${'x'.repeat(10)} Field length must be set.`)).to.equal(false);
    expect(at400(`request ${'y'.repeat(80)} limit`)).to.equal(false);
    // Vetoes win over the grammar: rate limits, quotas and billing, output size, message count, headers.
    expect(at400('Request too large for model: tokens per min (TPM) limit exceeded')).to.equal(false);
    expect(at400('The prompt exceeds your monthly quota')).to.equal(false);
    expect(at400('max_tokens is too large for the context window of this model')).to.equal(false);
    expect(at400('400 Request Header Or Cookie Too Large')).to.equal(false);
    // Keys are not read: a 400 whose only length words are JSON keys is not an overflow.
    expect(isContextWindowExceeded({ status: 400, body: { request_length: 12, context: 'chat', message: 'unknown model' } })).to.equal(false);
  });

  it('reads JSON nested in a message string', () => {
    const nested = JSON.stringify({ error: { code: 'context_length_exceeded' } });
    expect(isContextWindowExceeded({ status: 400, message: `upstream said: ${nested}` })).to.equal(true);
  });
  it('classifyProviderError gives an actionable message and never surfaces a Bedrock message', () => {
    const e = classifyProviderError('bedrock', { status: 403, code: 'AccessDeniedException', message: 'User arn:aws:iam::123:user/x is not authorized' }, { surfaceMessage: false, label: 'AccessDeniedException' });
    expect(e.message).to.equal('bedrock request failed (HTTP 403): AccessDeniedException. Check the provider credentials (API key or AWS credentials).');
    expect(classifyProviderError('openai', { status: 429, message: 'Rate limit reached' }).message).to.equal('openai request failed (HTTP 429): Rate limit reached. The provider is rate limiting; try again later.');
  });

  it('a connection that failed names the host: a name that does not resolve, an address that refused', async () => {
    const lookup = await fetch('http://no-such-host.invalid/').catch((e) => e);
    expect(networkError('openai', lookup, 1000).message).to.equal('openai request failed: no-such-host.invalid does not resolve (ENOTFOUND). Check that the provider endpoint is reachable.');
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const refused = await fetch(`http://127.0.0.1:${port}/`).catch((e) => e);
    expect(networkError('ollama', refused, 1000).message).to.equal(`ollama request failed: 127.0.0.1:${port} refused the connection (ECONNREFUSED). Check that the provider endpoint is reachable.`);
  });
});

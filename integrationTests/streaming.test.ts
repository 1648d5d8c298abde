// Streaming, the model-call log and the spending limit, end to end: the real SDKs inside Harper stream from the
// provider-compatible server; the CLI (a real process) and the admin page (headless Chromium) follow the run.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { REPO } from '../scripts/harper.js';
import { AgentClient } from '../cli/client.js';
import { launchBrowser } from './browser.js';
import type { TestHarper } from './harness.js';
import type { Provider, Turn } from './providerServer/server.js';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const CLI = path.join(REPO, 'dist/cli/main.js');
const PROVIDERS = ['openai', 'anthropic', 'bedrock', 'ollama'] as const;

/** A transcript with what differs between two runs of one script taken out: times and the server's call ids. */
function comparable(messages: any[]) {
  const ids = new Map<string, string>();
  const idOf = (raw: string) => (ids.has(raw) ? ids.get(raw)! : (ids.set(raw, `call-${ids.size}`), ids.get(raw)!));
  return messages.map(({ at: _at, ...m }) => {
    if (m.toolCalls) m.toolCalls = m.toolCalls.map((c: any) => ({ ...c, id: idOf(c.id) }));
    if (m.toolCallId) m.toolCallId = idOf(m.toolCallId);
    return m;
  });
}

async function until<T>(what: string | (() => string), probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined && got !== false) return got as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('streaming, the model-call log and the spending limit', function () {
  const suite = providerSuite((h) => {
    writeFileSync(path.join(h.logsDir, 'stream.log'), 'alpha\nbeta ERROR\ngamma\n');
    // 24 KB: a page over 2 KiB, which the context-window shrink cuts.
    writeFileSync(path.join(h.logsDir, 'wide.log'), Array.from({ length: 600 }, (_, i) => `entry ${String(i).padStart(4, '0')} replication lag ${'x'.repeat(20)}`).join('\n') + '\n');
  });
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));

  const READ = { toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'stream.log' } }] };
  const ANSWER = 'The log has three lines and one error: beta ERROR on line 2.';

  it('the CLI and the admin page show the answer while the server is still streaming it; the stored transcript equals a non-streaming run', async function () {
    this.timeout(120_000);
    const settings = providerSettings('openai', server);
    expect((await h.setConfig({ ...settings, stream: true })).status).to.equal(200);
    const releases: (() => void)[] = [];
    server.reset([READ, { text: ANSWER }]);
    // The server caches as OpenAI does: the second request reads the first one's prefix (the page shows it).
    server.caching = true;
    // Not held after the first call's tool call; held after the answer's first word and after its second.
    server.streamHolds = [Promise.resolve(), ...[0, 1].map(() => new Promise<void>((r) => releases.push(r)))];
    let start!: () => void;
    server.streamStart = new Promise<void>((r) => (start = r));
    const releaseAll = () => (start(), releases.forEach((r) => r()));

    const { admin, opsUrl } = h.harper;
    const child = spawn(process.execPath, [CLI, 'prompt', 'what is in logs/stream.log?'], {
      env: { PATH: process.env.PATH!, HARPER_AGENT_URL: opsUrl, HARPER_AGENT_USER: admin.username, HARPER_AGENT_PASSWORD: admin.password },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    let browser: Browser | undefined;
    try {
      const id = await until('the CLI to name its session', () => /^session (\S+)$/m.exec(stdout)?.[1]);
      // The model writes once a follower opened after the CLI's print is in (see the test below).
      await followerOpen(id);
      start();
      // The server sent the answer's first word and holds the rest back.
      expect(await until('the stream to be held', () => server.held)).to.equal('The ');
      await until(() => `the CLI to print the first word; it printed ${JSON.stringify(stdout)}`, () => /\n {2}→ read_file \{"root":"logs","path":"stream\.log"\}\n {2}← read_file \d+ bytes\nThe $/.test(stdout));
      expect((await h.row(id)).status).to.equal('running');

      browser = await launchBrowser();
      const context = await browser.newContext({ httpCredentials: { username: admin.username, password: admin.password } });
      const page = await context.newPage();
      await page.goto(`${h.harper.httpUrl}agent/#session=${id}`);
      await page.waitForSelector('#transcript > li.message.tool');
      expect(server.held, 'still held while the page opened').to.equal('The ');
      // The next word: the page, following from the middle of the call, shows the text written since it joined, marked
      // as missing its start (the piece's `at` is 4).
      releases[0]!();
      expect(await until('the second hold', () => server.held !== 'The ' && server.held)).to.equal('The log ');
      await page.waitForFunction(() => document.querySelector('#transcript > li.live pre')?.textContent === '…log ', null, { timeout: 10_000 });
      await until(() => `the CLI to print the second word; it printed ${JSON.stringify(stdout)}`, () => stdout.endsWith('\nThe log '));
      expect(server.held, 'both seen while the server held the stream').to.equal('The log ');
      expect((await h.row(id)).messages.map((m: any) => m.role), 'nothing of the answer stored yet').to.deep.equal(['user', 'assistant', 'tool']);
      releases[1]!();
      await page.waitForFunction(() => document.querySelector('#session-status')?.textContent === 'completed', null, { timeout: 30_000 });
      const items = await page.locator('#transcript > li').evaluateAll((lis) => lis.map((li) => [li.className, li.querySelector('pre')?.textContent ?? '']));
      expect(items.at(-1)).to.deep.equal(['message assistant', ANSWER]);
      expect(items.filter(([c]) => c!.includes('live')), 'the streamed text gave way to the stored message').to.have.length(0);
      // The session's model calls: one row per request the server saw, with its size and status.
      await page.waitForFunction(() => document.querySelectorAll('#calls tbody tr').length === 2, null, { timeout: 10_000 });
      const rows = await page.locator('#calls tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      expect(rows.map((r) => [r[1], r[3], r[5], r[8], r[9]])).to.deep.equal(server.requests.map((r) => [`openai · ${new URL(server.url).host}`, `${r.bytes.toLocaleString('en-US')} B`, String(r.usage!.read), '200', '']));
      const { read, uncached } = server.cache.bill;
      expect(read).to.be.above(0);
      const share = Math.round((read / (read + uncached)) * 100);
      expect(await page.locator('#calls-summary').textContent()).to.match(new RegExp(`^Model calls: 2 requests · [\\d,]+ in / [\\d,]+ out tokens · ${read.toLocaleString('en-US')} read from the cache \\(${share}%\\) · \\$0\\.0000$`));
      await context.close();
    } finally {
      releaseAll();
      await browser?.close();
    }
    expect(await exited, stderr).to.equal(0);
    // Printed once, as it was written: the answer is not printed again at the end.
    expect(stdout.split(ANSWER)).to.have.length(2);
    expect(stdout.endsWith(`${ANSWER}\n`)).to.equal(true);
    expect(server.requests.map((r) => r.streamed)).to.deep.equal([true, true]);

    const streamedId = /^session (\S+)$/m.exec(stdout)![1]!;
    const streamed = await h.row(streamedId);
    expect((await h.setConfig({ stream: false })).status).to.equal(200);
    server.reset([READ, { text: ANSWER }]);
    const plain = await h.prompt('what is in logs/stream.log?');
    expect(server.requests.map((r) => r.streamed)).to.deep.equal([false, false]);
    expect(plain.status).to.equal('completed');
    expect(comparable(streamed.messages)).to.deep.equal(comparable((await h.row(plain.session_id)).messages));
    expect(streamed.messages).to.have.length(4);
  });

  it('the CLI marks text it printed from a stream that then broke as not kept, and ends with the error (exit 1)', async function () {
    this.timeout(60_000);
    expect((await h.setConfig({ ...providerSettings('openai', server), stream: true })).status).to.equal(200);
    let release!: () => void;
    server.reset([{ cutAfter: 'The log has three lines and ' }]);
    server.streamHolds = [new Promise<void>((r) => (release = r))];
    let start!: () => void;
    server.streamStart = new Promise<void>((r) => (start = r));
    const { admin, opsUrl } = h.harper;
    const child = spawn(process.execPath, [CLI, 'prompt', 'what is in logs/stream.log?'], { env: { PATH: process.env.PATH!, HARPER_AGENT_URL: opsUrl, HARPER_AGENT_USER: admin.username, HARPER_AGENT_PASSWORD: admin.password }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      // The CLI names the session, then follows it: the stream starts once a follower opened after that print is in
      // (a piece published before the CLI subscribed would never reach it).
      await followerOpen(await until('the CLI to name its session', () => /^session (\S+)$/m.exec(stdout)?.[1]));
      start();
      // The first word reaches the CLI before the rest is written and the connection drops.
      await until(() => `the first word; the CLI printed ${JSON.stringify(stdout)}`, () => stdout.endsWith('\nThe '));
    } finally {
      start();
      release();
    }
    expect(await exited).to.equal(1);
    const id = /^session (\S+)$/m.exec(stdout)![1]!;
    // What was published before the break is printed (text gathered since is dropped with the failed call), then the mark.
    expect(stdout).to.equal(`session ${id}\nThe \n  ✗ the model call failed mid-answer: the text above was not kept\n`);
    expect(stderr).to.match(/✗ error: openai request failed: the connection closed before the answer was complete \(UND_ERR_SOCKET\)\. Check that the provider endpoint is reachable\.\n$/);
    expect((await h.row(id)).messages.map((m: any) => m.role)).to.deep.equal(['user']);
  });

  for (const provider of PROVIDERS) {
    it(`${provider}: the feed carries each tool call as soon as it is complete, while the model call is still open`, async function () {
      this.timeout(60_000);
      expect((await h.setConfig({ ...providerSettings(provider, server), stream: true })).status).to.equal(200);
      let release!: () => void;
      let start!: () => void;
      server.reset([{ text: 'Reading it.', toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'stream.log' } }] }, { text: ANSWER }]);
      server.streamHolds = [Promise.resolve(), Promise.resolve(), new Promise<void>((r) => (release = r))];
      // The model writes once this test follows the session: live pieces are published, never kept.
      server.streamStart = new Promise<void>((r) => (start = r));
      const { admin, opsUrl } = h.harper;
      const client = new AgentClient({ url: opsUrl, username: admin.username, password: admin.password });
      const started = await h.op({ operation: 'agent_prompt', message: 'what is in logs/stream.log?' });
      const id = started.body.session_id as string;
      const stop = new AbortController();
      const live: any[] = [];
      try {
        for await (const { event, data } of client.events(id, 0, stop.signal)) {
          if (event === 'session') start();
          if (event !== 'live') continue;
          live.push(data);
          if (data.kind === 'toolCall') break;
        }
        expect(server.held, 'the server still holds the call open').to.equal('Reading it.→read_file');
        expect((await h.row(id)).messages, 'nothing of the call stored yet').to.have.length(1);
      } finally {
        stop.abort();
        start();
        release();
      }
      const call = live.at(-1);
      expect(call).to.deep.include({ kind: 'toolCall', index: 1 });
      expect(call.toolCall).to.deep.include({ name: 'read_file', arguments: { root: 'logs', path: 'stream.log' } });
      const text = live.filter((e) => e.kind === 'text');
      expect(text.map((e) => e.text).join('')).to.equal('Reading it.');
      // Each piece says how much text came before it.
      expect(text.map((e) => e.at)).to.deep.equal(text.map((_, i) => text.slice(0, i).reduce((n, e) => n + e.text.length, 0)));
      const s = await h.waitForSession(id);
      expect(s.status, s.lastError).to.equal('completed');
      // The call id the feed showed is the one stored (Ollama's calls get theirs from the backend).
      expect(s.messages[1].toolCalls.map((c: any) => c.id)).to.deep.equal([call.toolCall.id]);
    });
  }

  /** Opens a follower of session `id` and waits for its first event (the subscription is in), then closes it. */
  async function followerOpen(id: string) {
    const stop = new AbortController();
    const client = new AgentClient({ url: h.harper.opsUrl, username: h.harper.admin.username, password: h.harper.admin.password });
    try {
      for await (const { event } of client.events(id, 0, stop.signal)) if (event === 'session') break;
    } finally {
      stop.abort();
    }
  }

  /** Runs `script` once streaming and once not, from a fresh session each; returns both outcomes. */
  async function twins(provider: Provider, script: () => Turn[], prompt: string) {
    const out: { status: string; lastError: string | null; messages: any[]; streamed: boolean[] }[] = [];
    for (const stream of [true, false]) {
      expect((await h.setConfig({ ...providerSettings(provider, server), model: `${provider}-twin`, stream })).status).to.equal(200);
      await h.op({ operation: 'forget_agent_context_limits' });
      server.reset(script());
      const s = await h.prompt(prompt);
      out.push({ status: s.status, lastError: s.lastError, messages: comparable((await h.row(s.session_id)).messages), streamed: server.requests.map((r) => r.streamed) });
    }
    return out;
  }

  for (const provider of PROVIDERS) {
    it(`${provider}: a stream cut mid-answer ends as a reset connection does; its partial text is not stored`, async () => {
      const [streamed, plain] = await twins(provider, () => [{ cutAfter: 'The log has three lines and ' }], 'what is in logs/stream.log?');
      expect(streamed!.streamed).to.deep.equal([true]);
      expect(plain!.streamed).to.deep.equal([false]);
      expect(streamed!.status).to.equal('error');
      expect(streamed!.lastError).to.equal(plain!.lastError);
      expect(streamed!.lastError).to.match(new RegExp(`^${provider} request failed: the connection closed before the answer was complete \\((UND_ERR_SOCKET|ECONNRESET)\\)\\. Check that the provider endpoint is reachable\\.$`));
      expect(streamed!.messages).to.deep.equal(plain!.messages);
      expect(streamed!.messages.map((m) => m.role)).to.deep.equal(['user']);
    });

    it(`${provider}: an overflow reported inside the stream is recovered as the same rejection before it: cut, retried once, completed`, async () => {
      const script = (): Turn[] => [{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'wide.log' } }] }, { overflowAfter: 'Reading the ' }, { text: 'wide.log is about replication lag.' }];
      const [streamed, plain] = await twins(provider, script, 'what is in logs/wide.log?');
      expect(streamed!.streamed).to.deep.equal([true, true, true]);
      expect(streamed!.status, streamed!.lastError ?? '').to.equal('completed');
      expect(plain!.status, plain!.lastError ?? '').to.equal('completed');
      expect(streamed!.messages).to.deep.equal(plain!.messages);
      const tool = streamed!.messages.find((m) => m.role === 'tool');
      expect(tool.cut).to.equal('context');
      expect(Buffer.byteLength(tool.content)).to.be.at.most(2048);
      expect(streamed!.messages.at(-1)).to.deep.equal({ role: 'assistant', content: 'wide.log is about replication lag.' });
    });
  }

  for (const provider of PROVIDERS) {
    it(`${provider}: the model-call log has one record per request the server saw, retries included, with its bytes, status, tokens and class`, async () => {
      const retried = provider !== 'ollama'; // the Ollama SDK does not retry
      const throttle: Turn =
        provider === 'bedrock'
          ? { error: { status: 429, body: { message: 'Too many requests, please wait before trying again.' }, headers: { 'x-amzn-errortype': 'ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/' } } }
          : provider === 'anthropic'
            ? { error: { status: 429, body: { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' } }, headers: { 'retry-after-ms': '10', 'retry-after': '0' } } }
            : { error: { status: 429, body: { error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } }, headers: { 'retry-after-ms': '10', 'retry-after': '0' } } };
      const settings = { ...providerSettings(provider, server), maxRetries: retried ? 2 : 0, stream: true, prices: null };
      expect((await h.setConfig(settings)).status).to.equal(200);
      server.reset([...(retried ? [throttle] : []), READ, { text: ANSWER }]);
      const s = await h.prompt('what is in logs/stream.log?');
      expect(s.status, s.lastError).to.equal('completed');
      const answer = await h.op({ operation: 'list_agent_model_calls', session_id: s.session_id });
      expect(answer.status).to.equal(200);
      const calls = answer.body.calls as any[];
      const host = new URL(server.url).host;
      expect(calls.map((c) => ({ host: c.host, provider: c.provider, model: c.model, requestBytes: c.requestBytes, status: c.status, inputTokens: c.inputTokens, outputTokens: c.outputTokens, errorClass: c.errorClass, streamed: c.streamed }))).to.deep.equal(
        server.requests.map((r) => ({ host, provider, model: settings.model, requestBytes: r.bytes, status: r.status, inputTokens: r.usage?.input ?? null, outputTokens: r.usage?.output ?? null, errorClass: r.status === 429 ? 'rate_limit' : null, streamed: true }))
      );
      expect(calls).to.have.length(retried ? 3 : 2);
      for (const c of calls) expect(c.latencyMs).to.be.a('number').and.at.least(0).and.below(30_000);
      expect(answer.body.totals).to.include({ requests: calls.length, failed: retried ? 1 : 0, inputTokens: calls.reduce((n, c) => n + (c.inputTokens ?? 0), 0) });
      // Unknown to the catalog and not in agent.prices: no cost.
      expect(calls.map((c) => c.costUsd)).to.deep.equal(calls.map(() => null));
    });
  }

  it('harper-agent show prints a session\'s model calls and their totals; a missing session\'s log is a 404', async () => {
    expect((await h.setConfig({ ...providerSettings('openai', server), model: 'gpt-4.1-mini', stream: true })).status).to.equal(200);
    server.reset([READ, { text: ANSWER }]);
    const s = await h.prompt('what is in logs/stream.log?');
    const { calls, totals } = (await h.op({ operation: 'list_agent_model_calls', session_id: s.session_id })).body;
    expect(s.modelCalls, 'get_agent_session carries the same totals').to.deep.equal(totals);
    const { admin, opsUrl } = h.harper;
    const child = spawn(process.execPath, [CLI, 'show', s.session_id], { env: { PATH: process.env.PATH!, HARPER_AGENT_URL: opsUrl, HARPER_AGENT_USER: admin.username, HARPER_AGENT_PASSWORD: admin.password }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    expect(await new Promise((resolve) => child.on('close', resolve))).to.equal(0);
    const lines = stdout.trimEnd().split('\n');
    const at = lines.findIndex((l) => l.startsWith('model calls: '));
    const n = (v: number) => v.toLocaleString('en-US');
    // gpt-4.1-mini is priced by the catalog: $0.40 and $1.60 a million tokens.
    const cost = calls.reduce((sum: number, c: any) => sum + (c.inputTokens * 0.4 + c.outputTokens * 1.6) / 1e6, 0);
    expect(totals.costUsd).to.be.closeTo(cost, 1e-12);
    expect(lines[at]).to.equal(`model calls: 2 request(s) · ${n(totals.inputTokens)} input / ${n(totals.outputTokens)} output tokens · ${n(totals.latencyMs)} ms · $${cost.toFixed(4)}`);
    expect(lines.slice(at + 2).map((l) => l.split(/\s{2,}/).slice(1, 4))).to.deep.equal(server.requests.map((r) => [new URL(server.url).host, 'gpt-4.1-mini', n(r.bytes)]));
    expect(lines).to.have.length(at + 4);
    expect((await h.op({ operation: 'list_agent_model_calls', session_id: 'nope' })).status).to.equal(404);
  });

  it('a run over agent.maxCostUsd ends before the request that would cross it, every tool call answered, saying what was spent', async function () {
    this.timeout(60_000);
    const model = 'priced-demo-model';
    const prices = { [model]: { inputPerMTokens: 1000, outputPerMTokens: 1000 } }; // a tenth of a cent a token
    const script = (): Turn[] => [READ, READ, READ, { text: ANSWER }];
    // The same script with no limit: what each call costs.
    expect((await h.setConfig({ ...providerSettings('anthropic', server), model, prices, maxTokens: 64, maxCostUsd: null })).status).to.equal(200);
    server.reset(script());
    const free = await h.prompt('read logs/stream.log three times');
    expect(free.status, free.lastError).to.equal('completed');
    const costs = ((await h.op({ operation: 'list_agent_model_calls', session_id: free.session_id })).body.calls as any[]).map((c) => c.costUsd as number);
    expect(costs).to.have.length(4);
    server.requests.forEach((r, i) => expect(costs[i]).to.be.closeTo(((r.usage!.input + r.usage!.output) * 1000) / 1e6, 1e-9));
    // A limit the first two calls fit under, and the third would cross.
    const limit = costs[0]! + costs[1]! + costs[2]! * 0.9;
    expect((await h.setConfig({ maxCostUsd: limit })).status).to.equal(200);
    server.reset(script());
    const capped = await h.prompt('read logs/stream.log three times');
    expect(capped.status).to.equal('error');
    expect(server.requests).to.have.length(2);
    const spent = costs[0]! + costs[1]!;
    const m = /^This prompt has spent \$(\d+\.\d+) in 2 model request\(s\); the next call could cost up to \$(\d+\.\d+) \(about (\d+) input tokens and up to agent\.maxTokens 64 output tokens at agent\.prices prices\), which would cross agent\.maxCostUsd \(\$(\d+\.\d+)\)\. Nothing more was sent\. To go on: raise agent\.maxCostUsd \(harper-agent config maxCostUsd=<dollars>\) and send a new prompt\.$/.exec(capped.lastError);
    expect(m, capped.lastError).to.not.equal(null);
    expect(Number(m![1])).to.be.closeTo(spent, 0.01);
    expect(spent + Number(m![2])).to.be.greaterThan(limit);
    // The call it refused would have cost more than was left, as the run without a limit shows.
    expect(spent + costs[2]!).to.be.greaterThan(limit);
    // Never a half-recorded turn: the transcript ends with the answer to the last tool call.
    const row = await h.row(capped.session_id);
    expect(row.messages.map((x: any) => x.role)).to.deep.equal(['user', 'assistant', 'tool', 'assistant', 'tool']);
    expect((await h.setConfig({ maxCostUsd: null, prices: null, maxTokens: 4096 })).status).to.equal(200);
  });
});

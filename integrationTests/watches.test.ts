// Watches on a real Harper (agent/watches/), with a scripted provider and a webhook server of the test's own. Harper
// aggregates analytics every second here (a metric watch has samples to read), and runs a component that writes
// 10,000 error lines a second for 5 s into its log when asked (GET /LogSpam).
import { expect } from 'chai';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { execFile, spawn } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { bootHarper, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

const REPORT = ['## What happened', 'A burst of LOGSPAM errors.', '## Evidence', 'logs/hdb.log, the lines the watch gave.', '## Ruled out', 'Replication.', '## Next steps', 'Stop the spamming component.'].join('\n');
const PRICE = { inputPerMTokens: 1, outputPerMTokens: 2 };
const SPAM_COMPONENT = `
export class LogSpam extends Resource {
  static loadAsInstance = false;
  get() {
    let sent = 0;
    const timer = setInterval(() => {
      for (let i = 0; i < 100; i++) logger.error('LOGSPAM ' + ++sent + ' replication queue full for table metrics');
      if (sent >= 50000) clearInterval(timer);
    }, 10);
    return { started: true };
  }
}
`;

/** A webhook receiver: answers each POST with the next status of `script` (200 once it runs out). */
class Webhook {
  bodies: { status: number; body: any; headers: http.IncomingHttpHeaders }[] = [];
  script: number[] = [];
  private server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const status = this.script.shift() ?? 200;
      this.bodies.push({ status, body: JSON.parse(text), headers: req.headers });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'try again');
    });
  });
  url = '';
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  close() {
    return new Promise((r) => this.server.close(r));
  }
  accepted() {
    return this.bodies.filter((b) => b.status === 200);
  }
}

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 400)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('watches: investigations that start themselves, with a report delivered', function () {
  this.timeout(120_000);
  let h: TestHarper;
  const server = new ProviderServer();
  const hook = new Webhook();
  let settings: ReturnType<typeof providerSettings>;
  const args = ['--ANALYTICS_AGGREGATEPERIOD', '1'];

  before(async function () {
    await server.start();
    await hook.start();
    h = await bootHarper({
      args,
      prepare: (root) => {
        const dir = path.join(root, 'components', 'logspam');
        mkdirSync(dir, { recursive: true });
        writeFileSync(path.join(dir, 'config.yaml'), "rest: true\njsResource:\n  files: 'resources.js'\n");
        writeFileSync(path.join(dir, 'resources.js'), SPAM_COMPONENT);
      },
    });
    settings = providerSettings('openai', server);
    expect((await h.setConfig({ ...settings, prices: { [settings.model]: PRICE } })).status).to.equal(200);
  });
  after(async () => {
    await h?.stop();
    await server.close();
    await hook.close();
  });

  const watch = async (id: string) => (await h.op({ operation: 'get_agent_watch', watch_id: id })).body;
  const create = async (definition: Record<string, unknown>) => {
    const r = await h.op({ operation: 'create_agent_watch', prompt: 'Find the cause.', ...definition });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.watch_id as string;
  };

  it('10,000 error lines a second for 5 s: one run, whose first request holds the first matching line and its position; one report delivered, within the cost limit', async () => {
    server.reset([{ text: REPORT }]);
    hook.bodies = [];
    const id = await create({
      name: 'spam',
      trigger: { type: 'log', path: 'hdb.log', level: 'error', pattern: 'LOGSPAM', debounceSeconds: 2 },
      limits: { maxCostUsd: 0.05 },
      delivery: { webhook: { url: hook.url, secretHeader: { name: 'X-Hook-Secret', value: 's3cret' } } },
    });
    await until('the watch to start at the log end', () => watch(id), (w) => typeof w.offset === 'number');
    const spam = await fetch(`${h.harper.httpUrl}LogSpam`);
    expect(spam.status).to.equal(200);
    await until('the report', async () => hook.accepted().length, (n) => n >= 1, 60_000);
    await new Promise((r) => setTimeout(r, 3000));
    const w = await watch(id);
    expect([w.fired, hook.bodies.length, server.requests.length]).to.deep.equal([1, 1, 1]);
    // Every matching line of the log is counted in the one burst; the first is where the log says it is.
    const log = readFileSync(path.join(h.logsDir, 'hdb.log'));
    const matching = log.toString('utf8').split('\n').filter((l) => /\[error\]/.test(l) && l.includes('LOGSPAM'));
    expect(matching).to.have.length(50_000);
    const { first, last, count } = w.lastReport.trigger.log;
    expect(count).to.equal(50_000);
    expect(log.toString('utf8', first.offset, log.indexOf(10, first.offset))).to.equal(first.text).and.to.equal(matching[0]);
    expect(log.toString('utf8', 0, first.offset).split('\n').length).to.equal(first.line);
    expect(last.text).to.equal(matching.at(-1));
    // The run's first request starts from there.
    const prompt = server.requests[0]!.neutral.messages.find((m) => m.role === 'user')!.text;
    expect(prompt).to.contain(`First matching line, logs/hdb.log line ${first.line} (byte ${first.offset}):\n${first.text}\n`);
    expect(prompt).to.contain(`startLine ${first.line}`);
    // The report: the answer's sections, the evidence, the cost (within the watch's limit), as the webhook got it.
    const [{ body, headers }] = hook.bodies;
    expect(headers['x-hook-secret']).to.equal('s3cret');
    expect(headers['content-type']).to.equal('application/json');
    expect(body.report).to.deep.equal(w.lastReport);
    expect([body.report.whatHappened, body.report.ruledOut, body.report.nextSteps, body.report.status, body.report.session_id]).to.deep.equal(['A burst of LOGSPAM errors.', 'Replication.', 'Stop the spamming component.', 'completed', w.lastSessionId]);
    expect(body.text).to.match(/^Harper Agent watch "spam" on \S+ \(completed\): A burst of LOGSPAM errors\.\n50,000 lines of logs\/hdb\.log matched/);
    expect(body.report.cost.usd).to.be.greaterThan(0).and.at.most(0.05);
    expect(w.delivery.webhook.secretHeader).to.deep.equal({ name: 'X-Hook-Secret', value: '(set)' });
    expect([w.lastDelivery.status, w.lastDelivery.attempts, w.deliveryAttempts.map((a: any) => a.status)]).to.deep.equal(['delivered', 1, [200]]);
    // The run is a session like any other.
    const s = (await h.op({ operation: 'get_agent_session', session_id: w.lastSessionId })).body;
    expect([s.status, s.messages.at(-1).content]).to.deep.equal(['completed', REPORT]);
    await h.op({ operation: 'delete_agent_watch', watch_id: id });
  });

  it('a metric threshold fires after its duration and not before, and not again in its cool-down', async () => {
    server.reset([{ text: REPORT }, { text: 'a second run' }]);
    const id = await create({ name: 'busy', trigger: { type: 'metric', metric: 'utilization', attribute: 'utilization', above: -1, forSeconds: 3 }, limits: { coolDownSeconds: 600 } });
    const created = (await watch(id)).createdAt;
    const fired = await until('the metric watch to fire', () => watch(id), (w) => typeof w.lastFiredAt === 'number', 20_000);
    expect(fired.lastFiredAt - created).to.be.at.least(3000);
    expect(fired.lastReport === null || fired.lastReport.trigger.metric.attribute === 'utilization').to.equal(true);
    // Due again at every tick from now on, and suppressed by the cool-down.
    const later = await until('a suppressed firing', () => watch(id), (w) => w.suppressed >= 1, 20_000);
    expect(later.fired).to.equal(1);
    expect(later.lastReport.trigger.metric).to.include({ metric: 'utilization', attribute: 'utilization' });
    expect(later.lastReport.trigger.metric.since + 3000).to.be.at.most(fired.lastFiredAt);
    await h.op({ operation: 'delete_agent_watch', watch_id: id });
  });

  it('a webhook that answers 500 three times, then 200, gets the report once, four attempts recorded; one never reached stops at its limit and the report stays readable', async () => {
    server.reset([{ text: REPORT }, { text: REPORT }]);
    hook.bodies = [];
    hook.script = [500, 500, 500];
    const id = await create({ name: 'retry', status: 'paused', trigger: { type: 'schedule', everySeconds: 3600 }, delivery: { webhook: { url: hook.url, retrySeconds: 0.2 } } });
    expect((await h.op({ operation: 'test_agent_watch', watch_id: id })).status).to.equal(200);
    const done = await until('the delivery', () => watch(id), (w) => w.lastDelivery?.status === 'delivered', 30_000);
    expect(done.deliveryAttempts.map((a: any) => [a.attempt, a.status])).to.deep.equal([[1, 500], [2, 500], [3, 500], [4, 200]]);
    expect(done.deliveryAttempts[0].error).to.equal('answered 500: try again');
    expect(hook.accepted()).to.have.length(1);
    expect(hook.accepted()[0]!.body.report.trigger.kind).to.equal('test');
    // Nothing listens here: every attempt fails, and the watch stops trying after maxAttempts.
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const dead = await create({ name: 'dead', status: 'paused', trigger: { type: 'schedule', everySeconds: 3600 }, delivery: { webhook: { url: `http://127.0.0.1:${port}/`, retrySeconds: 0.2, maxAttempts: 3 } } });
    await h.op({ operation: 'test_agent_watch', watch_id: dead });
    const failed = await until('the delivery to give up', () => watch(dead), (w) => w.lastDelivery?.status === 'failed', 30_000);
    expect(failed.deliveryAttempts.map((a: any) => [a.attempt, a.status])).to.deep.equal([[1, null], [2, null], [3, null]]);
    expect(failed.deliveryAttempts[0].error).to.match(/ECONNREFUSED/);
    expect(failed.lastReport.whatHappened).to.equal('A burst of LOGSPAM errors.');
    expect((await h.op({ operation: 'get_agent_session', session_id: failed.lastSessionId })).body.status).to.equal('completed');
    for (const w of [id, dead]) await h.op({ operation: 'delete_agent_watch', watch_id: w });
  });

  it('a watch that keeps firing says so and stops itself at its runs per hour', async () => {
    server.reset([{ text: 'one' }, { text: 'two' }, { text: 'three' }]);
    const id = await create({ name: 'chatty', trigger: { type: 'schedule', everySeconds: 1 }, limits: { runsPerHour: 2, coolDownSeconds: 0 } });
    const stopped = await until('the watch to stop itself', () => watch(id), (w) => w.status === 'stopped', 20_000);
    expect([stopped.fired, stopped.stoppedReason]).to.deep.equal([2, 'fired 2 times in the last hour (limits.runsPerHour is 2) and was due again: stopped; update it, or set status active to resume']);
    expect(server.requests).to.have.length(2);
    const listed = (await h.op({ operation: 'list_agent_watches' })).body.watches.find((w: any) => w.watch_id === id);
    expect([listed.status, listed.runsLastHour]).to.deep.equal(['stopped', 2]);
    await h.op({ operation: 'delete_agent_watch', watch_id: id });
  });

  it('the CLI creates a watch, lists it, fires it and follows its run live to the report, and deletes it', async () => {
    server.reset([{ text: REPORT }]);
    const env = { ...process.env, ...h.cliEnv() };
    const cli = (...args: string[]) => promisify(execFile)(process.execPath, ['dist/cli/main.js', ...args], { env });
    const created = JSON.parse((await cli('watch', 'create', JSON.stringify({ name: 'cli', status: 'paused', trigger: { type: 'schedule', everySeconds: 3600 }, prompt: 'Check replication.' }), '--json')).stdout);
    const id = created.watch_id as string;
    const listed = (await cli('watches')).stdout.split('\n').find((l) => l.startsWith(id))!;
    expect(listed.split(/\s{2,}/)).to.deep.equal([id, 'cli', 'paused', 'every 3600 s', '0']);
    const follow = spawn(process.execPath, ['dist/cli/main.js', 'watch', 'follow', id, '--runs', '1'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    follow.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => follow.on('close', r));
    await until('the follow to start', async () => out, (o) => o.includes('waiting for it to fire'));
    expect((await cli('watch', 'test', id)).stdout).to.equal(`watch ${id}: fires once now on ${created.node}; harper-agent watch follow ${id} shows the run\n`);
    expect(await exited).to.equal(0);
    const lines = out.split('\n');
    expect(lines[0]).to.equal('following watch cli (every 3600 s); waiting for it to fire');
    expect(lines[1]).to.equal(`fired: session watch-${id}-1`);
    expect(out).to.contain(REPORT);
    expect(out).to.match(/last report \(completed, \$0\.\d{4}\): A burst of LOGSPAM errors\.\n/);
    expect((await cli('watch', 'delete', id)).stdout).to.equal(`watch ${id} deleted (its runs' sessions stay)\n`);
  });

  it('bad input: a pattern that does not compile, a cron that does not parse, a webhook the SSRF rules refuse, a limit out of bounds: 400 naming the field, nothing stored', async () => {
    const before = (await h.op({ operation: 'list_agent_watches' })).body.watches.length;
    const cases: [Record<string, unknown>, string][] = [
      [{ trigger: { type: 'log', pattern: '(unclosed' } }, 'trigger.pattern does not compile: Invalid regular expression: /(unclosed/: Unterminated group'],
      [{ trigger: { type: 'schedule', cron: '61 * * * *' } }, 'trigger.cron does not parse: CronPattern: Invalid value for minute: 61'],
      [{ trigger: { type: 'log', level: 'error' }, delivery: { webhook: { url: 'http://169.254.169.254/latest/meta-data' } } }, 'delivery.webhook.url is refused: http://169.254.169.254/latest/meta-data is refused: 169.254.169.254 is link-local (cloud metadata lives there)'],
      [{ trigger: { type: 'log', level: 'error' }, limits: { runsPerHour: 0 } }, 'create_agent_watch: "limits.runsPerHour" must be >= 1'],
      [{ trigger: { type: 'log', level: 'error' }, limits: { maxCostUsd: 1000 } }, 'create_agent_watch: "limits.maxCostUsd" must be <= 100'],
      [{ trigger: { type: 'metric', metric: 'utilization', attribute: 'utilization' } }, 'trigger: a metric trigger needs exactly one of above or below'],
      [{ trigger: { type: 'log', level: 'error', path: 'no-such.log' } }, 'trigger.path: logs/no-such.log does not exist'],
    ];
    for (const [definition, error] of cases) {
      const r = await h.op({ operation: 'create_agent_watch', name: 'bad', prompt: 'x', ...definition });
      expect([r.status, r.body.error], JSON.stringify(definition)).to.deep.equal([400, error]);
    }
    expect((await h.op({ operation: 'list_agent_watches' })).body.watches).to.have.length(before);
  });

  it('SIGKILL while a log trigger is pending: after the restart the watch fires once, from where it stopped', async () => {
    server.reset([{ text: REPORT }, { text: 'a second run' }]);
    const file = path.join(h.logsDir, 'app.log');
    writeFileSync(file, 'boot\n');
    const id = await create({ name: 'kill', trigger: { type: 'log', path: 'app.log', pattern: 'KILLME', debounceSeconds: 8 } });
    await until('the watch to start at the log end', () => watch(id), (w) => typeof w.offset === 'number');
    for (let i = 1; i <= 3; i++) appendFileSync(file, `noise ${i}\nKILLME ${i}\n`);
    // Killed while the burst waits out its debounce (8 s from the tick that read it: room for a busy machine).
    await until('the burst to be pending', () => watch(id), (w) => w.pending?.count === 3);
    await h.stop('SIGKILL', true);
    // Lines that arrive while Harper is down are not lost either.
    for (let i = 4; i <= 5; i++) appendFileSync(file, `noise ${i}\nKILLME ${i}\n`);
    h = await h.restart();
    const fired = await until('the watch to fire after the restart', () => watch(id), (w) => !!w.lastReport, 40_000);
    expect(fired.fired).to.equal(1);
    expect(fired.lastReport.trigger.log).to.deep.include({ count: 5, first: { line: 3, offset: 13, text: 'KILLME 1' }, last: { line: 11, offset: 81, text: 'KILLME 5' } });
    await new Promise((r) => setTimeout(r, 2000));
    expect((await watch(id)).fired).to.equal(1);
    expect(server.requests).to.have.length(1);
    await h.op({ operation: 'delete_agent_watch', watch_id: id });
  });
});

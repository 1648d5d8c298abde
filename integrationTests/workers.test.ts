// Harper's worker threads, on one real Harper (production defaults, two worker threads): prompts racing on one session
// from both threads, a write from a thread whose clock runs ahead, and profile_cpu and heap_usage through the real
// OpenAI SDK (a component keeps a worker busy in a named function while a profile runs; the profile names it; no
// listening port of Harper's speaks the inspector protocol before, during or after).
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bootHarper, listeningPorts, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

/** Keeps a worker busy while the file named by BUSY_FLAG exists (the profile test makes it): the other tests share
 * this Harper, and a busy worker the whole file long cost 12 s of CPU. */
const BUSY = `// Keeps this worker busy 25 ms of every 40 in one named function while process.env.BUSY_FLAG names a file that
// exists. The function is async and waits between its bursts, so V8 resumes it on its own each time: a function a timer
// calls can be inlined into the timer's code, and a profile then charges the time to the caller (listOnTimeout at 96%,
// seen twice under load).
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
async function busyLoopForProfile() {
  let x = 0;
  while (existsSync(process.env.BUSY_FLAG)) {
    const end = Date.now() + 25;
    while (Date.now() < end) x += Math.sqrt(x + 1);
    await sleep(15);
  }
  return x;
}
let busy;
setInterval(() => {
  if (!busy && existsSync(process.env.BUSY_FLAG)) busy = busyLoopForProfile().finally(() => (busy = undefined));
}, 200);
`;

/** A component that writes a record of an agent table as a worker thread whose clock runs `aheadMs` ahead would:
 * Harper stamps a write with the writing thread's clock (two threads of one Harper were measured 45 ms apart). */
const AHEAD_WRITER = `server.http(async (request, next) => {
  if (!request.url.startsWith('/ahead-write')) return next(request);
  const body = await new Promise((resolve, reject) => {
    const chunks = [];
    request.body.on('data', (chunk) => chunks.push(chunk));
    request.body.on('end', () => resolve(Buffer.concat(chunks).toString()));
    request.body.on('error', reject);
  });
  const { table, id, record, aheadMs } = JSON.parse(body);
  for (const key of ['createdAt', 'updatedAt']) if (record[key]) record[key] = new Date(record[key]);
  await databases.agent[table].put(id, record, { timestamp: Date.now() + aheadMs });
  return { status: 200, headers: new Headers(), body: 'written' };
});
`;



/** Ports whose answer to the inspector's discovery request (GET /json/version) is the inspector's. */
async function inspectorPorts(ports: number[]): Promise<number[]> {
  const speaking: number[] = [];
  for (const port of ports) {
    const body = await fetch(`http://127.0.0.1:${port}/json/version`, { signal: AbortSignal.timeout(2000) }).then((r) => r.text(), () => '');
    if (/Protocol-Version|V8-Version|webSocketDebuggerUrl/.test(body)) speaking.push(port);
  }
  return speaking;
}

describe("Harper's worker threads", function () {
  let h: TestHarper;
  const server = new ProviderServer();
  let busyFlag: string;
  before(async function () {
    this.timeout(120_000);
    const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-workers-'));
    busyFlag = path.join(rootPath, 'busy-now');
    const component = (name: string, file: string) => {
      mkdirSync(path.join(rootPath, 'components', name), { recursive: true });
      writeFileSync(path.join(rootPath, 'components', name, 'config.yaml'), `jsResource:\n  files: '${name}.js'\n`);
      writeFileSync(path.join(rootPath, 'components', name, `${name}.js`), file);
      writeFileSync(path.join(rootPath, 'components', name, 'package.json'), `{"name":"${name}","version":"1.0.0","type":"module"}\n`);
    };
    component('busy', BUSY);
    component('ahead', AHEAD_WRITER);
    h = await bootHarper({ rootPath, mode: 'prod', env: { THREADS_COUNT: '2', BUSY_FLAG: busyFlag } });
    await server.start();
    writeFileSync(path.join(h.logsDir, 'race.log'), 'one\ntwo\n');
  });
  after(async () => {
    await h?.stop();
    await server.close();
  });

  describe('prompts racing on one session', () => {
    it('on one idle session, from both worker threads at once: exactly one prompt is accepted, every other one is a 409', async function () {
      this.timeout(120_000);
      expect((await h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0 })).status).to.equal(200);
      // Both worker threads answer first (on a loaded machine the second can still be loading after Harper is ready).
      await h.waitForAgent(0, 2);
      server.reset([{ text: 'ready' }]);
      const first = await h.prompt('hello');
      expect(first.status).to.equal('completed');
      const tally: string[] = [];
      for (let round = 0; round < 8; round++) {
        // The model answers slowly, so the accepted run is still running when the others are decided.
        server.reset([{ text: `answer ${round}` }]);
        server.delayMs = 1000;
        const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => h.opOnNewConnection({ operation: 'agent_prompt', message: `race ${round}.${i}`, session_id: first.session_id })));
        tally.push(answers.map((r) => r.status).join(','));
        expect(answers.filter((r) => r.status === 200), `round ${round}: ${tally.at(-1)}`).to.have.length(1);
        for (const r of answers.filter((a) => a.status !== 200)) {
          expect(r.status).to.equal(409);
          expect(r.body.error).to.match(/^session \S+ is running: wait for it to finish or cancel it with cancel_agent_run$/);
        }
        const s = await h.waitForSession(first.session_id);
        expect(s.status).to.equal('completed');
        expect(s.messages.filter((m: any) => m.role === 'user' && m.content.startsWith(`race ${round}.`))).to.have.length(1);
        expect(s.messages.at(-1)).to.include({ role: 'assistant', content: `answer ${round}` });
        expect(s.messageCount).to.equal(s.messages.length);
      }
      expect(server.requests.length).to.equal(1);
    });

    it('a change lands after a write from a thread whose clock runs ahead: the prompt is in the row, answered; a cancel holds', async function () {
      this.timeout(60_000);
      expect((await h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0 })).status).to.equal(200);
      server.reset([{ text: 'first' }, { text: 'second' }, { hang: true }]);
      server.delayMs = 0;
      const first = await h.prompt('hello');
      expect(first.status).to.equal('completed');
      const id = first.session_id as string;
      // Another thread's write of the row, stamped 3 s ahead (its content as it is: only its version moves).
      const aheadWrite = async () => {
        const row = (await h.op({ operation: 'search_by_id', database: 'agent', table: 'AgentSession', ids: [id], get_attributes: ['*'] })).body[0];
        const { __createdtime__, __updatedtime__, ...record } = row;
        const written = await fetch(`${h.harper.httpUrl}ahead-write`, { method: 'POST', headers: { authorization: h.authHeader() }, body: JSON.stringify({ table: 'AgentSession', id, record, aheadMs: 3_000 }) });
        expect([written.status, await written.text()]).to.deep.equal([200, 'written']);
      };
      await aheadWrite();
      // The prompt's change comes right after it, on whichever thread: it must land (Harper dropped it before: the row
      // kept the other write, and the prompt answered 200 was never in the session).
      const accepted = await h.op({ operation: 'agent_prompt', message: 'after the write ahead', session_id: id });
      expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
      const s = await h.waitForSession(id);
      expect(s.messages.map((m: any) => [m.role, m.content])).to.deep.equal([['user', 'hello'], ['assistant', 'first'], ['user', 'after the write ahead'], ['assistant', 'second']]);
      expect([s.status, s.messageCount]).to.deep.equal(['completed', 4]);

      // A cancel right after such a write holds too (it answered 200 and the run went on to complete).
      const held = await h.op({ operation: 'agent_prompt', message: 'hold on', session_id: id });
      expect(held.status).to.equal(200);
      await h.waitForSession(id, ['running']);
      await aheadWrite();
      const cancelled = await h.op({ operation: 'cancel_agent_run', session_id: id });
      expect(cancelled.body).to.deep.include({ status: 'aborted' });
      const row = await h.row(id);
      expect([row.status, row.lastError]).to.deep.equal(['aborted', 'Cancelled with cancel_agent_run.']);
    });
  });

  describe('profile_cpu and heap_usage', () => {

    it("names the busy component's function among a worker's top five, through the loop; no port speaks the inspector protocol", async function () {
      this.timeout(120_000);
      const ports = listeningPorts(h.harper.pid);
      expect(ports).to.include.members([Number(new URL(h.harper.opsUrl).port), Number(new URL(h.harper.httpUrl).port)]);
      expect(await inspectorPorts(ports), 'before').to.deep.equal([]);
      server.reset([{ toolCalls: [{ name: 'profile_cpu', arguments: { thread: 1, durationMs: 3000, topN: 5 } }] }, { toolCalls: [{ name: 'heap_usage', arguments: { thread: 0 } }] }, { text: 'busyLoopForProfile is hot' }]);
      expect((await h.setConfig(providerSettings('openai', server))).status).to.equal(200);
      writeFileSync(busyFlag, '');
      const started = await h.op({ operation: 'agent_prompt', message: 'Why is worker 1 busy?' });
      expect(started.status).to.equal(200);
      await new Promise((r) => setTimeout(r, 1000));
      const during = listeningPorts(h.harper.pid);
      expect(await inspectorPorts(during), 'during the profile').to.deep.equal([]);
      const s = await h.waitForSession(started.body.session_id).finally(() => rmSync(busyFlag, { force: true }));
      expect(s.status).to.equal('completed');
      const [profile, heap] = s.messages.filter((m: any) => m.role === 'tool').map((m: any) => JSON.parse(m.content));
      expect(profile.thread).to.equal(1);
      // As long as asked, give or take the late timers of a loaded machine (3.5 s seen with three test lanes).
      expect(profile.durationMs).to.be.within(2900, 6000);
      expect(profile.topFunctions).to.have.length.at.most(5);
      const busy = profile.topFunctions.find((f: any) => f.function === 'busyLoopForProfile');
      expect(busy, JSON.stringify(profile.topFunctions)).to.not.equal(undefined);
      expect(busy.url).to.match(/components\/busy\/busy\.js$/);
      expect(busy.line).to.equal(7);
      expect(busy.percent).to.be.above(30);
      expect(heap.thread).to.equal(0);
      expect(heap.heap.used_heap_size).to.be.a('number').above(1_000_000);
      expect(await inspectorPorts(listeningPorts(h.harper.pid)), 'after').to.deep.equal([]);
    });

    it('an unknown thread is a tool error naming the threads there are', async function () {
      this.timeout(60_000);
      server.reset([{ toolCalls: [{ name: 'profile_cpu', arguments: { thread: 2 } }, { name: 'heap_usage', arguments: { thread: 7 } }] }, { text: 'no such thread' }]);
      const s = await h.prompt('Profile thread 2.');
      expect(s.status).to.equal('completed');
      const results = s.messages.filter((m: any) => m.role === 'tool').map((m: any) => m.content);
      expect(results).to.deep.equal([{ error: 'unknown thread 2: Harper has 2 worker threads, 0 to 1' }, { error: 'unknown thread 7: Harper has 2 worker threads, 0 to 1' }].map((r) => JSON.stringify(r)));
    });
  });
});

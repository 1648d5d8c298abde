// Worker threads racing on one session: a Harper with two worker threads (production defaults), prompts sent on new
// connections so Harper hands them to both threads at once; and a write from a thread whose clock runs ahead.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bootHarper, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';

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

describe('prompts racing across worker threads', function () {
  let h: TestHarper;
  const server = new ProviderServer();
  before(async function () {
    this.timeout(120_000);
    const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-threads-'));
    const ahead = path.join(rootPath, 'components', 'ahead');
    mkdirSync(ahead, { recursive: true });
    writeFileSync(path.join(ahead, 'config.yaml'), "jsResource:\n  files: 'ahead.js'\n");
    writeFileSync(path.join(ahead, 'ahead.js'), AHEAD_WRITER);
    writeFileSync(path.join(ahead, 'package.json'), '{"name":"ahead","version":"1.0.0","type":"module"}\n');
    h = await bootHarper({ rootPath, mode: 'prod', env: { THREADS_COUNT: '2' } });
    await server.start();
    writeFileSync(path.join(h.logsDir, 'race.log'), 'one\ntwo\n');
  });
  after(async () => {
    await h?.stop();
    await server.close();
  });

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

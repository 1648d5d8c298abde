// Worker threads racing on one session: a Harper with two worker threads (production defaults), prompts sent on new
// connections so Harper hands them to both threads at once.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bootHarper, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';

describe('prompts racing across worker threads', function () {
  let h: TestHarper;
  const server = new ProviderServer();
  before(async function () {
    this.timeout(120_000);
    h = await bootHarper({ mode: 'prod', env: { THREADS_COUNT: '2' } });
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
});

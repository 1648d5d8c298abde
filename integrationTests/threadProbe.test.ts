// profile_cpu and heap_usage on a real Harper (production defaults, two worker threads) through the real OpenAI SDK: a
// component on the workers keeps busy in a named function; the profile names it. No listening port of Harper's speaks
// the inspector protocol before, during or after.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bootHarper, listeningPorts, type TestHarper } from './harness.js';
import { ProviderServer } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

const BUSY = `// Keeps this worker busy 25 ms of every 40 in one named function. The function is too big for V8 to inline into the
// timer that calls it (TurboFan inlines functions under 460 bytes of bytecode, and a profile then charges the time to
// the caller: CI once saw listOnTimeout at 96%), as a component's real work usually is.
function busyLoopForProfile() {
  const end = Date.now() + 25;
  let x = 0;
  while (Date.now() < end) {
${Array.from({ length: 60 }, (_, i) => `    x += Math.sqrt(x + ${i + 1}) * ${(i % 7) + 1};`).join('\n')}
  }
  return x;
}
setInterval(busyLoopForProfile, 40);
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

describe('profile_cpu and heap_usage on a real Harper', function () {
  let h: TestHarper;
  const server = new ProviderServer();
  before(async function () {
    this.timeout(120_000);
    const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-probe-'));
    mkdirSync(path.join(rootPath, 'components', 'busy'), { recursive: true });
    writeFileSync(path.join(rootPath, 'components', 'busy', 'config.yaml'), "jsResource:\n  files: 'busy.js'\n");
    writeFileSync(path.join(rootPath, 'components', 'busy', 'busy.js'), BUSY);
    writeFileSync(path.join(rootPath, 'components', 'busy', 'package.json'), '{"name":"busy","version":"1.0.0"}\n');
    h = await bootHarper({ rootPath, mode: 'prod', env: { THREADS_COUNT: '2' } });
    await server.start();
  });
  after(async () => {
    await h?.stop();
    await server.close();
  });

  it("names the busy component's function among a worker's top five, through the loop; no port speaks the inspector protocol", async function () {
    this.timeout(120_000);
    const ports = listeningPorts(h.harper.pid);
    expect(ports).to.include.members([Number(new URL(h.harper.opsUrl).port), Number(new URL(h.harper.httpUrl).port)]);
    expect(await inspectorPorts(ports), 'before').to.deep.equal([]);
    server.reset([{ toolCalls: [{ name: 'profile_cpu', arguments: { thread: 1, durationMs: 3000, topN: 5 } }] }, { toolCalls: [{ name: 'heap_usage', arguments: { thread: 0 } }] }, { text: 'busyLoopForProfile is hot' }]);
    expect((await h.setConfig(providerSettings('openai', server))).status).to.equal(200);
    const started = await h.op({ operation: 'agent_prompt', message: 'Why is worker 1 busy?' });
    expect(started.status).to.equal(200);
    await new Promise((r) => setTimeout(r, 1000));
    const during = listeningPorts(h.harper.pid);
    expect(await inspectorPorts(during), 'during the profile').to.deep.equal([]);
    const s = await h.waitForSession(started.body.session_id);
    expect(s.status).to.equal('completed');
    const [profile, heap] = s.messages.filter((m: any) => m.role === 'tool').map((m: any) => JSON.parse(m.content));
    expect(profile.thread).to.equal(1);
    // As long as asked, give or take the late timers of a loaded machine (3.5 s seen with three test lanes).
    expect(profile.durationMs).to.be.within(2900, 6000);
    expect(profile.topFunctions).to.have.length.at.most(5);
    const busy = profile.topFunctions.find((f: any) => f.function === 'busyLoopForProfile');
    expect(busy, JSON.stringify(profile.topFunctions)).to.not.equal(undefined);
    expect(busy.url).to.match(/components\/busy\/busy\.js$/);
    expect(busy.line).to.equal(4);
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

// The investigator's extras on a real Harper through the real OpenAI SDK: the environment block (Harper's version with no
// tool call) and harper_best_practice (the package's rules, one read in pages within the cap).
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ruleNames } from '@harperfast/skills';
import { providerSuite } from './providerSuite.js';
import { providerSettings } from './recoveryScenarios.js';

const require = createRequire(import.meta.url);
const HARPER_VERSION = (JSON.parse(readFileSync(new URL('../../node_modules/harperdb/package.json', import.meta.url), 'utf8')) as { version: string }).version;
const AGENT_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('the investigator knows where it runs and reads Harper\'s best practices', function () {
  this.timeout(120_000);
  const suite = providerSuite();

  it("asked for Harper's version, the model finds it in its first request, with no tool call", async () => {
    const { h, server } = suite;
    expect(HARPER_VERSION).to.equal('4.7.29');
    server.reset([{ text: `This is Harper ${HARPER_VERSION}.` }]);
    expect((await h.setConfig(providerSettings('openai', server))).status).to.equal(200);
    const s = await h.prompt('What Harper version is this?');
    expect(s.status).to.equal('completed');
    expect(server.requests).to.have.length(1);
    const systems = server.requests[0]!.neutral.systems;
    expect(systems).to.have.length(1);
    const block = systems[0]!.slice(systems[0]!.indexOf('=== Where you run ==='));
    expect(block).to.match(new RegExp(`^=== Where you run ===\\nHarper ${HARPER_VERSION.replace(/\./g, '\\.')} on node \\S+, [1-9]\\d* worker threads?\\.\\n`));
    expect(block).to.include(`Node.js ${process.version}. Harper Agent ${AGENT_VERSION}.`);
    // The time goes with the prompt, not the system prompt (which stays the same for every request of a session).
    expect(block).to.not.match(/\d{4}-\d\d-\d\dT/);
    const prompt = server.requests[0]!.neutral.messages[0]!.text;
    const sent = /^What Harper version is this\?\n\n\[sent (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\]$/.exec(prompt)![1]!;
    expect(Math.abs(Date.parse(sent) - Date.now())).to.be.below(60_000);
    expect(Date.parse(sent)).to.equal(Math.floor(s.messages[0].at / 1000) * 1000);
    expect(s.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']);
    // get_agent_status answers the same facts for the operator.
    const status = (await h.op({ operation: 'get_agent_status' })).body;
    expect(status.environment).to.include({ harper: HARPER_VERSION, agent: AGENT_VERSION, nodeVersion: process.version });
  });

  it('harper_best_practice lists the rules and returns one whole, in pages under a small cap, through the loop', async () => {
    const { h, server } = suite;
    const cap = 4096;
    const rule = 'checking-authentication';
    const file = path.join(path.dirname(require.resolve('@harperfast/skills')), '..', 'harper-best-practices', 'rules', `${rule}.md`);
    const text = readFileSync(file, 'utf8');
    expect(Buffer.byteLength(text)).to.be.above(cap / 2);
    server.reset([]);
    server.responder = (req) => {
      const last = req.messages.at(-1)!;
      if (last.role === 'user') return { toolCalls: [{ name: 'harper_best_practice', arguments: {} }] };
      const result = JSON.parse(last.text);
      if (result.rules) return { toolCalls: [{ name: 'harper_best_practice', arguments: { rule } }] };
      if (result.nextLine !== undefined) return { toolCalls: [{ name: 'harper_best_practice', arguments: { rule, startLine: result.nextLine, offset: result.nextOffset } }] };
      return { text: 'read it' };
    };
    expect((await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: cap, workingSetBytes: 0 })).status).to.equal(200);
    const s = await h.prompt('What does Harper advise about authentication?');
    expect(s.status).to.equal('completed');
    const results = s.messages.filter((m: any) => m.role === 'tool').map((m: any) => JSON.parse(m.content));
    expect(results[0]).to.deep.equal({ rules: [...ruleNames].sort() });
    const pages = results.slice(1);
    expect(pages.length).to.be.at.least(Math.ceil(Buffer.byteLength(text) / (cap / 2)));
    for (const m of s.messages.filter((m: any) => m.role === 'tool')) expect(Buffer.byteLength(m.content)).to.be.at.most(cap);
    expect(pages.map((p: any) => p.content).join('')).to.equal(text);
    expect(pages.every((p: any) => p.rule === rule && p.path === `best-practices/${rule}.md`)).to.equal(true);
    server.responder = undefined;
  });
});

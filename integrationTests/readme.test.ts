// The README's commands, run as written against a real Harper: the quick start's two curl requests (the URL is the
// test Harper's; the credentials are the README's own, `npm start`'s), and the CLI line that shows a window too small
// for any run refused with the smallest that works. What the README says they answer is what they answer. (The
// install commands are run by cluster.test.ts and freshClone.test.ts; deploy_component with a payload as the README
// builds it, `npm install && npm start` and `npm test` on a fresh clone.)
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { providerSuite } from './providerSuite.js';

const run = promisify(execFile);
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The README's fenced shell block that holds `needle`, as its lines. */
function shellBlock(needle: string): string[] {
  const blocks = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.includes(needle));
  if (!block) throw new Error(`no sh block in README.md holds ${needle}`);
  return block.trimEnd().split('\n');
}

/** A block's commands (a trailing backslash joins lines), each with the comment lines after it (what it answers). */
function commands(lines: string[]): { command: string; says: string }[] {
  const out: { command: string; says: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.startsWith('#')) continue;
    let command = lines[i]!;
    while (command.endsWith('\\')) command = command.slice(0, -1) + (lines[++i] ?? '');
    const says: string[] = [];
    while (lines[i + 1]?.startsWith('# ')) says.push(lines[++i]!.slice(2));
    out.push({ command, says: says.join(' ') });
  }
  return out;
}

describe("the README's commands, as written", function () {
  this.timeout(60_000);
  const suite = providerSuite();

  it('the quick start: agent_prompt answers a running session, get_agent_session its transcript', async () => {
    const { h } = suite;
    const [prompt, get] = commands(shellBlock('"operation":"agent_prompt"'));
    expect(prompt!.command).to.contain("-u admin:harper-agent");
    const here = (c: string) => c.replaceAll('http://localhost:9925/', h.harper.opsUrl);
    const started = JSON.parse((await run('bash', ['-c', here(prompt!.command)])).stdout);
    // The README's comment, its "…" standing for any value.
    const said = JSON.parse(prompt!.says.replace(/"…"/g, 'null'));
    expect(Object.keys(started).sort()).to.deep.equal(Object.keys(said).sort());
    expect(started.status).to.equal(said.status);
    let s: any;
    for (let i = 0; i < 100; i++) {
      s = JSON.parse((await run('bash', ['-c', here(get!.command).replace('"session_id":"…"', `"session_id":"${started.session_id}"`)])).stdout);
      if (s.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(s.status).to.equal('completed');
    // The transcript: the prompt, then the local backend's answer about the log (what it says depends on what this
    // shared Harper's log holds by now: other tests write to it).
    expect(s.messages[0]).to.include({ role: 'user', content: 'summarize logs/hdb.log' });
    expect(s.messages.at(-1).role).to.equal('assistant');
    expect(s.messages.at(-1).content).to.contain('logs/hdb.log');
  });

  it('a window too small for any run is refused with the message the README shows', async () => {
    const { h } = suite;
    const [config] = commands(shellBlock('contextWindowTokens=1024'));
    const cli = config!.command.replace(/^harper-agent /, `${process.execPath} dist/cli/main.js `);
    const refused = await run('bash', ['-c', cli], { env: { ...process.env, ...h.cliEnv() } }).catch((e) => e);
    expect(refused.code).to.equal(7);
    // The sizes depend on the host (the environment block the system prompt carries): the same words, the numbers
    // within 10% of the README's.
    const numbers = (text: string) => [/about (\d+) tokens/.exec(text)![1], /works is (\d+)/.exec(text)![1]].map(Number);
    const words = (text: string) => text.replace(/about \d+ tokens/, 'about N tokens').replace(/works is \d+/, 'works is N');
    const expected = `harper-agent: ${config!.says}\n`;
    expect(words(refused.stderr)).to.equal(words(expected));
    numbers(refused.stderr).forEach((n, i) => expect(n).to.be.within(numbers(expected)[i]! * 0.9, numbers(expected)[i]! * 1.1));
  });
});

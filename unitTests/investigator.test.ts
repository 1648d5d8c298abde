// The investigator's own extras: where it runs (the environment block) and Harper's best-practice rules.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ruleNames } from '@harperfast/skills';
import { environmentBlock, harperVersion, hostEnvironment } from '../agent/environment.js';
import { systemPrompt, SYSTEM_PROMPT } from '../agent/systemPrompt.js';
import { bestPracticeTool, rulesDirectory } from '../agent/tools/bestPractices.js';
import { ToolError, type ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

describe('the environment block', () => {
  it("names Harper's version from the package.json of the harperdb whose script started the process (through a symlinked bin)", () => {
    const base = mkdtempSync(path.join(os.tmpdir(), 'agent-env-'));
    const pkg = path.join(base, 'node_modules', 'harperdb');
    mkdirSync(path.join(pkg, 'bin'), { recursive: true });
    writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'harperdb', version: '4.7.29' }));
    writeFileSync(path.join(pkg, 'bin', 'harperdb.js'), '');
    mkdirSync(path.join(base, '.bin'));
    symlinkSync(path.join(pkg, 'bin', 'harperdb.js'), path.join(base, '.bin', 'harperdb'));
    expect(harperVersion(path.join(base, '.bin', 'harperdb'))).to.equal('4.7.29');
    expect(harperVersion(path.join(base, 'nowhere.js'))).to.equal(null);
    writeFileSync(path.join(base, 'other.js'), '');
    expect(harperVersion(path.join(base, 'other.js'))).to.equal(null);
  });

  it('is a few lines with the version, node, threads, OS, Node.js, the agent and the run\'s start in UTC, after the prompt and before the operator\'s text', () => {
    const env = { harper: '4.7.29', node: 'node-a', threads: 2, os: 'Linux 6.1.0 x64', nodeVersion: 'v20.19.0', agent: '0.1.0' };
    const block = environmentBlock(env, new Date('2026-12-04T19:05:06.789Z'));
    expect(block).to.equal(
      '=== Where you run ===\nHarper 4.7.29 on node node-a, 2 worker threads.\nLinux 6.1.0 x64, Node.js v20.19.0. Harper Agent 0.1.0.\nThis run started at 2026-12-04T19:05:06Z (UTC).'
    );
    expect(environmentBlock({ ...env, harper: null, node: null, threads: 1 }, new Date(0))).to.match(/^=== Where you run ===\nHarper \(version unknown\), 1 worker thread\.\n/);
    expect(Buffer.byteLength(block)).to.be.below(400);
    expect(systemPrompt('Be brief.', block)).to.equal(`${SYSTEM_PROMPT}\n\n${block}\n\n=== Operator instructions ===\nBe brief.`);
    expect(systemPrompt(undefined, undefined)).to.equal(SYSTEM_PROMPT);
    // Outside a Harper worker there is no thread count; the rest is this process's.
    expect(hostEnvironment('9.9.9', 'n')).to.deep.include({ threads: null, nodeVersion: process.version, agent: '9.9.9', node: 'n' });
  });
});

describe('harper_best_practice', () => {
  const ctx = (maxResultBytes: number): ToolContext => ({ scopes: tempScopes(), maxResultBytes, signal: new AbortController().signal });
  const dir = rulesDirectory()!;

  it("lists the package's rules", async () => {
    expect(await bestPracticeTool.handler({}, ctx(65536))).to.deep.equal({ rules: [...ruleNames].sort() });
  });

  it('returns a rule whole in one page when it fits, the file exactly', async () => {
    const text = readFileSync(path.join(dir, 'caching.md'), 'utf8');
    const page = (await bestPracticeTool.handler({ rule: 'caching' }, ctx(65536))) as Record<string, unknown>;
    expect(page).to.include({ rule: 'caching', path: 'best-practices/caching.md', content: text, startLine: 1, size: Buffer.byteLength(text) });
    expect(page.nextLine).to.equal(undefined);
  });

  it('pages a rule over half the cap: every page within it, the pages together the file exactly', async () => {
    const file = path.join(dir, 'checking-authentication.md');
    const text = readFileSync(file, 'utf8');
    const cap = 4096;
    expect(Buffer.byteLength(text)).to.be.above(cap / 2);
    let args: Record<string, unknown> = { rule: 'checking-authentication' };
    let joined = '';
    let pages = 0;
    for (;;) {
      const page = (await bestPracticeTool.handler(args, ctx(cap))) as Record<string, any>;
      pages++;
      expect(Buffer.byteLength(JSON.stringify(page))).to.be.at.most(cap / 2 + 200);
      joined += page.content;
      if (page.nextLine === undefined) break;
      args = { rule: 'checking-authentication', startLine: page.nextLine, offset: page.nextOffset };
    }
    expect(pages).to.be.at.least(Math.ceil(Buffer.byteLength(text) / (cap / 2)));
    expect(joined).to.equal(text);
  });

  it('an unknown or malformed rule is a tool error naming the rules there are', async () => {
    for (const rule of ['no-such-rule', '../SKILL', 'Caching']) {
      const error = await bestPracticeTool.handler({ rule }, ctx(65536)).then(() => null, (e) => e);
      expect(error).to.be.instanceOf(ToolError);
      expect(error.message).to.equal(`unknown rule ${JSON.stringify(rule)}: the rules are ${[...ruleNames].sort().join(', ')}`);
    }
  });
});

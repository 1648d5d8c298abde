// The investigator's own extras: where it runs (the environment block) and Harper's best-practice rules.
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ruleNames } from '@harperfast/skills';
import { environmentBlock, harperVersion, hostEnvironment } from '../agent/environment.js';
import { systemPrompt, SYSTEM_PROMPT } from '../agent/systemPrompt.js';
import { bestPracticeTool, rulesDirectory } from '../agent/tools/bestPractices.js';
import { ToolError, type ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { probeThread, ProbeError, topBySelfTime, type ProfileResult } from '../agent/threadProbe.js';
import { checkThread } from '../agent/tools/threadTools.js';

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
    rmSync(base, { recursive: true, force: true });
  });

  it('is a few lines with the version, node, threads, OS, Node.js, the agent and the run\'s start in UTC, after the prompt and before the operator\'s text', () => {
    const env = { harper: '4.7.29', node: 'node-a', threads: 2, os: 'Linux 6.1.0 x64', nodeVersion: 'v20.19.0', agent: '0.1.0' };
    const block = environmentBlock(env);
    expect(block).to.equal(
      '=== Where you run ===\nHarper 4.7.29 on node node-a, 2 worker threads.\nLinux 6.1.0 x64, Node.js v20.19.0. Harper Agent 0.1.0.\nEach prompt ends with the time it was sent, [sent <UTC time>].'
    );
    expect(environmentBlock({ ...env, harper: null, node: null, threads: 1 })).to.match(/^=== Where you run ===\nHarper \(version unknown\), 1 worker thread\.\n/);
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

describe('profile_cpu and heap_usage (the thread probe)', () => {
  const ctx: ToolContext = { scopes: tempScopes(), maxResultBytes: 65536, signal: new AbortController().signal };

  it("self time per function from V8's samples: each sample's time is the delta to the next, idle left out, largest first", () => {
    const frame = (functionName: string, lineNumber: number) => ({ functionName, url: 'file:///c.js', lineNumber });
    const profile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', -1) },
        { id: 2, callFrame: frame('(idle)', -1) },
        { id: 3, callFrame: frame('spin', 9) },
        { id: 4, callFrame: frame('', 19) },
      ],
      samples: [3, 3, 2, 4, 3],
      timeDeltas: [0, 1000, 2000, 500, 1500],
      startTime: 0,
      endTime: 5000,
    };
    // spin: 1000 (to the 2nd) + 2000 (to the idle one) + 0 (last) = 3 ms; the anonymous one: 1.5 ms; idle: not counted.
    expect(topBySelfTime(profile, 5)).to.deep.equal({
      busyMs: 4.5,
      sampleCount: 5,
      top: [
        { function: 'spin', url: 'file:///c.js', line: 10, selfMs: 3, percent: 66.7 },
        { function: '(anonymous)', url: 'file:///c.js', line: 20, selfMs: 1.5, percent: 33.3 },
      ],
    });
    expect(topBySelfTime(profile, 1).top).to.have.length(1);
  });

  it('a thread that is not a worker index is a tool error naming the ones there are; outside Harper there are none', () => {
    for (const bad of [-1, 2, 1.5, '0']) expect(() => checkThread(bad, 2)).to.throw(ToolError, `unknown thread ${JSON.stringify(bad)}: Harper has 2 worker threads, 0 to 1`);
    expect(() => checkThread(1, 1)).to.throw(ToolError, 'unknown thread 1: Harper has 1 worker thread, 0');
    expect(checkThread(1, 2)).to.equal(1);
    expect(() => checkThread(0, null)).to.throw(ToolError, 'not running in a Harper worker thread');
  });

  it('a worker answers its heap and a profile that names its busy function; a worker that does not exist times out', async function () {
    this.timeout(20_000);
    const worker = new Worker(new URL('./probeWorker.js', import.meta.url), { workerData: { workerIndex: 0, workerCount: 1 } });
    try {
      await once(worker, 'message');
      const heap = (await probeThread(0, { kind: 'heap' }, 5000)) as any;
      expect(heap.thread).to.equal(0);
      expect(heap.heap.used_heap_size).to.be.a('number').above(0);
      expect(heap.spaces.map((s: any) => s.name)).to.include('old_space');
      const profile = (await probeThread(0, { kind: 'profile', durationMs: 600, topN: 5 }, 5000)) as ProfileResult;
      expect(profile.thread).to.equal(0);
      expect(profile.sampleCount).to.be.above(50);
      expect(profile.topFunctions.map((f) => f.function)).to.include('busyLoopInWorker');
      const busy = profile.topFunctions.find((f) => f.function === 'busyLoopInWorker')!;
      expect(busy.url).to.match(/probeWorker\.js$/);
      const compiled = readFileSync(new URL('./probeWorker.js', import.meta.url), 'utf8').split('\n');
      expect(busy.line, 'the function\'s line in the file the worker ran').to.equal(compiled.findIndex((l) => l.startsWith('function busyLoopInWorker')) + 1);
      const error = await probeThread(3, { kind: 'heap' }, 300).then(() => null, (e) => e);
      expect(error).to.be.instanceOf(ProbeError);
      expect(error.message).to.equal('worker thread 3 did not answer within 300 ms');
    } finally {
      worker.postMessage('stop');
      await worker.terminate();
    }
  });
});

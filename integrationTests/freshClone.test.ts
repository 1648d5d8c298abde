// The first ten minutes of a new operator, on a fresh clone of this repository (its committed state): `npm install`
// leaves the lockfile as committed, `npm start` boots a Harper that asks every request for credentials, opens no
// inspector and does not reload when the CLI runs, and the README's CLI line works at once, three times in parallel.
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { DEV_ADMIN, freePort, REPO } from '../scripts/harper.js';
import { listeningPorts } from './harness.js';

const run = promisify(execFile);


const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a fresh clone, as a new operator uses it', function () {
  this.timeout(300_000);
  let clone: string;
  let root: string;

  before(async () => {
    clone = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-clone-'));
    root = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-start-'));
    await run('git', ['clone', '--quiet', REPO, clone]);
  });
  after(() => {
    rmSync(clone, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  });

  it('npm install leaves the committed lockfile as it is: git status is clean', async () => {
    // The lockfile npm would write, resolved from the committed package.json and lockfile (npm's cache, no download).
    await run('npm', ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: clone });
    expect((await run('git', ['status', '--porcelain'], { cwd: clone })).stdout).to.equal('');
  });

  describe('npm start', () => {
    let npm: ChildProcess;
    let output = '';
    let harperPid = 0;
    let opsUrl: string;
    let httpUrl: string;

    before(async function () {
      this.timeout(300_000);
      // The installed packages of this checkout (a second install would download nothing new and take minutes).
      symlinkSync(path.join(REPO, 'node_modules'), path.join(clone, 'node_modules'));
      // And its build, which npm test made a moment ago (in CI from the same commit, in a clean clone: that is the
      // build from nothing): copied after the clone, so npm start's build finds every project up to date and only
      // bundles, instead of compiling all of it a second time (16 CPU-s of a 2-core run).
      for (const dir of ['dist', ...['openai', 'anthropic', 'bedrock', 'ollama'].map((p) => `components/${p}/dist`)]) cpSync(path.join(REPO, dir), path.join(clone, dir), { recursive: true });
      const httpPort = await freePort();
      const opsPort = await freePort();
      opsUrl = `http://127.0.0.1:${opsPort}/`;
      httpUrl = `http://127.0.0.1:${httpPort}/`;
      // Its own process group, so the test can stop npm, the start script and Harper together.
      // Not the lane's port range (TEST_PORTS): npm start would hand out the test's two ports again for its others.
      const { TEST_PORTS: _lane, ...env } = process.env;
      npm = spawn('npm', ['start'], { cwd: clone, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, ROOTPATH: root, HTTP_PORT: String(httpPort), OPERATIONSAPI_NETWORK_PORT: String(opsPort) } });
      npm.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      npm.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      const deadline = Date.now() + 240_000;
      while (!(harperPid = Number(/harper-agent is ready \(Harper PID (\d+)\)/.exec(output)?.[1] ?? 0))) {
        if (npm.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not get ready:\n${output.slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    });
    after(async function () {
      this.timeout(60_000);
      if (npm?.pid && npm.exitCode === null && npm.signalCode === null) {
        const exited = new Promise((r) => npm.once('exit', r));
        process.kill(-npm.pid, 'SIGINT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
      }
      if (harperPid && alive(harperPid)) process.kill(harperPid, 'SIGKILL');
    });

    it('prints where everything is, and its CLI line (npx harper-agent) works right away, with two more CLI calls at once', async () => {
      expect(output).to.include(`Operations API: http://localhost:${new URL(opsUrl).port}/`);
      expect(output).to.include('Every request needs credentials');
      const env = { ...process.env, HARPER_AGENT_URL: opsUrl, HARPER_AGENT_USER: DEV_ADMIN.username, HARPER_AGENT_PASSWORD: DEV_ADMIN.password };
      // The printed line as printed (npx), and the same bin (package.json `bin`) twice beside it: three sessions at
      // once on a Harper that just booted. npx itself costs 3-4 CPU-s a call (it reads the whole installed tree).
      const bin = JSON.parse(readFileSync(path.join(clone, 'package.json'), 'utf8')).bin['harper-agent'] as string;
      const line = /npx (harper-agent prompt .*)$/m.exec(output)?.[1];
      expect(line, 'the CLI line npm start prints').to.equal('harper-agent prompt "summarize logs/hdb.log"');
      const calls = await Promise.all(
        [['npx', 'harper-agent'], [process.execPath, bin], [process.execPath, bin]].map(([command, ...head], n) =>
          run(command!, [...head, 'prompt', `say hello, ${n}`], { cwd: clone, env }).then(
            (r) => ({ code: 0, ...r }),
            (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr })
          )
        )
      );
      for (const c of calls) {
        expect(c.code, c.stderr).to.equal(0);
        expect(c.stdout).to.match(/^session \S+\n/);
      }
      expect(new Set(calls.map((c) => c.stdout.split('\n')[0])).size).to.equal(3);
      // Nothing reloaded Harper (npx marks the CLI executable in the component): the same process answers.
      expect(alive(harperPid)).to.equal(true);
      expect(output).to.not.include('Reloaded HarperDB components');
    });

    it('asks for credentials: the admin page and the operations API answer 401 without them', async () => {
      const page = await fetch(`${httpUrl}agent/`);
      expect(page.status).to.equal(401);
      const op = await fetch(opsUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'list_agent_sessions' }) });
      expect(op.status).to.equal(401);
      const harperOwn = await fetch(opsUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'describe_all' }) });
      expect(harperOwn.status).to.equal(401);
    });

    it('opens no inspector: none of the ports Harper listens on answers the inspector protocol', async () => {
      const ports = listeningPorts(harperPid);
      expect(ports).to.include.members([Number(new URL(httpUrl).port), Number(new URL(opsUrl).port)]);
      expect(ports).to.not.include(9229);
      // An inspector answers GET /json/version with its protocol version; Harper's own ports do not.
      const inspectors: number[] = [];
      for (const port of ports) {
        const version = await fetch(`http://127.0.0.1:${port}/json/version`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.text(), () => '');
        if (version.includes('Protocol-Version')) inspectors.push(port);
      }
      expect(inspectors).to.deep.equal([]);
    });

    it('Ctrl-C stops npm start and Harper with it', async () => {
      const exited = new Promise<number | null>((r) => npm.once('exit', (code) => r(code)));
      process.kill(-npm.pid!, 'SIGINT');
      await exited;
      const deadline = Date.now() + 15_000;
      while (alive(harperPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(alive(harperPid)).to.equal(false);
    });
  });
});

// Installed the way an operator installs components: a plain Harper with no component, the root `npm pack` tarball
// deployed with deploy_component, each provider through its real SDK, drop_component, and `harperdb deploy` from the
// unpacked tarball (an upgrade that keeps the settings, on every worker thread). Settings outliving a process restart:
// cluster.test.ts (a node SIGKILLed and booted again).
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO } from '../scripts/harper.js';
import { bootHarper, type TestHarper } from './harness.js';
import { packedTarball } from './pack.js';
import { ProviderServer } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

const run = promisify(execFile);
const PACKAGE = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { name: string; version: string };

describe('deploy_component into a plain Harper (the packed tarball)', function () {
  let work: string;
  let tarball: string;
  let files: string[];
  let h: TestHarper;
  const server = new ProviderServer();

  before(async function () {
    this.timeout(300_000);
    work = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-deploy-'));
    tarball = await packedTarball();
    files = (await run('tar', ['tzf', tarball], { maxBuffer: 64 * 1024 * 1024 })).stdout.split('\n').filter(Boolean);
    // A plain instance, as an operator runs it: no component, production defaults (Harper's dev defaults run one
    // thread and trust local requests), two worker threads.
    h = await bootHarper({ component: null, mode: 'prod', env: { THREADS_COUNT: '2' } });
    await server.start();
  });
  after(async () => {
    await h?.stop();
    await server.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the tarball holds the agent and its four backends, each one file with its libraries compiled in, and nothing of the dev setup', async () => {
    // Exactly, but for the two packages shipped whole: gpt-tokenizer (one module per model, loaded by model id at run
    // time) and @harperfast/skills (rules read as files).
    const backends = ['anthropic', 'bedrock', 'ollama', 'openai'].flatMap((p) => ['config.yaml', 'dist/component.js', 'package.json'].map((f) => `package/node_modules/harper-agent-${p}/${f}`));
    expect(files.filter((f) => !/^package\/node_modules\/(gpt-tokenizer|@harperfast\/skills)\//.test(f)).sort()).to.deep.equal(
      [
        'package/README.md',
        'package/package.json',
        'package/config.yaml',
        'package/admin/app.js',
        'package/admin/index.html',
        'package/admin/style.css',
        'package/schema/config.schema.json',
        'package/schema/schema.graphql',
        'package/dist/component/boot.js',
        'package/dist/component/cli.js',
        'package/dist/component/grepWorker.js',
        ...backends,
      ].sort(),
    );
    expect(files).to.include.members(['package/node_modules/gpt-tokenizer/package.json', 'package/node_modules/@harperfast/skills/package.json']);
    const packed = JSON.parse((await run('tar', ['xzOf', tarball, 'package/package.json'])).stdout);
    expect(Object.keys(packed.dependencies).sort()).to.deep.equal(['@harperfast/skills', 'gpt-tokenizer', 'harper-agent-anthropic', 'harper-agent-bedrock', 'harper-agent-ollama', 'harper-agent-openai']);
    expect(packed.bin).to.deep.equal({ 'harper-agent': 'dist/component/cli.js' });
  });

  it('deployed as a payload: the agent answers on every thread with all backends, and each provider completes a prompt', async function () {
    this.timeout(180_000);
    const payload = readFileSync(tarball).toString('base64');
    const deployed = await h.op({ operation: 'deploy_component', project: 'harper-agent', payload, restart: true });
    expect(deployed.status, JSON.stringify(deployed.body)).to.equal(200);
    expect(deployed.body.message).to.equal('Successfully deployed: harper-agent, restarting HarperDB');
    const status = await h.waitForAgent(Date.now(), 2);
    expect(status).to.include({ version: PACKAGE.version });
    expect(status.providers).to.deep.equal(['anthropic', 'bedrock', 'local', 'ollama', 'openai']);
    const threads = await h.statusPerThread(2);
    expect(threads.size).to.equal(2);
    for (const s of threads.values()) expect(s.providers).to.deep.equal(['anthropic', 'bedrock', 'local', 'ollama', 'openai']);
    // Harper links itself into the component (import 'harperdb'); nothing installed it a second time.
    const installed = path.join(h.componentsDir, 'harper-agent');
    expect(lstatSync(path.join(installed, 'node_modules/harperdb')).isSymbolicLink()).to.equal(true);
    expect(existsSync(path.join(installed, 'node_modules/typescript'))).to.equal(false);
    // harper_best_practice's rules came with it (Harper installs nothing for a package that brings node_modules).
    expect(existsSync(path.join(installed, 'node_modules/@harperfast/skills/harper-best-practices/rules'))).to.equal(true);

    for (const provider of ['openai', 'anthropic', 'bedrock', 'ollama'] as const) {
      const settings = providerSettings(provider, server);
      expect((await h.setConfig(settings)).status).to.equal(200);
      server.reset([{ text: `hello from ${provider}, deployed` }]);
      const s = await h.prompt('say hello');
      expect(s.status, s.lastError).to.equal('completed');
      expect(s).to.include({ provider, model: settings.model });
      expect(s.messages.at(-1).content).to.equal(`hello from ${provider}, deployed`);
      expect(server.requests.map((r) => r.provider)).to.deep.equal([provider]);
    }
  });

  it('drop_component removes it (its operations are gone after the restart, its data stays), and harperdb deploy from the unpacked tarball brings it back with its settings, on every thread', async function () {
    this.timeout(240_000);
    const set = await h.setConfig({ provider: 'local', maxToolResultBytes: 4096, maxTurns: 77, apiKey: 'sk-never-shown' });
    expect(set.status).to.equal(200);
    expect(set.body.persisted).to.deep.equal({ provider: 'local', maxToolResultBytes: 4096, maxTurns: 77, apiKey: '(set)' });
    expect(JSON.stringify(set.body)).to.not.contain('sk-never-shown');
    const dropped = await h.op({ operation: 'drop_component', project: 'harper-agent' });
    expect(dropped.body).to.deep.equal({ message: 'Successfully dropped: harper-agent' });
    expect(existsSync(path.join(h.componentsDir, 'harper-agent'))).to.equal(false);
    expect((await h.op({ operation: 'restart_service', service: 'http_workers' })).status).to.equal(200);
    const deadline = Date.now() + 60_000;
    let gone: { status: number; body: any } = { status: 0, body: null };
    while (Date.now() < deadline) {
      gone = await h.opOnNewConnection({ operation: 'get_agent_config' }).catch(() => gone);
      if (gone.status === 400) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(gone.body).to.deep.equal({ error: "Operation 'get_agent_config' not found" });
    expect((await h.op({ operation: 'describe_database', database: 'agent' })).body).to.have.property('AgentSetting');

    // The remote path of the README: unpack the tarball, run Harper's CLI in it. skip_node_modules=false sends the
    // bundled dependencies, so Harper installs nothing.
    const unpacked = path.join(work, 'unpacked');
    await run('mkdir', ['-p', unpacked]);
    await run('tar', ['xzf', tarball, '-C', unpacked]);
    const { username, password } = h.harper.admin;
    const since = Date.now();
    const cli = await run(process.execPath, [path.join(REPO, 'node_modules/harperdb/bin/harperdb.js'), 'deploy', `target=${h.harper.opsUrl}`, `username=${username}`, `password=${password}`, 'project=harper-agent', 'restart=true', 'skip_node_modules=false'], {
      cwd: path.join(unpacked, 'package'),
      env: { ...process.env, HOME: unpacked },
    });
    expect(cli.stdout.trim()).to.equal('message: "Successfully deployed: harper-agent, restarting HarperDB"');
    await h.waitForAgent(since, 2);
    const threads = await h.statusPerThread(2);
    expect(threads.size).to.equal(2);
    for (const status of threads.values()) {
      expect(status.providers).to.deep.equal(['anthropic', 'bedrock', 'local', 'ollama', 'openai']);
      expect(status.config).to.include({ provider: 'local', maxToolResultBytes: 4096, maxTurns: 77, apiKey: '(set)' });
      expect(JSON.stringify(status)).to.not.contain('sk-never-shown');
    }
    // The stored rows, as Harper's own operations show them: one per key set since the deploy (the provider prompts
    // set baseUrl, model and maxRetries).
    const rows = await h.op({ operation: 'search_by_value', database: 'agent', table: 'AgentSetting', search_attribute: 'key', search_value: '*', get_attributes: ['key', 'value'] });
    expect(rows.body.map((r: any) => r.key).sort()).to.deep.equal(['apiKey', 'baseUrl', 'maxRetries', 'maxToolResultBytes', 'maxTurns', 'model', 'provider']);
    expect(rows.body.find((r: any) => r.key === 'maxTurns')).to.deep.equal({ key: 'maxTurns', value: 77 });
  });
});

// The CLI (`harper-agent`, dist/cli/main.js) as an operator runs it: a real process against the real Harper, its
// output checked line by line against the session row Harper stores.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_SCHEMA } from '../agent/agent.js';
import { messageBytes } from '../agent/session.js';
import { freePort, REPO } from '../scripts/harper.js';
import { providerSuite, useLocal } from './providerSuite.js';

const CLI = path.join(REPO, 'dist/cli/main.js');

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** When each stdout chunk arrived, to tell live output from output at the end. */
  chunks: { at: number; text: string }[];
}

describe('harper-agent CLI against a real Harper', function () {
  const suite = providerSuite();
  let env: Record<string, string>;

  before(() => {
    const { opsUrl, admin } = suite.h.harper;
    env = { HARPER_AGENT_URL: opsUrl, HARPER_AGENT_USER: admin.username, HARPER_AGENT_PASSWORD: admin.password };
  });

  function cli(args: string[], extraEnv: Record<string, string> = {}): { done: Promise<CliRun>; run: CliRun } {
    const run: CliRun = { code: null, stdout: '', stderr: '', chunks: [] };
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH!, ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => {
      run.stdout += d.toString();
      run.chunks.push({ at: Date.now(), text: d.toString() });
    });
    child.stderr.on('data', (d: Buffer) => (run.stderr += d.toString()));
    const done = new Promise<CliRun>((resolve) => child.on('close', (code) => resolve(Object.assign(run, { code }))));
    return { done, run };
  }
  const runCli = (args: string[], extraEnv?: Record<string, string>) => cli(args, extraEnv).done;

  const fmt = (n: number) => `${n.toLocaleString('en-US')} bytes`;

  it('prompt prints each tool call and the stored size of each result, then the answer', async () => {
    writeFileSync(path.join(suite.h.logsDir, 'cli.log'), Array.from({ length: 12000 }, (_, i) => `line ${i}${i % 100 === 0 ? ' error: disk slow' : ''}`).join('\n') + '\n');
    const r = await runCli(['prompt', 'summarize logs/cli.log']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trimEnd().split('\n');
    const id = /^session (\S+)$/.exec(lines[0]!)![1]!;
    const row = await suite.h.row(id);
    const tools = row.messages.filter((m: any) => m.role === 'tool');
    expect(tools.length).to.be.greaterThan(1);
    // Each result is printed as the CLI first sees it: whole (its size as it landed, which the working set's marker
    // names), then a ✂ line once the working set cuts it; or already cut, marked so, when the cut came first (a busy
    // machine). Either way the lines say exactly what was stored when. The local backend's notes (the text of each call
    // after the first) are printed clipped.
    expect(tools.filter((m: any) => m.cut === 'workingSet').length).to.be.greaterThan(0);
    const clip = (text: string) => (text.length > 200 ? `${text.slice(0, 199)}…` : text);
    const printed = lines.slice(1);
    const cuts = printed.filter((l) => l.startsWith('  ✂ '));
    const expected: string[] = [];
    const expectedCuts: string[] = [];
    row.messages.slice(1, -1).forEach((m: any, k: number) => {
      if (m.role === 'assistant') {
        if (m.content) expected.push(`  · ${clip(m.content)}`);
        for (const c of m.toolCalls) expected.push(`  → ${c.name} ${JSON.stringify(c.arguments)}`);
        return;
      }
      const index = k + 1;
      const whole = m.cut === 'workingSet' ? Number(/full result is (\d+) bytes/.exec(m.content)![1]) : messageBytes(m);
      const cutLine = `  ✂ #${index} read_file cut to ${fmt(messageBytes(m))} as it left the working set (agent.workingSetBytes)`;
      if (m.cut === 'workingSet' && !cuts.includes(cutLine)) expected.push(`  ← read_file ${fmt(messageBytes(m))} [cut: working set (agent.workingSetBytes)]`);
      else {
        expected.push(`  ← read_file ${fmt(whole)}`);
        if (m.cut === 'workingSet') expectedCuts.push(cutLine);
      }
    });
    expect(cuts.sort()).to.deep.equal(expectedCuts.sort());
    const answer = row.messages.at(-1).content;
    expect(printed.filter((l) => !l.startsWith('  ✂ '))).to.deep.equal([...expected, ...answer.split('\n')]);
    expect(answer).to.contain('12000 lines');
  });

  it('prompt --json prints one object: status, answer and this run\'s messages with their sizes', async () => {
    const first = await runCli(['prompt', 'summarize logs/cli.log', '--json']);
    expect(first.code, first.stderr).to.equal(0);
    const a = JSON.parse(first.stdout);
    // A second prompt on the same session follows only its own messages.
    const second = await runCli(['prompt', 'hello', '--session', a.session_id, '--json']);
    expect(second.code, second.stderr).to.equal(0);
    expect(second.stdout.trim().split('\n')).to.have.length(1);
    const b = JSON.parse(second.stdout);
    const row = await suite.h.row(a.session_id);
    expect(b.session_id).to.equal(a.session_id);
    expect(b.status).to.equal('completed');
    expect(b.answer).to.equal(row.messages.at(-1).content);
    expect(b.messages.map((m: any) => m.index)).to.deep.equal([a.messages.at(-1).index + 1, a.messages.at(-1).index + 2]);
    expect(b.messages.map((m: any) => [m.role, m.bytes])).to.deep.equal(row.messages.slice(-2).map((m: any) => [m.role, messageBytes(m)]));
    expect(a.messages[0]).to.include({ index: 0, role: 'user', content: 'summarize logs/cli.log', bytes: 22 });
  });

  it('a write waits for approval (exit 10); approve resumes and follows it; --deny writes nothing', async () => {
    mkdirSync(path.join(suite.h.componentsDir, 'cli-notes'), { recursive: true });
    const target = path.join(suite.h.componentsDir, 'cli-notes/ok.txt');
    const asked = await runCli(['prompt', 'write components/cli-notes/ok.txt: written through the CLI']);
    expect(asked.code, asked.stderr).to.equal(10);
    const id = /^session (\S+)$/m.exec(asked.stdout)![1]!;
    const approval = /^⏸ write_file needs approval \((\S+)\): /m.exec(asked.stdout)![1]!;
    expect(asked.stdout).to.contain(`  approve: harper-agent approve ${id} ${approval}\n  deny:    harper-agent approve ${id} ${approval} --deny\n`);
    expect(existsSync(target)).to.equal(false);
    const approved = await runCli(['approve', id, approval]);
    expect(approved.code, approved.stderr).to.equal(0);
    expect(readFileSync(target, 'utf8')).to.equal('written through the CLI');
    expect(approved.stdout).to.equal(`approved ${approval}; following session ${id}\n  ← write_file ${fmt(messageBytes((await suite.h.row(id)).messages.at(-2)))}\nI wrote 23 bytes to components/cli-notes/ok.txt.\n`);

    const denied = path.join(suite.h.componentsDir, 'cli-notes/no.txt');
    const asked2 = await runCli(['prompt', 'write components/cli-notes/no.txt: never', '--json']);
    expect(asked2.code).to.equal(10);
    const pending = JSON.parse(asked2.stdout);
    expect(pending.status).to.equal('awaiting_approval');
    const deny = await runCli(['approve', pending.session_id, pending.pendingApprovals[0].approval_id, '--deny', '--json']);
    expect(deny.code, deny.stderr).to.equal(0);
    expect(JSON.parse(deny.stdout).answer).to.match(/^I did not write components\/cli-notes\/no\.txt: .*denied/);
    expect(existsSync(denied)).to.equal(false);
  });

  it('follow ID follows a run started with curl to its end, by a prefix of its id; an ambiguous or unknown prefix says so', async () => {
    await suite.h.setConfig({ provider: 'openai', baseUrl: `${suite.server.url}/v1`, apiKey: 'k', maxRetries: 0 });
    suite.server.reset([{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'cli.log' } }] }, { hang: true }]);
    try {
      // Started as curl would: a POST to the operations API.
      const started = await suite.h.op({ operation: 'agent_prompt', message: 'read logs/cli.log for me' });
      const id = started.body.session_id as string;
      const follow = cli(['follow', id.slice(0, 10)]);
      const deadline = Date.now() + 20_000;
      while (!/← read_file /.test(follow.run.stdout) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await runCli(['cancel', id]);
      const r = await follow.done;
      expect(r.stdout.split('\n')[0]).to.equal(`following session ${id} (running)`);
      expect(r.stdout).to.contain('  ← read_file ');
      expect([r.code, r.stderr]).to.deep.equal([1, '✗ aborted: Cancelled with cancel_agent_run.\n']);
      const unknown = await runCli(['show', 'zzzz']);
      expect([unknown.code, unknown.stderr]).to.deep.equal([5, 'harper-agent: 404 Not Found: session "zzzz" not found. `harper-agent sessions` lists the sessions.\n']);
    } finally {
      await useLocal(suite.h);
    }
  });

  it('follows live: the tool result is printed while the model call after it is still running; cancel ends it (exit 1)', async () => {
    await suite.h.setConfig({ provider: 'openai', baseUrl: `${suite.server.url}/v1`, apiKey: 'k', maxRetries: 0 });
    suite.server.reset([{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'cli.log' } }] }, { hang: true }]);
    try {
      const prompt = cli(['prompt', 'read logs/cli.log']);
      const deadline = Date.now() + 20_000;
      while (!/← read_file /.test(prompt.run.stdout) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const id = /^session (\S+)$/m.exec(prompt.run.stdout)![1]!;
      expect((await suite.h.row(id)).status).to.equal('running');
      expect(suite.server.requests).to.have.length(2); // the second model call is the one hanging
      const cancel = await runCli(['cancel', id]);
      expect(cancel.code, cancel.stderr).to.equal(0);
      expect(cancel.stdout).to.equal(`session ${id}: aborted\n`);
      const r = await prompt.done;
      expect(r.code).to.equal(1);
      expect(r.stderr).to.equal('✗ aborted: Cancelled with cancel_agent_run.\n');
      const row = await suite.h.row(id);
      expect(r.stdout).to.equal(`session ${id}\n  → read_file {"root":"logs","path":"cli.log"}\n  ← read_file ${fmt(messageBytes(row.messages[2]))}\n`);
    } finally {
      await useLocal(suite.h);
    }
  });

  it('sessions lists each session with its status, size and last error; show prints each message with its size', async () => {
    const done = JSON.parse((await runCli(['prompt', 'summarize logs/cli.log', '--json'])).stdout);
    const list = await runCli(['sessions']);
    expect(list.code, list.stderr).to.equal(0);
    const [header, ...rows] = list.stdout.trimEnd().split('\n');
    expect(header).to.match(/^SESSION\s+TITLE\s+OWNER\s+STATUS\s+MSGS\s+BYTES\s+COST\s+UPDATED \(UTC\)\s+LAST ERROR$/);
    const s = (await suite.h.op({ operation: 'get_agent_session', session_id: done.session_id })).body;
    const mine = rows.find((l) => l.startsWith(done.session_id))!;
    expect(mine.split(/\s{2,}/).slice(0, 7)).to.deep.equal([done.session_id, 'summarize logs/cli.log', suite.h.harper.admin.username, 'completed', String(s.messages.length), s.bytes.toLocaleString('en-US'), '$0.0000']);
    expect(rows[0]!.startsWith(done.session_id), 'newest first').to.equal(true);
    const cancelled = rows.find((l) => / aborted /.test(l))!;
    expect(cancelled.endsWith('Cancelled with cancel_agent_run.')).to.equal(true);

    // Any unique beginning of an id names the session, as the admin page shows ids (8 characters).
    const show = await runCli(['show', done.session_id.slice(0, 8)]);
    expect(show.code, show.stderr).to.equal(0);
    const heads = show.stdout.split('\n').filter((l) => /^#\d+ /.test(l));
    const mark = (m: any) => (m.cut === 'workingSet' ? ' [cut: working set (agent.workingSetBytes)]' : '');
    expect(heads).to.deep.equal(s.messages.map((m: any, i: number) => `#${i} ${m.role === 'tool' ? `tool ${m.name}` : m.role} · ${fmt(messageBytes(m))}${mark(m)}`));
    expect(show.stdout.split('\n')[0]).to.equal(`session ${done.session_id} · completed · local / local-deterministic · ${s.messages.length} messages · ${fmt(s.bytes)}`);
    const json = JSON.parse((await runCli(['sessions', '--json', '--limit', '1'])).stdout);
    expect(json.sessions).to.have.length(1);
    expect(json.sessions[0]).to.include({ session_id: done.session_id, bytes: s.bytes, status: 'completed' });
    expect(json.nextCursor).to.be.a('string');
    // A page ends with how to get the next; filters narrow the list.
    const paged = await runCli(['sessions', '--limit', '1']);
    expect(paged.stdout.trimEnd().split('\n').at(-1)).to.equal(`more: harper-agent sessions --cursor ${json.nextCursor}`);
    const next = await runCli(['sessions', '--limit', '1', '--cursor', json.nextCursor]);
    expect(next.stdout.split('\n')[1]!.startsWith(done.session_id)).to.equal(false);
    const aborted = await runCli(['sessions', '--status', 'aborted']);
    const abortedRows = aborted.stdout.trimEnd().split('\n').slice(1).filter((l) => !l.startsWith('more:'));
    expect(abortedRows.length).to.be.at.least(1);
    expect(abortedRows.every((l) => / aborted /.test(l))).to.equal(true);
  });

  it('config shows the agent.* config and sets keys; a bad value is a 400 naming the key (exit 7)', async () => {
    const shown = await runCli(['config']);
    expect(shown.code).to.equal(0);
    // Columns are as wide as their longest value (a baseUrl set by another test widens them): compare cells.
    const row = (out: string, key: string) => out.split('\n').find((l) => l.startsWith(`${key} `))?.split(/\s{2,}/);
    expect(row(shown.stdout, 'maxToolResultBytes')).to.deep.equal(['maxToolResultBytes', '65,536', '65,536', '1,024 to 1,048,576']);
    expect(row(shown.stdout, 'contextWindowTokens')).to.deep.equal(['contextWindowTokens', '(unset)', 'unset', '1,024 to 10,000,000']);
    expect(shown.stdout.split('\n')).to.have.length(2 + Object.keys(CONFIG_SCHEMA.properties).length); // header, keys, final newline
    const set = await runCli(['config', 'maxTurns=7', 'autoApprove=false']);
    expect(set.code, set.stderr).to.equal(0);
    expect(row(set.stdout, 'maxTurns')).to.deep.equal(['maxTurns', '7', '50', '1 to 500']);
    expect(row(set.stdout, 'autoApprove')).to.deep.equal(['autoApprove', 'false', 'false', 'true or false']);
    expect(set.stdout.split('\n')).to.include('stored in agent.AgentSetting: maxTurns = 7, autoApprove = false');
    expect((await suite.h.op({ operation: 'get_agent_config' })).body.maxTurns).to.equal(7);
    const bad = await runCli(['config', 'maxToolResultBytes=1023']);
    expect(bad.code).to.equal(7);
    expect(bad.stderr).to.match(/^harper-agent: 400: .*maxToolResultBytes/);
    expect((await suite.h.op({ operation: 'get_agent_config' })).body.maxToolResultBytes).to.equal(65536);
    const back = await runCli(['config', 'maxTurns=null']);
    expect(row(back.stdout, 'maxTurns')).to.deep.equal(['maxTurns', '50', '50', '1 to 500']);
    expect(back.stdout.split('\n')).to.include('stored in agent.AgentSetting: maxTurns (taken back)');
  });

  it('says what went wrong and what to do: connection refused, 401, 403, 404, 409, usage', async () => {
    const port = await freePort();
    const refused = await runCli(['sessions'], { HARPER_AGENT_URL: `http://127.0.0.1:${port}/` });
    expect(refused.code).to.equal(3);
    expect(refused.stderr).to.equal(`harper-agent: cannot reach Harper's operations API at http://127.0.0.1:${port}/ (connection refused). Is Harper running? Point --url (or HARPER_AGENT_URL) at its operations API.\n`);

    const wrong = await runCli(['sessions', '--password', 'not-the-password']);
    expect(wrong.code).to.equal(4);
    expect(wrong.stderr).to.match(/^harper-agent: 401 Unauthorized: Harper rejected the credentials of admin \(.+\)\. Pass --user and --password/);

    const role = await suite.h.op({ operation: 'add_role', role: 'cli_reader', permission: { super_user: false } });
    expect(role.status, JSON.stringify(role.body)).to.equal(200);
    const user = await suite.h.op({ operation: 'add_user', role: 'cli_reader', username: 'cli_reader', password: 'reader-pass', active: true });
    expect(user.status, JSON.stringify(user.body)).to.equal(200);
    const forbidden = await runCli(['sessions'], { HARPER_AGENT_USER: 'cli_reader', HARPER_AGENT_PASSWORD: 'reader-pass' });
    expect(forbidden.code).to.equal(4);
    expect(forbidden.stderr).to.equal('harper-agent: 403 Forbidden: list_agent_sessions needs a super_user role or a role named in agent.roles (the role cli_reader is not). Use a user with the super_user role, or one whose role agent.roles names.\n');

    const missing = await runCli(['show', 'no-such-session']);
    expect(missing.code).to.equal(5);
    expect(missing.stderr).to.equal('harper-agent: 404 Not Found: session "no-such-session" not found. `harper-agent sessions` lists the sessions.\n');

    const done = JSON.parse((await runCli(['prompt', 'hello', '--json'])).stdout);
    const conflict = await runCli(['cancel', done.session_id]);
    expect(conflict.code).to.equal(6);
    expect(conflict.stderr).to.equal(`harper-agent: 409 Conflict: session ${done.session_id} is completed: there is no run to cancel.\n`);

    const noUser = await runCli(['sessions', '--password', 'p'], { HARPER_AGENT_USER: '' });
    expect([noUser.code, noUser.stderr]).to.deep.equal([2, 'harper-agent: a password needs a user: --user or HARPER_AGENT_USER\n']);

    const usage = await runCli(['approve', 'only-one-arg']);
    expect(usage.code).to.equal(2);
    expect(usage.stderr).to.equal('harper-agent: usage: harper-agent approve ID APPROVAL [--deny]\n');
  });
});

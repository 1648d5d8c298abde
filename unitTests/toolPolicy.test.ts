// A policy per tool (agent/toolPolicy.ts): allow, ask, deny, by role or "*", the readOnly preset, and approval for the
// rest of a session; checked on the request the backend receives and on the calls the model makes.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createOperations } from '../agent/operations.js';
import { activeRun } from '../agent/runs.js';
import type { Session } from '../agent/session.js';
import { ToolCallLog } from '../agent/toolCalls.js';
import { policyOf } from '../agent/toolPolicy.js';
import { defaultTools } from '../agent/tools/index.js';
import { calls, harness, text, type Harness } from './helpers.js';

const user = { username: 'admin', role: { role: 'super_user', permission: { super_user: true } } };
const tool = (name: string) => defaultTools.find((t) => t.name === name)!;

function ops(h: Harness) {
  return createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('no config store in this test')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: new Date(0).toISOString() } });
}

async function settle(h: Harness, id: string): Promise<Session> {
  await activeRun(id)?.done;
  return (await h.store.get(id))!;
}

describe('a policy per tool', () => {
  it('the role\'s own entry, then "*", then the default: a tool that writes asks (allows with autoApprove), any other runs', () => {
    const config = { autoApprove: false, toolPolicy: { '*': { read_file: 'ask' as const, http_fetch: 'deny' as const }, oncall: { read_file: 'allow' as const }, viewer: 'readOnly' as const } };
    expect([policyOf(config, 'sales', tool('read_file')), policyOf(config, 'oncall', tool('read_file')), policyOf(config, undefined, tool('read_file'))]).to.deep.equal(['ask', 'allow', 'ask']);
    expect([policyOf(config, 'sales', tool('write_file')), policyOf({ ...config, autoApprove: true }, 'sales', tool('write_file')), policyOf(config, 'sales', tool('tail_file'))]).to.deep.equal(['ask', 'allow', 'allow']);
    expect(policyOf(config, 'oncall', tool('http_fetch'))).to.equal('deny');
    // readOnly: what writes is denied; http_fetch reads with GET and writes with POST.
    expect(['write_file', 'harper_operation', 'read_file', 'grep_files'].map((n) => policyOf(config, 'viewer', tool(n)))).to.deep.equal(['deny', 'deny', 'allow', 'allow']);
    const fetch = tool('http_fetch');
    const ro = { autoApprove: false, toolPolicy: { viewer: 'readOnly' as const } };
    expect([policyOf(ro, 'viewer', fetch), policyOf(ro, 'viewer', fetch, { url: 'http://x/', method: 'POST' })]).to.deep.equal(['allow', 'deny']);
  });

  it('deny: the tool is not in the request the backend receives, and a call to it anyway is refused without asking', async () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n';
    const h = harness([calls(['grep_files', { root: 'logs', pattern: 'x' }], ['write_file', { root: 'components', path: 'k.txt', content: pem }]), text('done')], { toolPolicy: { '*': { grep_files: 'deny', write_file: 'deny' } } });
    h.deps.toolCalls = new ToolCallLog();
    const r = (await ops(h).agent_prompt.handle({ message: 'look' }, user)) as { session_id: string };
    const s = await settle(h, r.session_id);
    expect(s.status).to.equal('completed');
    const offered = h.backend.inputs[0]!.tools.map((t) => t.name);
    expect(offered).to.include('read_file').and.not.include.members(['grep_files', 'write_file']);
    expect(JSON.parse(s.messages.find((m) => m.role === 'tool')!.content)).to.deep.equal({ error: 'grep_files is denied here by agent.toolPolicy: use another tool, or ask the operator' });
    // Both in the audit as denied; the key in write_file's arguments is withheld there.
    const audited = (await h.deps.toolCalls.list({ session_id: s.session_id })).map((r) => [r.tool, r.decision, r.isError, r.arguments]);
    expect(audited).to.deep.equal([
      ['grep_files', 'denied', true, '{"root":"logs","pattern":"x"}'],
      ['write_file', 'denied', true, '{"root":"components","path":"k.txt","content":"[withheld: key material]"}'],
    ]);
    // Deleted with its session.
    await ops(h).delete_agent_session.handle({ session_id: s.session_id }, user);
    expect(await h.deps.toolCalls.list({ session_id: s.session_id })).to.deep.equal([]);
  });

  it('ask: a reading tool pauses the run; approved for the session, its later calls run without pausing; readOnly offers no tool that writes', async () => {
    const h = harness([calls(['tail_file', { root: 'logs', path: 'a.log' }]), calls(['tail_file', { root: 'logs', path: 'a.log' }]), text('read twice')], { toolPolicy: { '*': { tail_file: 'ask' } } });
    h.deps.toolCalls = new ToolCallLog();
    writeFileSync(path.join(h.scopes.logs, 'a.log'), 'one\ntwo\n');
    const o = ops(h);
    const r = (await o.agent_prompt.handle({ message: 'tail it' }, user)) as { session_id: string };
    let s = await settle(h, r.session_id);
    expect(s.status).to.equal('awaiting_approval');
    expect(s.pendingApprovals.map((p) => p.name)).to.deep.equal(['tail_file']);
    const approved = (await o.approve_agent_action.handle({ session_id: s.session_id, approval_id: s.pendingApprovals[0]!.approval_id, approved: true, forSession: true }, user)) as { approvedTools: string[] };
    expect(approved.approvedTools).to.deep.equal(['tail_file']);
    s = await settle(h, s.session_id);
    expect([s.status, s.approvedTools, s.messages.filter((m) => m.role === 'tool').length, s.messages.at(-1)!.content]).to.deep.equal(['completed', ['tail_file'], 2, 'read twice']);
    // The audit: asked, approved (the result's stored size), then allowed for the rest of the session.
    const results = s.messages.filter((m) => m.role === 'tool').map((m) => Buffer.byteLength(m.content));
    const audited = (await h.deps.toolCalls.list({ session_id: s.session_id })).map((r) => [r.tool, r.decision, r.resultBytes, r.user, r.arguments]);
    expect(audited).to.deep.equal([
      ['tail_file', 'asked', null, 'admin', '{"root":"logs","path":"a.log"}'],
      ['tail_file', 'approved', results[0], 'admin', '{"root":"logs","path":"a.log"}'],
      ['tail_file', 'allowed', results[1], 'admin', '{"root":"logs","path":"a.log"}'],
    ]);

    const ro = harness([text('nothing written')], { toolPolicy: { '*': 'readOnly' } });
    const started = (await ops(ro).agent_prompt.handle({ message: 'look' }, user)) as { session_id: string };
    await settle(ro, started.session_id);
    const names = ro.backend.inputs[0]!.tools.map((t) => t.name);
    expect(names).to.include.members(['read_file', 'tail_file', 'grep_files']).and.not.include.members(['write_file', 'harper_operation']);
  });
});

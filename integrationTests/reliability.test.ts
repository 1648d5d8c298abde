// Faults, concurrency and bad input at the operations API, on a real Harper. Each ends clearly and loses nothing.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually } from './cluster.js';
import type { TestHarper } from './harness.js';
import { providerSuite, useLocal } from './providerSuite.js';
import { type Turn } from './providerServer/server.js';

export const COUNTS = { faults: 0, concurrentSessions: 20 };

describe('reliability under faults, load and bad input', function () {
  const suite = providerSuite((h) => writeFileSync(path.join(h.logsDir, 'redos.log'), 'a'.repeat(40) + '!\n'));
  const server = suite.server;
  let h!: TestHarper;
  before(() => (h = suite.h));
  const useOpenAI = (extra: Record<string, unknown> = {}) =>
    h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 1, requestTimeoutMs: 120000, maxToolResultBytes: 65536, ...extra });

  const faults: [string, Turn[], RegExp, number, Record<string, unknown>?][] = [
    ['429', [{ error: { status: 429, body: { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } } } }], /^openai request failed \(HTTP 429\): 429 Rate limit reached\. The provider is rate limiting; try again later\.$/, 2],
    ['500', [{ error: { status: 500, body: { error: { message: 'boom', type: 'server_error' } } } }], /^openai request failed \(HTTP 500\): 500 boom\. The provider failed; try again later\.$/, 2],
    ['503', [{ error: { status: 503, body: { error: { message: 'overloaded', type: 'server_error' } } } }], /^openai request failed \(HTTP 503\): 503 overloaded\. The provider failed; try again later\.$/, 2],
    ['a reset connection', [{ reset: true }], /^openai request failed: .*Check that the provider endpoint is reachable\.$/, 2],
    ['a hung request (timeout)', [{ hang: true }], /^openai request failed: no answer within agent\.requestTimeoutMs \(1000 ms\)\. Check that the provider endpoint is reachable, or raise agent\.requestTimeoutMs\.$/, 1, { requestTimeoutMs: 1000, maxRetries: 0 }],
    ['malformed JSON', [{ malformed: true }], /^openai request failed: .*JSON/, 1, { maxRetries: 0 }],
    ['a tool call with invalid JSON arguments', [{ toolCalls: [{ name: 'read_file', arguments: '{"root": "logs", "path": ' }] }], /^The model produced a tool call that could not be parsed \(arguments of read_file are not a JSON object: .*\)\. Send the prompt again\.$/, 1],
  ];
  for (const [label, turns, lastError, requests, extra] of faults) {
    it(`${label}: the turn ends with a clear lastError, the SDK's retry is the only retry, the session takes the next prompt`, async () => {
      COUNTS.faults++;
      await useOpenAI(extra);
      server.reset([...turns, ...turns]);
      const s = await h.prompt('hello');
      expect(s.status).to.equal('error');
      expect(s.lastError).to.match(lastError);
      expect(server.requests.length).to.equal(requests);
      expect(s.messages.map((m: any) => m.role)).to.deep.equal(['user']);
      server.reset([{ text: 'all good now' }]);
      await useOpenAI();
      const next = await h.prompt('again', s.session_id);
      expect(next.status).to.equal('completed');
      expect(next.messages.map((m: any) => m.content)).to.deep.equal(['hello', 'again', 'all good now']);
    });
  }

  it('an unknown tool is an error observation and the run goes on', async () => {
    COUNTS.faults++;
    await useOpenAI();
    server.reset([{ toolCalls: [{ name: 'rm_rf', arguments: {} }] }, { text: 'sorry' }]);
    const s = await h.prompt('delete everything');
    expect(s.status).to.equal('completed');
    const tool = s.messages.find((m: any) => m.role === 'tool');
    expect(tool).to.include({ isError: true });
    expect(tool.content).to.match(/^\{"error":"unknown tool \\"rm_rf\\"; the tools are read_file, tail_file, list_dir, write_file, grep_files, describe_tables, search_table, system_information, read_log, describe_all, describe_database, cluster_status, get_components, get_configuration, get_status, list_metrics, get_analytics, get_job, search_jobs_by_start_date, list_users, list_roles, harper_operation, http_fetch, schedule_followup, profile_cpu, heap_usage, harper_best_practice, remember, search_memory, read_runbook"\}$/);
  });

  it('20 prompts on 20 sessions at once all complete with their own transcripts', async () => {
    await useLocal(h);
    for (let i = 0; i < COUNTS.concurrentSessions; i++) writeFileSync(path.join(h.logsDir, `load-${i}.log`), `${'line\n'.repeat(i + 1)}`);
    const sessions = await Promise.all(Array.from({ length: COUNTS.concurrentSessions }, (_, i) => h.prompt(`summarize logs/load-${i}.log`)));
    expect(new Set(sessions.map((s) => s.session_id)).size).to.equal(COUNTS.concurrentSessions);
    sessions.forEach((s, i) => {
      expect(s.status).to.equal('completed');
      expect(s.messages.at(-1).content).to.match(new RegExp(`^logs/load-${i}\\.log: ${i + 1} lines`));
    });
  });

  it('two prompts racing on one session: one 409, nothing lost', async () => {
    const first = await h.prompt('summarize logs/load-0.log');
    const [a, b] = await Promise.all([
      h.op({ operation: 'agent_prompt', message: 'summarize logs/load-1.log', session_id: first.session_id }),
      h.op({ operation: 'agent_prompt', message: 'summarize logs/load-2.log', session_id: first.session_id }),
    ]);
    expect([a.status, b.status].sort()).to.deep.equal([200, 409]);
    const s = await h.waitForSession(first.session_id);
    const users = s.messages.filter((m: any) => m.role === 'user').map((m: any) => m.content);
    expect(users).to.have.length(2);
    expect(users[0]).to.equal('summarize logs/load-0.log');
    expect(s.messages).to.have.length(8);
    expect(s.status).to.equal('completed');
  });

  it('cancel_agent_run during a model call ends aborted, and nothing is written after', async () => {
    await useOpenAI({ maxRetries: 0 });
    server.reset([{ hang: true }]);
    const r = await h.op({ operation: 'agent_prompt', message: 'this will hang' });
    for (let i = 0; i < 100 && server.requests.length === 0; i++) await new Promise((res) => setTimeout(res, 20));
    expect((await h.op({ operation: 'cancel_agent_run', session_id: r.body.session_id })).body.status).to.equal('aborted');
    await new Promise((res) => setTimeout(res, 300));
    const s = await h.waitForSession(r.body.session_id);
    expect(s).to.include({ status: 'aborted', lastError: 'Cancelled with cancel_agent_run.' });
    expect(s.messages).to.have.length(1);
  });

  it('cancel_agent_run during a tool call ends aborted; the tool result is never stored', async () => {
    await useOpenAI();
    server.reset([{ toolCalls: [{ name: 'grep_files', arguments: { root: 'logs', path: 'redos.log', pattern: '^(a+)+$' } }] }, { text: 'never' }]);
    const r = await h.op({ operation: 'agent_prompt', message: 'grep' });
    // The grep runs past SLOW_TOOL_MS (250 ms): the call it answers is stored while it runs.
    await eventually(async () => expect((await h.op({ operation: 'get_agent_session', session_id: r.body.session_id })).body.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']), 10_000, 20);
    const t0 = Date.now();
    expect((await h.op({ operation: 'cancel_agent_run', session_id: r.body.session_id })).status).to.equal(200);
    const s = await h.waitForSession(r.body.session_id);
    expect(s.status).to.equal('aborted');
    expect(Date.now() - t0).to.be.lessThan(2000);
    await new Promise((res) => setTimeout(res, 300));
    const after = await h.waitForSession(r.body.session_id);
    expect(after.messages.map((m: any) => m.role)).to.deep.equal(['user', 'assistant']);
    expect(server.requests).to.have.length(1);
  });

  describe('bad input at the operations API', () => {
    const cases: [string, unknown, number, string][] = [
      ['message of the wrong type', { operation: 'agent_prompt', message: ['x'] }, 400, 'agent_prompt: "message" must be string'],
      ['an empty message', { operation: 'agent_prompt', message: '' }, 400, 'agent_prompt: "message" must NOT have fewer than 1 characters'],
      ['a session_id with bad characters', { operation: 'get_agent_session', session_id: '../x' }, 400, 'get_agent_session: "session_id" must match pattern "^[A-Za-z0-9._:-]+$"'],
      ['approved not a boolean', { operation: 'approve_agent_action', session_id: 's', approval_id: 'a', approved: 'yes' }, 400, 'approve_agent_action: "approved" must be boolean'],
      ['a missing approval_id', { operation: 'approve_agent_action', session_id: 's', approved: true }, 400, 'approve_agent_action: "approval_id" is required'],
      ['unknown keys in set_agent_config', { operation: 'set_agent_config', maxToolResultBytes: 4096, colour: 'blue' }, 400, 'agent.colour is not a known key (known: provider, model, maxTurns, maxToolResultBytes, workingSetBytes, compaction, compactAtPercent, followupMinSeconds, followupMaxSeconds, maxFollowups, memoryRecallBytes, retainSessionsDays, retainModelCallsDays, autoApprove, maxTokens, apiKey, baseUrl, region, requestTimeoutMs, maxRetries, systemPromptAppend, user, allowOperations, roles, roleScopes, toolPolicy, fetchAllow, stream, maxCostUsd, maxSessionCostUsd, prices, contextWindowTokens)'],
      ['set_agent_config with nothing', { operation: 'set_agent_config' }, 400, 'set_agent_config needs at least one agent.* key to change'],
      ['a 300 KB message', { operation: 'agent_prompt', message: 'x'.repeat(300_000) }, 413, 'message is 300000 bytes; agent_prompt accepts at most 262144'],
      ['a 2 MB body', { operation: 'agent_prompt', message: 'x'.repeat(2_000_000) }, 413, 'request body is 2000041 bytes; agent operations accept at most 1048576'],
    ];
    for (const [label, body, status, error] of cases) {
      it(`${label}: ${status}`, async () => {
        expect(await h.op(body)).to.deep.equal({ status, body: { error } });
      });
    }
    it('a failed set_agent_config changes nothing', async () => {
      const before = (await h.op({ operation: 'get_agent_config' })).body;
      await h.op({ operation: 'set_agent_config', maxTurns: 5, maxToolResultBytes: 1023 });
      expect((await h.op({ operation: 'get_agent_config' })).body).to.deep.equal(before);
    });
    it('a body that is not JSON, or a JSON array, is left to Harper', async () => {
      const notJson = await h.op('{"operation": "agent_prompt", ');
      expect(notJson.status).to.be.oneOf([400, 500]);
      const array = await h.op([{ operation: 'agent_prompt', message: 'x' }]);
      expect(array.status).to.not.equal(200);
      expect((await h.op({ operation: 'describe_all' })).status).to.equal(200);
    });
  });
});

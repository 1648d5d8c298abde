// What the model sees (agent/context/request.ts): a request is a pure function of the stored transcript, stable from one
// request to the next up to the newest turn but at a cut or a compaction, and the loop sends exactly what it builds.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildRequest, cacheMarksFor, describeRequest, systemText, withWorkingSet } from '../agent/context/request.js';
import { COMPACTION_SYSTEM, type StoredMessage } from '../agent/compaction.js';
import { createOperations } from '../agent/operations.js';
import { activeRun } from '../agent/runs.js';
import type { HostEnvironment } from '../agent/environment.js';
import type { GenerateInput, Message } from '../resources/models/types.js';
import { calls, harness, text, type Harness, type Step } from './helpers.js';
import { capabilities } from '../agent/modelCall.js';
import { createToolRegistry, defaultTools } from '../agent/tools/index.js';
import type { Capabilities } from '../agent/tools/types.js';

const env: HostEnvironment = { harper: '4.7.29', node: 'node-a', threads: 2, os: 'Linux 6.1.0 x64', nodeVersion: 'v20.19.0', agent: '0.1.0' };
const tools = [
  { name: 'read_file', description: 'reads', parameters: { type: 'object' } },
  { name: 'tail_file', description: 'tails', parameters: { type: 'object' } },
];
const policy = { config: { maxTokens: 1000, systemPromptAppend: 'Be brief.' }, model: 'm', tools, environment: env, sessionId: 's1' };
const T0 = Date.UTC(2026, 11, 6, 16, 4, 7);

describe('the request: one pure function of the transcript', () => {
  const transcript: StoredMessage[] = [
    { role: 'user', content: 'read logs/a.log', at: T0 },
    { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read_file', arguments: { root: 'logs', path: 'a.log' } }], at: T0 + 10 },
    { role: 'tool', toolCallId: 'c1', name: 'read_file', content: '{"content":"x"}', at: T0 + 20 },
    { role: 'assistant', content: 'done', at: T0 + 30 },
  ];

  it('holds no clock: the system text is the same for every request, each prompt carries the time it was sent', () => {
    const one = buildRequest(transcript, policy);
    expect(one.system).to.equal(systemText(policy));
    expect(one.system).to.not.match(/\d{4}-\d\d-\d\dT/);
    expect(one.system.endsWith('=== Operator instructions ===\nBe brief.')).to.equal(true);
    expect(one.messages[0]).to.deep.equal({ role: 'user', content: 'read logs/a.log\n\n[sent 2026-12-06T16:04:07Z]', at: T0 });
    expect(one.messages.slice(1)).to.deep.equal(transcript.slice(1));
    expect(one.tools.map((t) => t.name)).to.deep.equal(['read_file', 'tail_file']);
    expect(one.cache).to.deep.equal({ key: 's1', marks: false });
    // Built again later, byte for byte the same.
    expect(JSON.stringify(buildRequest(transcript, policy))).to.equal(JSON.stringify(one));
  });

  it('a new prompt only appends: the previous request is a prefix of the next, and the view says where it ends', () => {
    const before = buildRequest(transcript, policy);
    const after = buildRequest([...transcript, { role: 'user', content: 'and b.log?', at: T0 + 60_000 }], policy);
    expect(after.system).to.equal(before.system);
    expect(after.messages.slice(0, before.messages.length)).to.deep.equal(before.messages);
    const view = describeRequest(after);
    const newest = Buffer.byteLength(JSON.stringify(after.messages.at(-1)));
    expect(view.stablePrefixBytes).to.equal(view.bytes - newest);
    expect(view.parts.map((p) => p.bytes)).to.deep.equal([Buffer.byteLength(JSON.stringify(tools)), Buffer.byteLength(after.system), view.bytes - Buffer.byteLength(JSON.stringify(tools)) - Buffer.byteLength(after.system)]);
  });

  it('marks for the cache only where an API caches at marks and the model can', () => {
    expect([cacheMarksFor('anthropic', false), cacheMarksFor('bedrock', true), cacheMarksFor('bedrock', false), cacheMarksFor('openai', true), cacheMarksFor('ollama', true)]).to.deep.equal([true, true, false, false, false]);
  });

  it('applies the working set as the store would, on a copy', () => {
    const big = (id: string): Message => ({ role: 'tool', toolCallId: id, name: 'read_file', content: JSON.stringify({ nextLine: 9, content: 'y'.repeat(30_000) }) });
    const call = (id: string): Message => ({ role: 'assistant', content: '', toolCalls: [{ id, name: 'read_file', arguments: {} }] });
    const stored: StoredMessage[] = [{ role: 'user', content: 'go' }, call('a'), big('a'), call('b'), big('b'), call('c'), big('c')];
    const kept = withWorkingSet(stored, 64 * 1024);
    expect(kept.map((m) => (m as { cut?: string }).cut ?? null)).to.deep.equal([null, null, 'workingSet', null, 'workingSet', null, null]);
    expect(stored[2]).to.not.have.property('cut');
    expect(withWorkingSet(stored, 0)).to.equal(stored);
  });
});

describe('the request over a long session: the prefix holds but at a cut or a compaction', () => {
  const user = { username: 'admin', role: { permission: { super_user: true } } };
  const ops = (h: Harness) => createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: '' } });
  const isSummary = (x: GenerateInput) => x.system === COMPACTION_SYSTEM;
  /** A message as a backend sends it: no `at` (a prompt's time is in its text), a call by id and name (the memory
   * store hands arguments back as getter objects, as Harper's records do, which JSON does not show). */
  const sent = (m: Message) => (m.role === 'assistant' ? { role: m.role, content: m.content, calls: (m.toolCalls ?? []).map((c) => [c.id, c.name]) } : m.role === 'tool' ? { role: m.role, id: m.toolCallId, name: m.name, content: m.content, isError: m.isError === true } : { role: m.role, content: m.content });

  it('24 prompts of three pages: every turn request repeats the one before it whole, except where the one before held a result since cut or a compaction came between', async () => {
    let page = 0;
    const reader: Step = (input) => {
      if (isSummary(input)) return text(`SUMMARY ${input.messages[0]!.content.length}`);
      let since = input.messages.length - 1;
      while (since >= 0 && input.messages[since]!.role !== 'user') since--;
      const results = input.messages.slice(since + 1).filter((m) => m.role === 'tool').length;
      return results >= 3 ? text(`read ${results} pages`) : calls(['read_file', { root: 'logs', path: 'a.log', startLine: 1 + (page++ % 40) * 25, lineCount: 25 }]);
    };
    const h = harness(Array(1000).fill(reader), { contextWindowTokens: 24_000, maxTokens: 1000, workingSetBytes: 16 * 1024 });
    writeFileSync(path.join(h.scopes.logs, 'a.log'), Array.from({ length: 1000 }, (_, i) => `line ${i} ${'z'.repeat(90)}`).join('\n') + '\n');
    let id: string | undefined;
    for (let i = 0; i < 24; i++) {
      const r = (await ops(h).agent_prompt.handle({ message: `go on (${i})`, ...(id ? { session_id: id } : {}) }, user)) as { session_id: string };
      id = r.session_id;
      await activeRun(id)?.done;
      const s = (await h.store.get(id))!;
      expect(s.status, s.lastError ?? '').to.equal('completed');
    }
    const turns = h.backend.inputs.filter((x) => !isSummary(x));
    let breaks = 0;
    for (let i = 1; i < turns.length; i++) {
      const [prev, next] = [turns[i - 1]!, turns[i]!];
      expect(next.system).to.equal(prev.system);
      expect(next.tools).to.deep.equal(prev.tools);
      const kept = JSON.stringify(next.messages.slice(0, prev.messages.length).map(sent)) === JSON.stringify(prev.messages.map(sent));
      if (kept) continue;
      breaks++;
      // Explained: a compaction (the request now opens with a summary) or a result cut to its head since.
      const compacted = next.messages[0]!.content.startsWith('[Summary of the earlier part');
      const cut = next.messages.some((m, k) => m.role === 'tool' && m.cut === 'workingSet' && prev.messages.some((p) => p.role === 'tool' && p.toolCallId === m.toolCallId && !p.cut) && k < prev.messages.length);
      expect(compacted || cut, `request ${i} changed what request ${i - 1} sent without a cut or a compaction`).to.equal(true);
    }
    const stored = (await h.store.get(id!))!.messages;
    const compactions = stored.filter((m) => m.role === 'compaction').length;
    // In batches: far fewer breaks than turns (a cut every page would break about every request).
    expect(compactions).to.be.at.least(2);
    expect(breaks).to.be.at.most(Math.ceil(turns.length / 3));
    console.log(`      ${turns.length} turn requests, ${breaks} broke the prefix (${compactions} compactions)`);
  });
});

describe('the tools a request offers: only those the run can use', () => {
  const all = createToolRegistry(defaultTools);
  const names = (can?: Capabilities) => all.specs(can).map((t) => t.name);

  it('leaves out what needs operations, data, follow-ups or memory the run lacks, in the registry order otherwise', () => {
    const everything = names();
    expect(names({ operations: true, data: true, followups: true, memory: true })).to.deep.equal(everything);
    const bare = names({ operations: false, data: false, followups: false, memory: false });
    // The same order, fewer tools: every file tool and the agent's own extras stay.
    expect(bare).to.deep.equal(everything.filter((n) => bare.includes(n)));
    expect(bare).to.deep.equal(['read_file', 'tail_file', 'list_dir', 'write_file', 'grep_files', 'http_fetch', 'profile_cpu', 'heap_usage', 'harper_best_practice']);
    expect(bare).to.include.members(['read_file', 'tail_file', 'list_dir', 'grep_files', 'write_file', 'http_fetch']);
    expect(bare).to.not.include.members(['describe_tables', 'schedule_followup', 'read_log', 'harper_operation', 'remember', 'search_memory', 'read_runbook']);
    const bytes = (list: string[]) => Buffer.byteLength(JSON.stringify(all.specs().filter((t) => list.includes(t.name))));
    console.log(`      tool specs: ${everything.length} tools ${bytes(everything).toLocaleString('en-US')} bytes; with no operations, data or follow-ups ${bare.length} tools ${bytes(bare).toLocaleString('en-US')} bytes`);
  });

  it('a run as a user gets the operation tools; one with no user, agent.maxFollowups 0 or no databases does not', () => {
    const deps = { operationsAs: () => async () => ({}), databases: {}, followups: {} as never };
    expect(capabilities(deps, { maxFollowups: 5 }, 'alice')).to.deep.equal({ operations: true, data: true, followups: true, memory: false });
    expect(capabilities(deps, { maxFollowups: 5, user: 'ops-bot' }, null)).to.deep.equal({ operations: true, data: true, followups: true, memory: false });
    expect(capabilities(deps, { maxFollowups: 0 }, null)).to.deep.equal({ operations: false, data: true, followups: false, memory: false });
    expect(capabilities({}, { maxFollowups: 5 }, 'alice')).to.deep.equal({ operations: false, data: false, followups: false, memory: false });
  });
});

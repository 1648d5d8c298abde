import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { activeRun } from '../agent/runs.js';
import { SLOW_TOOL_MS } from '../agent/loop.js';
import { createOperations, HttpError } from '../agent/operations.js';
import type { Session } from '../agent/session.js';
import { SYSTEM_PROMPT } from '../agent/systemPrompt.js';
import type { Tool } from '../agent/tools/types.js';
import { ModelError } from '../resources/models/backendHelpers.js';
import type { AgentConfig } from '../agent/agent.js';
import type { GenerateInput, ToolMessage } from '../resources/models/types.js';
import { calls, harness, text, type Harness, type Step } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };

function ops(h: Harness) {
  return createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('no config store in this test')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: new Date(0).toISOString() } });
}

async function prompt(h: Harness, message: string, session_id?: string): Promise<Session> {
  const r = (await ops(h).agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return (await h.store.get(r.session_id))!;
}

const toolMessages = (s: Session) => s.messages.filter((m): m is ToolMessage => m.role === 'tool');
const tooLong = () => new ModelError('scripted request failed (HTTP 400): prompt is too long', 'scripted', 400, true);

function bigTool(name: string, produce: () => unknown): Tool {
  return { name, description: name, parameters: { type: 'object', properties: {}, additionalProperties: true }, handler: async () => produce() };
}

describe('the run loop', () => {
  it('completes a prompt: user message, answer, status completed, no lastError', async () => {
    const h = harness([text('hello')]);
    const s = await prompt(h, 'hi');
    expect(s.status).to.equal('completed');
    expect(s.lastError).to.equal(null);
    expect(s.messages.map((m) => [m.role, m.content])).to.deep.equal([['user', 'hi'], ['assistant', 'hello']]);
  });

  it('a prompt reads the persisted config again before it starts (a change made on another thread is in force)', async () => {
    const h = harness([text('hello')], { model: 'old-model' });
    let config = h.config;
    const operations = createOperations({
      ...h.deps,
      config: () => config,
      refreshConfig: async () => void (config = { ...config, model: 'new-model' }),
      changeConfig: () => Promise.reject(new Error('no config store in this test')),
      persistedConfig: () => ({}),
      instance: { version: 'test', startedAt: new Date(0).toISOString() },
    });
    const r = (await operations.agent_prompt.handle({ message: 'hi' }, user)) as { session_id: string };
    await activeRun(r.session_id)?.done;
    expect((await h.store.get(r.session_id))!.model).to.equal('new-model');
  });

  it('sends the system prompt once, in input.system only, never as a message', async () => {
    const h = harness([calls(['list_dir', { root: 'logs' }]), text('done')]);
    await prompt(h, 'list');
    expect(h.backend.inputs).to.have.length(2);
    for (const input of h.backend.inputs) {
      expect(input.system).to.equal(SYSTEM_PROMPT);
      expect(input.messages.map((m) => m.role)).to.not.include('system');
      expect(JSON.stringify(input.messages)).to.not.contain(SYSTEM_PROMPT.slice(0, 40));
    }
  });

  it('runs a tool call and stores its result by call id', async () => {
    const h = harness([calls(['read_file', { root: 'logs', path: 'a.log' }]), text('read it')]);
    writeFileSync(path.join(h.scopes.logs, 'a.log'), 'one\ntwo\n');
    const s = await prompt(h, 'read');
    const [t] = toolMessages(s);
    const call = (s.messages[1] as { toolCalls: { id: string }[] }).toolCalls[0]!;
    expect(t!.toolCallId).to.equal(call.id);
    expect(JSON.parse(t!.content)).to.include({ content: 'one\ntwo\n', totalLines: 2, size: 8 });
    expect(s.status).to.equal('completed');
  });

  describe('writes: a prompt with its session, a tool turn with its result', () => {
    /** The one session's stored message count, read while a tool runs. */
    const storedCount = (h: Harness) => (JSON.parse([...h.table.rows.values()][0]!) as { messageCount: number }).messageCount;
    const probe = (name: string, h: () => Harness, seen: number[], opts: { destructive?: boolean; ms?: number } = {}): Tool => ({
      ...bigTool(name, () => 'ok'),
      destructive: opts.destructive,
      handler: async () => {
        seen.push(storedCount(h()));
        if (opts.ms) await new Promise((r) => setTimeout(r, opts.ms));
        seen.push(storedCount(h()));
        return 'ok';
      },
    });
    const allowAll = { autoApprove: true };

    it('a new session and its prompt are one write of the row; a tool call and its result are one more; the answer one more', async () => {
      const seen: number[] = [];
      let h: Harness;
      h = harness([calls(['probe', {}]), text('done')], {}, [probe('probe', () => h, seen)]);
      const s = await prompt(h, 'go');
      expect(s.messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'assistant']);
      expect(seen, 'the call is not stored while its quick, read-only tool runs').to.deep.equal([1, 1]);
      expect(h.table.puts).to.equal(3);
      expect(h.messages.puts).to.equal(4);
    });

    it('a tool that may change something has its call stored before it runs', async () => {
      const seen: number[] = [];
      let h: Harness;
      h = harness([calls(['probe_write', {}]), text('done')], allowAll, [probe('probe_write', () => h, seen, { destructive: true })]);
      const s = await prompt(h, 'go');
      expect(s.status, s.lastError ?? '').to.equal('completed');
      expect(seen).to.deep.equal([2, 2]);
      expect(s.messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'assistant']);
      expect(h.table.puts).to.equal(4);
    });

    it(`a tool still running after ${SLOW_TOOL_MS} ms has its call stored while it runs, and its result after it`, async () => {
      const seen: number[] = [];
      let h: Harness;
      h = harness([calls(['probe', {}], ['probe', {}]), text('done')], {}, [probe('probe', () => h, seen, { ms: SLOW_TOOL_MS + 100 })]);
      const s = await prompt(h, 'go');
      // The first call's tool: not stored when it starts, stored once it has run past SLOW_TOOL_MS; the second finds
      // the call stored with the first's result.
      expect(seen).to.deep.equal([1, 2, 3, 3]);
      expect(s.messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool', 'assistant']);
      expect(h.table.puts).to.equal(5);
    });

    it('a pause for approval stores the held call with the pause, in one write', async () => {
      const h = harness([calls(['probe_write', {}])], {}, [{ ...bigTool('probe_write', () => 'ok'), destructive: true }]);
      const s = await prompt(h, 'go');
      expect(s.status).to.equal('awaiting_approval');
      expect(s.messages.map((m) => m.role)).to.deep.equal(['user', 'assistant']);
      expect(s.pendingApprovals.map((a) => a.name)).to.deep.equal(['probe_write']);
      expect(h.table.puts).to.equal(2);
    });
  });

  describe('every observation is capped where it is stored', () => {
    const cap = 4096;
    const cases: [string, Tool | null, Record<string, unknown>][] = [
      ['a 1 MB result', bigTool('big', () => 'r'.repeat(1_000_000)), {}],
      ['a 1 MB error message', bigTool('bigerr', () => { throw new Error('e'.repeat(1_000_000)); }), {}],
      ['a thrown plain object', bigTool('plain', () => { throw { message: 'plain object thrown' }; }), {}],
      ['an invented tool name', null, {}],
      ['invalid arguments', null, { root: 'nowhere' }],
    ];
    for (const [label, tool, args] of cases) {
      it(label, async () => {
        const name = tool?.name ?? (label.startsWith('invalid') ? 'read_file' : 'no_such_tool_'.repeat(2000));
        const h = harness([calls([name, args]), text('ok')], { maxToolResultBytes: cap }, tool ? [tool] : []);
        const s = await prompt(h, 'go');
        const [t] = toolMessages(s);
        expect(Buffer.byteLength(t!.content)).to.be.at.most(cap);
        if (label === 'a thrown plain object') expect(t!.content).to.equal('{"error":"plain object thrown"}');
        if (label.startsWith('a 1 MB')) {
          expect(t!.cut).to.equal('cap');
          expect(t!.content).to.match(/…\[truncated; full result is \d+ bytes\. Ask for less: .*\]$/);
        }
        if (label !== 'a 1 MB result') expect(t!.isError).to.equal(true);
        if (label.startsWith('invalid')) expect(t!.content).to.contain('invalid arguments for read_file');
        expect(s.status).to.equal('completed');
      });
    }

    it('a BigInt-holding result whose toJSON throws { message } reaches the model as that message', async () => {
      const tool = bigTool('bigint', () => ({ n: { toJSON() { throw { message: 'Do not know how to serialize a BigInt' }; } } }));
      const h = harness([calls(['bigint', {}]), text('ok')], {}, [tool]);
      await prompt(h, 'go');
      const seen = h.backend.inputs[1]!.messages.at(-1) as ToolMessage;
      expect(seen.content).to.equal('{"error":"Do not know how to serialize a BigInt"}');
    });
  });

  describe('approval of destructive tools', () => {
    // Into a component that exists (write_file makes no new component folder).
    const write = (h: Harness) => (mkdirSync(path.join(h.scopes.components, 'app'), { recursive: true }), calls(['write_file', { root: 'components', path: 'app/x.js', content: 'export {}\n' }]));

    it('pauses for approval, then writes and completes when approved', async () => {
      const h = harness([]);
      h.backend.steps.push(write(h), text('written'));
      const s = await prompt(h, 'write it');
      expect(s.status).to.equal('awaiting_approval');
      expect(s.pendingApprovals).to.have.length(1);
      expect(existsSync(path.join(h.scopes.components, 'app/x.js'))).to.equal(false);
      const o = ops(h);
      let conflict: unknown;
      await o.agent_prompt.handle({ message: 'again', session_id: s.session_id }, user).catch((e) => (conflict = e));
      expect((conflict as HttpError).status).to.equal(409);
      await o.approve_agent_action.handle({ session_id: s.session_id, approval_id: s.pendingApprovals[0]!.approval_id, approved: true }, user);
      await activeRun(s.session_id)?.done;
      const after = (await h.store.get(s.session_id))!;
      expect(after.status).to.equal('completed');
      expect(readFileSync(path.join(h.scopes.components, 'app/x.js'), 'utf8')).to.equal('export {}\n');
      expect(JSON.parse(toolMessages(after)[0]!.content)).to.include({ bytes: 10, created: true });
    });

    it('denied: nothing is written and the model is told, within the cap', async () => {
      const h = harness([]);
      h.backend.steps.push(write(h), text('ok, not written'));
      const s = await prompt(h, 'write it');
      await ops(h).approve_agent_action.handle({ session_id: s.session_id, approval_id: s.pendingApprovals[0]!.approval_id, approved: false }, user);
      await activeRun(s.session_id)?.done;
      const after = (await h.store.get(s.session_id))!;
      expect(after.status).to.equal('completed');
      expect(existsSync(path.join(h.scopes.components, 'app/x.js'))).to.equal(false);
      expect(toolMessages(after)[0]).to.include({ isError: true, content: '{"error":"the operator denied write_file; do not retry it unless asked"}' });
    });

    it('runs without a pause under agent.autoApprove', async () => {
      const h = harness([], { autoApprove: true });
      h.backend.steps.push(write(h), text('written'));
      const s = await prompt(h, 'write it');
      expect(s.status).to.equal('completed');
      expect(existsSync(path.join(h.scopes.components, 'app/x.js'))).to.equal(true);
    });
  });

  it('cancel during a model call ends aborted, and nothing is written after', async () => {
    let release!: () => void;
    const started = new Promise<void>((r) => (release = r));
    // Answers only after the cancel, as a provider that finishes anyway would.
    const slow: Step = (_input, signal) =>
      new Promise((resolve) => {
        release();
        signal.addEventListener('abort', () => setTimeout(() => resolve(text('too late')), 5));
      });
    const h = harness([slow]);
    const r = (await ops(h).agent_prompt.handle({ message: 'go' }, user)) as { session_id: string };
    await started;
    const c = await ops(h).cancel_agent_run.handle({ session_id: r.session_id }, user);
    expect(c).to.deep.equal({ session_id: r.session_id, status: 'aborted', followupsCancelled: 0 });
    await activeRun(r.session_id)?.done;
    const s = (await h.store.get(r.session_id))!;
    expect(s.status).to.equal('aborted');
    expect(s.messages).to.have.length(1);
  });

  it('agent.maxTurns ends the run error with what to do', async () => {
    const h = harness([], { maxTurns: 3 });
    for (let i = 0; i < 5; i++) h.backend.steps.push(calls(['list_dir', { root: 'logs' }]));
    const s = await prompt(h, 'loop');
    expect(s.status).to.equal('error');
    expect(s.lastError).to.equal('The run reached agent.maxTurns (3) model calls before the model answered. Raise agent.maxTurns, or ask for less in one prompt.');
    expect(h.backend.inputs).to.have.length(3);
  });

  for (const [reason, expected] of [
    ['length', /cut short at agent\.maxTokens/],
    ['content_filter', /content filter/],
    ['invalid_tool_call', /could not be parsed \(bad json\)/],
    ['empty', /empty answer/],
  ] as const) {
    it(`a turn cut short (${reason}) ends error with nothing appended`, async () => {
      const out = reason === 'empty' ? text('') : { text: 'partial', toolCalls: [], finishReason: reason, detail: 'bad json' };
      const h = harness([out as never]);
      const s = await prompt(h, 'go');
      expect(s.status).to.equal('error');
      expect(s.lastError).to.match(expected);
      expect(s.messages.map((m) => m.role)).to.deep.equal(['user']);
    });
  }

  it('a provider error ends error with a readable lastError, and the session takes the next prompt', async () => {
    const h = harness([new ModelError('scripted request failed (HTTP 500): boom. The provider failed; try again later.', 'scripted', 500, false), text('fine now')]);
    const s = await prompt(h, 'one');
    expect(s.status).to.equal('error');
    expect(s.lastError).to.equal('scripted request failed (HTTP 500): boom. The provider failed; try again later.');
    const again = await prompt(h, 'two', s.session_id);
    expect(again.status).to.equal('completed');
    expect(again.lastError).to.equal(null);
  });
});

describe('context-window recovery (generateTurn)', () => {
  function seedRead(h: Harness, bytes: number) {
    writeFileSync(path.join(h.scopes.logs, 'big.log'), ('x'.repeat(99) + '\n').repeat(bytes / 100));
  }
  const read = () => calls(['read_file', { root: 'logs', path: 'big.log' }]);

  it('shrinks the newest large result to 2 KiB and retries once', async () => {
    const h = harness([read(), tooLong(), text('recovered')]);
    seedRead(h, 200_000);
    const s = await prompt(h, 'read');
    expect(s.status).to.equal('completed');
    const [t] = toolMessages(s);
    expect(t!.cut).to.equal('context');
    expect(Buffer.byteLength(t!.content)).to.be.at.most(2048);
    // The retry carried the cut result.
    expect(Buffer.byteLength((h.backend.inputs[2]!.messages.at(-1) as ToolMessage).content)).to.be.at.most(2048);
    expect(h.backend.inputs).to.have.length(3);
  });

  it('a second rejection ends error saying what to do; no tool runs again', async () => {
    const h = harness([read(), tooLong(), tooLong()]);
    seedRead(h, 200_000);
    const s = await prompt(h, 'read');
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/still longer than the model's context window after cutting 1 tool result\(s\) to 2 KiB .*To continue: shorten the prompt, or start a new session\.$/);
    expect(toolMessages(s)).to.have.length(1);
  });

  it('nothing left to cut ends error without a retry (compaction off: today\'s advice)', async () => {
    const h = harness([tooLong()], { compaction: false });
    const s = await prompt(h, 'x'.repeat(10_000));
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/no tool result is left to cut .*shorten the prompt, or start a new session, or turn agent\.compaction on\.$/);
    expect(h.backend.inputs).to.have.length(1);
  });

  it('nothing left to cut and nothing before the prompt to compact: the error says the prompt alone does not fit', async () => {
    const h = harness([tooLong()]);
    const s = await prompt(h, 'x'.repeat(10_000));
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/^The prompt being answered does not fit the model's context window even alone \(scripted request failed \(HTTP 400\): prompt is too long\): no tool result is left to cut, and everything before the prompt is already a summary\. To continue: shorten the prompt, or use a model with a larger window\.$/);
    expect(h.backend.inputs).to.have.length(1);
  });

  it('cancellation during the retry ends aborted and writes nothing after', async () => {
    let h!: Harness;
    let id = '';
    const cancelThenAnswer: Step = async (input: GenerateInput) => {
      void input;
      await ops(h).cancel_agent_run.handle({ session_id: id }, user);
      return text('should not be stored');
    };
    h = harness([read(), tooLong(), cancelThenAnswer]);
    seedRead(h, 200_000);
    const r = (await ops(h).agent_prompt.handle({ message: 'read' }, user)) as { session_id: string };
    id = r.session_id;
    await activeRun(id)?.done;
    const s = (await h.store.get(id))!;
    expect(s.status).to.equal('aborted');
    expect(s.messages.at(-1)!.role).to.equal('tool');
  });

  it('recovers a session broken before the cap existed, on its next prompt', async () => {
    const h = harness([tooLong(), text('works again')]);
    const sess = await h.store.create({ user: 'admin', provider: 'scripted', model: null });
    await h.store.append(sess.session_id, [
      { role: 'user', content: 'read big.log' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'old', name: 'read_file', arguments: {} }] },
      { role: 'tool', toolCallId: 'old', name: 'read_file', content: 'y'.repeat(1_057_864) },
      { role: 'assistant', content: 'it was big' },
    ]);
    await h.store.setStatus(sess.session_id, 'error', 'prompt is too long');
    const s = await prompt(h, 'and now?', sess.session_id);
    expect(s.status).to.equal('completed');
    expect(Buffer.byteLength(toolMessages(s)[0]!.content)).to.be.at.most(2048);
    expect(toolMessages(s)[0]!.content).to.contain('full result is 1057864 bytes');
  });

  it('an approval-resumed result is capped and shrinkable like any other', async () => {
    const destructive: Tool = { ...bigTool('big_write', () => 'w'.repeat(1_000_000)), destructive: true };
    const h = harness([], { maxToolResultBytes: 8192 } as Partial<AgentConfig>, [destructive]);
    h.backend.steps.push(calls(['big_write', {}]), tooLong(), text('ok'));
    const s = await prompt(h, 'write');
    await ops(h).approve_agent_action.handle({ session_id: s.session_id, approval_id: s.pendingApprovals[0]!.approval_id, approved: true }, user);
    await activeRun(s.session_id)?.done;
    const after = (await h.store.get(s.session_id))!;
    expect(after.status).to.equal('completed');
    const [t] = toolMessages(after);
    expect(t!.cut).to.equal('context');
    expect(Buffer.byteLength(t!.content)).to.be.at.most(2048);
    // What was shrunk is the capped result (8,192 bytes), never the 1 MB one.
    expect(t!.content).to.contain('full result is 8192 bytes');
  });
});

describe('silent overflow', () => {
  const bigResult = () => calls(['read_file', { root: 'logs', path: 'silent.log' }]);
  const seed = (h: Harness) => writeFileSync(path.join(h.scopes.logs, 'silent.log'), ('s'.repeat(99) + '\n').repeat(500));

  it('a length finish with nothing produced on a large conversation is shrunk and retried', async () => {
    const h = harness([bigResult(), { text: '', toolCalls: [], finishReason: 'length' }, text('recovered')]);
    seed(h);
    const s = await prompt(h, 'read');
    expect(s.status, s.lastError ?? '').to.equal('completed');
    expect(toolMessages(s)[0]!.cut).to.equal('context');
  });

  it('usage at agent.contextWindowTokens is a silent overflow; failing twice says which in lastError', async () => {
    const full = { text: 'partial answer', toolCalls: [], finishReason: 'stop' as const, usage: { inputTokens: 100_000, outputTokens: 3 } };
    const h = harness([bigResult(), full, full], { contextWindowTokens: 100_000 });
    seed(h);
    const s = await prompt(h, 'read');
    expect(s.status).to.equal('error');
    expect(s.lastError).to.match(/still longer than the model's context window .*the provider reported 100000 input tokens, all of agent\.contextWindowTokens \(100000\).*silent overflow.*To continue: shorten the prompt, or start a new session\.$/);
  });

  it('a length finish on a small conversation stays a cut-short answer', async () => {
    const h = harness([{ text: '', toolCalls: [], finishReason: 'length' }]);
    const s = await prompt(h, 'hi');
    expect(s.lastError).to.match(/cut short at agent\.maxTokens/);
  });
});

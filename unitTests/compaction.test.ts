// Compaction: where it cuts, what stays whole, what a request carries (rebuilt from the stored transcript alone), the
// digest's budget, and the loop: when it triggers, the model's summary, the digest fallback, cancel, on demand.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { BRIDGE, COMPACTION_SYSTEM, compactionSizes, digest, planCompaction, requestMessages, segmentBlocks, splitParts, type CompactionRecord, type StoredMessage } from '../agent/compaction.js';
import { estimateTokens } from '../agent/contextBudget.js';
import { activeRun } from '../agent/runs.js';
import { ModelCallLog } from '../agent/modelCalls.js';
import { createOperations } from '../agent/operations.js';
import type { Session } from '../agent/session.js';
import { answeredTranscript, CURRENT_PROMPT_HEADING, ModelError, promptText, sentLine } from '../resources/models/backendHelpers.js';
import { buildRequest } from '../agent/context/request.js';
import type { GenerateInput, GenerateOutput, Message } from '../resources/models/types.js';
import { localBackend } from '../resources/models/localBackend.js';
import { Models } from '../resources/models/models.js';
import { calls, harness, text, type Harness, type Step } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };
const ops = (h: Harness) => createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: '' } });

async function prompt(h: Harness, message: string, session_id?: string): Promise<Session> {
  const r = (await ops(h).agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return (await h.store.get(r.session_id))!;
}

const u = (content: string): Message => ({ role: 'user', content });
const a = (content: string, id?: string): Message => (id ? { role: 'assistant', content, toolCalls: [{ id, name: 'read_file', arguments: { root: 'logs', path: 'x.log' } }] } : { role: 'assistant', content });
const t = (id: string, content: string): Message => ({ role: 'tool', toolCallId: id, name: 'read_file', content });
const rec = (keepFrom: number, content = 'S'): CompactionRecord => ({ role: 'compaction', content, keepFrom, compactedBy: 'digest' });
const isSummaryCall = (input: GenerateInput) => input.system === COMPACTION_SYSTEM;

describe('compaction: what a request carries', () => {
  it('no record: the transcript as it is; a record: its summary, a bridge before a kept prompt, then the kept messages', () => {
    const plain: StoredMessage[] = [u('q1'), a('', 'c1'), t('c1', 'r1'), a('a1')];
    expect(requestMessages(plain)).to.deep.equal(plain);
    const atPrompt: StoredMessage[] = [...plain, u('q2'), a('', 'c2'), t('c2', 'r2'), rec(4, 'SUM')];
    expect(requestMessages(atPrompt)).to.deep.equal([u('SUM'), { role: 'assistant', content: BRIDGE }, u('q2'), a('', 'c2'), t('c2', 'r2')]);
    // Cut inside a turn: the kept part begins with a model turn, so no bridge is needed for roles to alternate.
    const midTurn: StoredMessage[] = [...plain, u('q2'), a('', 'c2'), t('c2', 'r2'), a('', 'c3'), t('c3', 'r3'), rec(7, 'SUM2')];
    expect(requestMessages(midTurn)).to.deep.equal([u('SUM2'), a('', 'c3'), t('c3', 'r3')]);
  });

  it('only the newest record counts; an older record inside the kept part is never sent', () => {
    const m: StoredMessage[] = [u('q1'), a('a1'), u('q2'), rec(2, 'OLD'), a('a2'), u('q3'), rec(2, 'NEW'), a('a3')];
    expect(requestMessages(m)).to.deep.equal([u('NEW'), { role: 'assistant', content: BRIDGE }, u('q2'), a('a2'), u('q3'), a('a3')]);
  });

  it('a local backend finds the prompt being answered inside a summary that restates it', () => {
    expect(promptText('plain prompt')).to.equal('plain prompt');
    expect(promptText('plain prompt' + sentLine(Date.UTC(2026, 11, 6, 16, 4, 7, 250)))).to.equal('plain prompt');
    expect(sentLine(Date.UTC(2026, 11, 6, 16, 4, 7, 250))).to.equal('\n\n[sent 2026-12-06T16:04:07Z]');
    expect(promptText(`[Summary]\nfound things\n\n${CURRENT_PROMPT_HEADING} (#12):\nsummarize logs/hdb.log\nplease`)).to.equal('summarize logs/hdb.log\nplease');
  });
});

describe('compaction: where it cuts and what stays whole', () => {
  const page = (id: string) => t(id, JSON.stringify({ path: 'logs/x.log', startLine: 1, nextLine: 9, nextOffset: 900, content: 'L'.repeat(1000) }));
  // Three prompts of one read each, then a fourth prompt mid-way through two reads.
  const m: StoredMessage[] = [u('q0'), a('', 'c0'), page('c0'), a('ans0'), u('q1'), a('', 'c1'), page('c1'), a('ans1'), u('q2'), a('', 'c2'), page('c2'), a('ans2'), u('q3'), a('', 'c3'), page('c3'), a('', 'c4'), page('c4')];
  const bytesFrom = (i: number) => m.slice(i).reduce((n, x) => n + Buffer.byteLength(JSON.stringify(x)), 0);

  it('keeps the earliest earlier prompt whose messages fit; else the prompt being answered whole if its turn fits twice the room', () => {
    const plan = planCompaction(m, bytesFrom(8))!;
    expect(plan).to.deep.equal({ from: 0, keepFrom: 8 });
    expect(planCompaction(m, bytesFrom(8) - 1)!.keepFrom).to.equal(12);
    expect(planCompaction(m, Math.ceil(bytesFrom(12) / 2))!.keepFrom).to.equal(12);
  });

  it('when the prompt being answered does not fit, cuts inside its turn at a model turn and restates the prompt', () => {
    const keep = Math.ceil(bytesFrom(12) / 2) - 1;
    expect(keep).to.be.at.least(bytesFrom(15));
    const plan = planCompaction(m, keep)!;
    expect(plan).to.deep.equal({ from: 0, keepFrom: 15, currentPrompt: { index: 12, content: 'q3' } });
  });

  it('the newest model turn always stays, however small the room', () => {
    expect(planCompaction(m, 0)!.keepFrom).to.equal(15);
    expect(planCompaction([u('only')], 0)).to.equal(null);
    expect(planCompaction([u('q'), a('', 'c'), page('c')], 0)).to.equal(null);
  });

  it('a later compaction covers the earlier summary and the messages since; nothing new to cover: null', () => {
    const once: StoredMessage[] = [...m, rec(8, 'EARLIER')];
    const plan = planCompaction(once, 0)!;
    expect(plan.from).to.equal(8);
    expect(plan.keepFrom).to.equal(15);
    expect(plan.previous!.content).to.equal('EARLIER');
    expect(segmentBlocks(once, plan)[0]).to.equal('[summary so far, standing for messages #0-#7]\nEARLIER');
    expect(planCompaction([...m, rec(15)], 0)).to.equal(null);
  });

  it('on demand (all) covers every message, the newest turn too', () => {
    expect(planCompaction(m, 10 ** 9, true)).to.deep.equal({ from: 0, keepFrom: m.length });
  });

  it('a summary call reads each message as a block: results as their cursor-first 2 KiB head; parts are never over their size', () => {
    const blocks = segmentBlocks(m, { from: 0, keepFrom: 4 });
    expect(blocks[0]).to.equal('[#0 operator]\nq0');
    expect(blocks[1]).to.equal('[#1 assistant]\n\n-> read_file {"root":"logs","path":"x.log"}');
    expect(blocks[2]).to.match(/^\[#2 read_file result, 1078 bytes\]\n\{"path":"logs\/x\.log","startLine":1,"nextLine":9,"nextOffset":900,"content":"L+"\}$/);
    const parts = splitParts(blocks, 1200);
    expect(parts).to.have.length(2);
    for (const p of parts) expect(Buffer.byteLength(p)).to.be.at.most(1200);
    expect(parts.join('\n\n')).to.equal(blocks.join('\n\n'));
  });
});

describe('compaction: the digest', () => {
  const long: StoredMessage[] = [];
  for (let i = 0; i < 200; i++) {
    long.push(u(`question ${i} about logs/hdb.log`), a('', `c${i}`), t(`c${i}`, JSON.stringify({ path: 'logs/hdb.log', startLine: i * 10 + 1, nextLine: i * 10 + 11, nextOffset: i * 1000, content: 'x'.repeat(3000) })), a(`answer ${i}\nsecond line`));
  }

  it('lists each tool call with its arguments, result size and cursor (the prompts and answers are the working state\'s)', () => {
    const d = digest(long, { from: 0, keepFrom: 4 }, 10_000);
    expect(d.split('\n')).to.deep.equal([
      'Digest (deterministic, written without the model):',
      `- read_file {"root":"logs","path":"x.log"} -> ${Buffer.byteLength((long[2] as { content: string }).content).toLocaleString('en-US')} bytes; path "logs/hdb.log", startLine 1, nextLine 11, nextOffset 0`,
    ]);
  });

  it('is cut to its budget from the middle: the first call and the newest stay, and it says how many it left out', () => {
    const d = digest(long, { from: 0, keepFrom: 800 }, 4096);
    expect(Buffer.byteLength(d)).to.be.at.most(4096);
    const lines = d.split('\n');
    expect(lines[1]).to.match(/^- read_file \{"root":"logs","path":"x\.log"\} -> [\d,]+ bytes; path "logs\/hdb\.log", startLine 1, nextLine 11, nextOffset 0$/);
    expect(lines.filter((l) => /^\(\d+ line\(s\) left out here to fit\)$/.test(l))).to.have.length(1);
    expect(lines.at(-1)).to.match(/startLine 1991, nextLine 2001, nextOffset 199000$/);
  });

  it('a later digest carries the earlier one\'s lines on, within the same budget', () => {
    const first = digest(long, { from: 0, keepFrom: 8 }, 4096);
    // The record is stored after the messages it was written at; the next digest covers #8-#11 and folds it in.
    const record = rec(8, `[Summary of messages #0-#7]\n${first}`);
    const second = digest([...long.slice(0, 12), record], { from: 8, keepFrom: 12, previous: record }, 4096);
    expect(second.split('\n').slice(1)).to.deep.equal([...first.split('\n').slice(1), ...digest(long, { from: 8, keepFrom: 12 }, 4096).split('\n').slice(1)]);
  });

  it('sizes: the threshold is the percent of the budget; kept messages get half the room left once the summary and the working state (as large) are counted; the summary 128 to 4,096 tokens (a twelfth of the budget)', () => {
    expect(compactionSizes(48_000, 75, 5_000, 3)).to.deep.equal({ threshold: 36_000, summaryTokens: 4_000, keepBytes: 34_500, digestBytes: 12_000, stateBytes: 12_000, partBytes: 47_440 });
    expect(compactionSizes(4_000, 50, 1_000, 2).summaryTokens).to.equal(333);
    expect(compactionSizes(1_200, 50, 200, 2).summaryTokens).to.equal(128);
  });
});

describe('compaction in the loop', () => {
  function seed(h: Harness) {
    writeFileSync(path.join(h.scopes.logs, 'a.log'), ('a'.repeat(99) + '\n').repeat(50)); // 5,000 bytes: one page in the 12,000-token window's 5,500
  }
  const read = () => calls(['read_file', { root: 'logs', path: 'a.log' }]);
  const summary = (s: string): GenerateOutput => text(s);
  /** A model that reads a.log once per prompt, then answers; asked for a summary, writes one. */
  const investigator: Step = (input) => {
    if (isSummaryCall(input)) return summary(`SUMMARY of ${input.messages[0]!.content.length} chars`);
    const last = input.messages.at(-1)!;
    return last.role === 'tool' ? text('the log has 50 lines') : read();
  };
  const config = { contextWindowTokens: 12_000, maxTokens: 1000, workingSetBytes: 0 };

  it('compacts when a request passes compactAtPercent of the budget; every request is rebuilt exactly from the stored transcript', async () => {
    const h = harness(Array(200).fill(investigator), config);
    seed(h);
    let s = await prompt(h, 'read logs/a.log');
    for (let i = 1; i < 12; i++) s = await prompt(h, `read logs/a.log again (${i})`, s.session_id);
    expect(s.status, s.lastError ?? '').to.equal('completed');
    const records = s.messages.flatMap((m, i) => (m.role === 'compaction' ? [{ i, m }] : []));
    expect(records.length).to.be.at.least(2);
    for (const { m } of records) {
      expect(m.compactedBy).to.equal('model');
      // A cut inside a prompt's turn restates the prompt being answered after the summary.
      expect(m.content).to.match(/^\[Summary of the earlier part of this session \(\d+ messages\), written by the model\. The messages after it follow whole\.\]\nSUMMARY of \d+ chars\n\n=== Working state \(rebuilt at every compaction from the whole session\) ===\nThe operator's prompts, word for word, oldest first:\n1\. \[[\dT:-]+Z\] read logs\/a\.log\n[\s\S]*?(\n\nThe operator's prompt being answered, kept whole:\nread logs\/a\.log( again \(\d+\))?)?$/);
    }
    const turns = h.backend.inputs.filter((x) => !isSummaryCall(x));
    const summaries = h.backend.inputs.filter(isSummaryCall);
    expect(summaries).to.have.length(records.length);
    for (const x of summaries) expect([x.tools.length, x.messages.length, x.messages[0]!.role]).to.deep.equal([0, 1, 'user']);
    // The budget is 11,000 tokens; compaction starts at 75% (8,250): no turn request passes it after the first.
    for (const x of turns) expect(estimateTokens(x)).to.be.at.most(8_250 + 2_100);
    // The last request is what the stored transcript says a request is: the context module's, built again from it.
    // (As JSON, times aside: the store stamps each message after its request was built, from the same clock.)
    const plain = (x: unknown) => JSON.parse(JSON.stringify(x, (k, v) => (k === 'at' ? undefined : v)));
    expect(plain(turns.at(-1)!.messages)).to.deep.equal(plain(buildRequest(s.messages.slice(0, -1), { config: { maxTokens: 1000 }, model: 'm', tools: [] }).messages));
    // A later compaction folds the earlier summary in.
    expect(summaries[1]!.messages[0]!.content).to.contain(`[summary so far, standing for messages #0-#${(records[0]!.m as CompactionRecord).keepFrom - 1}]`);
    // Every original message is still stored.
    expect(s.messages.filter((m) => m.role === 'user')).to.have.length(12);
  });

  it('agent.compaction false: today\'s behaviour, no record and no summary call', async () => {
    const h = harness(Array(200).fill(investigator), { ...config, compaction: false });
    seed(h);
    let s = await prompt(h, 'read logs/a.log');
    for (let i = 1; i < 12; i++) s = await prompt(h, `again ${i}`, s.session_id);
    expect(s.messages.some((m) => m.role === 'compaction')).to.equal(false);
    expect(h.backend.inputs.some(isSummaryCall)).to.equal(false);
  });

  it('a failed summary call falls back to the digest, the prompt completes, and the call log shows the failed call', async () => {
    const failing: Step = (input) => {
      if (isSummaryCall(input)) throw new ModelError('scripted request failed (HTTP 500): boom', 'scripted', 500, false);
      return (investigator as (i: GenerateInput) => GenerateOutput)(input);
    };
    const h = harness(Array(200).fill(failing), config);
    h.deps.calls = new ModelCallLog();
    seed(h);
    let s = await prompt(h, 'read logs/a.log');
    for (let i = 1; i < 8; i++) s = await prompt(h, `read logs/a.log again (${i})`, s.session_id);
    expect(s.status, s.lastError ?? '').to.equal('completed');
    const record = s.messages.find((m): m is CompactionRecord => m.role === 'compaction')!;
    expect(record.compactedBy).to.equal('digest');
    expect(record.detail).to.equal('the summary call failed: scripted request failed (HTTP 500): boom');
    expect(record.content).to.match(/^\[Summary of the earlier part of this session \(\d+ messages\), a digest written without the model\. The messages after it follow whole\.\]\nDigest \(deterministic, written without the model\):\n- read_file \{"root":"logs","path":"a\.log"\} -> 5,1\d\d bytes; path "logs\/a\.log"/);
    expect(record.content).to.match(/\n=== Working state \(rebuilt at every compaction from the whole session\) ===\nThe operator's prompts, word for word, oldest first:\n1\. \[[\dT:-]+Z\] read logs\/a\.log\n/);
  });

  it('the local backend gets the digest, and reads on after a cut inside its prompt\'s turn', async () => {
    Models.register(localBackend);
    const h = harness([], { provider: 'local', contextWindowTokens: 10_000, maxTokens: 500, maxToolResultBytes: 4096, workingSetBytes: 0 });
    writeFileSync(path.join(h.scopes.logs, 'long.log'), Array.from({ length: 400 }, (_, i) => `line ${i + 1} ${i % 50 === 0 ? 'error here' : 'fine'} ${'.'.repeat(60)}\n`).join(''));
    const s = await prompt(h, 'summarize logs/long.log');
    expect(s.status, s.lastError ?? '').to.equal('completed');
    const records = s.messages.filter((m): m is CompactionRecord => m.role === 'compaction');
    expect(records.length).to.be.at.least(1);
    for (const r of records) expect([r.compactedBy, r.detail]).to.deep.equal(['digest', 'the local backend is not a model']);
    expect(records[0]!.content).to.contain(`${CURRENT_PROMPT_HEADING}:\nsummarize logs/long.log`);
    // It read on to the end from the cursor kept whole, and its answer covers the whole file: its newest note (the text
    // of the model turn a cut inside its prompt's turn keeps) carries the tally of the pages before.
    expect(s.messages.at(-1)!.content).to.match(/^logs\/long\.log: 400 lines, 29940 bytes, read in \d+ page\(s\); 29940 bytes of text seen\. 8 line\(s\) mention "error"; the first 5:\n- line 1: line 1 error here \.+\n- line 51: line 51 error here/);
  });

  it('a cancel during the summary call writes no record; the session takes the next prompt', async () => {
    let h!: Harness;
    let id = '';
    let cancelled = false;
    const cancelling: Step = async (input, signal) => {
      if (isSummaryCall(input) && !cancelled) {
        cancelled = true;
        await ops(h).cancel_agent_run.handle({ session_id: id }, user);
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        throw new DOMException('cancelled', 'AbortError');
      }
      return (investigator as (i: GenerateInput) => GenerateOutput)(input);
    };
    h = harness(Array(200).fill(cancelling), config);
    seed(h);
    let s = await prompt(h, 'read logs/a.log');
    id = s.session_id;
    for (let i = 1; i < 12 && !cancelled; i++) s = await prompt(h, `read logs/a.log again (${i})`, id);
    expect(cancelled).to.equal(true);
    expect([s.status, s.lastError]).to.deep.equal(['aborted', 'Cancelled with cancel_agent_run.']);
    expect(s.messages.some((m) => m.role === 'compaction')).to.equal(false);
    const next = await prompt(h, 'read logs/a.log once more', id);
    expect(next.status, next.lastError ?? '').to.equal('completed');
    expect(next.messages.some((m) => m.role === 'compaction')).to.equal(true);
  });

  it('compact_agent_session compacts an idle session whole; 409 while running or with nothing new; 404 unknown', async () => {
    const h = harness(Array(20).fill(investigator), { workingSetBytes: 0 });
    seed(h);
    const s = await prompt(h, 'read logs/a.log');
    const answer = (await ops(h).compact_agent_session.handle({ session_id: s.session_id, wait: true }, user)) as { status: string; compaction: { index: number; keepFrom: number; compactedBy: string; boundary: string; content: string } };
    expect(answer.status).to.equal('completed');
    expect(answer.compaction).to.include({ index: 4, keepFrom: 4, compactedBy: 'model', boundary: 'the model sees a summary the model wrote below instead of messages #0-#3' });
    const after = (await h.store.get(s.session_id))!;
    expect(after.messages).to.have.length(5);
    expect(requestMessages(after.messages)).to.deep.equal([u(answer.compaction.content), { role: 'assistant', content: BRIDGE }]);
    type Refusal = { status: number; message: string };
    const refused = (input: Record<string, unknown>) => ops(h).compact_agent_session.handle(input, user).then(() => ({ status: 200, message: '' }), (e: Refusal) => e);
    const again = await refused({ session_id: s.session_id });
    expect([again.status, again.message]).to.deep.equal([409, `session ${s.session_id} has nothing to compact since its last compaction`]);
    const missing = await refused({ session_id: 'nope' });
    expect(missing.status).to.equal(404);
    await h.store.mutate(s.session_id, (x) => void (x.status = 'running'));
    await h.store.append(s.session_id, [u('more')]);
    const busy = await refused({ session_id: s.session_id });
    expect([busy.status, busy.message]).to.deep.equal([409, `session ${s.session_id} is running: compact it once the run ends, or cancel the run with cancel_agent_run`]);
  });

  it('compact_agent_session with a provider that cannot be used gives the digest: the session stays completed, no error', async () => {
    Models.register(localBackend);
    const h = harness(Array(20).fill(investigator), { workingSetBytes: 0 });
    seed(h);
    const s = await prompt(h, 'read logs/a.log');
    h.config.provider = 'nowhere';
    const answer = (await ops(h).compact_agent_session.handle({ session_id: s.session_id, instructions: 'the log', wait: true }, user)) as { status: string; lastError: string | null; compaction: { compactedBy: string; detail: string } };
    expect([answer.status, answer.lastError]).to.deep.equal(['completed', null]);
    expect(answer.compaction).to.include({ compactedBy: 'digest' });
    expect(answer.compaction.detail).to.match(/^no summary call could be made: agent\.provider "nowhere" is not registered \(available: .*\)\. Set agent\.provider to one of them\.$/);
  });
});

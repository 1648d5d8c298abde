// The working state a compaction record carries (agent/context/workingState.ts): the operator's prompts word for word,
// each paged read with the call that reads its next page, the model's own notes; dropped from the middle to fit.
import { expect } from 'chai';
import { compactionContent, digest, planCompaction, type StoredMessage } from '../agent/compaction.js';
import { middleOut, readsInProgress, workingStateBlock } from '../agent/context/workingState.js';

const call = (id: string, name: string, args: Record<string, unknown>, content = '') => ({ role: 'assistant' as const, content, toolCalls: [{ id, name, arguments: args }] });
const result = (id: string, name: string, content: string, cut?: 'workingSet') => ({ role: 'tool' as const, toolCallId: id, name, content, ...(cut ? { cut } : {}) });

const transcript: StoredMessage[] = [
  { role: 'user', content: 'Why did replication stop last night? Look at logs/hdb.log first.', at: Date.UTC(2026, 11, 6, 9, 0, 0) },
  call('1', 'read_file', { root: 'logs', path: 'hdb.log' }, 'Reading the log from the start.'),
  result('1', 'read_file', '{"path":"logs/hdb.log","size":900000,"offset":0,"startLine":1,"endLine":400,"nextLine":401,"nextOffset":32000,"content":"…"}'),
  call('2', 'read_file', { root: 'logs', path: 'hdb.log', startLine: 401, offset: 32000 }),
  // cut to its head by the working set: the cursor survives (results are stored short fields first)
  result('2', 'read_file', '{"path":"logs/hdb.log","size":900000,"offset":32000,"startLine":401,"endLine":800,"nextLine":801,"nextOffset":64100,"content":"2026-12-05 …', 'workingSet'),
  call('3', 'read_file', { root: 'config', path: '' }),
  result('3', 'read_file', '{"path":"harperdb-config.yaml","size":900,"offset":0,"startLine":1,"endLine":30,"totalLines":30,"content":"…"}'),
  call('4', 'list_dir', { root: 'components' }),
  result('4', 'list_dir', '{"path":"components","entries":[]}'),
  { role: 'assistant', content: 'Not the config: replication is on and the node names match. The log shows "Connection pool exhausted" at line 611.' },
  { role: 'user', content: 'Go on with the log.' },
  call('5', 'read_file', { root: 'logs', path: 'hdb.log', startLine: 801, offset: 64100 }),
];

describe('the working state a compaction keeps', () => {
  it('names each paged read by its newest page: the call for the next page, or that it ended; calls without a cursor are not reads', () => {
    expect(readsInProgress(transcript)).to.deep.equal([
      { tool: 'read_file', target: { root: 'logs', path: 'hdb.log' }, next: { root: 'logs', path: 'hdb.log', startLine: 801, offset: 64100 }, endLine: 800 },
      { tool: 'read_file', target: { root: 'config', path: '' }, next: null, totalLines: 30, endLine: 30 },
    ]);
    // Up to a point: what the transcript before it knew.
    expect(readsInProgress(transcript, 3)[0]!.next).to.deep.equal({ root: 'logs', path: 'hdb.log', startLine: 401, offset: 32000 });
  });

  it('reads, word for word: the prompts with their times, the reads, the notes and answers', () => {
    expect(workingStateBlock(transcript, transcript.length, 8192)).to.equal(
      [
        '=== Working state (rebuilt at every compaction from the whole session) ===',
        "The operator's prompts, word for word, oldest first:",
        '1. [2026-12-06T09:00:00Z] Why did replication stop last night? Look at logs/hdb.log first.',
        '2. Go on with the log.',
        'Paged reads, each with the call that reads its next page (go on from there; do not start again):',
        '- read_file {"root":"logs","path":"hdb.log","startLine":801,"offset":64100} reads on after line 800',
        '- read_file {"root":"config","path":""} was read to its end (30 lines)',
        'Your own notes and answers, oldest first:',
        '- note: Reading the log from the start.',
        '- answer: Not the config: replication is on and the node names match. The log shows "Connection pool exhausted" at line 611.',
      ].join('\n')
    );
  });

  it('fits its budget from both ends: the first and the newest stay, what was left out is said where it was', () => {
    const lines = Array.from({ length: 10 }, (_, i) => `line ${i}`);
    expect(middleOut(lines, 28, 'line(s)')).to.deep.equal(['line 0', 'line 1', '(6 line(s) left out here to fit)', 'line 8', 'line 9']);
    expect(middleOut(lines, 1000, 'line(s)')).to.deep.equal(lines);
    const prompts: StoredMessage[] = Array.from({ length: 40 }, (_, i) => [{ role: 'user' as const, content: `prompt ${i} ${'x'.repeat(100)}` }, { role: 'assistant' as const, content: `answer ${i}` }]).flat();
    const block = workingStateBlock(prompts, prompts.length, 2048);
    expect(block).to.contain('1. prompt 0 ').and.to.contain('40. prompt 39 ').and.to.match(/\(\d+ prompt\(s\) left out here to fit\)/);
    expect(Buffer.byteLength(block)).to.be.at.most(2048);
  });

  it('goes into the record after the summary, with no message numbers, and again (rebuilt) at the next compaction', () => {
    const plan = planCompaction(transcript, 0)!;
    const content = compactionContent(transcript, plan, 'The operator asked about replication.', 'model', 8192);
    expect(content.split('\n').slice(0, 3)).to.deep.equal([
      `[Summary of the earlier part of this session (${plan.keepFrom} messages), written by the model. The messages after it follow whole.]`,
      'The operator asked about replication.',
      '',
    ]);
    expect(content).to.contain(workingStateBlock(transcript, plan.keepFrom, 8192));
    expect(content).to.not.match(/#\d/);
  });

  it('the digest lists the tool calls with their cursors, after the earlier summary, and drops from the middle', () => {
    const plan = planCompaction(transcript, 0)!;
    const d = digest(transcript, plan, 4096);
    const size = (i: number) => Buffer.byteLength((transcript[i] as { content: string }).content);
    expect(d.split('\n')).to.deep.equal([
      'Digest (deterministic, written without the model):',
      `- read_file {"root":"logs","path":"hdb.log"} -> ${size(2)} bytes; path "logs/hdb.log", startLine 1, endLine 400, nextLine 401, nextOffset 32000`,
      `- read_file {"root":"logs","path":"hdb.log","startLine":401,"offset":32000} -> ${size(4)} bytes (cut: workingSet); path "logs/hdb.log", startLine 401, endLine 800, nextLine 801, nextOffset 64100`,
      `- read_file {"root":"config","path":""} -> ${size(6)} bytes; path "harperdb-config.yaml", startLine 1, endLine 30, totalLines 30`,
      `- list_dir {"root":"components"} -> ${size(8)} bytes; path "components"`,
    ]);
    const small = digest(transcript, plan, 300);
    expect(small.split('\n')[0]).to.equal('Digest (deterministic, written without the model):');
    expect(small).to.contain('left out here to fit');
    expect(small.split('\n')[1]).to.match(/^- read_file \{"root":"logs","path":"hdb\.log"\}/);
  });
});

// The repeat detector (agent/repeats.ts) and the run loop's use of it: told once, stopped at the sixth.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createOperations } from '../agent/operations.js';
import { callKey, callsThisTurn, repeats, REPEAT_NOTICE, REPEAT_STOP } from '../agent/repeats.js';
import { activeRun } from '../agent/runs.js';
import type { StoredMessage } from '../agent/compaction.js';
import { calls, harness, text } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };

describe('repeated tool calls', () => {
  it('counts the newest call repeated in a row, and a pair taken in turn once per pair', () => {
    expect(repeats([])).to.equal(0);
    expect(repeats(['a'])).to.equal(1);
    expect(repeats(['b', 'a', 'a', 'a'])).to.equal(3);
    expect(repeats(['a', 'a', 'b'])).to.equal(1);
    expect(repeats(['a', 'b', 'a', 'b'])).to.equal(2);
    expect(repeats(['c', 'a', 'b', 'a', 'b', 'a', 'b'])).to.equal(3);
    expect(repeats(['a', 'b', 'c', 'a', 'b', 'c'])).to.equal(1);
  });

  it('a call is the same whatever the order of its arguments; a new cursor is a new call', () => {
    expect(callKey({ name: 'read_file', arguments: { root: 'logs', path: 'a.log' } })).to.equal(callKey({ name: 'read_file', arguments: { path: 'a.log', root: 'logs' } }));
    expect(callKey({ name: 'read_file', arguments: { root: 'logs', path: 'a.log', startLine: 2, offset: 10 } })).to.not.equal(callKey({ name: 'read_file', arguments: { root: 'logs', path: 'a.log', startLine: 3, offset: 20 } }));
  });

  it('counts only the turn of the newest prompt, through the call asked about', () => {
    const read = (id: string) => ({ role: 'assistant' as const, content: '', toolCalls: [{ id, name: 'tail_file', arguments: { root: 'logs', path: 'a.log' } }] });
    const result = (id: string) => ({ role: 'tool' as const, toolCallId: id, name: 'tail_file', content: '{}' });
    const messages: StoredMessage[] = [{ role: 'user', content: 'one' }, read('1'), result('1'), { role: 'assistant', content: 'done' }, { role: 'user', content: 'two' }, read('2'), result('2'), read('3')];
    expect(callsThisTurn(messages, { id: '3', name: 'tail_file', arguments: {} })).to.have.length(2);
    expect(callsThisTurn(messages, { id: '2', name: 'tail_file', arguments: {} })).to.have.length(1);
  });

  it('a model that makes one read over and over is told once, and stopped before the sixth, with what its calls cost', async () => {
    const same = ['tail_file', { root: 'logs', path: 'loop.log', lines: 5 }] as [string, Record<string, unknown>];
    const h = harness(Array.from({ length: 8 }, () => calls(same)).concat([text('never reached')]));
    writeFileSync(path.join(h.scopes.logs, 'loop.log'), 'one\ntwo\n');
    const operations = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: new Date(0).toISOString() } });
    const r = (await operations.agent_prompt.handle({ message: 'watch logs/loop.log' }, user)) as { session_id: string };
    await activeRun(r.session_id)?.done;
    const s = (await h.store.get(r.session_id))!;
    const results = s.messages.filter((m) => m.role === 'tool');
    expect(results).to.have.length(REPEAT_STOP - 1);
    const notices = results.map((m) => (JSON.parse(m.content) as { notice?: string }).notice ?? null);
    expect(notices.map((n) => n !== null)).to.deep.equal([false, false, true, false, false]);
    expect(notices[REPEAT_NOTICE - 1]).to.match(/^You have now made this same tail_file call 3 times in a row with the same arguments/);
    expect(JSON.parse(results[REPEAT_NOTICE - 1]!.content)).to.include({ path: 'logs/loop.log' });
    expect(s.status).to.equal('error');
    expect(s.lastError).to.equal(
      'The model repeated the same call, tail_file {"root":"logs","path":"loop.log","lines":5}, 6 times in a row after being told its results do not change, so the run was stopped before running it again. To go on: send a prompt that says what to do differently (another file, a cursor, a narrower question).'
    );
  });
});

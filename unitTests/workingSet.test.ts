// The working set (agent.workingSetBytes): which tool results stay whole before a model call, how the others are cut,
// and that a cut page keeps its cursor readable.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { cutToHead, workingSetCuts, WORKING_SET_REASON } from '../agent/session.js';
import { readFile } from '../agent/tools/fsTools.js';
import { cursorFirst } from '../resources/models/agentLoop.js';
import { LocalBackend } from '../resources/models/localBackend.js';
import type { Message } from '../resources/models/types.js';
import { memoryStore, tempScopes } from './helpers.js';

const KiB = 1024;
const tool = (bytes: number, extra: Partial<Message> = {}): Message => ({ role: 'tool', toolCallId: 'c', name: 'read_file', content: 'x'.repeat(bytes), ...extra }) as Message;
const asst: Message = { role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'read_file', arguments: {} }] };
/** A transcript: a prompt, then one assistant call and one result of each size. */
const transcript = (...sizes: (number | Message)[]): Message[] => [{ role: 'user', content: 'read it' }, ...sizes.flatMap((s) => [asst, typeof s === 'number' ? tool(s) : s])];
/** The index of the n-th tool result (0-based) in `transcript`. */
const at = (n: number) => 2 + 2 * n;

/** A read_file page as the tool returns it: content before the cursor to the next page. */
function page(startLine: number, offset: number, contentBytes: number) {
  return JSON.stringify({ path: 'logs/big.log', size: 1_000_000, offset, startLine, endLine: startLine + 99, content: 'l'.repeat(contentBytes), nextLine: startLine + 100, nextOffset: offset + contentBytes });
}

describe('working set', () => {
  it('cuts nothing while the results fit the budget; once they do not, cuts down to half of it, so the next pages only append', () => {
    // Everything fits: nothing is cut.
    expect(workingSetCuts(transcript(40 * KiB, 40 * KiB), 96 * KiB)).to.deep.equal([]);
    // Four 40 KiB results pass 96 KiB: cut down to 48 KiB, the newest whole and three 2 KiB heads (46 KiB).
    expect(workingSetCuts(transcript(40 * KiB, 40 * KiB, 40 * KiB, 40 * KiB), 96 * KiB)).to.deep.equal([at(0), at(1), at(2)]);
    // In batches: the next page is appended with nothing cut (80 KiB whole and three heads fit 96 KiB) ...
    const head = tool(2 * KiB, { cut: 'workingSet' });
    expect(workingSetCuts(transcript(head, head, head, 40 * KiB, 40 * KiB), 96 * KiB)).to.deep.equal([]);
    // ... and only the one after it cuts again, down to the newest.
    expect(workingSetCuts(transcript(head, head, head, 40 * KiB, 40 * KiB, 40 * KiB), 96 * KiB)).to.deep.equal([at(3), at(4)]);
    // A budget that holds three keeps one and a half of them after a cut: the newest whole, the one before cut.
    expect(workingSetCuts(transcript(40 * KiB, 40 * KiB, 40 * KiB, 40 * KiB), 124 * KiB)).to.deep.equal([at(0), at(1), at(2)]);
  });

  it('keeps the newest result whole even when it alone is over the budget', () => {
    expect(workingSetCuts(transcript(10 * KiB, 64 * KiB), 8 * KiB)).to.deep.equal([at(0)]);
    expect(workingSetCuts(transcript(64 * KiB), 1024)).to.deep.equal([]);
  });

  it('goes by age, not size: once one result is cut, every older one over 2 KiB is cut too', () => {
    // The 5 KiB result would fit after the 40 KiB one is cut, but it is older: it is cut as well.
    expect(workingSetCuts(transcript(5 * KiB, 40 * KiB, 40 * KiB), 50 * KiB)).to.deep.equal([at(0), at(1)]);
  });

  it('never touches a result of 2 KiB or less (so none already cut to its head); one cut by the cap is cut again', () => {
    expect(workingSetCuts(transcript(2 * KiB, 100, 2 * KiB, 64 * KiB), 1024)).to.deep.equal([]);
    const headed = tool(2 * KiB, { cut: 'context' });
    const capped = tool(64 * KiB, { cut: 'cap' });
    expect(workingSetCuts(transcript(headed, capped, 30 * KiB, 64 * KiB), 1024)).to.deep.equal([at(1), at(2)]);
  });

  it('puts a result\'s short fields before its long ones (cursors survive a head cut); other text stays as it is', () => {
    const text = page(101, 4200, 3000);
    const moved = JSON.parse(cursorFirst(text));
    expect(Object.keys(moved)).to.deep.equal(['path', 'size', 'offset', 'startLine', 'endLine', 'nextLine', 'nextOffset', 'content']);
    expect(moved).to.deep.equal(JSON.parse(text));
    expect(cursorFirst('plain text')).to.equal('plain text');
    expect(cursorFirst('[1,2]')).to.equal('[1,2]');
  });

  it('the store cuts picked results to 2 KiB heads with their cursor first, marked, once; bytes follow', async () => {
    const { store } = memoryStore();
    const s = await store.create({ user: 'u', provider: 'local', model: null });
    const pages = [page(1, 0, 30 * KiB), page(101, 30 * KiB, 30 * KiB), page(201, 60 * KiB, 30 * KiB), page(301, 90 * KiB, 30 * KiB)];
    await store.append(s.session_id, transcript(...pages.map((content) => ({ role: 'tool', toolCallId: 'c', name: 'read_file', content }) as Message)));
    // Over 72 KiB: cut down to 36 KiB, the newest page whole.
    expect(await store.trimToWorkingSet(s.session_id, 72 * KiB)).to.equal(3);
    const back = (await store.get(s.session_id))!;
    for (const n of [0, 1, 2]) {
      const m = back.messages[at(n)]!;
      expect((m as { cut?: string }).cut).to.equal('workingSet');
      expect(Buffer.byteLength(m.content)).to.be.at.most(2048).and.greaterThan(2000);
      const cursor = JSON.parse(pages[n]!);
      expect(m.content.startsWith(`{"path":"logs/big.log","size":1000000,"offset":${cursor.offset},"startLine":${cursor.startLine},"endLine":${cursor.endLine},"nextLine":${cursor.nextLine},"nextOffset":${cursor.nextOffset},"content":"lll`)).to.equal(true);
      expect(m.content).to.match(new RegExp(`…\\[${WORKING_SET_REASON.replace(/[().]/g, '\\$&')}; full result is ${Buffer.byteLength(pages[n]!)} bytes\\. Ask for less: if you need this page again, read it again from its cursor above \\(path, offset, startLine\\)\\]$`));
    }
    expect(back.messages[at(3)]!.content).to.equal(pages[3]);
    expect(back.bytes).to.equal(Buffer.byteLength(JSON.stringify(back.messages)));
    // Cut once: the same budget finds nothing more to cut.
    expect(await store.trimToWorkingSet(s.session_id, 72 * KiB)).to.equal(0);
  });
});

describe('the local backend under a working set', () => {
  const scopes = tempScopes();

  /** Drives the local backend and read_file to the end of `name`, cutting older pages as the loop would. */
  async function readThrough(name: string, budgetBytes: number): Promise<{ answer: string; messages: Message[] }> {
    const backend = new LocalBackend();
    const messages: Message[] = [{ role: 'user', content: `summarize logs/${name}` }];
    const ctx = { scopes, maxResultBytes: 16384, signal: new AbortController().signal };
    for (let turn = 0; turn < 200; turn++) {
      if (budgetBytes) for (const i of workingSetCuts(messages, budgetBytes)) messages[i] = { ...messages[i], content: cutToHead(messages[i]!.content, WORKING_SET_REASON, 'read it again'), cut: 'workingSet' } as Message;
      const out = await backend.generate({ system: '', messages, tools: [], model: 'local', maxTokens: 100 }, new AbortController().signal);
      if (out.toolCalls.length === 0) return { answer: out.text, messages };
      const call = out.toolCalls[0]!;
      messages.push({ role: 'assistant', content: out.text, toolCalls: out.toolCalls });
      messages.push({ role: 'tool', toolCallId: call.id, name: call.name, content: JSON.stringify(await readFile(call.arguments as Record<string, unknown>, ctx)) });
    }
    throw new Error('no answer in 200 turns');
  }

  it('notes each page as it reads, and answers the same whether or not the old pages were cut', async () => {
    writeFileSync(path.join(scopes.logs, 'noted.log'), Array.from({ length: 20000 }, (_, i) => `line ${i + 1}${i % 150 === 7 ? ' ERROR: disk slow' : ''}`).join('\n') + '\n');
    const whole = await readThrough('noted.log', 0);
    const trimmed = await readThrough('noted.log', 20 * KiB);
    expect(trimmed.messages.filter((m) => (m as { cut?: string }).cut === 'workingSet').length).to.be.greaterThan(10);
    expect(trimmed.answer).to.equal(whole.answer);
    expect(whole.answer).to.match(/^logs\/noted\.log: 20000 lines, 211172 bytes, read in \d+ page\(s\); 211172 bytes of text seen\. 134 line\(s\) mention "error"; the first 5:\n- line 8: line 8 ERROR: disk slow\n/);
    expect(whole.answer).to.not.include('cut and not parsed');
  });
});

// The live-view seam: what a follower is sent of a session (TranscriptCursor), and the event-stream body.
import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { endEventStreams, eventStream, followSession, messageView, TranscriptCursor } from '../agent/sessionFeed.js';
import type { Session } from '../agent/session.js';
import type { Message } from '../resources/models/types.js';
import { memoryStore } from './helpers.js';

function session(messages: Message[], fields: Partial<Session> = {}): Session {
  const sizes = { messageCount: messages.length, bytes: Buffer.byteLength(JSON.stringify(messages)) };
  return { session_id: 's1', user: 'admin', status: 'running', messages, pendingApprovals: [], provider: 'local', model: null, createdAt: 1, updatedAt: 2, lastError: null, runner: 'r', node: null, title: null, ...sizes, ...fields };
}

const read: Message = { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'read_file', arguments: { path: 'a.log' } }] };
const page: Message = { role: 'tool', toolCallId: 'c1', name: 'read_file', content: 'x'.repeat(5000) };

describe('TranscriptCursor', () => {
  it('sends messages from `from` on, then only new ones; a write that changes nothing visible sends nothing', () => {
    const cursor = new TranscriptCursor(1);
    const first = cursor.delta(session([{ role: 'user', content: 'hi' }, read]))!;
    expect(first.messages.map((m) => m.index)).to.deep.equal([1]);
    expect(first.messages[0]).to.deep.equal({ index: 1, role: 'assistant', content: '', bytes: Buffer.byteLength(JSON.stringify(read.toolCalls)), toolCalls: read.toolCalls });
    expect(first.session).to.include({ messageCount: 2, status: 'running' });
    expect(cursor.delta(session([{ role: 'user', content: 'hi' }, read], { updatedAt: 99 }))).to.equal(null);
    const second = cursor.delta(session([{ role: 'user', content: 'hi' }, read, page]))!;
    expect(second.messages.map((m) => [m.index, m.bytes])).to.deep.equal([[2, 5000]]);
  });

  it('resends a message the context-window shrink rewrote in place, with its new size and mark', () => {
    const cursor = new TranscriptCursor();
    cursor.delta(session([read, page]));
    const cut: Message = { ...page, content: 'x'.repeat(2048), cut: 'context' };
    const delta = cursor.delta(session([read, cut]))!;
    expect(delta.messages).to.deep.equal([{ index: 1, role: 'tool', content: cut.content, bytes: 2048, name: 'read_file', toolCallId: 'c1', cut: 'context' }]);
  });

  it('sends the header when only the status, last error or approvals change', () => {
    const cursor = new TranscriptCursor();
    cursor.delta(session([read]));
    const ended = cursor.delta(session([read], { status: 'error', lastError: 'boom' }))!;
    expect(ended.messages).to.deep.equal([]);
    expect(ended.session).to.include({ status: 'error', lastError: 'boom' });
  });

  it('measures a message as its content bytes plus its tool calls (multi-byte text counted in bytes)', () => {
    expect(messageView({ role: 'user', content: 'héllo ✓' }, 0).bytes).to.equal(10);
    expect(messageView({ role: 'tool', toolCallId: 'c', name: 'n', content: 'e', isError: true, cut: 'cap' }, 3)).to.deep.equal({ index: 3, role: 'tool', content: 'e', bytes: 1, name: 'n', toolCallId: 'c', isError: true, cut: 'cap' });
  });
});

class FakeQueue extends EventEmitter {}

/** Reads until `done` holds for what came (or the stream ends), leaving the stream open. */
function read1(stream: NodeJS.ReadableStream, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const finish = () => {
      stream.off('data', onData);
      stream.off('end', finish);
      stream.pause();
      resolve(text);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      if (done(text)) finish();
    };
    stream.on('data', onData);
    stream.on('end', finish);
    stream.resume(); // a paused stream stays paused when a listener is added
  });
}

describe('event streams', () => {
  it('followSession subscribes, sends the current state, then each change; closing the stream ends the subscription', async () => {
    const { store } = memoryStore();
    const s = await store.create({ user: 'admin', provider: 'local', model: null, session_id: 'f1' });
    const queue = new FakeQueue();
    let closed = 0;
    queue.on('close', () => closed++);
    let query: unknown;
    const stream = followSession({ subscribe: async (q) => ((query = q), queue) }, store, s.session_id, 0);
    const first = await read1(stream, (t) => /event:[^]*\n\n$/.test(t));
    expect(first.startsWith('retry: 1000\n\nevent: session\ndata: ')).to.equal(true);
    expect(query).to.deep.equal({ id: 'f1', omitCurrent: true });
    const updated = await store.append('f1', [{ role: 'user', content: 'hello' }]);
    queue.emit('data', { id: 'f1', type: 'put', value: JSON.parse(JSON.stringify(updated)) });
    const next = await read1(stream, (t) => t.includes('\n\n'));
    const data = JSON.parse(/^event: session\ndata: (.*)\n\n$/.exec(next)![1]!);
    expect(data.messages).to.deep.equal([{ index: 0, role: 'user', content: 'hello', bytes: 5, at: (await store.get('f1'))!.messages[0]!.at }]);
    stream.destroy();
    expect(closed).to.equal(1);
  });

  // Last: after it this process serves no new stream, as a thread Harper is restarting.
  it('endEventStreams ends open streams, and later ones at once (Harper is restarting the thread)', async () => {
    let stopped = 0;
    const open = eventStream(async () => () => stopped++);
    await new Promise((r) => setImmediate(r));
    expect(endEventStreams()).to.be.at.least(1);
    expect(await read1(open, () => false)).to.equal('retry: 1000\n\n');
    expect(stopped).to.equal(1);
    let started = 0;
    const late = eventStream(async () => (started++, () => undefined));
    expect(await read1(late, () => false)).to.equal('retry: 1000\n\n');
    expect(started).to.equal(0);
  });
});

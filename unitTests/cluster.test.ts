// A session belongs to one node: operations on another node's session are sent there (with the caller's
// credentials), only a node's own interrupted runs are recovered at its boot, and a cancel written by another
// writer (thread) stops a run through the row's subscription.
import { expect } from 'chai';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Cluster, FORWARDED_HEADER, operationsUrl } from '../agent/cluster.js';
import { startRun } from '../agent/loop.js';
import { newRunner, recoverInterruptedRuns } from '../agent/runs.js';
import { createOperations, HttpError } from '../agent/operations.js';
import { SessionStore } from '../agent/session.js';
import { harness, MemoryTable, memoryStore, text } from './helpers.js';

async function owner(status: number, body: unknown) {
  const seen: { headers: IncomingHttpHeaders; body: string }[] = [];
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: data });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return { seen, url, close: () => new Promise((r) => server.close(r)) };
}

function clusterWith(rows: Record<string, { operationsUrl: string }>) {
  const nodes = new MemoryTable();
  for (const [name, row] of Object.entries(rows)) nodes.rows.set(name, JSON.stringify({ name, ...row }));
  return new Cluster('A', 'http://A:9925/', () => nodes);
}

const failure = (p: Promise<unknown>) => p.then(() => { throw new Error('expected a failure'); }, (e: HttpError) => e);

describe('Cluster', () => {
  it("forwards an operation to the owner with the caller's credentials and answers its 200 body", async () => {
    const b = await owner(200, { session_id: 's', status: 'aborted' });
    try {
      const input = { operation: 'cancel_agent_run', session_id: 's' };
      expect(await clusterWith({ B: { operationsUrl: b.url } }).forward('B', input, { authorization: 'Basic YWRtaW46cHc=' })).to.deep.equal({ session_id: 's', status: 'aborted' });
      expect(b.seen).to.have.length(1);
      expect(b.seen[0]!.headers).to.include({ authorization: 'Basic YWRtaW46cHc=', [FORWARDED_HEADER]: 'A', 'content-type': 'application/json' });
      expect(JSON.parse(b.seen[0]!.body)).to.deep.equal(input);
    } finally {
      await b.close();
    }
  });

  it("passes the owner's refusal on with its status, naming the node", async () => {
    const b = await owner(409, { error: 'session s is running: wait for it to finish or cancel it with cancel_agent_run' });
    try {
      const e = await failure(clusterWith({ B: { operationsUrl: b.url } }).forward('B', { operation: 'agent_prompt', session_id: 's', message: 'x' }, {}));
      expect([e.status, e.message]).to.deep.equal([409, 'node B: session s is running: wait for it to finish or cancel it with cancel_agent_run']);
    } finally {
      await b.close();
    }
  });

  it('answers 503 when the owner does not answer or never recorded its URL, and 409 instead of forwarding twice', async () => {
    const gone = await owner(200, {});
    await gone.close();
    const down = await failure(clusterWith({ B: { operationsUrl: gone.url } }).forward('B', { session_id: 's' }, {}));
    expect(down.status).to.equal(503);
    expect(down.message).to.equal(`session "s" belongs to node B, whose operations API at ${gone.url} did not answer (ECONNREFUSED). Any node can read the session; to run or cancel it, bring B back, or start a new session here.`);
    const unknown = await failure(clusterWith({}).forward('C', { session_id: 's' }, {}));
    expect([unknown.status, unknown.message]).to.deep.equal([503, 'session "s" belongs to node C, which has not recorded its operations URL in agent.AgentNode: is the agent running there?']);
    const twice = await failure(clusterWith({ B: { operationsUrl: gone.url } }).forward('B', { session_id: 's' }, { forwardedBy: 'C' }));
    expect([twice.status, twice.message]).to.deep.equal([409, 'session "s" belongs to node B, not to A, which C sent this request to']);
  });

  it("builds a node's operations URL from its name and port (https on the secure port only)", () => {
    expect(operationsUrl('127.0.0.2', { port: 9925 })).to.equal('http://127.0.0.2:9925/');
    expect(operationsUrl('db1.example.com', { securePort: 9943 })).to.equal('https://db1.example.com:9943/');
    expect(operationsUrl('::1', { port: 9925 })).to.equal('http://[::1]:9925/');
  });
});

describe('sessions owned by a node', () => {
  const user = { username: 'admin', role: { permission: { super_user: true } } };

  it('sends prompt, cancel and approve on another node\'s session to that node; runs its own here', async () => {
    const h = harness([text('here')]);
    const sent: [string, Record<string, unknown>, unknown][] = [];
    const cluster = { node: 'A', forward: async (node: string, input: Record<string, unknown>, via: unknown) => (sent.push([node, input, via]), { forwarded: node }) } as unknown as Cluster;
    const ops = createOperations({ ...h.deps, cluster, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 't', startedAt: '' } });
    await h.table.put('theirs', { session_id: 'theirs', status: 'idle', node: 'B', provider: 'scripted', messageCount: 0, bytes: 2 });
    const via = { authorization: 'Basic x' };
    expect(await ops.agent_prompt!.handle({ operation: 'agent_prompt', message: 'hi', session_id: 'theirs' }, user, via)).to.deep.equal({ forwarded: 'B' });
    expect(await ops.cancel_agent_run!.handle({ operation: 'cancel_agent_run', session_id: 'theirs' }, user, via)).to.deep.equal({ forwarded: 'B' });
    expect(await ops.approve_agent_action!.handle({ operation: 'approve_agent_action', session_id: 'theirs', approval_id: 'x', approved: true }, user, via)).to.deep.equal({ forwarded: 'B' });
    expect(sent.map(([node, input, v]) => [node, input.operation, v])).to.deep.equal([['B', 'agent_prompt', via], ['B', 'cancel_agent_run', via], ['B', 'approve_agent_action', via]]);
    expect((await h.store.get('theirs'))!.messages).to.deep.equal([]);
    // A new session is this node's, and runs here.
    const mine = (await ops.agent_prompt!.handle({ operation: 'agent_prompt', message: 'hi' }, user, via)) as { session_id: string; node: string };
    expect(mine.node).to.equal('A');
    await h.store.get(mine.session_id);
    expect(sent).to.have.length(3);
  });

  it("recovers only this node's interrupted runs at boot", async () => {
    const { store, table } = memoryStore(0, 'A');
    const row = (id: string, node: string, runner: string) => table.put(id, { session_id: id, status: 'running', node, runner, provider: 'local', messageCount: 0, bytes: 2, updatedAt: 1 });
    await row('a-dead', 'A', 'A:1:1:x'); // an earlier process of this node
    await row('a-live', 'A', newRunner('A')); // this process
    await row('b-live', 'B', 'B:1:1:y'); // another node's run
    expect(await recoverInterruptedRuns(store)).to.equal(1);
    expect((await store.header('a-dead'))!).to.include({ status: 'error', runner: null, lastError: 'The run was interrupted by a Harper restart. Send a new prompt to continue the session.' });
    expect((await store.header('a-live'))!.status).to.equal('running');
    expect((await store.header('b-live'))!).to.include({ status: 'running', runner: 'B:1:1:y' });
  });

  it('recovers the runs of an earlier thread of its own worker index (Harper restarted the workers), not those of other workers', async () => {
    const { store, table } = memoryStore(0, 'A');
    const row = (id: string, runner: string) => table.put(id, { session_id: id, status: 'running', node: 'A', runner, provider: 'local', messageCount: 0, bytes: 2, updatedAt: 1 });
    const pid = process.pid;
    await row('replaced', `A:${pid}:0.5:x`); // worker 0's thread before the restart
    await row('mine', `A:${pid}:0.7:x`); // this thread: worker 0, thread 7
    await row('other-worker', `A:${pid}:1.6:x`); // worker 1 may still be running it
    await row('old-token', `A:${pid}:5:x`); // a token from before the worker index was in it
    expect(await recoverInterruptedRuns(store, { index: 0, thread: 7 })).to.equal(1);
    expect((await store.header('replaced'))!).to.include({ status: 'error', runner: null });
    for (const id of ['mine', 'other-worker', 'old-token']) expect((await store.header(id))!.status, id).to.equal('running');
  });

  it('a cancel written by another writer (another thread) stops a run inside its model call, through the subscription', async () => {
    let modelSignal: AbortSignal | undefined;
    const h = harness([(_input, signal) => new Promise((_, reject) => ((modelSignal = signal), signal.addEventListener('abort', () => reject(signal.reason))))]);
    const otherThread = new SessionStore({ sessions: () => h.table, messages: () => (h.store as unknown as { tables: { messages: () => MemoryTable } }).tables.messages() });
    const s = await h.store.create({ user: 'u', provider: 'scripted', model: null });
    const runner = newRunner(null);
    await h.store.mutate(s.session_id, (row) => {
      row.status = 'running';
      row.runner = runner;
      return [{ role: 'user', content: 'go' }];
    });
    const run = startRun(h.deps, s.session_id, runner);
    while (!modelSignal) await new Promise((r) => setTimeout(r, 5));
    await otherThread.setStatus(s.session_id, 'aborted', 'Cancelled with cancel_agent_run.');
    await run.done;
    expect(modelSignal.aborted).to.equal(true);
    const after = (await h.store.get(s.session_id))!;
    expect(after).to.include({ status: 'aborted', lastError: 'Cancelled with cancel_agent_run.' });
    expect(after.messages.map((m) => m.role)).to.deep.equal(['user']);
  });

  it("a late event of the row's earlier writes (its creation, idle) does not stop a run", async () => {
    let release!: () => void;
    const h = harness([() => new Promise((resolve) => (release = () => resolve(text('done'))))]);
    const s = await h.store.create({ user: 'u', provider: 'scripted', model: null });
    const runner = newRunner(null);
    const accepted = await h.store.mutate(s.session_id, (row) => {
      row.status = 'running';
      row.runner = runner;
      return [{ role: 'user', content: 'go' }];
    });
    const run = startRun(h.deps, s.session_id, runner, undefined, accepted.updatedAt);
    while (!release) await new Promise((r) => setTimeout(r, 5));
    const queues = (h.table as unknown as { subscribers: Set<{ queue: import('node:events').EventEmitter }> }).subscribers;
    expect(queues.size).to.equal(1);
    for (const { queue } of queues) queue.emit('data', { id: s.session_id, type: 'put', value: { session_id: s.session_id, status: 'idle', runner: null, updatedAt: s.updatedAt } });
    release();
    await run.done;
    expect((await h.store.get(s.session_id))!).to.include({ status: 'completed', lastError: null });
  });
});

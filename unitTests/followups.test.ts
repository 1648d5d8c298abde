// Follow-ups: the bounds and bad input of schedule_followup, and firing: once, never when cancelled, later when the
// session is busy, once across two threads racing on one follow-up.
import { expect } from 'chai';
import { dueTime, FollowupError, Followups, type FollowupTable } from '../agent/followups.js';
import { BACKEND_LOAD_GRACE_MS, fireFollowup, followupPrompt } from '../agent/followupFiring.js';
import { activeRun } from '../agent/runs.js';
import { createOperations, HttpError } from '../agent/operations.js';
import { defaultConfig } from '../agent/agent.js';
import { Models } from '../resources/models/models.js';
import type { Session } from '../agent/session.js';
import { calls, harness, MemoryTable, text, type Harness } from './helpers.js';

const user = { username: 'admin', role: { permission: { super_user: true } } };
const limits = { followupMinSeconds: 10, followupMaxSeconds: 604_800, maxFollowups: 3 };

function withFollowups(h: Harness, table = new MemoryTable()) {
  const followups = new Followups(() => table as unknown as FollowupTable, null);
  h.deps.followups = followups;
  followups.onDue = (f) => fireFollowup(h.deps, f);
  const ops = createOperations({ ...h.deps, changeConfig: () => Promise.reject(new Error('none')), persistedConfig: () => ({}), instance: { version: 'test', startedAt: '' } });
  return { followups, table, ops };
}

async function prompt(ops: ReturnType<typeof createOperations>, h: Harness, message: string, session_id?: string): Promise<Session> {
  const r = (await ops.agent_prompt.handle({ message, ...(session_id ? { session_id } : {}) }, user)) as { session_id: string };
  await activeRun(r.session_id)?.done;
  return (await h.store.get(r.session_id))!;
}

describe('follow-ups: bounds and bad input', () => {
  const now = Date.parse('2026-12-04T19:00:00Z');
  it('a delay or a time within the bounds is due then; out of range, both, neither or malformed is an error naming what is allowed', () => {
    expect(dueTime({ delaySeconds: 10 }, limits, now)).to.equal(now + 10_000);
    expect(dueTime({ delaySeconds: 604_800 }, limits, now)).to.equal(now + 604_800_000);
    expect(dueTime({ at: '2026-12-04T20:00:00Z' }, limits, now)).to.equal(now + 3_600_000);
    const range = '10 s to 604800 s ahead (agent.followupMinSeconds, agent.followupMaxSeconds)';
    const cases: [Record<string, unknown>, string][] = [
      [{ delaySeconds: 9 }, `a follow-up must be due ${range}; this one would be 9 s ahead`],
      [{ delaySeconds: 604_801 }, `a follow-up must be due ${range}; this one would be 604801 s ahead`],
      [{ delaySeconds: -5 }, `a follow-up must be due ${range}; this one would be -5 s ahead`],
      [{ at: '2026-12-04T18:00:00Z' }, `a follow-up must be due ${range}; this one would be -3600 s ahead`],
      [{ delaySeconds: 60, at: '2026-12-04T20:00:00Z' }, `pass exactly one of delaySeconds or at (an ISO 8601 time), ${range}`],
      [{}, `pass exactly one of delaySeconds or at (an ISO 8601 time), ${range}`],
      [{ at: 'tomorrow' }, 'at must be an ISO 8601 time such as 2026-12-04T20:00:00.000Z'],
      [{ delaySeconds: '60' }, `delaySeconds must be a number of seconds, ${range}`],
    ];
    for (const [args, message] of cases) expect(() => dueTime(args, limits, now), JSON.stringify(args)).to.throw(FollowupError, message);
  });

  it('through the tool: a bad delay, the per-session limit and follow-ups turned off are tool errors; nothing is stored for them', async () => {
    const h = harness(
      [
        calls(['schedule_followup', { delaySeconds: 3, message: 'too soon' }]),
        calls(['schedule_followup', { delaySeconds: 60, message: 'one' }], ['schedule_followup', { delaySeconds: 120, message: 'two' }], ['schedule_followup', { delaySeconds: 180, message: 'three' }]),
        text('scheduled'),
      ],
      { maxFollowups: 2 }
    );
    const { ops, table } = withFollowups(h);
    const s = await prompt(ops, h, 'check back later');
    const results = s.messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(m.content));
    expect(results[0]).to.deep.equal({ error: 'a follow-up must be due 10 s to 604800 s ahead (agent.followupMinSeconds, agent.followupMaxSeconds); this one would be 3 s ahead' });
    expect(results[1].inSeconds).to.equal(60);
    expect(results[2].inSeconds).to.equal(120);
    expect(results[3].error).to.match(/^this session already has 2 pending follow-ups \(agent\.maxFollowups is 2\): the next is due \d{4}-/);
    expect(table.rows.size).to.equal(2);
    const listed = (await ops.list_agent_followups.handle({ session_id: s.session_id }, user)) as { followups: any[] };
    expect(listed.followups.map((f) => [f.message, f.status])).to.deep.equal([['one', 'pending'], ['two', 'pending']]);
    // get_agent_session shows what is still to come.
    expect(((await ops.get_agent_session.handle({ session_id: s.session_id }, user)) as any).followups.map((f: any) => f.message)).to.deep.equal(['one', 'two']);
    for (const f of listed.followups) h.deps.followups!.disarm(f.followup_id);

    const off = harness([calls(['schedule_followup', { delaySeconds: 60, message: 'x' }]), text('no')], { maxFollowups: 0 });
    const o = withFollowups(off);
    const s2 = await prompt(o.ops, off, 'later?');
    expect(JSON.parse(s2.messages.find((m) => m.role === 'tool')!.content)).to.deep.equal({ error: 'follow-ups are turned off here (agent.maxFollowups is 0)' });
    expect(o.table.rows.size).to.equal(0);
  });
});

describe('follow-ups: firing', () => {
  it('a due follow-up fires once: its message becomes a prompt marked with its id, the run answers it, the row is fired', async () => {
    const h = harness([text('first answer'), text('checked again')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'look at the log again', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    expect(await fireFollowup(h.deps, f)).to.equal('fired');
    await activeRun(s.session_id)?.done;
    expect(await fireFollowup(h.deps, f)).to.equal('done');
    const after = (await h.store.get(s.session_id))!;
    expect(after.status).to.equal('completed');
    const prompts = after.messages.filter((m) => m.role === 'user');
    expect(prompts).to.have.length(2);
    expect(prompts[1]).to.deep.include({ content: `Follow-up you scheduled at ${new Date(f.createdAt).toISOString()}: look at the log again`, followup: f.followup_id });
    expect(after.messages.at(-1)).to.deep.include({ role: 'assistant', content: 'checked again' });
    expect((await followups.get(f.followup_id))!.status).to.equal('fired');
    expect(h.backend.inputs).to.have.length(2);
  });

  it('a firing cut off before its prompt is stored leaves the follow-up pending; one cut off after it is not fired twice', async () => {
    const h = harness([text('first answer'), text('checked again')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'look again', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    // The worker dies as the prompt is written (its message write fails): nothing is marked fired.
    const messages = h.messages as unknown as { put: (...args: unknown[]) => unknown };
    const put = messages.put;
    messages.put = () => Promise.reject(new Error('worker terminated'));
    const cut = await fireFollowup(h.deps, f).then(() => null, (e: Error) => e);
    messages.put = put;
    expect(cut?.message).to.equal('worker terminated');
    expect((await followups.get(f.followup_id))!.status).to.equal('pending');
    // A firing whose prompt was stored but that died before marking the row: the next one marks it, stores nothing.
    await h.store.append(s.session_id, [{ role: 'user', content: followupPrompt(f), followup: f.followup_id }]);
    expect(await fireFollowup(h.deps, f)).to.equal('done');
    expect((await followups.get(f.followup_id))!.status).to.equal('fired');
    expect((await h.store.get(s.session_id))!.messages.filter((m) => m.role === 'user')).to.have.length(2);
  });

  it('two threads racing on one due follow-up: exactly one fires it', async () => {
    const h = harness([text('a'), text('b'), text('c')]);
    const { followups, ops, table } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'again', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    const other = new Followups(() => table as unknown as FollowupTable, null);
    other.onDue = followups.onDue;
    const outcomes = await Promise.all([fireFollowup(h.deps, f), fireFollowup(h.deps, f), fireFollowup(h.deps, f)]);
    expect(outcomes.sort()).to.deep.equal(['done', 'done', 'fired']);
    await activeRun(s.session_id)?.done;
    expect((await h.store.get(s.session_id))!.messages.filter((m) => m.role === 'user')).to.have.length(2);
  });

  it('a cancelled follow-up never fires; cancelling twice is 409, an unknown one 404', async () => {
    const h = harness([text('a')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'never', Date.now() + 60_000, limits);
    const cancelled = (await ops.cancel_agent_followup.handle({ followup_id: f.followup_id }, user)) as any;
    expect(cancelled).to.include({ status: 'cancelled', cancelReason: 'cancel_agent_followup' });
    expect(await fireFollowup(h.deps, f)).to.equal('done');
    const again = (await ops.cancel_agent_followup.handle({ followup_id: f.followup_id }, user).then(() => null, (e: HttpError) => e)) as HttpError;
    expect(again).to.be.instanceOf(HttpError);
    expect([again.status, again.message]).to.deep.equal([409, `follow-up ${f.followup_id} is cancelled: only a pending follow-up can be cancelled`]);
    const missing = (await ops.cancel_agent_followup.handle({ followup_id: 'nope' }, user).then(() => null, (e: HttpError) => e)) as HttpError;
    expect([missing.status, missing.message]).to.deep.equal([404, 'follow-up "nope" not found']);
    expect((await h.store.get(s.session_id))!.messages).to.have.length(2);
  });

  it("a follow-up due before its provider's backend has registered (a boot) waits as busy, and fires once it has", async () => {
    const h = harness([text('a'), text('after the backend came')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'after boot', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    Models.unregister('scripted');
    h.deps.loadedAt = Date.now();
    expect(await fireFollowup(h.deps, f)).to.equal('busy');
    expect((await followups.get(f.followup_id))!.status).to.equal('pending');
    expect((await h.store.get(s.session_id))!.messages).to.have.length(2);
    Models.register({ provider: 'scripted', defaultModel: 'scripted-1', create: () => h.backend });
    expect(await fireFollowup(h.deps, f)).to.equal('fired');
    await activeRun(s.session_id)?.done;
    const after = (await h.store.get(s.session_id))!;
    expect([after.status, after.messages.at(-1)!.content]).to.deep.equal(['completed', 'after the backend came']);
  });

  it('past the grace after load, a follow-up whose backend never registered fires and the run says which provider is missing', async () => {
    const h = harness([text('a')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'much later', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    Models.unregister('scripted');
    h.deps.loadedAt = Date.now() - BACKEND_LOAD_GRACE_MS - 1;
    try {
      expect(await fireFollowup(h.deps, f)).to.equal('fired');
      await activeRun(s.session_id)?.done;
      const after = (await h.store.get(s.session_id))!;
      expect(after.status).to.equal('error');
      expect(after.lastError).to.match(/^agent\.provider "scripted" is not registered \(available: [^)]*\)\. Set agent\.provider to one of them\.$/);
    } finally {
      Models.register({ provider: 'scripted', defaultModel: 'scripted-1', create: () => h.backend });
    }
  });

  it('a follow-up due while its session runs waits, then fires; cancel_agent_run cancels the pending ones', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const h = harness([text('a'), async () => (await held, text('slow')), text('after the wait')]);
    const { followups, ops } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    const f = await followups.schedule(s.session_id, null, 'when free', Date.now() + 60_000, limits);
    followups.disarm(f.followup_id);
    await ops.agent_prompt.handle({ message: 'slow one', session_id: s.session_id }, user);
    expect(await fireFollowup(h.deps, f)).to.equal('busy');
    release();
    await activeRun(s.session_id)?.done;
    expect(await fireFollowup(h.deps, f)).to.equal('fired');
    await activeRun(s.session_id)?.done;
    expect((await h.store.get(s.session_id))!.messages.at(-1)).to.deep.include({ content: 'after the wait' });

    const h2 = harness([async (_i, signal) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason)))]);
    const o2 = withFollowups(h2);
    const r = (await o2.ops.agent_prompt.handle({ message: 'long' }, user)) as { session_id: string };
    const g = await o2.followups.schedule(r.session_id, null, 'later', Date.now() + 60_000, limits);
    const cancelled = (await o2.ops.cancel_agent_run.handle({ session_id: r.session_id }, user)) as any;
    expect(cancelled).to.deep.equal({ session_id: r.session_id, status: 'aborted', followupsCancelled: 1 });
    expect((await o2.followups.get(g.followup_id))).to.include({ status: 'cancelled', cancelReason: 'cancel_agent_run' });
    await activeRun(r.session_id)?.done;
  });

  it('armed, a follow-up fires on its own when due; at boot, one already due fires at once', async function () {
    this.timeout(10_000);
    const h = harness([text('a'), text('fired by the timer'), text('fired at boot')]);
    const { followups, ops, table } = withFollowups(h);
    const s = await prompt(ops, h, 'hi');
    await followups.schedule(s.session_id, null, 'soon', Date.now() + 10, { ...limits, followupMinSeconds: 0 });
    for (let i = 0; i < 100 && (await h.store.get(s.session_id))!.messages.length < 4; i++) await new Promise((r) => setTimeout(r, 20));
    await activeRun(s.session_id)?.done;
    expect((await h.store.get(s.session_id))!.messages.at(-1)).to.deep.include({ content: 'fired by the timer' });
    // A row due in the past, as after a restart: a new Followups (the next boot) arms it and it fires once.
    await table.put('past', { followup_id: 'past', session_id: s.session_id, node: null, message: 'missed', dueAt: new Date(Date.now() - 5000), createdAt: new Date(Date.now() - 60_000), status: 'pending' });
    const boot = new Followups(() => table as unknown as FollowupTable, null);
    boot.onDue = (f) => fireFollowup(h.deps, f);
    expect(await boot.armAll()).to.equal(1);
    for (let i = 0; i < 100 && (await h.store.get(s.session_id))!.messages.length < 6; i++) await new Promise((r) => setTimeout(r, 20));
    await activeRun(s.session_id)?.done;
    const after = (await h.store.get(s.session_id))!;
    const marks = after.messages.filter((m) => m.role === 'user').map((m) => (m as any).followup ?? null);
    expect(marks).to.have.length(3);
    expect([marks[0], typeof marks[1], marks[2]]).to.deep.equal([null, 'string', 'past']);
    expect(after.messages.at(-1)).to.deep.include({ content: 'fired at boot' });
    expect(await boot.armAll()).to.equal(0);
  });

  it("another node's follow-up is never armed here", async () => {
    const table = new MemoryTable();
    const here = new Followups(() => table as unknown as FollowupTable, 'node-a');
    await table.put('x', { followup_id: 'x', session_id: 's', node: 'node-b', message: 'm', dueAt: new Date(Date.now() - 1), createdAt: new Date(), status: 'pending' });
    let fired = 0;
    here.onDue = async () => (fired++, 'fired');
    expect(await here.armAll()).to.equal(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(fired).to.equal(0);
    expect(defaultConfig()).to.include(limits);
  });
});

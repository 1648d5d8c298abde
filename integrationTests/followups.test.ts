// Follow-ups on a real Harper (two worker threads) through the real OpenAI SDK: one scheduled 5 s ahead fires exactly
// once; one scheduled and then Harper SIGKILLed before it is due fires exactly once after the restart; a cancelled one
// never fires. The model schedules them with schedule_followup; the provider server answers a follow-up's prompt.
import { expect } from 'chai';
import { bootHarper, type TestHarper } from './harness.js';
import { followupResponder, followupsAnswered } from './providerServer/pager.js';
import { ProviderServer } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

describe('follow-ups that outlive a restart', function () {
  this.timeout(180_000);
  let h: TestHarper;
  const server = new ProviderServer();

  const answered = (message: string) => followupsAnswered(server.requests, message);

  before(async function () {
    this.timeout(120_000);
    h = await bootHarper({ env: { THREADS_COUNT: '2' } });
    await server.start();
    server.reset();
    server.responder = followupResponder();
    expect((await h.setConfig({ ...providerSettings('openai', server), followupMinSeconds: 1 })).status).to.equal(200);
  });
  after(async () => {
    await h?.stop();
    await server.close();
  });

  async function schedule(message: string, seconds: number, session_id?: string) {
    const s = await h.prompt(`come back in ${seconds} s: ${message}`, session_id);
    expect(s.status).to.equal('completed');
    const result = JSON.parse(s.messages.filter((m: any) => m.role === 'tool').at(-1).content);
    expect(result.inSeconds).to.equal(seconds);
    return { session: s, followupId: result.followup_id as string };
  }

  async function waitFor(check: () => Promise<boolean>, ms: number, state?: () => Promise<unknown>) {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`not within ${ms} ms${state ? `: ${JSON.stringify(await state())}` : ''}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  const followupPrompts = (s: any, id: string) => s.messages.filter((m: any) => m.role === 'user' && m.followup === id);

  it('scheduled 5 s ahead, it fires exactly once: one prompt marked with its id, one model call, answered; listed as fired', async () => {
    const { session, followupId } = await schedule('is the job done?', 5);
    const pending = (await h.op({ operation: 'list_agent_followups', session_id: session.session_id })).body.followups;
    expect(pending.map((f: any) => [f.followup_id, f.status, f.message])).to.deep.equal([[followupId, 'pending', 'is the job done?']]);
    expect(pending[0].dueAt - pending[0].createdAt).to.be.within(4_900, 5_100);
    expect((await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body.followups.map((f: any) => f.followup_id)).to.deep.equal([followupId]);
    await waitFor(async () => (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body.status === 'completed' && answered('is the job done?') === 1, 20_000);
    await new Promise((r) => setTimeout(r, 3000)); // two worker threads armed it: still once
    const s = (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body;
    expect(followupPrompts(s, followupId)).to.have.length(1);
    expect(s.messages.at(-1)).to.deep.include({ role: 'assistant', content: 'followed up: is the job done?' });
    expect(answered('is the job done?')).to.equal(1);
    expect(s.followups).to.deep.equal([]);
    const [row] = (await h.op({ operation: 'list_agent_followups', session_id: session.session_id })).body.followups;
    expect(row.status).to.equal('fired');
    expect(row.firedAt - row.dueAt).to.be.within(0, 2000);
  });

  it('scheduled, then Harper SIGKILLed before it is due: it fires exactly once after the restart', async () => {
    const { session, followupId } = await schedule('did the restart settle?', 6);
    await h.harper.stop('SIGKILL');
    expect(answered('did the restart settle?')).to.equal(0);
    h = await h.restart();
    const state = async () => {
      const now = (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body;
      const rows = (await h.op({ operation: 'list_agent_followups', session_id: session.session_id })).body;
      return { answered: answered('did the restart settle?'), status: now.status, lastError: now.lastError, last: now.messages?.slice(-3), rows };
    };
    await waitFor(async () => answered('did the restart settle?') === 1 && (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body.status === 'completed', 30_000, state);
    await new Promise((r) => setTimeout(r, 3000));
    const s = (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body;
    expect(followupPrompts(s, followupId)).to.have.length(1);
    expect(answered('did the restart settle?')).to.equal(1);
    expect(s.messages.at(-1)).to.deep.include({ role: 'assistant', content: 'followed up: did the restart settle?' });
  });

  it('a cancelled follow-up never fires; cancel_agent_followup twice is 409, an unknown id 404, a bad one 400', async () => {
    const { session, followupId } = await schedule('never ask this', 3);
    const cancel = await h.op({ operation: 'cancel_agent_followup', followup_id: followupId });
    expect(cancel.status).to.equal(200);
    expect(cancel.body).to.include({ followup_id: followupId, status: 'cancelled', cancelReason: 'cancel_agent_followup' });
    const again = await h.op({ operation: 'cancel_agent_followup', followup_id: followupId });
    expect([again.status, again.body.error]).to.deep.equal([409, `follow-up ${followupId} is cancelled: only a pending follow-up can be cancelled`]);
    const unknown = await h.op({ operation: 'cancel_agent_followup', followup_id: 'no-such-followup' });
    expect([unknown.status, unknown.body.error]).to.deep.equal([404, 'follow-up "no-such-followup" not found']);
    const bad = await h.op({ operation: 'cancel_agent_followup' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error).to.match(/followup_id/);
    await new Promise((r) => setTimeout(r, 5000));
    expect(answered('never ask this')).to.equal(0);
    const s = (await h.op({ operation: 'get_agent_session', session_id: session.session_id })).body;
    expect(followupPrompts(s, followupId)).to.have.length(0);
  });
});

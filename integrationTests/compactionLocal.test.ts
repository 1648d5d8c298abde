// Compaction without a model, on a real Harper: the local provider compacts by a deterministic digest over 60 prompts
// and every request stays within the budget; compaction on demand through the operations API and the CLI.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { providerSuite } from './providerSuite.js';
import { writeBigLog } from './recoveryScenarios.js';

const run = promisify(execFile);
/** Prompts in the long session: enough for a dozen digests, each folding the one before. */
const PROMPTS = 60;

describe('compaction by digest (the local provider) and on demand', function () {
  this.timeout(900_000);
  const suite = providerSuite((h) => writeBigLog(h.logsDir));

  it('local: 60 prompts of three pages in one session compact by digest, and every request stays within the budget', async () => {
    const { h } = suite;
    // About 96 KB: four pages in the 56,000-token window (pages sized to it: agent/context/window.ts).
    writeFileSync(path.join(h.logsDir, 'three.log'), Array.from({ length: 1200 }, (_, i) => `2026-12-04T10:00:00.000Z [http/1] [${i % 100 === 0 ? 'error' : 'info'}]: request ${i + 1} ${i % 100 === 0 ? 'ERROR upstream timed out' : 'served'}\n`).join('').padEnd(96_000, '.'));
    expect((await h.setConfig({ provider: 'local', contextWindowTokens: 56_000, maxTurns: 50 })).status).to.equal(200);
    let id: string | undefined;
    for (let i = 0; i < PROMPTS; i++) {
      const r = await h.promptLight('summarize logs/three.log', id);
      id = r.session_id;
      if (r.status !== 'completed') throw new Error(`prompt ${i + 1} ended ${r.status}: ${r.lastError}`);
    }
    const s = (await h.op({ operation: 'get_agent_session', session_id: id })).body;
    const records = s.messages.filter((m: any) => m.role === 'compaction');
    expect(records.length).to.be.greaterThan(10);
    for (const r of records) expect([r.compactedBy, r.detail]).to.deep.equal(['digest', 'the local backend is not a model']);
    expect(s.messages.filter((m: any) => m.role === 'user')).to.have.length(PROMPTS);
    // Every answer covers the whole file, compacted or not: the local backend's newest note carries its tally.
    const answers = s.messages.filter((m: any) => m.role === 'assistant' && !m.toolCalls?.length).map((m: any) => m.content);
    expect(answers).to.have.length(PROMPTS);
    expect(answers[0]).to.match(/^logs\/three\.log: 1201 lines, 96000 bytes, read in 4 page\(s\); 96000 bytes of text seen\. 12 line\(s\) mention "error"; the first 5:\n- line 1: /);
    expect(new Set(answers).size).to.equal(1);
    expect(s.estimatedContextTokens).to.be.at.most(s.contextBudget.tokens);
    console.log(`      local: ${PROMPTS} prompts, ${s.messages.length} messages stored, ${records.length} digests; the next request about ${s.estimatedContextTokens.toLocaleString('en-US')} tokens of a ${s.contextBudget.tokens.toLocaleString('en-US')}-token budget`);
    expect((await h.op({ operation: 'list_agent_model_calls', session_id: id })).body.calls).to.have.length(0);
  });

  it('compact_agent_session and `harper-agent compact` compact on demand; get_agent_session and `show` mark the boundary', async () => {
    const { h } = suite;
    expect((await h.setConfig({ provider: 'local', contextWindowTokens: null, maxTurns: 50 })).status).to.equal(200);
    const first = await h.promptLight('summarize logs/big.log');
    expect(first.status).to.equal('completed');
    // In the background, like agent_prompt: `running` at once, the record once the session reads `completed` again.
    const before = (await h.row(first.session_id)).messages.length;
    const started = await h.op({ operation: 'compact_agent_session', session_id: first.session_id });
    expect([started.status, started.body]).to.deep.equal([200, { session_id: first.session_id, status: 'running', messageIndex: before, node: 'localhost' }]);
    let session: any;
    for (let i = 0; i < 100 && (session = (await h.op({ operation: 'get_agent_session', session_id: first.session_id })).body).status === 'running'; i++) await new Promise((r) => setTimeout(r, 50));
    expect(session.status).to.equal('completed');
    const stored = (await h.row(first.session_id)).messages;
    const index = stored.length - 1;
    expect(index).to.equal(before);
    const record = session.messages[index];
    expect(record).to.include({ role: 'compaction', keepFrom: index, compactedBy: 'digest', detail: 'the local backend is not a model' });
    expect(stored[index]).to.include({ role: 'compaction', keepFrom: index, compactedBy: 'digest', content: record.content });
    const boundary = `the model sees a deterministic digest below instead of messages #0-#${index - 1} (the local backend is not a model)`;
    const again = await h.op({ operation: 'compact_agent_session', session_id: first.session_id, wait: true });
    expect([again.status, again.body.error]).to.deep.equal([409, `session ${first.session_id} has nothing to compact since its last compaction`]);
    expect((await h.op({ operation: 'compact_agent_session', session_id: 'no-such-session' })).status).to.equal(404);
    expect((await h.op({ operation: 'compact_agent_session' })).status).to.equal(400);
    const empty = await h.op({ operation: 'compact_agent_session', session_id: first.session_id, instructions: '' });
    expect([empty.status, empty.body.error]).to.deep.equal([400, 'compact_agent_session: "instructions" must NOT have fewer than 1 characters']);

    // The next prompt reads on from the digest; then the CLI compacts again and `show` prints both boundaries.
    expect((await h.promptLight('summarize logs/big.log', first.session_id)).status).to.equal('completed');
    const env = { ...process.env, HARPER_AGENT_URL: h.harper.opsUrl, HARPER_AGENT_USER: h.harper.admin.username, HARPER_AGENT_PASSWORD: h.harper.admin.password };
    const cli = path.resolve('dist/cli/main.js');
    const compacted = await run(process.execPath, [cli, 'compact', first.session_id], { env });
    expect(compacted.stdout).to.match(new RegExp(`^session ${first.session_id}: the model sees a deterministic digest below instead of messages #0-#\\d+ \\(the local backend is not a model\\)\\n  ══ #\\d+ compaction · [\\d,]+ bytes · `));
    const shown = await run(process.execPath, [cli, 'show', first.session_id], { env });
    const boundaries = shown.stdout.split('\n').filter((l) => l.startsWith('  ══ #'));
    expect(boundaries).to.have.length(2);
    expect(boundaries[0]).to.equal(`  ══ #${index} compaction · ${Buffer.byteLength(record.content).toLocaleString('en-US')} bytes · ${boundary} ══`);
  });
});

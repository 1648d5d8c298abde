// The working set on a real Harper through the real OpenAI SDK: reading a 1 MB log to its end costs a few times the
// file, not its square; every request's whole results stay within the working set (older pages are 2 KiB heads); and a
// session whose results the working set cut still recovers from a context-window rejection.
import { expect } from 'chai';
import { readerResponder } from './providerServer/pager.js';
import { providerSuite } from './providerSuite.js';
import { BIG_LOG_BYTES, providerSettings, writeBigLog } from './recoveryScenarios.js';

const KiB = 1024;
const WORKING_SET = 96 * KiB; // the default
const CAP = 65_536;

describe('working set (agent.workingSetBytes) through the real OpenAI SDK', function () {
  this.timeout(180_000);
  const suite = providerSuite();
  let sessionId: string;
  let lines: number;
  let lastRequestBytes: number;

  before(() => {
    const text = writeBigLog(suite.h.logsDir);
    lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  });

  it('a 1 MB log read to its end sends at most 4x the file, and no request holds more whole results than the working set', async () => {
    const { h, server } = suite;
    server.reset([]);
    server.responder = readerResponder('logs', 'big.log');
    expect((await h.setConfig({ ...providerSettings('openai', server), maxToolResultBytes: CAP, maxTurns: 100 })).status).to.equal(200);
    const s = await h.prompt('Read logs/big.log to its end.');
    sessionId = s.session_id;
    expect([s.status, s.lastError]).to.deep.equal(['completed', null]);
    expect(s.messages.at(-1).content).to.equal(`Reached the end of big.log: ${lines} lines.`);

    const requests = server.requests.map((r) => r.neutral);
    const total = server.requests.reduce((sum, r) => sum + r.bytes, 0);
    const toolBytes = requests.map((r) => r.messages.filter((m) => m.role === 'tool').reduce((sum, m) => sum + Buffer.byteLength(m.text), 0));
    // Whole results (over 2 KiB: the others are heads or small) per request; cut results are heads of at most 2 KiB.
    const wholeBytes = requests.map((r) => r.messages.filter((m) => m.role === 'tool' && Buffer.byteLength(m.text) > 2048).reduce((sum, m) => sum + Buffer.byteLength(m.text), 0));
    const heads = requests.map((r) => r.messages.filter((m) => m.role === 'tool' && Buffer.byteLength(m.text) <= 2048).length);
    // The fixed overhead: what the first request carries besides tool results (system prompt, tool schemas, prompt),
    // and each assistant turn's tool call.
    const fixed = server.requests[0]!.bytes + 200 * requests.length;
    const largest = Math.max(...server.requests.map((r) => r.bytes));
    console.log(`      ${requests.length} requests, ${total.toLocaleString('en-US')} bytes sent (${(total / BIG_LOG_BYTES).toFixed(2)}x the file); largest ${largest.toLocaleString('en-US')} bytes; tool results per request at most ${Math.max(...toolBytes).toLocaleString('en-US')} bytes`);
    expect(total).to.be.at.most(4 * BIG_LOG_BYTES);
    // The whole results fit the working set; the request is that, a 2 KiB head per older page, and the fixed part.
    for (const [i, r] of server.requests.entries()) expect(r.bytes, `request ${i}`).to.be.at.most(WORKING_SET + 2048 * heads[i]! + fixed);
    for (const bytes of wholeBytes) expect(bytes).to.be.at.most(WORKING_SET);

    // What was sent is what is stored: the cut pages are marked, their cursors intact at the head.
    const stored = s.messages.filter((m: any) => m.role === 'tool');
    const cut = stored.filter((m: any) => m.cut === 'workingSet');
    expect(cut.length).to.be.greaterThan(20);
    for (const m of cut) {
      expect(Buffer.byteLength(m.content)).to.be.at.most(2048);
      expect(m.content).to.match(/^\{"path":"logs\/big\.log","size":1000000,"offset":\d+,"startLine":\d+,"endLine":\d+,"nextLine":\d+,"nextOffset":\d+,"content":"/);
    }
    const last = requests.at(-1)!.messages.filter((m) => m.role === 'tool').map((m) => m.text);
    expect(last).to.deep.equal(stored.map((m: any) => m.content));
    lastRequestBytes = server.requests.at(-1)!.bytes;
  });

  it('a session the working set cut still recovers from a context-window rejection', async () => {
    const { h, server } = suite;
    // The next request is the last one plus an answer and a prompt (the working set keeps it so): a limit 500 bytes
    // under the last one rejects it once; the shrink cuts the newest page over 2 KiB (the file's last, about 4 KB, to a
    // 2 KiB head), and the retry fits and is answered.
    const answer = 'Every 40th request timed out upstream; the rest were served.';
    server.reset([{ text: answer }], lastRequestBytes - 500);
    const s = await h.prompt('What did you find?', sessionId);
    const sent = server.requests;
    console.log(`      limit ${(lastRequestBytes - 500).toLocaleString('en-US')} bytes; sent ${sent.map((r) => `${r.bytes.toLocaleString('en-US')}${r.rejected ? ' (rejected)' : ''}`).join(', ')}`);
    expect([s.status, s.lastError]).to.deep.equal(['completed', null]);
    expect(sent.map((r) => r.rejected)).to.deep.equal([true, false]);
    expect(s.messages.filter((m: any) => m.cut === 'context')).to.have.length(1);
    expect(s.messages.at(-1).content).to.equal(answer);
  });
});

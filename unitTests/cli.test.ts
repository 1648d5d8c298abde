// The CLI's pure parts: connection settings, SSE parsing, key=value parsing, and the exact lines it prints.
import { expect } from 'chai';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CONFIG_KEYS } from '../agent/agent.js';
import { CliError, connectionFrom, EXIT, httpFailure, parseEvent } from '../cli/client.js';
import { main, parseAssignments } from '../cli/main.js';
import { callsTable, compactionLines, configLines, Progress, resultLine, runLines, sessionsTable, transcript } from '../cli/render.js';
import { messageView } from '../agent/sessionFeed.js';

describe('CLI', () => {
  it('takes the connection from flags, then env, then the URL; credentials never stay in the URL', () => {
    expect(connectionFrom({}, {})).to.deep.equal({ url: 'http://localhost:9925/', username: undefined, password: undefined });
    expect(connectionFrom({}, { HARPER_AGENT_URL: 'https://ops.example:9925', HARPER_AGENT_USER: 'u', HARPER_AGENT_PASSWORD: 'p' })).to.deep.equal({ url: 'https://ops.example:9925/', username: 'u', password: 'p' });
    expect(connectionFrom({ url: 'http://a%40b:p%3Aw@h:1/' }, {})).to.deep.equal({ url: 'http://h:1/', username: 'a@b', password: 'p:w' });
    expect(connectionFrom({ url: 'h:2', user: 'x', password: 'y' }, { HARPER_AGENT_USER: 'ignored' })).to.deep.equal({ url: 'http://h:2/', username: 'x', password: 'y' });
    expect(connectionFrom({}, { CLI_TARGET_USERNAME: 'hdb', CLI_TARGET_PASSWORD: 'pw' })).to.include({ username: 'hdb', password: 'pw' });
    expect(() => connectionFrom({ user: 'x' }, {})).to.throw(CliError, 'a user (x) needs a password');
    const noUser = (() => {
      try {
        connectionFrom({ password: 'p' }, {});
      } catch (error) {
        return error as CliError;
      }
    })();
    expect(noUser).to.be.instanceOf(CliError);
    expect([noUser!.exitCode, noUser!.message]).to.deep.equal([EXIT.usage, 'a password needs a user: --user or HARPER_AGENT_USER']);
    expect(connectionFrom({ password: 'p' }, { HARPER_AGENT_USER: 'u' })).to.include({ username: 'u', password: 'p' });
  });

  it('config: every key with the value in force, its default and bounds, unset keys included', () => {
    const lines = configLines({ provider: 'openai', maxTurns: 7, maxToolResultBytes: 65536, autoApprove: false, maxTokens: 4096, requestTimeoutMs: 120000, maxRetries: 2, apiKey: '(set)', persisted: { maxTurns: 7, model: null } }).split('\n');
    expect(lines).to.have.length(CONFIG_KEYS.length + 2); // the header, one line per key, what was stored
    expect(lines[0]).to.equal('KEY                   IN FORCE  DEFAULT  BOUNDS');
    expect(lines).to.include.members([
      'provider              openai    local    one of local, openai, anthropic, bedrock, ollama',
      'model                 (unset)   unset    1 to 256 characters',
      'maxTurns              7         50       1 to 500',
      'maxToolResultBytes    65,536    65,536   1,024 to 1,048,576',
      'apiKey                (set)     unset    not empty',
      'contextWindowTokens   (unset)   unset    1,024 to 10,000,000',
      'stored in agent.AgentSetting: maxTurns = 7, model (taken back)',
    ]);
  });

  it('maps statuses to exit codes and advice', () => {
    const c = { url: 'http://h/', username: 'bob' };
    expect([401, 403, 404, 409, 400, 500].map((s) => httpFailure(s, 'why', c).exitCode)).to.deep.equal([EXIT.auth, EXIT.auth, EXIT.notFound, EXIT.conflict, EXIT.rejected, EXIT.rejected]);
    expect(httpFailure(401, 'Login failed', c).message).to.equal('401 Unauthorized: Harper rejected the credentials of bob (Login failed). Pass --user and --password (or HARPER_AGENT_USER and HARPER_AGENT_PASSWORD).');
    expect(httpFailure(500, 'boom', c).message).to.equal('500: boom');
  });

  it('parses server-sent event blocks; keep-alives and retry lines give nothing', () => {
    expect(parseEvent('event: session\ndata: {"a":1}')).to.deep.equal({ event: 'session', data: { a: 1 } });
    expect(parseEvent('data: [1,\ndata: 2]')).to.deep.equal({ event: 'message', data: [1, 2] });
    expect(parseEvent(': keep-alive')).to.equal(null);
    expect(parseEvent('retry: 1000')).to.equal(null);
  });

  it('parses key=value as JSON where it parses, text otherwise', () => {
    expect(parseAssignments(['maxTurns=7', 'autoApprove=false', 'model=gpt-4.1', 'baseUrl=null', 'apiKey=a=b'])).to.deep.equal({ maxTurns: 7, autoApprove: false, model: 'gpt-4.1', baseUrl: null, apiKey: 'a=b' });
    expect(() => parseAssignments(['=3'])).to.throw(CliError, 'is not key=value');
  });

  it('prints results with their size and why they were cut; an earlier result cut in place gets a ✂ line', () => {
    const base = { index: 4, role: 'tool' as const, name: 'read_file', toolCallId: 'c', content: 'x' };
    expect(resultLine({ ...base, bytes: 32694 })).to.equal('  ← read_file 32,694 bytes');
    expect(resultLine({ ...base, bytes: 65536, cut: 'cap' })).to.equal('  ← read_file 65,536 bytes [cut: cap (agent.maxToolResultBytes)]');
    expect(resultLine({ ...base, bytes: 2048, cut: 'workingSet' })).to.equal('  ← read_file 2,048 bytes [cut: working set (agent.workingSetBytes)]');
    expect(resultLine({ ...base, bytes: 40, isError: true, content: '{"error":"no\nsuch file"}' })).to.equal('  ← read_file 40 bytes [error]: {"error":"no such file"}');
    expect(runLines({ ...base, bytes: 2048, cut: 'context' }, true)).to.deep.equal(['  ✂ #4 read_file cut to 2,048 bytes after a context-window rejection']);
    // A result printed whole and cut later says so, with the size it has now.
    expect(runLines({ ...base, bytes: 2048, cut: 'workingSet' }, true)).to.deep.equal(['  ✂ #4 read_file cut to 2,048 bytes as it left the working set (agent.workingSetBytes)']);
    expect(runLines({ ...base, bytes: 2048 }, true)).to.deep.equal([]);
    expect(runLines({ index: 1, role: 'assistant', content: 'Looking.', bytes: 9, toolCalls: [{ id: 'c', name: 'tail_file', arguments: { lines: 5 } }] }, false)).to.deep.equal(['  · Looking.', '  → tail_file {"lines":5}']);
    expect(runLines({ index: 1, role: 'assistant', content: 'final', bytes: 5 }, false)).to.deep.equal([]);
    // Its text was printed as it streamed: only the tool calls are left.
    expect(runLines({ index: 1, role: 'assistant', content: 'Looking.', bytes: 9, toolCalls: [{ id: 'c', name: 'tail_file', arguments: { lines: 5 } }] }, false, true)).to.deep.equal(['  → tail_file {"lines":5}']);
  });

  it('draws a compaction as a boundary, followed live and in show, with the whole summary it stands for', () => {
    const record = messageView({ role: 'compaction', content: '[Summary of messages #0-#5 …]\nRead app.log to line 900.', keepFrom: 6, compactedBy: 'model' }, 9);
    expect(record).to.include({ index: 9, role: 'compaction', keepFrom: 6, compactedBy: 'model', bytes: 57, boundary: 'the model sees a summary the model wrote below instead of messages #0-#5' });
    expect(runLines(record, false)).to.deep.equal(['  ══ compacted: the model sees a summary the model wrote below instead of messages #0-#5 (57 bytes) ══']);
    const shown = transcript({ session_id: 's', status: 'completed', provider: 'openai', model: 'm', bytes: 100, lastError: null, pendingApprovals: [] }, [record], false).split('\n');
    expect(shown.slice(1)).to.deep.equal(['  ══ #9 compaction · 57 bytes · the model sees a summary the model wrote below instead of messages #0-#5 ══', '    [Summary of messages #0-#5 …]', '    Read app.log to line 900.']);
    const digest = messageView({ role: 'compaction', content: 'D', keepFrom: 2, compactedBy: 'digest', detail: 'the summary call failed: 500' }, 3);
    expect(compactionLines(digest)[0]).to.equal('  ══ #3 compaction · 1 bytes · the model sees a deterministic digest below instead of messages #0-#1 (the summary call failed: 500) ══');
  });

  it('marks a follow-up prompt with its id, and lists pending follow-ups with when they are due and how to cancel them', () => {
    const prompt = messageView({ role: 'user', content: 'Follow-up you scheduled at 2026-12-04T19:00:00.000Z: check the job', followup: 'f-1' }, 4);
    expect(prompt.followup).to.equal('f-1');
    const now = Date.UTC(2026, 11, 4, 19, 0, 0);
    const shown = transcript({ session_id: 's', status: 'completed', provider: 'openai', model: 'm', bytes: 100, lastError: null, pendingApprovals: [], followups: [{ followup_id: 'f-2', message: 'is replication caught up?', dueAt: now + 90_000 }] }, [prompt], false, now).split('\n');
    expect(shown.slice(1)).to.deep.equal([
      '#4 user (follow-up f-1) · 66 bytes',
      '    Follow-up you scheduled at 2026-12-04T19:00:00.000Z: check the job',
      '⏰ follow-up f-2 due 2026-12-04T19:01:30.000Z (in 90 s): is replication caught up?',
      '  cancel it: harper-agent cancel-followup f-2',
    ]);
  });

  it('shows a session\'s model calls, one row per request, with the totals', () => {
    const call = { host: 'api.openai.com', model: 'gpt-4.1-mini', requestBytes: 15030, latencyMs: 812 };
    const lines = callsTable(
      [
        { ...call, at: Date.UTC(2026, 11, 4, 4, 0, 0), status: 429, inputTokens: null, outputTokens: null, errorClass: 'rate_limit', costUsd: 0 },
        { ...call, at: Date.UTC(2026, 11, 4, 4, 0, 1), status: 200, inputTokens: 3758, cacheReadTokens: 3072, outputTokens: 210, errorClass: null, costUsd: 0.0018392 },
      ],
      { requests: 2, inputTokens: 3758, outputTokens: 210, cacheReadTokens: 3072, cacheShare: 0.817, costUsd: 0.0018392, latencyMs: 1624 }
    ).split('\n');
    expect(lines).to.deep.equal([
      'model calls: 2 request(s) · 3,758 input (82% read from cache) / 210 output tokens · 1,624 ms · $0.0018',
      'AT (UTC)             HOST            MODEL         REQ BYTES     IN  CACHED  OUT  LATENCY  STATUS  ERROR       COST',
      '2026-12-04 04:00:00  api.openai.com  gpt-4.1-mini     15,030      –       –    –   812 ms  429     rate_limit  $0.0000',
      '2026-12-04 04:00:01  api.openai.com  gpt-4.1-mini     15,030  3,758   3,072  210   812 ms  200                 $0.0018',
    ]);
    expect(callsTable([], { requests: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheShare: 0, costUsd: 0, latencyMs: 0 })).to.equal('model calls: none sent to a provider');
  });

  it('lists sessions in aligned columns: title, owner, cost; numbers right-aligned', () => {
    const table = sessionsTable([
      { session_id: 'a', title: 'summarize logs/hdb.log', user: 'ann', costUsd: 0.01234, status: 'completed', messageCount: 8, bytes: 106550, updatedAt: Date.UTC(2026, 11, 2, 17, 20, 11), lastError: null, pendingApprovals: 0 },
      { session_id: 'bb', title: null, user: null, costUsd: null, status: 'error', messageCount: 12, bytes: 5, updatedAt: Date.UTC(2026, 11, 2, 9, 0, 0), lastError: 'The model rejected it.', pendingApprovals: 0 },
    ]);
    expect(table.split('\n')).to.deep.equal([
      'SESSION  TITLE                   OWNER  STATUS     MSGS    BYTES     COST  UPDATED (UTC)        LAST ERROR',
      'a        summarize logs/hdb.log  ann    completed     8  106,550  $0.0123  2026-12-02 17:20:11',
      'bb                                      error        12        5           2026-12-02 09:00:00  The model rejected it.',
    ]);
  });

  it('draws a progress line only on a terminal, and clears it before printing lines', () => {
    const written: string[] = [];
    const tty = new Progress({ isTTY: true, write: (s: string) => written.push(s) });
    tty.update('running', 3, 45120);
    expect(written.at(-1)).to.match(/^\r\x1b\[K⠙ running · 3 messages · 45,120 bytes · \d+\.\d s$/);
    const out: string[] = [];
    tty.print(['  ← read_file 10 bytes'], { write: (s: string) => out.push(s) });
    expect(written.at(-2)).to.equal('\r\x1b[K');
    expect(out).to.deep.equal(['  ← read_file 10 bytes\n']);
    // While streamed text is written on the line, the progress line stays off it.
    tty.suspend();
    const drawn = written.length;
    tty.update('running', 4, 45200);
    expect(written.length).to.equal(drawn);
    tty.resume();
    expect(written.at(-1)).to.match(/^\r\x1b\[K.* running · 4 messages · 45,200 bytes/);
    tty.stop();
    expect(written.at(-1)).to.equal('\r\x1b[K');
    const pipe: string[] = [];
    const quiet = new Progress({ write: (s: string) => pipe.push(s) });
    quiet.update('running', 1, 1);
    quiet.stop();
    expect(pipe).to.deep.equal([]);
  });

  it('prints a streamed answer as it comes, and a call it joined after the first piece only once stored, whole', async () => {
    // Harper's side of one prompt: the answer to agent_prompt, then the session's event stream as `events` lists it.
    const answer = 'The log has three lines.';
    const header = (status: string, messageCount: number) => ({ session_id: 's1', status, lastError: null, pendingApprovals: [], messageCount, bytes: 0 });
    const stream = (live: object[]) => [
      ['session', { session: header('running', 1), messages: [{ index: 0, role: 'user', content: 'hi', bytes: 2 }] }],
      ...live.map((e) => ['live', { call: 'c1', index: 1, ...e }]),
      ['session', { session: header('completed', 2), messages: [{ index: 1, role: 'assistant', content: answer, bytes: answer.length }] }],
    ];
    const printed = async (events: unknown[][]) => {
      const server = createServer((req, res) => {
        if (req.method === 'POST') return res.end(JSON.stringify({ session_id: 's1', messageIndex: 0 }));
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join(''));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const out: string[] = [];
      const io = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: () => true }, env: { HARPER_AGENT_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` } };
      try {
        expect(await main(['prompt', 'hi'], io)).to.equal(EXIT.ok);
      } finally {
        server.close();
      }
      return out.join('');
    };
    // From its first piece: printed live, not again at the end.
    expect(await printed(stream([{ kind: 'text', at: 0, text: 'The log ' }, { kind: 'text', at: 8, text: 'has three lines.' }, { kind: 'end', failed: false }]))).to.equal(`session s1\n${answer}\n`);
    // Joined after the first piece (`at` 8): nothing of it live, the stored answer once, whole.
    expect(await printed(stream([{ kind: 'text', at: 8, text: 'has three lines.' }, { kind: 'end', failed: false }]))).to.equal(`session s1\n${answer}\n`);
  });

  it('prints help, and a usage error for an unknown command (exit 2)', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) }, env: {} };
    expect(await main(['--help'], io)).to.equal(0);
    expect(out.join('')).to.contain('harper-agent prompt "<message>" [--session ID]');
    expect(await main(['frobnicate'], io)).to.equal(EXIT.usage);
    expect(err.join('')).to.match(/^harper-agent: unknown command "frobnicate"/);
    expect(await main(['show', '--bogus'], io)).to.equal(EXIT.usage);
  });
});

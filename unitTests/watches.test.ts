import { expect } from 'chai';
import { appendFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAttempt, retryDelayMs } from '../agent/watches/delivery.js';
import { buildReport, deliveryBody, reportSections, watchPrompt } from '../agent/watches/report.js';
import { burstReady, downConnections, held, lineMatcher, metricHolds, newestSample, readLog, scheduleDue } from '../agent/watches/triggers.js';
import { freshState, normalizeTrigger, normalizeWebhook, type Delivery, type Trigger, type Watch, type WatchState } from '../agent/watches/watch.js';
import { totals } from '../agent/modelCalls.js';
import { tempScopes } from './helpers.js';

type LogTrigger = Extract<Trigger, { type: 'log' }>;
const logTrigger = (extra: Partial<LogTrigger> = {}): LogTrigger => ({ type: 'log', path: 'app.log', debounceSeconds: 2, maxWaitSeconds: 10, ...extra });

describe('watches', () => {
  describe('log triggers', () => {
    it("match Harper's level tag at or above the trigger's, and the pattern", () => {
      const m = lineMatcher(logTrigger({ level: 'warn', pattern: 'disk' }));
      expect(['2026-12-07T00:00:00Z [http/1] [warn]: disk full', 'x [main/0] [error]: disk gone', 'x [http/2] [info]: disk ok', 'x [http/1] [error]: cpu', 'no level: disk'].map(m)).to.deep.equal([true, true, false, false, false]);
      expect(lineMatcher(logTrigger({ pattern: '^GET /api' }))('GET /api/x')).to.equal(true);
    });

    it('start at the end of the log, read whole lines only, keep positions (line, byte), and start over on a log that shrank', async () => {
      const scopes = tempScopes();
      const file = path.join(scopes.logs, 'app.log');
      writeFileSync(file, 'old [error]\nold [error]\n');
      const t = logTrigger({ level: 'error' });
      let s: WatchState = await readLog(scopes, t, freshState('w', null), 1000);
      expect([s.offset, s.line, s.burst ?? null]).to.deep.equal([24, 3, null]);
      appendFileSync(file, 'a [info]\nb [error] one\nc [error] par');
      s = await readLog(scopes, t, s, 2000);
      expect([s.offset, s.line, s.burst]).to.deep.equal([24 + 23, 5, { first: { line: 4, offset: 33, text: 'b [error] one' }, last: { line: 4, offset: 33, text: 'b [error] one' }, count: 1, startedAt: 2000, lastAt: 2000 }]);
      appendFileSync(file, 'tial\n');
      s = await readLog(scopes, t, s, 3000);
      expect([s.burst!.count, s.burst!.last, s.burst!.lastAt, s.line]).to.deep.equal([2, { line: 5, offset: 47, text: 'c [error] partial' }, 3000, 6]);
      // Rotated: read from the start.
      writeFileSync(file, 'new [error]\n');
      s = await readLog(scopes, t, { ...s, burst: null }, 4000);
      expect([s.offset, s.line, s.burst!.first]).to.deep.equal([12, 2, { line: 1, offset: 0, text: 'new [error]' }]);
    });

    it('a line holding key material is evidence without its text', async () => {
      const scopes = tempScopes();
      const file = path.join(scopes.logs, 'app.log');
      writeFileSync(file, '');
      const s = await readLog(scopes, logTrigger({ pattern: 'KEY' }), freshState('w', null), 0);
      appendFileSync(file, 'leaked -----BEGIN RSA PRIVATE KEY----- abc\n');
      const after = await readLog(scopes, logTrigger({ pattern: 'KEY' }), s, 1);
      expect(after.burst!.first.text).to.equal('(withheld: this line holds key material)');
    });

    it('a burst is ready when quiet for the debounce, or after the longest wait however busy', () => {
      const t = logTrigger();
      const first = { line: 1, offset: 0, text: 'x' };
      const s = (startedAt: number, lastAt: number): WatchState => ({ ...freshState('w', null), burst: { first, last: first, count: 3, startedAt, lastAt } });
      expect([burstReady(t, s(0, 1000), 2999), burstReady(t, s(0, 1000), 3000), burstReady(t, s(0, 9999), 10_000), burstReady(t, freshState('w', null), 10_000)]).to.deep.equal([false, true, true, false]);
    });
  });

  describe('metric, cluster and schedule triggers (a fake clock)', () => {
    it('a threshold fires once it has held for its duration, not before; a break starts the count again', () => {
      let s = freshState('w', null);
      const steps: [number, boolean][] = [[0, true], [2000, true], [2500, false], [3000, true], [5999, true], [6000, true]];
      const due = steps.map(([now, holds]) => {
        const r = held(s, holds, 3, now);
        s = r.state;
        return r.due;
      });
      expect(due).to.deep.equal([false, false, false, false, false, true]);
      expect(s.since).to.equal(3000);
    });

    it("reads the newest sample that has the attribute (and matches where)", () => {
      const t = { type: 'metric', metric: 'table-size', attribute: 'size', above: 10, forSeconds: 0, where: { path: 'data/a' } } as const;
      const records = [{ time: 1, size: 50, path: 'data/a' }, { time: 3, size: 5, path: 'data/a' }, { time: 4, size: 99, path: 'data/b' }, { time: 5, path: 'data/a' }];
      expect(newestSample(records, t)).to.deep.equal({ value: 5, at: 3 });
      expect([metricHolds(t, 11), metricHolds(t, 10), metricHolds({ ...t, above: undefined, below: 1 }, 0)]).to.deep.equal([true, false, true]);
    });

    it('a cron schedule fires at its times, and once for the times missed while Harper was down', () => {
      const t = normalizeTrigger({ type: 'schedule', cron: '*/5 * * * *' }) as Extract<Trigger, { type: 'schedule' }>;
      const at = (iso: string) => Date.parse(iso);
      let r = scheduleDue(t, freshState('w', null), at('2026-01-01T00:01:00Z'));
      expect([r.due, r.state.nextDue]).to.deep.equal([false, at('2026-01-01T00:05:00Z')]);
      r = scheduleDue(t, r.state, at('2026-01-01T00:04:59Z'));
      expect(r.due).to.equal(false);
      r = scheduleDue(t, r.state, at('2026-01-01T00:27:00Z'));
      expect([r.due, r.state.nextDue]).to.deep.equal([true, at('2026-01-01T00:30:00Z')]);
    });

    it('cluster_status: each database connection down, by node and database', () => {
      const status = { connections: [{ name: 'b', database_sockets: [{ database: 'data', connected: true }, { database: 'agent', connected: false }] }, { url: 'wss://c:9933', database_sockets: [{ database: 'data', connected: false }] }] };
      expect(downConnections(status)).to.deep.equal(['b/agent', 'wss://c:9933/data']);
      expect(downConnections({ connections: [] })).to.deep.equal([]);
    });
  });

  describe('definitions', () => {
    it('a trigger is checked past its schema: the pattern compiles, the cron parses, one threshold, one schedule', () => {
      const refused = (input: Record<string, unknown>) => {
        try {
          normalizeTrigger(input);
          return null;
        } catch (error) {
          return (error as Error).message;
        }
      };
      expect([
        refused({ type: 'log', pattern: '[' }),
        refused({ type: 'log' }),
        refused({ type: 'schedule', cron: 'every tuesday' }),
        refused({ type: 'schedule', cron: '* * * * *', everySeconds: 5 }),
        refused({ type: 'metric', metric: 'm', attribute: 'a', above: 1, below: 2 }),
      ]).to.deep.equal([
        'trigger.pattern does not compile: Invalid regular expression: /[/: Unterminated character class',
        'trigger: a log trigger needs a level, a pattern or both',
        "trigger.cron does not parse: CronPattern: invalid configuration format ('every tuesday'), exactly five or six space separated parts are required.",
        'trigger: a schedule needs exactly one of everySeconds or cron',
        'trigger: a metric trigger needs exactly one of above or below',
      ]);
      expect(normalizeTrigger({ type: 'log', level: 'error' })).to.deep.equal({ type: 'log', path: 'hdb.log', level: 'error', debounceSeconds: 10, maxWaitSeconds: 60 });
    });

    it("a webhook's URL passes the SSRF rules at creation (a name resolving to metadata is refused)", async () => {
      const metadata = async () => [{ address: '169.254.169.254', family: 4 }];
      const error = await normalizeWebhook({ url: 'https://hooks.example.com/x' }, metadata).catch((e) => (e as Error).message);
      expect(error).to.equal('delivery.webhook.url is refused: https://hooks.example.com/x is refused: hooks.example.com resolves to 169.254.169.254, link-local (cloud metadata lives there)');
      const ok = await normalizeWebhook({ url: 'https://hooks.example.com/x' }, async () => [{ address: '203.0.113.9', family: 4 }]);
      expect(ok).to.deep.equal({ url: 'https://hooks.example.com/x', maxAttempts: 5, retrySeconds: 5 });
    });
  });

  describe('reports and deliveries', () => {
    const w: Watch = {
      watch_id: 'w1', name: 'errors', user: 'ann', node: 'a', status: 'active', stoppedReason: null, trigger: logTrigger({ level: 'error' }), prompt: 'Why?',
      limits: { runsPerHour: 4, coolDownSeconds: 600 }, delivery: {}, testRequestedAt: null, createdAt: 0, updatedAt: 0,
    };
    const evidence = { kind: 'log' as const, summary: '2 lines of logs/app.log matched', log: { path: 'app.log', count: 2, first: { line: 7, offset: 120, text: 'first [error]' }, last: { line: 9, offset: 160, text: 'last [error]' } } };

    it('the prompt starts where the trouble is: first and last lines with their positions, then the operator\'s words', () => {
      expect(watchPrompt(w, evidence, Date.parse('2026-01-01T00:00:00Z'))).to.equal(
        [
          'The watch "errors" fired at 2026-01-01T00:00:00.000Z on lines of logs/app.log at error or above: 2 lines of logs/app.log matched.',
          'First matching line, logs/app.log line 7 (byte 120):',
          'first [error]',
          'Last matching line, line 9 (byte 160):',
          'last [error]',
          'Read around them with read_file (root "logs", path "app.log", startLine 7) or grep_files.',
          '',
          'Why?',
          '',
          'Investigate, then answer with a report in four Markdown sections: ## What happened, ## Evidence, ## Ruled out, ## Next steps. Under Evidence give file and line, or metric and time.',
        ].join('\n')
      );
    });

    it("the report: the answer's sections by heading, the evidence, the cost; key material withheld", () => {
      expect(reportSections('Intro\n## What happened\nA.\n### Evidence:\nB\n## ruled out\n\n## Next steps\n- C\n')).to.deep.equal({ whatHappened: 'A.', evidence: 'B', ruledOut: null, nextSteps: '- C' });
      const answer = '## What happened\n-----BEGIN PRIVATE KEY-----\nabc\n## Next steps\nRotate it.';
      const report = buildReport(w, 'a', evidence, { session_id: 's1', status: 'completed', answer, lastError: null, firedAt: 0, finishedAt: 1000, totals: totals([]) });
      expect([report.whatHappened, report.nextSteps, report.answer]).to.deep.equal(['[withheld: key material]', 'Rotate it.', '[withheld: key material]']);
      expect(deliveryBody(report).text).to.equal('Harper Agent watch "errors" on a (completed): [withheld: key material]\n2 lines of logs/app.log matched · session s1 · $0.0000');
    });

    it('a delivery retries with a doubling delay until a 2xx or its last attempt', () => {
      const webhook = { url: 'https://x/', maxAttempts: 3, retrySeconds: 1 };
      let d: Delivery = { session_id: 's', status: 'pending', attempts: 0, lastStatus: null, lastError: null, nextAt: 0 };
      d = afterAttempt(webhook, d, { status: 500, error: 'answered 500' }, 10_000);
      expect([d.status, d.attempts, d.nextAt]).to.deep.equal(['pending', 1, 11_000]);
      d = afterAttempt(webhook, d, { status: null, error: 'ECONNREFUSED' }, 20_000);
      expect([d.status, d.attempts, d.nextAt]).to.deep.equal(['pending', 2, 22_000]);
      d = afterAttempt(webhook, d, { status: 503, error: 'answered 503' }, 30_000);
      expect([d.status, d.attempts, d.nextAt, d.lastStatus]).to.deep.equal(['failed', 3, null, 503]);
      expect(afterAttempt(webhook, { ...d, status: 'pending', attempts: 0 }, { status: 204, error: null }, 0).status).to.equal('delivered');
      expect(retryDelayMs({ ...webhook, retrySeconds: 30 }, 5)).to.equal(60_000);
    });
  });
});

// What streaming costs and gives on a real Harper 4.7.29 (the built component, the real OpenAI SDK against the
// provider-compatible server): how soon a follower (the CLI's own event client) sees a piece of text after the
// provider wrote it, and how many publishes (audit-log entries) a streamed answer makes.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AgentClient } from '../cli/client.js';
import { ProviderServer } from '../integrationTests/providerServer/server.js';
import { freePort, startHarper, type RunningHarper } from '../scripts/harper.js';
import { op } from './storage.js';

async function settled(h: RunningHarper, session_id: string): Promise<any> {
  for (;;) {
    const s = await op(h, { operation: 'get_agent_session', session_id });
    if (s.status !== 'running') return s;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export interface StreamingFigures {
  /** Median ms from the provider writing a piece (the stream still open) to a follower receiving it. */
  followerMs: number;
  runs: number;
  /** Publishes (each an audit-log entry) a follower got for one answer of `pieces` pieces written over `answerMs`. */
  publishes: number;
  pieces: number;
  answerMs: number;
}

export async function streamingOnHarper(runs = 7): Promise<StreamingFigures> {
  const rootPath = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-bench-s-'));
  const h = await startHarper({ rootPath, httpPort: await freePort(), opsPort: await freePort(), output: `${rootPath}.out` });
  const server = await new ProviderServer().start();
  const client = new AgentClient({ url: h.opsUrl, username: h.admin.username, password: h.admin.password });
  try {
    await op(h, { operation: 'set_agent_config', provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', model: 'bench-stream', maxRetries: 0 });
    // 1. The stream is held after its first piece until a follower is listening; then the second piece is written and
    // timed to the follower's `live` event that carries it.
    const lags: number[] = [];
    for (let i = 0; i < runs; i++) {
      const releases: (() => void)[] = [];
      server.reset([{ text: 'first second third' }]);
      // Held after "first " until a follower listens, and after "second " until it has been seen: a stream still
      // being written, whose pieces wait out the 100 ms gathering.
      server.streamHolds = [0, 1].map(() => new Promise<void>((r) => releases.push(r)));
      const { session_id } = await op(h, { operation: 'agent_prompt', message: 'say three words' });
      while (server.held === undefined) await new Promise((r) => setTimeout(r, 5));
      const stop = new AbortController();
      const events = client.events(session_id, 0, stop.signal);
      let sent = 0;
      for await (const { event, data } of events) {
        if (event === 'session' && sent === 0) {
          sent = performance.now();
          releases[0]!();
        }
        if (event === 'live' && (data as { text?: string }).text?.includes('second')) {
          lags.push(performance.now() - sent);
          break;
        }
      }
      stop.abort();
      releases[1]!();
      await settled(h, session_id);
    }
    // 2. A 60-piece answer written over 3 s: how many publishes (audit-log entries) its followers got.
    const pieces = 60;
    const answerMs = 3000;
    const answer = Array.from({ length: pieces }, (_, i) => `word${i}`).join(' ');
    server.reset([{ text: answer }]);
    let hold!: () => void;
    server.streamHolds = [new Promise<void>((r) => (hold = r)), ...Array.from({ length: pieces - 1 }, (_, i) => new Promise<void>((r) => setTimeout(r, ((i + 1) * answerMs) / pieces + 1000)))];
    const { session_id } = await op(h, { operation: 'agent_prompt', message: 'say sixty words' });
    let publishes = 0;
    let shown = '';
    const stop = new AbortController();
    for await (const { event, data } of client.events(session_id, 0, stop.signal)) {
      if (event === 'session') hold();
      if (event === 'live' && (data as { kind: string }).kind === 'text') {
        publishes++;
        shown += (data as { text: string }).text;
      }
      if (event === 'session' && (data as { session: { status: string } }).session.status !== 'running') break;
    }
    stop.abort();
    if (shown !== answer.slice(answer.indexOf(' ') + 1) && shown !== answer) throw new Error(`the follower saw ${JSON.stringify(shown.slice(0, 80))}`);
    return { followerMs: median(lags), runs, publishes, pieces, answerMs };
  } finally {
    await server.close();
    await h.stop();
    rmSync(rootPath, { recursive: true, force: true });
  }
}

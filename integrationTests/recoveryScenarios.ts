// The three recovery scenarios of `npm run demo`, run against a real Harper and the provider-compatible server.
// The demo prints them; integrationTests/recovery.test.ts asserts them.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pagerResponder } from './providerServer/pager.js';
import type { Provider, ProviderServer } from './providerServer/server.js';
import type { TestHarper } from './harness.js';

export const BIG_LOG_BYTES = 1_000_000;
/** The size of the tool message a pre-cap agent stored for a 1 MB log read (harper#3068). */
export const BROKEN_TOOL_MESSAGE_BYTES = 1_057_864;

export interface RequestRow {
  bytes: number;
  rejected: boolean;
}

export interface RunReport {
  prompt: string;
  requests: RequestRow[];
  toolMessageBytes: number[];
  status: string;
  lastError: string | null;
}

export interface ScenarioReport {
  title: string;
  /** The request size above which the server rejected. */
  limit: number;
  sessionId: string;
  runs: RunReport[];
}

/** A log of about 1 MB: numbered lines, every 40th an ERROR. */
export function writeBigLog(logsDir: string): string {
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 1; bytes < BIG_LOG_BYTES; i++) {
    const line = `2026-12-02T10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.000Z [http/1] [${i % 40 === 0 ? 'error' : 'info'}]: request ${i} ${i % 40 === 0 ? 'ERROR upstream timed out' : 'served'} in ${i % 97} ms\n`;
    lines.push(line);
    bytes += Buffer.byteLength(line);
  }
  const text = lines.join('').slice(0, BIG_LOG_BYTES);
  writeFileSync(path.join(logsDir, 'big.log'), text);
  return text;
}

let scenario = 0;
/** Each scenario gets a model name of its own: a limit learned from one scenario's rejection must not shape the next. */
export function providerSettings(provider: Provider, server: ProviderServer) {
  return { provider, baseUrl: provider === 'openai' ? `${server.url}/v1` : server.url, apiKey: 'test-key', maxRetries: 0, model: `${provider}-demo-model-${++scenario}` };
}

async function runPrompt(h: TestHarper, server: ProviderServer, prompt: string, sessionId?: string): Promise<{ sessionId: string; report: RunReport }> {
  const first = server.requests.length;
  const s = await h.prompt(prompt, sessionId);
  const requests = server.requests.slice(first).map((r) => ({ bytes: r.bytes, rejected: r.rejected }));
  const toolMessageBytes = s.messages.filter((m: any) => m.role === 'tool').map((m: any) => Buffer.byteLength(m.content));
  return { sessionId: s.session_id, report: { prompt, requests, toolMessageBytes, status: s.status, lastError: s.lastError } };
}

/**
 * Two prompts on one session in which the model reads big.log, with requests rejected when they are more than
 * `headroom` bytes over the first request (its system prompt, tool specs and prompt): a 32 KB page fits in 40 KB of
 * headroom, two do not.
 */
export async function twoPrompts(h: TestHarper, server: ProviderServer, provider: Provider, headroom: number): Promise<ScenarioReport> {
  server.reset([]);
  server.byteLimitOverFirst = headroom;
  server.responder = pagerResponder('logs', 'big.log');
  await h.setConfig({ ...providerSettings(provider, server), maxToolResultBytes: 65536 });
  const one = await runPrompt(h, server, 'Read logs/big.log and tell me what you see.');
  const two = await runPrompt(h, server, 'Read the next page of logs/big.log.', one.sessionId);
  const limit = server.byteLimit;
  const title = `${provider}, request limit ${(limit / 1000).toFixed(1)} KB (the first request + ${headroom / 1000} KB): two prompts reading a 1 MB log`;
  return { title, limit, sessionId: one.sessionId, runs: [one.report, two.report] };
}

/** A session a pre-cap agent broke: a stored 1,057,864-byte tool message, written straight into AgentSession. */
export async function brokenSession(h: TestHarper, server: ProviderServer, provider: Provider, limit: number, bigLog: string): Promise<ScenarioReport> {
  server.reset([], limit);
  server.responder = pagerResponder('logs', 'big.log');
  await h.setConfig({ ...providerSettings(provider, server), maxToolResultBytes: 65536 });
  const sessionId = `broken-${provider}-${Date.now()}`;
  const header = `{"path":"logs/big.log","size":${BIG_LOG_BYTES},"content":`;
  let content = header + JSON.stringify(bigLog) + '}';
  content = content + ' '.repeat(Math.max(0, BROKEN_TOOL_MESSAGE_BYTES - Buffer.byteLength(content)));
  const now = Date.now();
  const row = {
    session_id: sessionId,
    user: 'admin',
    status: 'error',
    provider,
    model: `${provider}-demo-model-${scenario}`,
    createdAt: now,
    updatedAt: now,
    lastError: `${provider} request failed (HTTP 400): prompt is too long`,
    runner: null,
    pendingApprovals: [],
    messages: [
      { role: 'user', content: 'Read logs/big.log', at: now },
      { role: 'assistant', content: '', toolCalls: [{ id: 'old_read', name: 'read_file', arguments: { root: 'logs', path: 'big.log' } }], at: now },
      { role: 'tool', toolCallId: 'old_read', name: 'read_file', content, at: now },
      { role: 'assistant', content: 'The log is large.', at: now },
    ],
  };
  const put = await h.op({ operation: 'upsert', database: 'agent', table: 'AgentSession', records: [row] });
  if (put.status !== 200) throw new Error(`upsert ${put.status}: ${JSON.stringify(put.body)}`);
  const stored = await h.row(sessionId);
  const seeded = Buffer.byteLength(stored.messages[2].content);
  const run = await runPrompt(h, server, 'Read logs/big.log again, a page at a time.', sessionId);
  return { title: `${provider}, request limit ${limit / 1000} KB: a session seeded with a stored ${seeded.toLocaleString('en-US')}-byte tool message`, limit, sessionId, runs: [run.report] };
}

const n = (x: number) => x.toLocaleString('en-US');

export function formatScenario(s: ScenarioReport): string {
  const lines = [`\n${s.title}`, `session ${s.sessionId}`];
  s.runs.forEach((r, i) => {
    lines.push(`  run ${i + 1}: "${r.prompt}"`);
    lines.push('    request  bytes      rejected');
    r.requests.forEach((q, j) => lines.push(`    ${String(j + 1).padEnd(8)} ${n(q.bytes).padStart(9)}  ${q.rejected ? 'yes (context window)' : 'no'}`));
    lines.push(`    stored tool messages (bytes): ${r.toolMessageBytes.map(n).join(', ') || 'none'}`);
    lines.push(`    final status: ${r.status}${r.lastError ? ` (${r.lastError})` : ''}`);
  });
  return lines.join('\n');
}

// Prompt-caching scenarios on a real Harper through the real SDKs, shared by cache.test.ts (which asserts on them) and
// the bench (bench/caching.ts, which tabulates them): the provider server caches and bills as each API does
// (providerServer/promptCache.ts), and the figures compare what the input was billed with the log the model read, and
// the agent's call log with the server's bill.
import type { TestHarper } from './harness.js';
import type { BillPrice } from './providerServer/promptCache.js';
import { isSummaryRequest, readerResponder, sessionReader } from './providerServer/pager.js';
import type { Provider, ProviderServer, Recorded } from './providerServer/server.js';
import { providerSettings } from './recoveryScenarios.js';

/** Anthropic's list price shape: reads at 0.1x the input price, writes at 1.25x. OpenAI bills no writes. */
export const CACHE_PRICE: BillPrice = { inputPerMTokens: 3, outputPerMTokens: 15, cacheReadPerMTokens: 0.3, cacheWritePerMTokens: 3.75 };
/** The server's request limit in bytes: a 160 KB window. */
export const CACHE_LIMIT = 160_000;

/** The log bytes the model read: each read_file page's text, counted once, where it first reached the server. */
export function logBytesRead(requests: readonly Recorded[]): number {
  const pages = new Map<string, number>();
  for (const r of requests) {
    for (const m of r.neutral.messages) {
      if (m.role !== 'tool' || !m.toolCallId || pages.has(m.toolCallId)) continue;
      try {
        const page = JSON.parse(m.text) as { content?: unknown };
        if (typeof page.content === 'string') pages.set(m.toolCallId, Buffer.byteLength(page.content));
      } catch {
        // a result cut to its head: seen whole before
      }
    }
  }
  return [...pages.values()].reduce((a, b) => a + b, 0);
}

export interface CacheFigures {
  session_id: string;
  /** Requests answered 200, and how many of them were compaction summary calls. */
  requests: number;
  summaries: number;
  /** Log bytes the model read. */
  read: number;
  /** Input tokens sent, and of them read from and written to the cache (the server's bill). */
  sent: number;
  cacheRead: number;
  cacheWrite: number;
  /** The billed input in token-equivalents at the input price. */
  billed: number;
  /** What the server billed, and what the agent's call log says (list_agent_model_calls totals). */
  billUsd: number;
  totals: { inputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number; cacheShare: number };
}

/** The server's bill and the session's call log, after a scenario. */
async function figures(h: TestHarper, server: ProviderServer, session_id: string): Promise<CacheFigures> {
  const ok = server.requests.filter((r) => r.status === 200);
  const bill = server.cache.bill;
  const calls = await h.op({ operation: 'list_agent_model_calls', session_id, limit: 10_000 });
  if (calls.status !== 200) throw new Error(`list_agent_model_calls ${calls.status}: ${JSON.stringify(calls.body)}`);
  return {
    session_id,
    requests: ok.length,
    summaries: ok.filter((r) => isSummaryRequest(r.neutral)).length,
    read: logBytesRead(server.requests),
    sent: bill.uncached + bill.read + bill.write,
    cacheRead: bill.read,
    cacheWrite: bill.write,
    billed: server.cache.billedInputTokens(CACHE_PRICE),
    billUsd: server.cache.costUsd(CACHE_PRICE),
    totals: calls.body.totals,
  };
}

async function configure(h: TestHarper, server: ProviderServer, provider: Provider, maxTurns: number, responder: ProviderServer['responder']): Promise<void> {
  server.reset([], CACHE_LIMIT);
  server.caching = true;
  server.responder = responder;
  const settings = providerSettings(provider, server);
  const set = await h.setConfig({ ...settings, maxTurns, prices: { [settings.model]: CACHE_PRICE } });
  if (set.status !== 200) throw new Error(`set_agent_config ${set.status}: ${JSON.stringify(set.body)}`);
}

/** An investigation of `prompts` prompts in one session, each reading three pages of logs/big.log on from where the
 * last one stopped. Every prompt must complete. */
export async function cachedInvestigation(h: TestHarper, server: ProviderServer, provider: Provider, prompts: number): Promise<CacheFigures> {
  await configure(h, server, provider, 20, sessionReader('logs', 'big.log', 3));
  let id: string | undefined;
  for (let i = 0; i < prompts; i++) {
    const r = await h.promptLight(`Go on reading logs/big.log (${i + 1}).`, id);
    id = r.session_id;
    if (r.status !== 'completed') throw new Error(`prompt ${i + 1}: ${r.status} ${r.lastError}`);
  }
  return figures(h, server, id!);
}

/** logs/big.log read to its end in one prompt. */
export async function cachedReadToEnd(h: TestHarper, server: ProviderServer, provider: Provider): Promise<CacheFigures> {
  await configure(h, server, provider, 500, readerResponder('logs', 'big.log'));
  const r = await h.promptLight('Read logs/big.log to its end.', undefined, 180_000);
  if (r.status !== 'completed') throw new Error(`read to end: ${r.status} ${r.lastError}`);
  return figures(h, server, r.session_id);
}

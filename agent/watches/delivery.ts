// Delivering a watch's report to its webhook: one POST an attempt, each attempt a record (AgentWatchDelivery), retried
// with a doubling delay until a 2xx or maxAttempts. The URL passes http_fetch's SSRF rules again at every attempt
// (a name may resolve elsewhere since the watch was stored), and the connection goes to the address that was checked.
import { randomUUID } from 'node:crypto';
import { RecordLog, millisOf, type LogRecord, type LogTable } from '../recordLog.js';
import { checkUrl, send, type Resolve } from '../tools/httpFetch.js';
import type { Delivery, Webhook } from './watch.js';

export interface DeliveryAttempt extends LogRecord {
  watch_id: string;
  attempt: number;
  /** The HTTP status answered, or null when none was (refused, unreachable, timed out). */
  status: number | null;
  error: string | null;
  latencyMs: number;
}

export class DeliveryLog extends RecordLog<DeliveryAttempt> {
  constructor(table: () => LogTable | undefined) {
    super(table, (r) => ({ id: String(r.id), session_id: String(r.session_id), at: millisOf(r.at), watch_id: String(r.watch_id), attempt: Number(r.attempt), status: r.status ?? null, error: r.error ?? null, latencyMs: Number(r.latencyMs) }));
  }
}

/** The longest wait between two attempts. */
const MAX_RETRY_MS = 60_000;
/** The most of a receiver's answer kept in an attempt's error. */
const ERROR_BODY_CHARS = 200;

/** The delay before attempt `n + 1` (n attempts made). */
export const retryDelayMs = (webhook: Webhook, n: number) => Math.min(MAX_RETRY_MS, webhook.retrySeconds * 1000 * 2 ** Math.max(0, n - 1));

/** One attempt: the body POSTed as JSON, with the secret header when set. */
export async function attemptDelivery(webhook: Webhook, body: unknown, resolve?: Resolve): Promise<{ status: number | null; error: string | null; latencyMs: number }> {
  const started = Date.now();
  try {
    const url = new URL(webhook.url);
    const at = await checkUrl(url, resolve);
    const headers: Record<string, string> = { 'user-agent': 'harper-agent watch' };
    if (webhook.secretHeader) headers[webhook.secretHeader.name] = webhook.secretHeader.value;
    const hop = await send(url, 'POST', at, 4096, AbortSignal.timeout(15_000), { text: JSON.stringify(body), type: 'application/json' }, headers);
    const ok = hop.status >= 200 && hop.status < 300;
    return { status: hop.status, error: ok ? null : `answered ${hop.status}: ${hop.body.toString('utf8').slice(0, ERROR_BODY_CHARS)}`, latencyMs: Date.now() - started };
  } catch (error) {
    return { status: null, error: (error as Error).message, latencyMs: Date.now() - started };
  }
}

/** The delivery after one attempt: delivered on a 2xx, failed after the last, else pending with its next time. */
export function afterAttempt(webhook: Webhook, d: Delivery, result: { status: number | null; error: string | null }, now: number): Delivery {
  const attempts = d.attempts + 1;
  const ok = result.error === null;
  const last = !ok && attempts >= webhook.maxAttempts;
  return { ...d, attempts, lastStatus: result.status, lastError: result.error, status: ok ? 'delivered' : last ? 'failed' : 'pending', nextAt: ok || last ? null : now + retryDelayMs(webhook, attempts) };
}

export function attemptRecord(watch_id: string, session_id: string, attempt: number, result: { status: number | null; error: string | null; latencyMs: number }): DeliveryAttempt {
  return { id: randomUUID(), session_id, watch_id, attempt, at: Date.now(), ...result };
}

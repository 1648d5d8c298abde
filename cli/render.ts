// What the CLI prints: a run's tool calls and result sizes as they happen, a progress line, session tables and
// transcripts. Pure functions of the feed's data, so the unit tests check the exact lines.
import { boundsText, CONFIG_KEYS, defaultText } from '../agent/agent.js';
import { usd, type CallTotals, type ModelCallRecord } from '../agent/modelCalls.js';
import { CUT_NOTES as CUT_NOTE, type MessageView } from '../agent/sessionFeed.js';

export const formatBytes = (n: number) => `${n.toLocaleString('en-US')} bytes`;

function clip(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Why a result was cut or failed, as ` [cut: cap, error]` (nothing for an intact one). */
function marks(m: MessageView): string {
  const notes = [m.cut ? CUT_NOTE[m.cut] : '', m.isError ? 'error' : ''].filter(Boolean);
  return notes.length ? ` [${notes.join(', ')}]` : '';
}

/** The line for a result: tool name, stored size, and why it was cut or failed. */
export function resultLine(m: MessageView): string {
  return `  ← ${m.name} ${formatBytes(m.bytes)}${marks(m)}${m.isError ? `: ${clip(m.content, 160)}` : ''}`;
}

/** Why a result printed earlier changed size since (the line printed then said its size at that moment). */
const CUT_WHY: Record<NonNullable<MessageView['cut']>, string> = {
  context: 'after a context-window rejection',
  workingSet: 'as it left the working set (agent.workingSetBytes)',
  cap: 'by the cap (agent.maxToolResultBytes)',
};

/** Lines for a message of a run being followed; `changed` is an earlier message rewritten in place; `streamed`: its
 * text was printed as the model wrote it, so only its tool calls are left to print. */
export function runLines(m: MessageView, changed: boolean, streamed = false): string[] {
  if (changed) return m.role === 'tool' && m.cut ? [`  ✂ #${m.index} ${m.name} cut to ${formatBytes(m.bytes)} ${CUT_WHY[m.cut]}`] : [];
  if (m.role === 'tool') return [resultLine(m)];
  if (m.role === 'compaction') return [`  ══ compacted: ${m.boundary} (${formatBytes(m.bytes)}) ══`];
  if (m.role === 'assistant' && m.toolCalls?.length) {
    const lines = m.content.trim() && !streamed ? [`  · ${clip(m.content, 200)}`] : [];
    return lines.concat(m.toolCalls.map((c) => `  → ${c.name} ${clip(JSON.stringify(c.arguments), 160)}`));
  }
  return [];
}

export interface ApprovalView {
  approval_id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export function approvalLines(sessionId: string, p: ApprovalView): string[] {
  return [
    `⏸ ${p.name} needs approval (${p.approval_id}): ${clip(JSON.stringify(p.arguments), 200)}`,
    `  approve: harper-agent approve ${sessionId} ${p.approval_id}`,
    `  deny:    harper-agent approve ${sessionId} ${p.approval_id} --deny`,
  ];
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** The progress line while a run goes on: redrawn in place on a terminal, never written elsewhere. */
export class Progress {
  private frame = 0;
  private text = '';
  private timer: NodeJS.Timeout | undefined;
  private readonly started = Date.now();

  constructor(private readonly out: { write(s: string): unknown; isTTY?: boolean }) {}

  get enabled() {
    return this.out.isTTY === true;
  }

  update(status: string, messageCount: number, bytes: number) {
    this.text = `${status} · ${messageCount} messages · ${formatBytes(bytes)}`;
    if (!this.enabled) return;
    this.timer ??= setInterval(() => this.draw(), 100);
    this.draw();
  }

  /** Prints lines above the progress line. */
  print(lines: string[], to: { write(s: string): unknown }) {
    if (lines.length === 0) return;
    this.clear();
    to.write(lines.join('\n') + '\n');
    this.draw();
  }

  line(): string {
    const seconds = ((Date.now() - this.started) / 1000).toFixed(1);
    return `${SPINNER[this.frame % SPINNER.length]} ${this.text} · ${seconds} s`;
  }

  private suspended = false;

  /** Streamed text is being written on its line: the progress line keeps off it until `resume`. */
  suspend() {
    this.clear();
    this.suspended = true;
  }

  resume() {
    this.suspended = false;
    this.draw();
  }

  private draw() {
    if (!this.enabled || !this.text || this.suspended) return;
    this.frame++;
    this.out.write(`\r\x1b[K${this.line()}`);
  }

  private clear() {
    if (this.enabled && this.text && !this.suspended) this.out.write('\r\x1b[K');
  }

  stop() {
    clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
    this.text = '';
  }
}

function table(header: string[], rows: string[][], numeric: Set<number> = new Set()): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : numeric.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export interface SessionSummaryView {
  session_id: string;
  title?: string | null;
  user?: string | null;
  costUsd?: number | null;
  status: string;
  messageCount: number;
  bytes: number;
  updatedAt: number;
  lastError: string | null;
  pendingApprovals: number;
}

const time = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

export function sessionsTable(sessions: SessionSummaryView[]): string {
  if (sessions.length === 0) return 'no sessions yet: harper-agent prompt "…" starts one';
  return table(
    ['SESSION', 'TITLE', 'OWNER', 'STATUS', 'MSGS', 'BYTES', 'COST', 'UPDATED (UTC)', 'LAST ERROR'],
    sessions.map((s) => [s.session_id, clip(s.title ?? '', 40), s.user ?? '', s.status, String(s.messageCount), s.bytes.toLocaleString('en-US'), s.costUsd === null || s.costUsd === undefined ? '' : `$${s.costUsd.toFixed(4)}`, time(s.updatedAt), clip(s.lastError ?? '', 60)]),
    new Set([4, 5, 6])
  );
}

/** A compaction record: the boundary it draws (which messages the model no longer sees), then the summary it sees. */
export function compactionLines(m: MessageView): string[] {
  return [`  ══ #${m.index} compaction · ${formatBytes(m.bytes)} · ${m.boundary} ══`, ...m.content.split('\n').map((l) => `    ${l}`)];
}

/** `show`: the header, then each message with its size and marks; long tool results show their head; a compaction
 * record shows the boundary and the whole summary the model sees from there on. */
export function transcript(s: { session_id: string; status: string; provider: string; model: string | null; bytes: number; lastError: string | null; estimatedContextTokens?: number; contextBudget?: { tokens: number | null; source: string } | null; pendingApprovals: ApprovalView[]; followups?: FollowupView[] }, messages: MessageView[], full: boolean, now = Date.now()): string {
  const out = [`session ${s.session_id} · ${s.status} · ${s.provider}${s.model ? ` / ${s.model}` : ''} · ${messages.length} messages · ${formatBytes(s.bytes)}`];
  if (s.estimatedContextTokens !== undefined) {
    const budget = s.contextBudget?.tokens ? ` of a ${s.contextBudget.tokens.toLocaleString('en-US')}-token budget (${s.contextBudget.source})` : '';
    out.push(`context: about ${s.estimatedContextTokens.toLocaleString('en-US')} tokens${budget}`);
  }
  if (s.lastError) out.push(`last error: ${s.lastError}`);
  for (const m of messages) {
    if (m.role === 'compaction') {
      out.push(...compactionLines(m));
      continue;
    }
    const who = m.role === 'tool' ? `tool ${m.name}` : m.followup ? `user (follow-up ${m.followup})` : m.role;
    out.push(`#${m.index} ${who} · ${formatBytes(m.bytes)}${marks(m)}`);
    // A tool result is one long JSON line: its head is enough to see what it was, --full shows it whole.
    if (m.role === 'tool' && !full && m.content.length > 200) out.push(`    ${m.content.slice(0, 200)}… (--full shows all)`);
    else for (const l of m.content ? m.content.split('\n') : []) out.push(`    ${l}`);
    for (const c of m.role === 'assistant' ? (m.toolCalls ?? []) : []) out.push(`    → ${c.name} ${JSON.stringify(c.arguments)}`);
  }
  for (const p of s.pendingApprovals) out.push(...approvalLines(s.session_id, p));
  for (const f of s.followups ?? []) out.push(...followupLines(f, now));
  return out.join('\n');
}

export interface FollowupView {
  followup_id: string;
  message: string;
  dueAt: number;
}

/** A pending follow-up: when it is due, what it will say, and how to cancel it. */
export function followupLines(f: FollowupView, now = Date.now()): string[] {
  const seconds = Math.round((f.dueAt - now) / 1000);
  const when = seconds > 0 ? `in ${seconds.toLocaleString('en-US')} s` : 'now';
  return [`⏰ follow-up ${f.followup_id} due ${new Date(f.dueAt).toISOString()} (${when}): ${clip(f.message, 200)}`, `  cancel it: harper-agent cancel-followup ${f.followup_id}`];
}

/** `config`: every agent.* key with the value in force (default or set), its default and its bounds, from the schema;
 * then what a set_agent_config stored, when it answers one. */
export function configLines(answer: Record<string, unknown>): string {
  const { persisted, ...config } = answer;
  const shown = (v: unknown) => (v === undefined ? '(unset)' : typeof v === 'number' ? v.toLocaleString('en-US') : typeof v === 'string' ? v : JSON.stringify(v));
  const lines = [table(['KEY', 'IN FORCE', 'DEFAULT', 'BOUNDS'], CONFIG_KEYS.map((k) => [k, shown(config[k]), defaultText(k), boundsText(k)]))];
  if (persisted && typeof persisted === 'object') {
    const stored = Object.entries(persisted).map(([k, v]) => (v === null ? `${k} (taken back)` : `${k} = ${JSON.stringify(v)}`));
    lines.push(`stored in agent.AgentSetting: ${stored.join(', ')}`);
  }
  if (Array.isArray(config.warnings)) for (const w of config.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}

/** A model-call record as `show` prints it. */
export type CallView = Pick<ModelCallRecord, 'at' | 'host' | 'model' | 'requestBytes' | 'status' | 'inputTokens' | 'outputTokens' | 'latencyMs' | 'errorClass' | 'costUsd'> & Partial<Pick<ModelCallRecord, 'cacheReadTokens'>>;

/** `show`: the session's model calls, one row per provider request (CACHED: the input read from the provider's prompt
 * cache), then the totals with the cache's share of the input. */
export function callsTable(calls: CallView[], t: Omit<CallTotals, 'failed' | 'cacheWriteTokens'>): string {
  if (calls.length === 0) return 'model calls: none sent to a provider';
  const n = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toLocaleString('en-US'));
  const rows = calls.map((c) => [time(c.at), c.host, c.model, n(c.requestBytes), n(c.inputTokens), n(c.cacheReadTokens), n(c.outputTokens), `${n(c.latencyMs)} ms`, c.status === null ? 'none' : String(c.status), c.errorClass ?? '', c.costUsd === null ? '–' : usd(c.costUsd)]);
  const cached = t.cacheReadTokens ? ` (${Math.round(t.cacheShare * 100)}% read from cache)` : '';
  const summary = `model calls: ${t.requests} request(s) · ${n(t.inputTokens)} input${cached} / ${n(t.outputTokens)} output tokens · ${n(t.latencyMs)} ms · ${usd(t.costUsd)}`;
  return `${summary}\n${table(['AT (UTC)', 'HOST', 'MODEL', 'REQ BYTES', 'IN', 'CACHED', 'OUT', 'LATENCY', 'STATUS', 'ERROR', 'COST'], rows, new Set([3, 4, 5, 6, 7, 10]))}`;
}

/** What preview_agent_request answers, as `preview` prints it. */
export interface PreviewView {
  session_id: string | null;
  provider: string;
  model: string;
  parts: { part: string; bytes: number }[];
  bytes: number;
  messages: number;
  stablePrefixBytes: number;
  cut: { index: number; name: string; cut: string; bytes: number }[];
  estimatedTokens: number;
  contextBudget: { tokens: number; source: string } | null;
  compactionDue: boolean;
  cacheMarks: boolean;
}

/** `preview`: the next request's size by part, how much of it the previous request already sent, what is cut. */
export function previewLines(p: PreviewView): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const pct = (a: number) => (p.bytes ? `${Math.round((a / p.bytes) * 100)}%` : '0%');
  const budget = p.contextBudget ? ` of a ${n(p.contextBudget.tokens)}-token budget (${p.contextBudget.source})` : ' (no window known)';
  const rows = p.parts.map((x) => [x.part, `${n(x.bytes)} B`, pct(x.bytes)]);
  return [
    `next request ${p.session_id ? `of session ${p.session_id}` : 'of a new session'} (${p.provider} / ${p.model}): ${n(p.bytes)} bytes, ${n(p.messages)} messages, about ${n(p.estimatedTokens)} tokens${budget}`,
    table(['PART', 'BYTES', 'SHARE'], rows, new Set([1, 2])),
    `stable prefix: ${n(p.stablePrefixBytes)} B (${pct(p.stablePrefixBytes)}), what the previous request already sent; ${p.cacheMarks ? 'marked for the provider\'s cache' : 'cached by the provider without marks, where it caches'}`,
    p.cut.length ? `cut: ${p.cut.map((c) => `#${c.index} ${c.name} (${c.cut}, ${n(c.bytes)} B)`).join(', ')}` : 'cut: nothing',
    p.compactionDue ? 'compaction due: the agent compacts before sending this (a summary call first)' : 'compaction due: no',
  ].join('\n');
}

/** A watch as list_agent_watches and get_agent_watch answer it (agent/watches/watch.ts publicWatch). */
export interface WatchView {
  watch_id: string;
  name: string;
  status: string;
  stoppedReason: string | null;
  node: string | null;
  trigger: { description: string };
  lastFiredAt?: number | null;
  lastSessionId?: string | null;
  fired?: number;
  suppressed?: number;
  pending?: { count: number } | null;
  lastReport?: { status: string; whatHappened: string | null; answer: string | null; lastError: string | null; cost: { usd: number } } | null;
  lastDelivery?: { status: string; attempts: number; lastError: string | null } | null;
}

export function watchesTable(watches: WatchView[]): string {
  if (watches.length === 0) return 'no watches yet: harper-agent watch create \'{"name": …, "trigger": …, "prompt": …}\'';
  return table(
    ['WATCH', 'NAME', 'STATUS', 'TRIGGER', 'FIRED', 'LAST FIRED (UTC)', 'LAST REPORT', 'DELIVERY'],
    watches.map((w) => [
      w.watch_id,
      w.name,
      w.status,
      clip(w.trigger.description, 60),
      String(w.fired ?? 0),
      w.lastFiredAt ? time(w.lastFiredAt) : '',
      clip(reportLine(w.lastReport) ?? '', 60),
      w.lastDelivery ? `${w.lastDelivery.status} (${w.lastDelivery.attempts})` : '',
    ]),
    new Set([4])
  );
}

function reportLine(r: WatchView['lastReport']): string | null {
  if (!r) return null;
  return (r.whatHappened ?? r.answer ?? r.lastError ?? r.status).replace(/\s+/g, ' ');
}

/** One watch: its definition's gist, where its trigger stands, and its last report. */
export function watchLines(w: WatchView): string {
  const out = [`watch ${w.watch_id} · ${w.name} · ${w.status}${w.stoppedReason ? ` (${w.stoppedReason})` : ''} · on ${w.node ?? 'this node'}`, `trigger: ${w.trigger.description}`];
  out.push(`fired ${w.fired ?? 0} time(s)${w.lastFiredAt ? `, last ${time(w.lastFiredAt)} (session ${w.lastSessionId})` : ''}; ${w.suppressed ?? 0} suppressed in a cool-down${w.pending ? `; ${w.pending.count} matching line(s) gathered, not fired yet` : ''}`);
  if (w.lastReport) out.push(`last report (${w.lastReport.status}, $${w.lastReport.cost.usd.toFixed(4)}): ${reportLine(w.lastReport)}`);
  if (w.lastDelivery) out.push(`delivery: ${w.lastDelivery.status} after ${w.lastDelivery.attempts} attempt(s)${w.lastDelivery.lastError ? `: ${w.lastDelivery.lastError}` : ''}`);
  return out.join('\n');
}

export interface NoteView {
  note_id: string;
  text: string;
  scope: { kind: string; name: string } | null;
  user: string | null;
  updatedAt: number;
}

export function notesTable(notes: NoteView[]): string {
  if (notes.length === 0) return 'no notes yet: harper-agent note add "<a fact about this instance>"';
  return table(['NOTE', 'SCOPE', 'BY', 'UPDATED (UTC)', 'TEXT'], notes.map((n) => [n.note_id, n.scope ? `${n.scope.kind} ${n.scope.name}` : '', n.user ?? '', time(n.updatedAt), clip(n.text, 100)]), new Set());
}

export function runbooksTable(runbooks: { runbook_id: string; title: string; tags: string[]; bytes: number }[]): string {
  if (runbooks.length === 0) return 'no runbooks yet: harper-agent runbook add FILE --title "<title>" [--tags a,b]';
  return table(['RUNBOOK', 'TITLE', 'TAGS', 'BYTES'], runbooks.map((r) => [r.runbook_id, clip(r.title, 60), r.tags.join(', '), r.bytes.toLocaleString('en-US')]), new Set([3]));
}

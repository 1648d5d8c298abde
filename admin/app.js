// The agent's admin page: a live session list, a live transcript with each message's size and cut marks, a prompt
// box and approve/deny buttons. Plain DOM, no build step; the server sends only what changed (agent/sessionFeed.ts).
// An answer's Markdown is rendered by marked and cleaned by DOMPurify (copied to vendor/ by the build).
import { marked } from './vendor/marked.js';
import DOMPurify from './vendor/purify.js';

const $ = (id) => document.getElementById(id);
const bytes = (n) => `${Number(n).toLocaleString('en-US')} B`;
const CUT_TITLES = {
  cap: 'cut to agent.maxToolResultBytes when it was stored',
  context: 'cut to 2 KiB after the model rejected the conversation as longer than its context window',
  workingSet: 'cut to 2 KiB before a model call: older than the working set of newest results kept whole (agent.workingSetBytes)',
};
const CUT_LABELS = { cap: 'cut: cap', context: 'cut: context window', workingSet: 'cut: working set' };

/** The session list, kept by id, newest first. */
const sessions = new Map();
/** The session on screen: its id, header and messages by index. */
let current = { id: null, session: null, messages: [], feed: null };

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

async function operation(body) {
  const res = await fetch('api/operation', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }));
  if (!res.ok) throw new Error(`${res.status}: ${answer.error ?? res.statusText}`);
  return answer;
}

function notice(message) {
  $('notice').hidden = !message;
  $('notice').textContent = message ?? '';
}

// ---- the session list: list_agent_sessions pages (search, status, owner), kept live by the event stream ----

const filters = { title: '', status: '', user: '' };
let nextCursor = null;
const usdText = (n) => (n === null || n === undefined ? '' : `$${n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`);
const matchesFilters = (s) => (!filters.status || s.status === filters.status) && (!filters.user || s.user === filters.user) && (!filters.title || (s.title ?? '').toLowerCase().includes(filters.title.toLowerCase()));

function since(ms) {
  const s = Math.round((Date.now() - ms) / 1000);
  if (s < 60) return `${Math.max(0, s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

function renderSessions() {
  const body = $('sessions').tBodies[0];
  const rows = [...sessions.values()].sort((a, b) => b.updatedAt - a.updatedAt || (a.session_id < b.session_id ? 1 : -1));
  body.replaceChildren(
    ...rows.map((s) =>
      el(
        'tr',
        { dataset: { id: s.session_id }, class: s.session_id === current.id ? 'selected' : '', onclick: () => select(s.session_id) },
        el('td', { class: 'title', title: s.session_id }, el('span', { class: 'title-text' }, s.title ?? '(no prompt yet)'), el('span', { class: 'id' }, s.session_id.slice(0, 8))),
        el('td', { class: 'owner' }, s.user ?? ''),
        el('td', {}, el('span', { class: `status ${s.status}` }, s.status)),
        el('td', { class: 'num' }, String(s.messageCount)),
        el('td', { class: 'num cost' }, usdText(s.costUsd)),
        el('td', { class: 'updated', title: new Date(s.updatedAt).toLocaleString() }, since(s.updatedAt)),
        el('td', { class: 'error error-col', title: s.lastError ?? '' }, s.lastError ?? '')
      )
    )
  );
  $('no-sessions').hidden = rows.length > 0;
  $('more-sessions').hidden = !nextCursor;
}

// Changes the stream brought while a first page was being read: the page may predate them.
let changedWhileLoading = null;

async function loadSessions(more = false) {
  const during = new Map();
  if (!more) changedWhileLoading = during;
  try {
    const answer = await operation({ operation: 'list_agent_sessions', limit: 50, ...(filters.title ? { title: filters.title } : {}), ...(filters.status ? { status: filters.status } : {}), ...(filters.user ? { user: filters.user } : {}), ...(more && nextCursor ? { cursor: nextCursor } : {}) });
    if (changedWhileLoading === during) changedWhileLoading = null;
    const shown = new Map(sessions);
    if (!more) sessions.clear();
    for (const s of answer.sessions) sessions.set(s.session_id, s);
    nextCursor = answer.nextCursor;
    // A session that changed after the page was read (a run that ended meanwhile) keeps the row it had, cost and all.
    for (const s of during.values()) {
      if (sessions.get(s.session_id)?.updatedAt >= s.updatedAt) continue;
      const row = shown.get(s.session_id);
      if (row && row.updatedAt >= s.updatedAt) sessions.set(s.session_id, row);
      else sessionChanged(s);
    }
    renderSessions();
  } catch (error) {
    notice(error.message);
  } finally {
    if (changedWhileLoading === during) changedWhileLoading = null;
  }
}

/** A session changed: its row updated (its cost kept, and read again from the call log once a run ends). */
function sessionChanged(s) {
  changedWhileLoading?.set(s.session_id, s);
  const known = sessions.get(s.session_id);
  if (!matchesFilters(s)) {
    if (known) sessions.delete(s.session_id);
    return renderSessions();
  }
  sessions.set(s.session_id, { ...s, costUsd: known?.costUsd ?? null });
  renderSessions();
  // What a run spent, once it stopped: also for one first seen already stopped (a fast run's writes can reach the
  // page as one change, never as running).
  if (s.status !== 'running' && (known?.status === 'running' || known?.costUsd == null)) {
    operation({ operation: 'list_agent_model_calls', session_id: s.session_id }).then(
      (calls) => {
        const row = sessions.get(s.session_id);
        if (row) sessions.set(s.session_id, { ...row, costUsd: calls.totals.costUsd }), renderSessions();
      },
      () => undefined
    );
  }
}

function followList() {
  const feed = new EventSource('api/sessions/events');
  feed.onopen = () => ($('connection').textContent = 'live');
  feed.onerror = () => ($('connection').textContent = 'reconnecting…');
  // The first page comes from list_agent_sessions (with its filters and costs); the stream keeps it current.
  feed.addEventListener('sessions', () => void loadSessions());
  feed.addEventListener('session', (e) => sessionChanged(JSON.parse(e.data)));
  feed.addEventListener('deleted', (e) => {
    sessions.delete(JSON.parse(e.data).session_id);
    renderSessions();
  });
}

let filterTimer;
for (const [id, key] of [['filter-title', 'title'], ['filter-status', 'status'], ['filter-user', 'user']]) {
  $(id).addEventListener('input', () => {
    filters[key] = $(id).value.trim();
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => void loadSessions(), 200);
  });
}
$('session-filters').addEventListener('submit', (e) => e.preventDefault());
$('more-sessions').addEventListener('click', () => void loadSessions(true));

// ---- one session ----

/** Markdown as HTML the page may show: rendered by marked, cleaned by DOMPurify. */
function markdown(text) {
  const div = el('div', { class: 'markdown' });
  div.innerHTML = DOMPurify.sanitize(marked.parse(text));
  return div;
}

/** The call a tool result answers, from the assistant message that made it. */
function callOf(toolCallId) {
  for (const m of current.messages) for (const c of m?.toolCalls ?? []) if (c.id === toolCallId) return c;
  return undefined;
}

/** A tool step's one-line header: what was asked (root/path, a query), where the result is (lines, cursor), errors. */
function toolLine(m, result) {
  const args = callOf(m.toolCallId)?.arguments ?? {};
  const parts = [];
  if (args.path) parts.push(`${args.root ? `${args.root}/` : ''}${args.path}`);
  else if (args.runbook_id) parts.push(`runbook ${String(args.runbook_id).slice(0, 8)}`);
  else if (args.query ?? args.pattern ?? args.operation) parts.push(String(args.query ?? args.pattern ?? args.operation).slice(0, 60));
  if (result && typeof result === 'object') {
    if (result.error) parts.push(`error: ${String(result.error).slice(0, 100)}`);
    if (result.startLine !== undefined && result.endLine !== undefined) parts.push(`lines ${result.startLine}–${result.endLine}${result.totalLines ? ` of ${result.totalLines}` : ''}`);
    if (result.nextLine !== undefined) parts.push(`next ${result.nextLine}${result.nextOffset !== undefined ? ` @${result.nextOffset}` : ''}`);
    if (Array.isArray(result.matches)) parts.push(`${result.matches.length} match${result.matches.length === 1 ? '' : 'es'}`);
  }
  return parts.join(' · ');
}

/** A tool result opened: a page's text as lines, the other fields as JSON; text the cap cut stays as it was stored. */
function resultBody(m, result) {
  if (!result || typeof result !== 'object') return [el('pre', { class: 'lines' }, m.content)];
  const { content, ...rest } = result;
  const out = [];
  if (typeof content === 'string') out.push(el('pre', { class: 'lines' }, content));
  if (Object.keys(rest).length) out.push(jsonTree(rest), el('details', { class: 'source' }, el('summary', {}, 'as JSON'), el('pre', { class: 'json' }, JSON.stringify(rest, null, 2))));
  return out;
}

/**
 * A JSON value as a tree: its members shown, each object or array a line with its size that opens to its members
 * (built when first opened, so a large result costs only what is looked at), each primitive a line of its own.
 */
function jsonTree(value) {
  const tree = el('ul', { class: 'json-tree' });
  tree.append(...members(value));
  return tree;
}

function members(value) {
  return Object.entries(value).map(([key, v]) => jsonNode(Array.isArray(value) ? `[${key}]` : key, v));
}

function jsonNode(key, value) {
  if (value === null || typeof value !== 'object') {
    const kind = value === null ? 'null' : typeof value;
    return el('li', {}, el('span', { class: 'key' }, key), ': ', el('span', { class: `value ${kind}` }, JSON.stringify(value)));
  }
  const size = Array.isArray(value) ? `[${value.length}]` : `{${Object.keys(value).length}}`;
  const children = el('ul');
  const node = el('details', {}, el('summary', {}, el('span', { class: 'key' }, key), ' ', el('span', { class: 'size' }, size)), children);
  node.addEventListener('toggle', () => node.open && !children.childElementCount && children.append(...members(value)));
  return el('li', {}, node);
}

function messageItem(m) {
  const failed = m.role === 'tool' && m.isError;
  const classes = ['message', m.role, m.cut ? `cut-${m.cut}` : '', failed ? 'failed' : ''].filter(Boolean).join(' ');
  let result;
  if (m.role === 'tool') {
    try {
      result = JSON.parse(m.content);
    } catch {
      result = undefined; // cut by the cap: the text as stored
    }
  }
  const who = m.role === 'tool' ? `tool · ${m.name}` : m.role;
  const head = el(
    'div',
    { class: 'message-head' },
    el('span', { class: 'who' }, who),
    m.role === 'tool' ? el('span', { class: 'step' }, toolLine(m, result)) : null,
    m.followup ? el('span', { class: 'badge followup', title: `follow-up ${m.followup}, scheduled by the model` }, 'follow-up') : null,
    m.cut ? el('span', { class: `badge cut ${m.cut}`, title: CUT_TITLES[m.cut] }, CUT_LABELS[m.cut]) : null,
    failed ? el('span', { class: 'badge error' }, 'error') : null,
    m.at ? el('time', { datetime: new Date(m.at).toISOString() }, new Date(m.at).toLocaleTimeString()) : null,
    el('span', { class: 'bytes', title: 'UTF-8 bytes of the content (and tool calls)' }, bytes(m.bytes))
  );
  const calls = m.toolCalls?.length ? el('ul', { class: 'calls' }, m.toolCalls.map((c) => el('li', {}, `→ ${c.name} ${JSON.stringify(c.arguments)}`))) : null;
  let body = null;
  if (m.role === 'tool') body = el('details', { class: 'result' }, el('summary', {}, 'show'), ...resultBody(m, result));
  else if (m.role === 'compaction') body = el('details', { class: 'summary' }, el('summary', {}, 'the summary the model sees from here on'), el('pre', {}, m.content));
  else if (m.role === 'assistant' && m.content) body = [markdown(m.content), el('details', { class: 'source' }, el('summary', {}, 'as text'), el('pre', {}, m.content))];
  else if (m.content) body = el('pre', {}, m.content);
  const recall = m.recall ? el('details', { class: 'recall' }, el('summary', {}, 'notes recalled for this prompt'), el('pre', {}, m.recall)) : null;
  // A compaction record draws the boundary: from here on the model sees the summary instead of the messages above.
  const boundary = m.role === 'compaction' ? el('p', { class: 'boundary' }, m.boundary) : null;
  return el('li', { class: classes, dataset: { index: String(m.index) } }, boundary, head, body, recall, calls);
}

/** A finished prompt's answer, first: the newest assistant message when the run completed. */
function renderAnswer() {
  const s = current.session;
  const last = current.messages[current.messages.length - 1];
  const show = s?.status === 'completed' && last?.role === 'assistant' && last.content;
  $('answer').hidden = !show;
  if (show) $('answer').querySelector('.markdown').replaceWith(markdown(last.content));
}

function renderHead() {
  const s = current.session;
  $('session-title').textContent = s ? s.session_id : 'New session';
  $('copy-id').hidden = !s;
  $('session-status').hidden = !s;
  $('last-error').hidden = !s?.lastError;
  $('last-error').textContent = s?.lastError ?? '';
  $('cancel-run').hidden = !(s && (s.status === 'running' || s.status === 'awaiting_approval'));
  $('delete-session').hidden = !s || s.status === 'running' || s.status === 'awaiting_approval';
  $('send').disabled = !!s && (s.status === 'running' || s.status === 'awaiting_approval');
  if (!s) {
    $('session-meta').textContent = '';
    $('approvals').replaceChildren();
    return;
  }
  $('session-status').className = `status ${s.status}`;
  $('session-status').textContent = s.status;
  $('session-meta').textContent = `${s.provider}${s.model ? ` / ${s.model}` : ''} · ${s.messageCount} messages · ${bytes(s.bytes)}`;
  $('approvals').replaceChildren(
    ...s.pendingApprovals.map((p) =>
      el(
        'div',
        { class: 'approval', dataset: { approval: p.approval_id } },
        el('strong', {}, `${p.name} needs your approval`),
        el('pre', {}, JSON.stringify(p.arguments, null, 2)),
        el(
          'div',
          { class: 'actions' },
          el('button', { type: 'button', class: 'approve', onclick: () => answer(p.approval_id, true) }, 'Approve'),
          el('button', { type: 'button', class: 'deny', onclick: () => answer(p.approval_id, false) }, 'Deny')
        )
      )
    )
  );
}

function applyDelta(delta) {
  const ran = current.session?.status === 'running';
  current.session = delta.session;
  const list = $('transcript');
  // Streamed text the stored messages now stand for, or that a failed call left.
  // (A run that ended without storing its answer, e.g. cut short at agent.maxTokens, leaves nothing to show either.)
  const over = delta.session.status !== 'running';
  for (const live of list.querySelectorAll('li.live')) if (over || live.classList.contains('failed') || delta.messages.some((m) => m.index === Number(live.dataset.index))) live.remove();
  if (delta.messages.length || (ran && delta.session.status !== 'running')) {
    showCalls(delta.session.session_id);
    showFollowups(delta.session.session_id);
  }
  for (const m of delta.messages) {
    current.messages[m.index] = m;
    const item = messageItem(m);
    const old = list.querySelector(`li[data-index="${m.index}"]`);
    if (old) old.replaceWith(item);
    else list.append(item);
  }
  renderHead();
  renderAnswer();
  sessionChanged({ ...delta.session, pendingApprovals: delta.session.pendingApprovals.length });
  if (delta.messages.length) list.lastElementChild?.scrollIntoView({ block: 'nearest' });
}

// A streaming model call's text and tool calls as they come, shown where its message will be; the stored message
// replaces it. A failed call's text is marked as not kept, and goes at the next change.
function liveItem(index) {
  let item = $('transcript').querySelector(`li.live[data-index="${index}"]`);
  if (!item) {
    item = el('li', { class: 'message assistant live', dataset: { index: String(index) } }, el('div', { class: 'message-head' }, el('span', { class: 'who' }, 'assistant'), el('span', { class: 'badge writing' }, 'writing…')), el('pre', {}, ''), el('ul', { class: 'calls' }));
    $('transcript').append(item);
  }
  return item;
}

function applyLive(e) {
  if (current.messages[e.index]) return; // already stored
  if (e.kind === 'text') {
    // Joined after the call's first piece (`at` > 0): mark the missing start; the stored message comes whole.
    const pre = liveItem(e.index).querySelector('pre');
    pre.append(pre.textContent === '' && e.at > 0 ? `…${e.text}` : e.text);
  }
  else if (e.kind === 'toolCall') liveItem(e.index).querySelector('ul.calls').append(el('li', {}, `→ ${e.toolCall.name} ${JSON.stringify(e.toolCall.arguments)}`));
  else if (e.kind === 'end' && e.failed) {
    const item = $('transcript').querySelector(`li.live[data-index="${e.index}"]`);
    if (item) {
      item.classList.add('failed');
      item.querySelector('.badge').textContent = 'failed: not kept';
    }
  }
  $('transcript').lastElementChild?.scrollIntoView({ block: 'nearest' });
}

const usd = (n) => `$${n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;

// The session's model calls: one row per provider request, totals in the summary.
async function showCalls(id) {
  let answer;
  try {
    answer = await operation({ operation: 'list_agent_model_calls', session_id: id });
  } catch {
    return;
  }
  if (current.id !== id) return;
  const t = answer.totals;
  // The cache's share of the input: what the provider read from its prompt cache, billed at a fraction of the price.
  const cached = t.cacheReadTokens ? ` · ${t.cacheReadTokens.toLocaleString('en-US')} read from the cache (${Math.round((t.cacheReadTokens / t.inputTokens) * 100)}%)` : '';
  $('calls-summary').textContent = `Model calls: ${t.requests} request${t.requests === 1 ? '' : 's'} · ${t.inputTokens.toLocaleString('en-US')} in / ${t.outputTokens.toLocaleString('en-US')} out tokens${cached} · ${usd(t.costUsd)}`;
  $('calls').hidden = false;
  annotateSteps(answer.calls);
  $('calls').querySelector('tbody').replaceChildren(
    ...answer.calls.map((c) =>
      el(
        'tr',
        { class: c.errorClass ? 'failed' : '' },
        el('td', {}, new Date(c.at).toLocaleTimeString()),
        el('td', {}, `${c.provider} · ${c.host}`),
        el('td', {}, c.model),
        el('td', { class: 'num' }, bytes(c.requestBytes)),
        el('td', { class: 'num' }, c.inputTokens ?? '–'),
        el('td', { class: 'num' }, c.cacheReadTokens ?? '–'),
        el('td', { class: 'num' }, c.outputTokens ?? '–'),
        el('td', { class: 'num' }, `${c.latencyMs} ms`),
        el('td', {}, c.status ?? 'none'),
        el('td', {}, c.errorClass ?? ''),
        el('td', { class: 'num' }, c.costUsd === null ? '–' : usd(c.costUsd))
      )
    )
  );
}

/**
 * Each model call beside the step it made: an assistant message (a turn) or a compaction record (its summary calls).
 * A call's record is written when it ends, before its message is stored and after the message before it was: the
 * last step of its kind with the message before it stored at or before the call, and itself at or after it.
 */
function annotateSteps(calls) {
  const usage = new Map();
  const messages = current.messages;
  for (const c of calls) {
    const kind = c.purpose === 'compaction' ? 'compaction' : 'assistant';
    for (let i = messages.length - 1; i > 0; i--) {
      const m = messages[i];
      if (m?.role !== kind || !m.at || !messages[i - 1]?.at) continue;
      if (messages[i - 1].at <= c.at && c.at <= m.at) {
        const u = usage.get(i) ?? { requests: 0, input: 0, cached: 0, output: 0, cost: 0, priced: true, ms: 0 };
        u.requests++;
        u.input += c.inputTokens ?? 0;
        u.cached += c.cacheReadTokens ?? 0;
        u.output += c.outputTokens ?? 0;
        u.ms += c.latencyMs;
        if (c.costUsd === null) u.priced = false;
        else u.cost += c.costUsd;
        usage.set(i, u);
        break;
      }
    }
  }
  for (const [index, u] of usage) {
    const head = $('transcript').querySelector(`li[data-index="${index}"] .message-head`);
    if (!head) continue;
    head.querySelector('.usage')?.remove();
    const cached = u.cached ? ` · ${Math.round((u.cached / u.input) * 100)}% cached` : '';
    const text = `${u.input.toLocaleString('en-US')} in${cached} · ${u.output.toLocaleString('en-US')} out · ${u.priced ? usd(u.cost) : 'no price'}`;
    head.querySelector('.bytes').before(el('span', { class: 'usage', title: `${u.requests} model request${u.requests === 1 ? '' : 's'}, ${u.ms} ms (list_agent_model_calls)` }, text));
  }
}

function select(id) {
  current.feed?.close();
  current = { id, session: null, messages: [], feed: null };
  $('transcript').replaceChildren();
  $('followups').replaceChildren();
  $('calls').hidden = true;
  $('calls-summary').textContent = '';
  notice(null);
  location.hash = id ? `session=${encodeURIComponent(id)}` : '';
  renderHead();
  renderAnswer();
  renderSessions();
  if (!id) return;
  const feed = new EventSource(`api/sessions/${encodeURIComponent(id)}/events`);
  // A reconnect starts over with a full snapshot.
  feed.onopen = () => {
    current.messages = [];
    $('transcript').replaceChildren();
  };
  feed.addEventListener('session', (e) => applyDelta(JSON.parse(e.data)));
  feed.addEventListener('live', (e) => applyLive(JSON.parse(e.data)));
  feed.addEventListener('deleted', () => notice('This session was deleted.'));
  current.feed = feed;
}

// The session's pending follow-ups (schedule_followup): when each is due and what it will say, with a Cancel button.
async function showFollowups(id) {
  let answer;
  try {
    answer = await operation({ operation: 'list_agent_followups', session_id: id, status: 'pending' });
  } catch {
    return;
  }
  if (current.id !== id) return;
  $('followups').replaceChildren(
    ...answer.followups.map((f) =>
      el(
        'div',
        { class: 'followup', dataset: { followup: f.followup_id } },
        el('strong', {}, 'Follow-up due '),
        el('time', { datetime: new Date(f.dueAt).toISOString() }, new Date(f.dueAt).toLocaleString()),
        el('pre', {}, f.message),
        el('button', { type: 'button', class: 'cancel-followup', onclick: () => cancelFollowup(id, f.followup_id) }, 'Cancel follow-up')
      )
    )
  );
}

async function cancelFollowup(id, followupId) {
  notice(null);
  try {
    await operation({ operation: 'cancel_agent_followup', followup_id: followupId });
  } catch (error) {
    notice(error.message);
  }
  showFollowups(id);
}

// Deletes the open session and everything of it, once the operator confirms.
$('delete-session').addEventListener('click', async () => {
  const id = current.id;
  if (!id || !confirm(`Delete session ${id} with its messages, model calls and follow-ups? This cannot be undone.`)) return;
  notice(null);
  try {
    await operation({ operation: 'delete_agent_session', session_id: id });
    sessions.delete(id);
    select(null);
  } catch (error) {
    notice(error.message);
  }
});

async function answer(approvalId, approved) {
  notice(null);
  try {
    await operation({ operation: 'approve_agent_action', session_id: current.id, approval_id: approvalId, approved });
  } catch (error) {
    notice(error.message);
  }
}

$('prompt-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const message = $('prompt').value.trim();
  if (!message) return;
  notice(null);
  $('send').disabled = true;
  try {
    const started = await operation({ operation: 'agent_prompt', message, ...(current.id ? { session_id: current.id } : {}) });
    $('prompt').value = '';
    if (started.session_id !== current.id) select(started.session_id);
  } catch (error) {
    notice(error.message);
    $('send').disabled = false;
  }
});

$('cancel-run').addEventListener('click', async () => {
  try {
    await operation({ operation: 'cancel_agent_run', session_id: current.id });
  } catch (error) {
    notice(error.message);
  }
});

$('new-session').addEventListener('click', () => select(null));
$('copy-id').addEventListener('click', () => void navigator.clipboard?.writeText(current.id).then(() => notice(null), () => undefined));

// ---- the caller's access: role, file scopes and each tool's policy (agent.toolPolicy), from get_agent_status ----

const POLICY_TITLES = { allow: 'runs without asking', ask: 'the run pauses for your approval', deny: 'not offered to the model' };

async function loadAccess() {
  try {
    const { access } = await operation({ operation: 'get_agent_status' });
    $('access-who').textContent = `${access.user ?? 'no user'} · role ${access.role ?? 'none'}${access.superUser ? ' (super_user)' : ''} · file scopes: ${access.scopes.join(', ') || 'none'}`;
    $('access-tools').tBodies[0].replaceChildren(
      ...Object.entries(access.toolPolicy)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([tool, policy]) => el('tr', { dataset: { tool } }, el('td', { class: 'id' }, tool), el('td', {}, el('span', { class: `policy ${policy}`, title: POLICY_TITLES[policy] }, policy))))
    );
  } catch (error) {
    $('access-who').textContent = `could not read the policy: ${error.message}`;
  }
}

// ---- watches: each with its trigger, last firing and report; test, pause or resume, delete; a new one from JSON ----

function watchActions(w) {
  const act = (label, body, cls) => el('button', { type: 'button', class: cls ?? '', onclick: () => void watchOperation(body) }, label);
  return [
    act('Test', { operation: 'test_agent_watch', watch_id: w.watch_id }, 'test'),
    w.status === 'active' ? act('Pause', { operation: 'update_agent_watch', watch_id: w.watch_id, status: 'paused' }, 'pause') : act('Resume', { operation: 'update_agent_watch', watch_id: w.watch_id, status: 'active' }, 'resume'),
    act('Delete', { operation: 'delete_agent_watch', watch_id: w.watch_id }, 'danger delete'),
  ];
}

function renderWatches(watches) {
  $('watches').tBodies[0].replaceChildren(
    ...watches.map((w) => {
      const r = w.lastReport;
      const found = r ? (r.whatHappened ?? r.answer ?? r.lastError ?? r.status) : '';
      return el(
        'tr',
        { dataset: { id: w.watch_id } },
        el('td', { class: 'name', title: w.watch_id }, w.name),
        el('td', {}, el('span', { class: `status ${w.status}`, title: w.stoppedReason ?? '' }, w.status)),
        el('td', { class: 'trigger' }, w.trigger.description),
        el('td', { class: 'fired' }, w.lastFiredAt ? new Date(w.lastFiredAt).toLocaleString() : 'never'),
        el('td', { class: 'report' }, r ? el('a', { href: `#session=${r.session_id}`, onclick: () => select(r.session_id), title: found }, found.length > 120 ? `${found.slice(0, 119)}…` : found) : ''),
        el('td', { class: 'delivery' }, w.lastDelivery ? `${w.lastDelivery.status} (${w.lastDelivery.attempts})` : ''),
        el('td', { class: 'actions' }, ...watchActions(w))
      );
    })
  );
  $('no-watches').hidden = watches.length > 0;
}

async function loadWatches() {
  try {
    renderWatches((await operation({ operation: 'list_agent_watches' })).watches);
  } catch (error) {
    notice(error.message);
  }
}

/** An operation from a button: its error as the notice, then the panel read again; `ask` confirms it first. */
async function act(body, reload, ask) {
  notice(null);
  if (ask && !confirm(ask)) return;
  try {
    await operation(body);
  } catch (error) {
    notice(error.message);
  }
  await reload();
}

const watchOperation = (body) => act(body, loadWatches, body.operation === 'delete_agent_watch' ? "Delete this watch? Its runs' sessions stay." : undefined);

$('watch-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  let definition;
  try {
    definition = JSON.parse($('watch-definition').value);
  } catch (error) {
    return notice(`The watch is JSON: ${error.message}`);
  }
  await watchOperation({ operation: 'create_agent_watch', ...definition });
});

// ---- notes: the agent's memory of this instance; each can be edited in place or deleted ----

function renderNotes(notes) {
  $('notes').tBodies[0].replaceChildren(
    ...notes.map((n) => {
      const text = el('td', { class: 'text' }, n.text);
      const editButton = el('button', { type: 'button', class: 'edit' }, 'Edit');
      const row = el(
        'tr',
        { dataset: { id: n.note_id } },
        text,
        el('td', { class: 'scope' }, n.scope ? `${n.scope.kind} ${n.scope.name}` : ''),
        el('td', { class: 'by', title: new Date(n.updatedAt).toLocaleString() }, n.user ?? ''),
        el('td', { class: 'actions' }, editButton, el('button', { type: 'button', class: 'danger delete', onclick: () => void noteOperation({ operation: 'delete_agent_note', note_id: n.note_id }, 'Delete this note?') }, 'Delete'))
      );
      editButton.addEventListener('click', () => {
        const area = el('textarea', { rows: 3, maxlength: 1000 });
        area.value = n.text;
        text.replaceChildren(area, el('button', { type: 'button', class: 'save', onclick: () => void noteOperation({ operation: 'update_agent_note', note_id: n.note_id, text: area.value }) }, 'Save'), el('button', { type: 'button', class: 'cancel', onclick: () => void loadNotes() }, 'Cancel'));
        area.focus();
      });
      return row;
    })
  );
  $('no-notes').hidden = notes.length > 0;
}

async function loadNotes() {
  try {
    renderNotes((await operation({ operation: 'list_agent_notes' })).notes);
  } catch (error) {
    notice(error.message);
  }
}

const noteOperation = (body, ask) => act(body, loadNotes, ask);

$('note-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const text = $('note-text').value.trim();
  if (!text) return;
  await noteOperation({ operation: 'add_agent_note', text });
  $('note-text').value = '';
});

// ---- settings and status: get_agent_status and get_agent_config, a key changed with set_agent_config ----

/** A typed value as set_agent_config takes it: JSON where it parses (numbers, booleans, lists), else text; empty takes
 * the stored change back (null). */
function parseValue(text) {
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function loadSettings() {
  const status = await operation({ operation: 'get_agent_status' });
  $('warnings').replaceChildren(...(status.warnings ?? []).map((w) => el('li', {}, w)));
  $('status-line').textContent = `agent ${status.version} on node ${status.node ?? '(none)'} · provider ${status.config.provider}${status.config.model ? ` / ${status.config.model}` : ''} · backends: ${status.providers.join(', ')} · API key ${status.config.apiKey ? 'set' : 'not set'}`;
  let config;
  try {
    config = await operation({ operation: 'get_agent_config' });
  } catch {
    // Not a super_user: the status is all there is to see.
    $('config-form').hidden = true;
    $('config-table').hidden = true;
    return;
  }
  const persisted = status.persisted ?? {};
  const keys = [...new Set([...Object.keys(config), ...Object.keys(persisted)])].sort();
  const selected = $('config-key').value;
  $('config-key').replaceChildren(...keys.map((k) => el('option', { value: k }, k)));
  if (selected) $('config-key').value = selected;
  const shown = (v) => (v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));
  $('config-table').tBodies[0].replaceChildren(...keys.map((k) => el('tr', { dataset: { key: k } }, el('td', { class: 'id' }, k), el('td', { class: 'value' }, shown(config[k])), el('td', { class: 'stored' }, shown(persisted[k])))));
}

$('open-settings').addEventListener('click', () => {
  $('settings').hidden = false;
  loadSettings().catch((error) => notice(error.message));
});
$('close-settings').addEventListener('click', () => ($('settings').hidden = true));
$('config-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  notice(null);
  try {
    await operation({ operation: 'set_agent_config', [$('config-key').value]: parseValue($('config-value').value) });
    $('config-value').value = '';
  } catch (error) {
    notice(error.message);
  }
  await loadSettings().catch((error) => notice(error.message));
});

followList();
loadAccess();
loadNotes();
loadWatches();
setInterval(loadWatches, 3000);
const fromHash = /session=([^&]+)/.exec(location.hash);
select(fromHash ? decodeURIComponent(fromHash[1]) : null);

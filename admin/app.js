// The agent's admin page: a live session list, a live transcript with each message's size and cut marks, a prompt
// box and approve/deny buttons. Plain DOM, no build step; the server sends only what changed (agent/sessionFeed.ts).

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

// ---- the session list ----

function renderSessions() {
  const body = $('sessions').tBodies[0];
  const rows = [...sessions.values()].sort((a, b) => b.updatedAt - a.updatedAt);
  body.replaceChildren(
    ...rows.map((s) =>
      el(
        'tr',
        { dataset: { id: s.session_id }, class: s.session_id === current.id ? 'selected' : '', onclick: () => select(s.session_id) },
        el('td', { class: 'id', title: s.session_id }, s.session_id.slice(0, 8)),
        el('td', {}, el('span', { class: `status ${s.status}` }, s.status)),
        el('td', { class: 'num' }, String(s.messageCount)),
        el('td', { class: 'num bytes' }, bytes(s.bytes)),
        el('td', { class: 'error', title: s.lastError ?? '' }, s.lastError ?? '')
      )
    )
  );
  $('no-sessions').hidden = rows.length > 0;
}

function followList() {
  const feed = new EventSource('api/sessions/events');
  feed.onopen = () => ($('connection').textContent = 'live');
  feed.onerror = () => ($('connection').textContent = 'reconnecting…');
  feed.addEventListener('sessions', (e) => {
    sessions.clear();
    for (const s of JSON.parse(e.data)) sessions.set(s.session_id, s);
    renderSessions();
  });
  feed.addEventListener('session', (e) => {
    const s = JSON.parse(e.data);
    sessions.set(s.session_id, s);
    renderSessions();
  });
  feed.addEventListener('deleted', (e) => {
    sessions.delete(JSON.parse(e.data).session_id);
    renderSessions();
  });
}

// ---- one session ----

function messageItem(m) {
  const failed = m.role === 'tool' && m.isError;
  const classes = ['message', m.role, m.cut ? `cut-${m.cut}` : '', failed ? 'failed' : ''].filter(Boolean).join(' ');
  const who = m.role === 'tool' ? `tool · ${m.name}` : m.role;
  const head = el(
    'div',
    { class: 'message-head' },
    el('span', { class: 'who' }, who),
    m.cut ? el('span', { class: `badge cut ${m.cut}`, title: CUT_TITLES[m.cut] }, CUT_LABELS[m.cut]) : null,
    failed ? el('span', { class: 'badge error' }, 'error') : null,
    m.at ? el('time', { datetime: new Date(m.at).toISOString() }, new Date(m.at).toLocaleTimeString()) : null,
    el('span', { class: 'bytes', title: 'UTF-8 bytes of the content (and tool calls)' }, bytes(m.bytes))
  );
  const calls = m.toolCalls?.length ? el('ul', { class: 'calls' }, m.toolCalls.map((c) => el('li', {}, `→ ${c.name} ${JSON.stringify(c.arguments)}`))) : null;
  return el('li', { class: classes, dataset: { index: String(m.index) } }, head, m.content ? el('pre', {}, m.content) : null, calls);
}

function renderHead() {
  const s = current.session;
  $('session-title').textContent = s ? s.session_id : 'New session';
  $('session-status').hidden = !s;
  $('last-error').hidden = !s?.lastError;
  $('last-error').textContent = s?.lastError ?? '';
  $('cancel-run').hidden = !(s && (s.status === 'running' || s.status === 'awaiting_approval'));
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
  current.session = delta.session;
  const list = $('transcript');
  for (const m of delta.messages) {
    current.messages[m.index] = m;
    const item = messageItem(m);
    const old = list.querySelector(`li[data-index="${m.index}"]`);
    if (old) old.replaceWith(item);
    else list.append(item);
  }
  renderHead();
  sessions.set(delta.session.session_id, { ...delta.session, pendingApprovals: delta.session.pendingApprovals.length });
  renderSessions();
  if (delta.messages.length) list.lastElementChild?.scrollIntoView({ block: 'nearest' });
}

function select(id) {
  current.feed?.close();
  current = { id, session: null, messages: [], feed: null };
  $('transcript').replaceChildren();
  notice(null);
  location.hash = id ? `session=${encodeURIComponent(id)}` : '';
  renderHead();
  renderSessions();
  if (!id) return;
  const feed = new EventSource(`api/sessions/${encodeURIComponent(id)}/events`);
  // A reconnect starts over with a full snapshot.
  feed.onopen = () => {
    current.messages = [];
    $('transcript').replaceChildren();
  };
  feed.addEventListener('session', (e) => applyDelta(JSON.parse(e.data)));
  feed.addEventListener('deleted', () => notice('This session was deleted.'));
  current.feed = feed;
}

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

followList();
const fromHash = /session=([^&]+)/.exec(location.hash);
select(fromHash ? decodeURIComponent(fromHash[1]) : null);

// export_agent_session: a whole session for an incident report, as Markdown or JSON, produced one message at a time
// (the store's message iterator) so a large session is streamed, never built as one string.
import { compactionBoundary, type StoredMessage } from './compaction.js';
import type { Followup } from './followups.js';
import type { CallTotals } from './modelCalls.js';
import type { SessionHeader } from './session.js';
import { CUT_NOTES, messageView } from './sessionFeed.js';

export type ExportFormat = 'markdown' | 'json';
export const EXPORT_FORMATS: ExportFormat[] = ['markdown', 'json'];

export interface ExportParts {
  header: SessionHeader;
  messages: AsyncIterable<StoredMessage & { seq: number }>;
  modelCalls: CallTotals;
  followups: Followup[];
}

const iso = (ms: number) => new Date(ms).toISOString();

/** A fence longer than any run of backticks in `text`, so a result holding ``` cannot end its block early. */
function fence(text: string): string {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  return '`'.repeat(Math.max(3, longest + 1));
}

function block(text: string, lang = ''): string {
  const f = fence(text);
  return `${f}${lang}\n${text}${text.endsWith('\n') ? '' : '\n'}${f}\n`;
}

export async function* exportMarkdown(p: ExportParts): AsyncGenerator<string> {
  const h = p.header;
  const t = p.modelCalls;
  yield (
    `# Harper Agent session ${h.session_id}\n\n` +
    (h.title ? `**${h.title.replace(/\n/g, ' ')}**\n\n` : '') +
    `- status: ${h.status}${h.lastError ? ` (last error: ${h.lastError})` : ''}\n` +
    `- provider / model: ${h.provider}${h.model ? ` / ${h.model}` : ''}\n` +
    `- user: ${h.user ?? '(none)'} · node: ${h.node ?? '(none)'}\n` +
    `- created ${iso(h.createdAt)} · updated ${iso(h.updatedAt)}\n` +
    `- ${h.messageCount} messages, ${h.bytes.toLocaleString('en-US')} bytes\n` +
    `- model calls: ${t.requests} requests (${t.failed} failed), ${t.inputTokens.toLocaleString('en-US')} input / ${t.outputTokens.toLocaleString('en-US')} output tokens, $${t.costUsd.toFixed(4)}, ${t.latencyMs.toLocaleString('en-US')} ms\n\n` +
    `## Transcript\n`
  );
  for await (const m of p.messages) {
    const v = messageView(m, m.seq);
    const at = m.at !== undefined ? ` · ${iso(m.at)}` : '';
    const size = ` · ${v.bytes.toLocaleString('en-US')} bytes`;
    if (m.role === 'compaction') {
      yield `\n### #${m.seq} compaction${at}${size}\n\n> ${compactionBoundary(m)}\n\n${block(m.content)}`;
      continue;
    }
    const who = m.role === 'tool' ? `tool ${m.name}` : m.role === 'user' && m.followup ? `user (follow-up ${m.followup})` : m.role;
    const notes = [m.role === 'tool' && m.cut ? CUT_NOTES[m.cut] : '', m.role === 'tool' && m.isError ? 'error' : ''].filter(Boolean);
    let out = `\n### #${m.seq} ${who}${at}${size}${notes.length ? ` [${notes.join(', ')}]` : ''}\n\n`;
    if (m.role === 'tool') out += block(m.content, 'json');
    else if (m.content) out += block(m.content);
    // A fence opens a line of its own, or Markdown renderers do not see a block.
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) out += `\n→ \`${c.name}\`\n\n${block(JSON.stringify(c.arguments), 'json')}`;
    if (m.role === 'user' && m.recall) out += `\nRecalled for this prompt (agent memory):\n\n${block(m.recall)}`;
    yield out;
  }
  if (h.pendingApprovals.length) {
    yield `\n## Pending approvals\n\n${h.pendingApprovals.map((a) => `- ${a.approval_id}: \`${a.name}\` ${JSON.stringify(a.arguments)}`).join('\n')}\n`;
  }
  if (p.followups.length) {
    yield `\n## Follow-ups\n\n${p.followups.map((f) => `- ${f.followup_id} · ${f.status} · due ${iso(f.dueAt)}: ${f.message.replace(/\n/g, ' ')}`).join('\n')}\n`;
  }
}

export async function* exportJson(p: ExportParts): AsyncGenerator<string> {
  yield `{"session":${JSON.stringify({ ...p.header, modelCalls: p.modelCalls, followups: p.followups })},"messages":[`;
  let first = true;
  for await (const m of p.messages) {
    const { seq, ...message } = m;
    yield `${first ? '' : ','}\n${JSON.stringify({ index: seq, ...message })}`;
    first = false;
  }
  yield '\n]}\n';
}

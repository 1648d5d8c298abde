// The embedded `local` backend: deterministic, NOT a language model. It lets the product run with no API key and
// drives the real loop and tools: for a prompt naming a file in a scope (logs/hdb.log, config, components/x/y.js)
// it pages through the file with read_file to the end, then answers with line counts and the lines that mention
// "error". Its every decision is derived from the transcript, so it survives approvals and restarts. As the system
// prompt asks of a model, it notes what it needs from each page as it reads (older pages are cut by the working set).
import { promptText } from './backendHelpers.js';
import type { BackendRegistration } from './models.js';
import type { GenerateInput, GenerateOutput, Message, ModelBackend, ToolMessage } from './types.js';

const REF = /\b(logs|components|config)(?:\/([^\s"'`,;]*))?/;
/** "write components/<path>: <content>" asks for a write_file (which waits for approval). */
const WRITE = /^write components\/([^\s:]+):\s?([\s\S]*)$/;
const ERROR_LINE = /error/i;
const SHOWN_ERRORS = 5;

interface Page {
  path: string;
  size: number;
  startLine: number;
  content: string;
  nextLine?: number;
  nextOffset?: number;
  totalLines?: number;
  lineTruncated?: boolean;
  error?: string;
}

function parse(message: ToolMessage): Page | null {
  try {
    return JSON.parse(message.content) as Page;
  } catch {
    return null; // cut by the cap, or after a context-window rejection
  }
}

export function parseFileReference(prompt: string): { root: string; path: string } | null {
  const m = REF.exec(prompt);
  if (!m) return null;
  return { root: m[1]!, path: (m[2] ?? '').replace(/[.)!?]+$/, '') };
}

/**
 * What the backend keeps of the pages read so far for the prompt, written as the text of its next call: a running
 * tally through the newest page, so the newest note alone answers once older pages are cut by the working set or
 * compacted away (a summary cut inside the prompt's turn keeps the newest model turn, whose text is that note).
 */
interface Note {
  path: string;
  size: number;
  /** The newest page's lines, and how many of them mention "error". */
  startLine: number;
  endLine: number;
  pageErrors: number;
  totalLines?: number;
  /** Through the newest page: pages read (and cut before they were noted), bytes of text, lines that mention "error"
   * (a long line read in parts spans two pages: counted once), the newest such line, and the first few. */
  pages: number;
  unread: number;
  bytes: number;
  errors: number;
  lastError?: number;
  shown: [number, string][];
}

/** A note reads as a sentence, then carries its data as JSON for the backend to read back. */
const NOTED = 'Noted ';
const noteText = (n: Note) => `${NOTED}lines ${n.startLine}-${n.endLine} of ${n.path}: ${n.pageErrors} mention "error". ${JSON.stringify(n)}`;
const readNote = (text: string): Note | null => (text.startsWith(NOTED) && text.includes('{') ? (JSON.parse(text.slice(text.indexOf('{'))) as Note) : null);

/** The tally with one more page. */
function addPage(before: Note | null, page: Page): Note {
  const errorLines: number[] = [];
  const shown: [number, string][] = [...(before?.shown ?? [])];
  page.content.split('\n').forEach((line, i) => {
    if (!ERROR_LINE.test(line)) return;
    const at = page.startLine + i;
    errorLines.push(at);
    if (shown.length < SHOWN_ERRORS && shown.at(-1)?.[0] !== at) shown.push([at, line.replace(/\r$/, '').slice(0, 160)]);
  });
  const lines = page.content.split('\n').length - (page.content.endsWith('\n') ? 1 : 0);
  const continued = before?.lastError !== undefined && errorLines[0] === before.lastError ? 1 : 0;
  const note: Note = {
    path: page.path,
    size: page.size,
    startLine: page.startLine,
    endLine: page.startLine + Math.max(lines, 1) - 1,
    pageErrors: errorLines.length,
    pages: (before?.pages ?? 0) + 1,
    unread: before?.unread ?? 0,
    bytes: (before?.bytes ?? 0) + Buffer.byteLength(page.content),
    errors: (before?.errors ?? 0) + errorLines.length - continued,
    shown,
  };
  const lastError = errorLines.at(-1) ?? before?.lastError;
  if (lastError !== undefined) note.lastError = lastError;
  if (page.totalLines !== undefined) note.totalLines = page.totalLines;
  return note;
}

/** The tally through the newest page read since the prompt: the newest note written (through the page before it),
 * plus the pages after it; an unreadable page counts as unread; a page that failed is the answer. */
function tallySince(since: Message[]): Note | { error: string } | null {
  let tally: Note | null = null;
  let unread = 0; // pages cut before any tally: added to the first one
  for (let i = 0; i < since.length; i++) {
    const m = since[i]!;
    if (m.role === 'assistant') tally = readNote(m.content) ?? tally;
    if (m.role !== 'tool' || m.name !== 'read_file') continue;
    const next = since[i + 1];
    if (next?.role === 'assistant' && readNote(next.content)) continue; // that note counts this page
    const page = parse(m);
    if (page?.error) return { error: page.error };
    if (page && typeof page.content === 'string') {
      tally = addPage(tally, page);
      tally.unread += unread;
      unread = 0;
    } else if (tally) tally = { ...tally, unread: tally.unread + 1 };
    else unread++;
  }
  return tally;
}

function summarize(ref: { root: string; path: string }, since: Message[]): string {
  const end = tallySince(since);
  if (end && 'error' in end) return `I could not read ${ref.root}/${ref.path}: ${end.error}`;
  if (!end) return `I could not read ${ref.root}/${ref.path}: the tool result was cut before I could parse it.`;
  const lines = end.totalLines !== undefined ? `${end.totalLines} lines` : `at least ${end.startLine} lines`;
  let text = `${end.path}: ${lines}, ${end.size} bytes, read in ${end.pages} page(s)${end.unread ? ` (${end.unread} page(s) were cut and not parsed)` : ''}; ${end.bytes} bytes of text seen.`;
  if (end.errors === 0) return `${text} No line mentions "error".`;
  text += ` ${end.errors} line(s) mention "error"; the first ${end.shown.length}:`;
  for (const [line, content] of end.shown) text += `\n- line ${line}: ${content}`;
  return text;
}

const HELP =
  'I am the embedded local backend: deterministic, not a language model. Name a file in a scope, for example ' +
  '"summarize logs/hdb.log", "read config" or "read components/my-app/resources.js", and I will page through it ' +
  'with read_file and report its line count and the lines that mention "error"; "write components/<path>: <text>" ' +
  'writes a file once you approve it. Set agent.provider (openai, ' +
  'anthropic or bedrock) for a real model.';

/** In a compaction record's working state: the call that reads `ref`'s next page, and the newest note it can parse
 * (the tally of the pages read before the compaction). */
function resumeFrom(summary: string, ref: { root: string; path: string }): { args: Record<string, unknown>; note: Note | null } | null {
  if (!summary.includes('=== Working state')) return null;
  let args: Record<string, unknown> | null = null;
  let note: Note | null = null;
  for (const line of summary.split('\n')) {
    try {
      if (line.startsWith('- read_file {')) {
        const a = JSON.parse(line.slice('- read_file '.length, line.lastIndexOf('}') + 1)) as Record<string, unknown>;
        if (a.root === ref.root && a.path === ref.path && a.offset !== undefined) args = a;
      } else if (line.startsWith('- note: ')) {
        const n = readNote(line.slice('- note: '.length));
        if (n && n.path.endsWith(ref.path)) note = n;
      }
    } catch {
      // a clipped line: not this one
    }
  }
  return args ? { args, note } : null;
}

export class LocalBackend implements ModelBackend {
  readonly provider = 'local';

  async generate(input: GenerateInput, signal: AbortSignal): Promise<GenerateOutput> {
    if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
    const messages = input.messages;
    let u = messages.length - 1;
    while (u >= 0 && messages[u]!.role !== 'user') u--;
    // After a compaction cut inside this prompt's turn, the newest user message is the summary restating the prompt.
    const prompt = u >= 0 ? promptText((messages[u] as Extract<Message, { role: 'user' }>).content) : '';
    const since = messages.slice(u + 1);
    const results = since.filter((m): m is ToolMessage => m.role === 'tool');
    const usage = { inputTokens: Math.ceil(Buffer.byteLength(JSON.stringify(input)) / 4), outputTokens: 0 };
    const answer = (text: string): GenerateOutput => ({ text, toolCalls: [], finishReason: 'stop', usage: { ...usage, outputTokens: Math.ceil(text.length / 4) } });
    const call = (name: string, args: Record<string, unknown>, text = ''): GenerateOutput => ({
      text,
      toolCalls: [{ id: `local_${messages.length}`, name, arguments: args }],
      finishReason: 'tool_calls',
      usage,
    });

    const write = WRITE.exec(prompt);
    if (write) {
      if (results.length === 0) return call('write_file', { root: 'components', path: write[1], content: write[2] });
      const r = parse(results[results.length - 1]!) as unknown as { bytes?: number; error?: string } | null;
      return answer(r?.error ? `I did not write components/${write[1]}: ${r.error}` : `I wrote ${r?.bytes} bytes to components/${write[1]}.`);
    }
    const ref = parseFileReference(prompt);
    if (!ref) return answer(HELP);
    const listing = ref.root !== 'config' && (ref.path === '' || ref.path.endsWith('/'));
    if (results.length === 0) {
      if (listing) return call('list_dir', { root: ref.root, path: ref.path });
      // A compaction cut inside this prompt's turn: go on from the read its working state names, as a model would.
      const resume = u >= 0 ? resumeFrom((messages[u] as Extract<Message, { role: 'user' }>).content, ref) : null;
      return resume ? call('read_file', resume.args, resume.note ? noteText(resume.note) : '') : call('read_file', { root: ref.root, path: ref.path });
    }
    const last = results[results.length - 1]!;
    const page = parse(last);
    if (last.name === 'list_dir') {
      const listed = page as unknown as { entries?: { name: string; type: string; size?: number }[]; total?: number; error?: string } | null;
      if (!listed || listed.error || !listed.entries) return answer(`I could not list ${ref.root}/${ref.path}: ${listed?.error ?? 'the result was cut'}`);
      const names = listed.entries.map((e) => `${e.name}${e.type === 'dir' ? '/' : ''}`).join(', ');
      return answer(`${ref.root}/${ref.path} has ${listed.total} entries: ${names}`);
    }
    if (page && !page.error && page.nextOffset !== undefined) {
      return call('read_file', { root: ref.root, path: ref.path, startLine: page.nextLine, offset: page.nextOffset }, noteText(tallySince(since) as Note));
    }
    return answer(summarize(ref, since));
  }
}

export const localBackend: BackendRegistration = {
  provider: 'local',
  defaultModel: 'local-deterministic',
  create: () => new LocalBackend(),
};

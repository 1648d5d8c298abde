// The embedded `local` backend: deterministic, NOT a language model. It lets the product run with no API key and
// drives the real loop and tools: for a prompt naming a file in a scope (logs/hdb.log, config, components/x/y.js)
// it pages through the file with read_file to the end, then answers with line counts and the lines that mention
// "error". Its every decision is derived from the transcript, so it survives approvals and restarts.
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

function summarize(ref: { root: string; path: string }, results: ToolMessage[]): string {
  const pages = results.map(parse);
  const ok = pages.filter((p): p is Page => !!p && !p.error && typeof p.content === 'string');
  const last = pages[pages.length - 1];
  if (last?.error) return `I could not read ${ref.root}/${ref.path}: ${last.error}`;
  if (ok.length === 0) return `I could not read ${ref.root}/${ref.path}: the tool result was cut before I could parse it.`;
  const errors = new Map<number, string>();
  let bytes = 0;
  for (const page of ok) {
    bytes += Buffer.byteLength(page.content);
    page.content.split('\n').forEach((line, i) => {
      if (ERROR_LINE.test(line) && !errors.has(page.startLine + i)) errors.set(page.startLine + i, line.replace(/\r$/, '').slice(0, 160));
    });
  }
  const end = ok[ok.length - 1]!;
  const lines = end.totalLines !== undefined ? `${end.totalLines} lines` : `at least ${end.startLine} lines`;
  const unread = pages.length - ok.length;
  let text = `${end.path}: ${lines}, ${end.size} bytes, read in ${ok.length} page(s)${unread ? ` (${unread} page(s) were cut and not parsed)` : ''}; ${bytes} bytes of text seen.`;
  if (errors.size === 0) return `${text} No line mentions "error".`;
  text += ` ${errors.size} line(s) mention "error"; the first ${Math.min(SHOWN_ERRORS, errors.size)}:`;
  for (const [line, content] of [...errors].slice(0, SHOWN_ERRORS)) text += `\n- line ${line}: ${content}`;
  return text;
}

const HELP =
  'I am the embedded local backend: deterministic, not a language model. Name a file in a scope, for example ' +
  '"summarize logs/hdb.log", "read config" or "read components/my-app/resources.js", and I will page through it ' +
  'with read_file and report its line count and the lines that mention "error"; "write components/<path>: <text>" ' +
  'writes a file once you approve it. Set agent.provider (openai, ' +
  'anthropic or bedrock) for a real model.';

export class LocalBackend implements ModelBackend {
  readonly provider = 'local';

  async generate(input: GenerateInput, signal: AbortSignal): Promise<GenerateOutput> {
    if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
    const messages = input.messages;
    let u = messages.length - 1;
    while (u >= 0 && messages[u]!.role !== 'user') u--;
    const prompt = u >= 0 ? (messages[u] as Extract<Message, { role: 'user' }>).content : '';
    const since = messages.slice(u + 1);
    const results = since.filter((m): m is ToolMessage => m.role === 'tool');
    const usage = { inputTokens: Math.ceil(Buffer.byteLength(JSON.stringify(input)) / 4), outputTokens: 0 };
    const answer = (text: string): GenerateOutput => ({ text, toolCalls: [], finishReason: 'stop', usage: { ...usage, outputTokens: Math.ceil(text.length / 4) } });
    const call = (name: string, args: Record<string, unknown>): GenerateOutput => ({
      text: '',
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
    if (results.length === 0) return listing ? call('list_dir', { root: ref.root, path: ref.path }) : call('read_file', { root: ref.root, path: ref.path });
    const last = results[results.length - 1]!;
    const page = parse(last);
    if (last.name === 'list_dir') {
      const listed = page as unknown as { entries?: { name: string; type: string; size?: number }[]; total?: number; error?: string } | null;
      if (!listed || listed.error || !listed.entries) return answer(`I could not list ${ref.root}/${ref.path}: ${listed?.error ?? 'the result was cut'}`);
      const names = listed.entries.map((e) => `${e.name}${e.type === 'dir' ? '/' : ''}`).join(', ');
      return answer(`${ref.root}/${ref.path} has ${listed.total} entries: ${names}`);
    }
    if (page && !page.error && page.nextOffset !== undefined) {
      return call('read_file', { root: ref.root, path: ref.path, startLine: page.nextLine, offset: page.nextOffset });
    }
    return answer(summarize(ref, results.filter((r) => r.name === 'read_file')));
  }
}

export const localBackend: BackendRegistration = {
  provider: 'local',
  defaultModel: 'local-deterministic',
  create: () => new LocalBackend(),
};

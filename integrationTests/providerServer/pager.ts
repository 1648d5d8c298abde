// A scripted "model" for the provider-compatible server: asked anything, it reads the next page of a log with
// read_file (continuing from the newest page it can parse), then says which lines it read. The demo and the
// recovery tests use it to make a conversation grow the way an investigation does.
import type { NeutralRequest, Responder, Turn } from './server.js';

/** The read_file cursor of the newest page that shows one, or the file's start. A page cut by the cap or the
 * context-window shrink may have lost it; one cut by the working set keeps it at its head. */
function newestCursor(req: NeutralRequest): { startLine?: number; offset?: number } {
  let cursor: { startLine?: number; offset?: number } = {};
  for (const m of req.messages) {
    if (m.role !== 'tool') continue;
    const line = /"nextLine":(\d+)/.exec(m.text);
    const offset = /"nextOffset":(\d+)/.exec(m.text);
    if (line && offset) cursor = { startLine: Number(line[1]), offset: Number(offset[1]) };
  }
  return cursor;
}

export function pagerResponder(root: string, file: string): Responder {
  return (req: NeutralRequest): Turn => {
    const last = req.messages[req.messages.length - 1];
    if (last?.role === 'tool') {
      try {
        const page = JSON.parse(last.text);
        if (page.error) return { text: `I could not read ${file}: ${page.error}` };
        return { text: `Read lines ${page.startLine}-${page.endLine} of ${file} (${Buffer.byteLength(page.content)} bytes of text).` };
      } catch {
        return { text: `The page of ${file} was cut before I could read it; I will ask for less next time.` };
      }
    }
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...newestCursor(req) } }] };
  };
}

/** An investigation: reads `turns` pages of a log in one prompt (continuing from the newest page it can parse),
 * then answers. Each request carries every page read so far, so the conversation outgrows a small window. */
export function investigatorResponder(root: string, file: string, turns: number): Responder {
  return (req: NeutralRequest): Turn => {
    let since = req.messages.length - 1;
    while (since >= 0 && req.messages[since]!.role !== 'user') since--;
    const results = req.messages.slice(since + 1).filter((m) => m.role === 'tool');
    if (results.length >= turns) return { text: `Read ${results.length} pages of ${file}.` };
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...newestCursor(req) } }] };
  };
}

/** Reads a log to its end in one prompt, each page from the newest cursor, then says where the file ended. */
export function readerResponder(root: string, file: string): Responder {
  return (req: NeutralRequest): Turn => {
    const last = req.messages[req.messages.length - 1];
    const total = last?.role === 'tool' ? /"totalLines":(\d+)/.exec(last.text) : null;
    if (total) return { text: `Reached the end of ${file}: ${total[1]} lines.` };
    if (last?.role === 'tool' && !/"nextOffset":/.test(last.text)) return { text: `I lost my place in ${file}: ${last.text.slice(0, 200)}` };
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...newestCursor(req) } }] };
  };
}

/** A request the agent sent to have older messages summarized (compaction): it carries the compaction instructions as
 * its system prompt and no tools. */
export const isSummaryRequest = (req: NeutralRequest) => req.tools.length === 0 && (req.systems[0] ?? '').startsWith('You compact the transcript');

/**
 * A long investigation, one prompt after another: each prompt reads `pages` pages of a log (from the newest cursor the
 * request shows; from the start again once the file ended), then answers. Asked for a summary, it writes one naming
 * the newest cursor it was shown, or answers with `onSummary`'s turn (a failure, a hang) when one is given.
 */
export function sessionReader(root: string, file: string, pages: number, onSummary?: (req: NeutralRequest) => Turn | undefined): Responder {
  return (req: NeutralRequest): Turn => {
    if (isSummaryRequest(req)) {
      const special = onSummary?.(req);
      if (special) return special;
      const text = req.messages.map((m) => m.text).join('\n');
      const cursors = [...text.matchAll(/"nextLine":(\d+)/g)];
      return { text: `Investigating ${file}: read up to line ${cursors.at(-1)?.[1] ?? 1}; every 40th request timed out upstream.` };
    }
    let since = req.messages.length - 1;
    while (since >= 0 && req.messages[since]!.role !== 'user') since--;
    const results = req.messages.slice(since + 1).filter((m) => m.role === 'tool');
    // A prompt whose turn a compaction cut restates it in the summary: one more page answers it.
    const cut = since >= 0 && req.messages[since]!.text.includes("The operator's prompt being answered, kept whole");
    if (results.length >= (cut ? 1 : pages)) return { text: `Read ${results.length} more pages of ${file}.` };
    // The newest page the request shows (whole or as a head): at the file's end, start over.
    const newest = req.messages.filter((m) => m.role === 'tool' && /"(nextLine|totalLines)":/.test(m.text)).at(-1);
    const ended = !!newest && !/"nextLine":/.test(newest.text);
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...(ended ? {} : newestCursor(req)) } }] };
  };
}

/**
 * A model that keeps the thread only from what each request holds: the first prompt greps `file` for `needle` and
 * answers with where it is and what it ruled out; every later prompt reads `pages` pages of `file` from the newest
 * cursor the request shows (a page, whole or cut to its head, after the newest summary; else the working state's call
 * for the next page; else the file's start), and says where the file ended. Asked for a summary, it answers
 * `summary` (a scripted summarizer that knows nothing, or a failure so that the digest stands in).
 */
export function threadFollower(root: string, file: string, pages: number, needle: string, summary: Turn): Responder {
  return (req: NeutralRequest): Turn => {
    if (isSummaryRequest(req)) return summary;
    let since = req.messages.length - 1;
    while (since >= 0 && req.messages[since]!.role !== 'user') since--;
    const results = req.messages.slice(since + 1).filter((m) => m.role === 'tool');
    const last = results.at(-1);
    if (last?.text.includes('"matches":')) {
      const match = new RegExp(`"line":(\\d+),"text":"[^"]*${needle}`).exec(last.text);
      return { text: `Found "${needle}" at line ${match?.[1] ?? '?'} of ${file}. Ruled out: the disk (usage 41%, far from full).` };
    }
    if (req.messages.filter((m) => m.role === 'user').length === 1 && results.length === 0 && !req.messages[0]!.text.startsWith('[Summary')) {
      return { toolCalls: [{ name: 'grep_files', arguments: { root, path: file, pattern: needle } }] };
    }
    const total = last ? /"totalLines":(\d+)/.exec(last.text) : null;
    if (total) return { text: `Reached the end of ${file}: ${total[1]} lines.` };
    if (results.length >= pages) return { text: `Read ${results.length} more pages of ${file}.` };
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...cursorInRequest(req, root, file) } }] };
  };
}

/**
 * Reads `file` to its end in one prompt, each page from the cursor the request holds (a page after the newest summary,
 * else the working state's call for the next page: it remembers nothing), then says where the file ended. Asked for a
 * summary, it writes a short one.
 */
export function windowReader(root: string, file: string): Responder {
  return (req: NeutralRequest): Turn => {
    if (isSummaryRequest(req)) return { text: `Reading ${root}/${file} page by page.` };
    const last = req.messages.at(-1);
    const total = last?.role === 'tool' ? /"totalLines":(\d+)/.exec(last.text) : null;
    if (total) return { text: `Reached the end of ${file}: ${total[1]} lines.` };
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...cursorInRequest(req, root, file) } }] };
  };
}

/** The newest cursor for `file` in what a request holds: a read_file page after the newest summary, or the summary's
 * working-state call for the next page; nothing else (no memory of earlier requests). */
function cursorInRequest(req: NeutralRequest, root: string, file: string): { startLine?: number; offset?: number } {
  let cursor: { startLine?: number; offset?: number } = {};
  for (const m of req.messages) {
    if (m.role === 'user' && m.text.startsWith('[Summary')) {
      for (const line of m.text.split('\n')) {
        if (!line.startsWith('- read_file {')) continue;
        const args = JSON.parse(line.slice('- read_file '.length, line.lastIndexOf('}') + 1)) as Record<string, unknown>;
        if (args.root === root && args.path === file && typeof args.offset === 'number') cursor = { startLine: args.startLine as number, offset: args.offset };
      }
    }
    if (m.role !== 'tool') continue;
    const line = /"nextLine":(\d+)/.exec(m.text);
    const offset = /"nextOffset":(\d+)/.exec(m.text);
    if (line && offset) cursor = { startLine: Number(line[1]), offset: Number(offset[1]) };
  }
  return cursor;
}

/** A follow-up's prompt as the agent writes it (agent/followupFiring.ts followupPrompt): the message is the group. */
export const FOLLOWUP_PROMPT = /^Follow-up you scheduled at \S+: (.*?)(?:\n\n\[sent \S+\])?$/;

/**
 * The model of the follow-up tests: asked "come back in N s: <message>", it schedules that with schedule_followup;
 * told a follow-up, it answers "followed up: <message>"; after a tool result, "scheduled".
 */
export function followupResponder(): Responder {
  return (req) => {
    const last = req.messages.at(-1)!;
    if (last.role === 'tool') return { text: 'scheduled' };
    const followup = FOLLOWUP_PROMPT.exec(last.text);
    if (followup) return { text: `followed up: ${followup[1]}` };
    const ask = /^come back in (\d+) s: (.*?)(?:\n\n\[sent \S+\])?$/.exec(last.text)!;
    return { toolCalls: [{ name: 'schedule_followup', arguments: { delaySeconds: Number(ask[1]), message: ask[2] } }] };
  };
}

/** How many requests `requests` holds that told the model follow-up `message`. */
export const followupsAnswered = (requests: readonly { neutral: NeutralRequest }[], message: string) =>
  requests.filter((r) => FOLLOWUP_PROMPT.exec(r.neutral.messages.at(-1)?.text ?? '')?.[1] === message).length;

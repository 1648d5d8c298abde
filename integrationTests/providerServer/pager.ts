// A scripted "model" for the provider-compatible server: asked anything, it reads the next page of a log with
// read_file (continuing from the newest page it can parse), then says which lines it read. The demo and the
// recovery tests use it to make a conversation grow the way an investigation does.
import type { NeutralRequest, Responder, Turn } from './server.js';

/** The read_file cursor of the newest page that can be parsed (a cut page has none), or the file's start. */
function newestCursor(req: NeutralRequest): { startLine?: number; offset?: number } {
  let cursor: { startLine?: number; offset?: number } = {};
  for (const m of req.messages) {
    if (m.role !== 'tool') continue;
    try {
      const page = JSON.parse(m.text);
      if (page.nextOffset !== undefined) cursor = { startLine: page.nextLine, offset: page.nextOffset };
    } catch {
      // a cut page: no cursor in it
    }
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

// A scripted "model" for the provider-compatible server: asked anything, it reads the next page of a log with
// read_file (continuing from the newest page it can parse), then says which lines it read. The demo and the
// recovery tests use it to make a conversation grow the way an investigation does.
import type { NeutralRequest, Responder, Turn } from './server.js';

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
    return { toolCalls: [{ name: 'read_file', arguments: { root, path: file, ...cursor } }] };
  };
}

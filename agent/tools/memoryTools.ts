// The model's side of the agent's memory (agent/memory/memory.ts): remember proposes a note (it waits for the
// operator's approval unless agent.toolPolicy allows it), search_memory finds notes and runbooks, read_runbook reads
// a runbook in pages exactly as read_file reads a file (its body served from memory through the same pager).
import type { Memory, NoteScope } from '../memory/memory.js';
import { MemoryError, refuseKeys } from '../memory/memory.js';
import { readPage } from './fsTools.js';
import type { CheckedFile } from './scopes.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

/** What a run's memory tools use: the memory, and who and which session a note proposed in this run is from. */
export interface RunMemory {
  memory: Memory;
  user: string | null;
  session_id: string;
}

const memoryOf = (ctx: ToolContext): RunMemory => {
  if (!ctx.memory) throw new ToolError('the agent has no memory here');
  return ctx.memory;
};

/** A runbook's body as the file pager reads it: the same reads, at the same positions. */
class BodyFile {
  constructor(private readonly body: Buffer) {}
  async read(buf: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    return { bytesRead: this.body.copy(buf, offset, position, Math.min(this.body.length, position + length)) };
  }
  async close(): Promise<void> {}
}

export const rememberTool: Tool = {
  name: 'remember',
  description:
    'Propose a note about this instance for later sessions: one short fact an operator would want the next investigation ' +
    'to start from (a harmless warning, a nightly job, how this team does something). It waits for the operator\'s ' +
    'approval. Optional scope: the component, log, table or database it is about. Never put secrets or keys in a note.',
  parameters: {
    type: 'object',
    properties: {
      text: { type: 'string', minLength: 1, maxLength: 1000, description: 'The fact, in one or two sentences.' },
      scope: {
        type: 'object',
        properties: { kind: { type: 'string', enum: ['component', 'log', 'table', 'database'] }, name: { type: 'string', minLength: 1, maxLength: 200 } },
        required: ['kind', 'name'],
        additionalProperties: false,
      },
    },
    required: ['text'],
    additionalProperties: false,
  },
  destructive: true,
  needs: 'memory',
  // Refused before it would wait for approval: a note with a key is never stored, whoever approves.
  refuse(args) {
    try {
      refuseKeys('the note', String(args.text ?? ''));
      return null;
    } catch (error) {
      return (error as Error).message;
    }
  },
  async handler(args, ctx) {
    const run = memoryOf(ctx);
    try {
      const note = await run.memory.addNote({ text: args.text as string, scope: (args.scope as NoteScope | undefined) ?? null, user: run.user, session_id: run.session_id });
      return { remembered: note.note_id, text: note.text, scope: note.scope };
    } catch (error) {
      throw error instanceof MemoryError ? new ToolError(error.message) : error;
    }
  },
};

export const searchMemoryTool: Tool = {
  name: 'search_memory',
  description:
    'Search the notes operators and earlier sessions left about this instance, and the runbooks (by title and tag). ' +
    'Answers the best matches first: a note whole, a runbook by id and title (read it with read_runbook).',
  parameters: {
    type: 'object',
    properties: {
      query: { type: 'string', minLength: 1, maxLength: 500, description: 'Words to look for: a component, a symptom, a tag.' },
      limit: { type: 'integer', minimum: 1, maximum: 50, description: 'At most this many matches (default 10).' },
    },
    required: ['query'],
    additionalProperties: false,
  },
  needs: 'memory',
  async handler(args, ctx) {
    const hits = await memoryOf(ctx).memory.search(args.query as string, (args.limit as number | undefined) ?? 10);
    return {
      matches: hits.map((h) =>
        h.kind === 'note'
          ? { kind: 'note', note_id: h.note.note_id, text: h.note.text, scope: h.note.scope, by: h.note.user, at: new Date(h.note.createdAt).toISOString(), score: h.score }
          : { kind: 'runbook', runbook_id: h.runbook.runbook_id, title: h.runbook.title, tags: h.runbook.tags, bytes: h.runbook.bytes, score: h.score }
      ),
    };
  },
};

export const readRunbookTool: Tool = {
  name: 'read_runbook',
  description:
    'Read a runbook (an id from search_memory or a recalled note) like read_file: a page of whole lines; while it ' +
    'continues the result has nextLine and nextOffset, pass them back as startLine and offset.',
  parameters: {
    type: 'object',
    properties: {
      runbook_id: { type: 'string', minLength: 1, maxLength: 128 },
      startLine: { type: 'integer', minimum: 1, description: 'First line to return, 1-based (default 1).' },
      offset: { type: 'integer', minimum: 0, description: 'Byte offset of startLine, from a previous nextOffset.' },
      lineCount: { type: 'integer', minimum: 1, description: 'At most this many lines.' },
    },
    required: ['runbook_id'],
    additionalProperties: false,
  },
  advice: 'keep paging with nextLine and nextOffset',
  needs: 'memory',
  async handler(args, ctx) {
    const runbook = await memoryOf(ctx).memory.getRunbook(args.runbook_id as string);
    if (!runbook) throw new ToolError(`no runbook ${JSON.stringify(args.runbook_id)}: search_memory lists them`);
    const body = Buffer.from(runbook.body);
    const page = await readPage({ display: `runbooks/${runbook.title}`, handle: new BodyFile(body) as unknown as CheckedFile, size: body.length }, args, ctx);
    return { runbook_id: runbook.runbook_id, title: runbook.title, tags: runbook.tags, ...page };
  },
};

export const memoryTools: Tool[] = [rememberTool, searchMemoryTool, readRunbookTool];

// The operations on the agent's memory: notes (add, list, update, delete) and runbooks (add, list, get, delete).
// Notes and runbooks are the instance's, not a user's: every user of the agent reads them (recall brings them into
// everyone's prompts); the author or a super_user changes or deletes one.
import { isSuperUser } from '../access.js';
import { HttpError, object, type User } from '../operations.js';
import { MAX_NOTE_CHARS, MemoryError, type Memory } from './memory.js';

const SCOPE = {
  type: 'object',
  properties: { kind: { type: 'string', enum: ['component', 'log', 'table', 'database'] }, name: { type: 'string', minLength: 1, maxLength: 200 } },
  required: ['kind', 'name'],
  additionalProperties: false,
};
const id = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:-]+$' };

/** A MemoryError (a key in a note, a note too long) is the caller's to fix: 400. */
async function checked<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof MemoryError) throw new HttpError(400, error.message);
    throw error;
  }
}

export function memoryOperations(memory: Memory) {
  const mayChange = (user: User, author: string | null, what: string) => {
    if (!isSuperUser(user) && author !== user.username) throw new HttpError(403, `${what} was written by ${author ?? 'another user'}: only they or a super_user may change it`);
  };
  /** The note, or 404; its author or a super_user only. */
  const mustChangeNote = async (user: User, id: string) => {
    const note = await memory.getNote(id);
    if (!note) throw new HttpError(404, `note ${JSON.stringify(id)} not found`);
    mayChange(user, note.user, `note ${note.note_id}`);
    return note;
  };
  return {
    add_agent_note: {
      // A fact about this instance, recalled into every later prompt it matters for.
      schema: object({ text: { type: 'string', minLength: 1, maxLength: MAX_NOTE_CHARS }, scope: SCOPE }, ['text']),
      async handle(input: Record<string, unknown>, user: User) {
        return checked(() => memory.addNote({ text: input.text as string, scope: (input.scope as never) ?? null, user: user.username ?? null }));
      },
    },
    list_agent_notes: {
      // Every note, newest first; with `query`, the matches best first (as search_memory finds them).
      schema: object({ query: { type: 'string', minLength: 1, maxLength: 500 } }),
      async handle(input: Record<string, unknown>) {
        if (input.query) return { notes: (await memory.search(input.query as string, 100)).flatMap((h) => (h.kind === 'note' ? [{ ...h.note, score: h.score }] : [])) };
        return { notes: await memory.listNotes() };
      },
    },
    update_agent_note: {
      schema: object({ note_id: id, text: { type: 'string', minLength: 1, maxLength: MAX_NOTE_CHARS }, scope: { oneOf: [SCOPE, { type: 'null' }] } }, ['note_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const note = await mustChangeNote(user, input.note_id as string);
        return checked(async () => (await memory.updateNote(note.note_id, { text: input.text as string | undefined, scope: input.scope as never }))!);
      },
    },
    delete_agent_note: {
      schema: object({ note_id: id }, ['note_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const note = await mustChangeNote(user, input.note_id as string);
        await memory.deleteNote(note.note_id);
        return { note_id: note.note_id, deleted: true };
      },
    },
    add_agent_runbook: {
      // A markdown document the model finds by title and tag (search_memory) and reads in pages (read_runbook). A
      // component can ship its own in a runbooks/ folder (agent/memory/componentRunbooks.ts).
      schema: object({ title: { type: 'string', minLength: 1, maxLength: 200 }, tags: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, maxItems: 20 }, body: { type: 'string', minLength: 1 } }, ['title', 'body']),
      async handle(input: Record<string, unknown>, user: User) {
        const r = await checked(() => memory.addRunbook({ title: input.title as string, tags: (input.tags as string[] | undefined) ?? [], body: input.body as string, user: user.username ?? null }));
        const { body: _body, ...rest } = r;
        return rest;
      },
    },
    list_agent_runbooks: {
      schema: object({ tag: { type: 'string', minLength: 1, maxLength: 50 } }),
      async handle(input: Record<string, unknown>) {
        const all = await memory.listRunbooks();
        return { runbooks: input.tag ? all.filter((r) => r.tags.includes((input.tag as string).toLowerCase())) : all };
      },
    },
    get_agent_runbook: {
      schema: object({ runbook_id: id }, ['runbook_id']),
      async handle(input: Record<string, unknown>) {
        const r = await memory.getRunbook(input.runbook_id as string);
        if (!r) throw new HttpError(404, `runbook ${JSON.stringify(input.runbook_id)} not found`);
        return r;
      },
    },
    delete_agent_runbook: {
      schema: object({ runbook_id: id }, ['runbook_id']),
      async handle(input: Record<string, unknown>, user: User) {
        const r = await memory.getRunbook(input.runbook_id as string);
        if (!r) throw new HttpError(404, `runbook ${JSON.stringify(input.runbook_id)} not found`);
        if (r.source) throw new HttpError(409, `runbook ${r.runbook_id} is shipped in components/${r.source}: remove or change that file to remove or change it`);
        mayChange(user, r.user, `runbook ${r.runbook_id}`);
        await memory.deleteRunbook(r.runbook_id);
        return { runbook_id: r.runbook_id, deleted: true };
      },
    },
  };
}

// What the agent knows of this instance between sessions (DESIGN.md "The agent learns the instance"): notes (short
// facts, AgentNote) and runbooks (markdown documents, AgentRunbook), both replicated tables. This module owns the
// rows, the checks a note or runbook passes on the way in (never key material), and the full-text index recall and
// search_memory read (MiniSearch: BM25 over notes' text and scope, runbooks' titles and tags), one per worker thread,
// kept current by the tables' subscriptions (a write on any thread or node reaches it), rebuilt whole when it cannot
// be. What a prompt recalls is chosen here, within agent.memoryRecallBytes.
import { randomUUID } from 'node:crypto';
import MiniSearch from 'minisearch';
import { RECALL_HEADING } from '../../resources/models/backendHelpers.js';
import { holdsArmorLine } from '../tools/keyMaterial.js';

export interface NoteScope {
  kind: 'component' | 'log' | 'table' | 'database';
  name: string;
}

export interface Note {
  note_id: string;
  text: string;
  scope: NoteScope | null;
  /** Who wrote it (the operator, or the owner of the session the model proposed it in). */
  user: string | null;
  /** The session it came from, when the model proposed it. */
  session_id: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface Runbook {
  runbook_id: string;
  title: string;
  tags: string[];
  body: string;
  bytes: number;
  user: string | null;
  /** The file a component ships it in (`<component>/runbooks/<file>.md`, agent/memory/componentRunbooks.ts), or null
   * for one added with add_agent_runbook. */
  source: string | null;
  createdAt: number;
  updatedAt: number;
}

/** The id prefix of a runbook a component ships (agent/memory/componentRunbooks.ts): add_agent_runbook's ids are
 * UUIDs, so the two never meet. */
export const SHIPPED_PREFIX = 'component:';

/** A runbook as a component's file gives it. */
export interface ShippedRunbook {
  runbook_id: string;
  title: string;
  tags: string[];
  body: string;
  /** The file, relative to the components folder (`<component>/runbooks/<file>.md`). */
  source: string;
}

/** A look at the files components ship runbooks in: what they are as one string (unchanged: nothing to read), and
 * their reading (agent/memory/componentRunbooks.ts). */
export type ShippedSource = () => Promise<{ signature: string; components: string[]; read: () => Promise<ShippedRunbook[]> }>;

export interface MemoryTable {
  get(id: string): unknown;
  put(id: string, record: Record<string, unknown>): unknown;
  delete?(id: string): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
  subscribe?(query: Record<string, unknown>): unknown;
}

export class MemoryError extends Error {}

/** The longest note: a fact, not a document (a runbook is the place for those). */
export const MAX_NOTE_CHARS = 1000;
export const MAX_RUNBOOK_BYTES = 1024 * 1024;

/** Refuses text that holds key material: a note or runbook is served to every later session and every node. */
export function refuseKeys(what: string, text: string): void {
  if (holdsArmorLine(Buffer.from(text))) throw new MemoryError(`${what} holds key material (a PEM armor line): it is not stored; leave the key out`);
}

const millis = (v: unknown): number => (v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : Number(v ?? 0));
const plain = <T>(v: unknown): T => (v === undefined || v === null ? (null as T) : (JSON.parse(JSON.stringify(v)) as T));

export function toNote(row: unknown): Note | undefined {
  if (!row) return undefined;
  const r = row as Record<string, unknown>;
  return { note_id: String(r.note_id), text: String(r.text ?? ''), scope: plain<NoteScope | null>(r.scope), user: (r.user as string | null) ?? null, session_id: (r.session_id as string | null) ?? null, createdAt: millis(r.createdAt), updatedAt: millis(r.updatedAt) };
}

export function toRunbook(row: unknown): Runbook | undefined {
  if (!row) return undefined;
  const r = row as Record<string, unknown>;
  const body = String(r.body ?? '');
  return { runbook_id: String(r.runbook_id), title: String(r.title ?? ''), tags: Array.from((r.tags as string[] | undefined) ?? [], String), body, bytes: Buffer.byteLength(body), user: (r.user as string | null) ?? null, source: (r.source as string | null) ?? null, createdAt: millis(r.createdAt), updatedAt: millis(r.updatedAt) };
}

/** A note as recall shows it to the model: one line, with where it applies and who wrote it when. */
export function noteLine(n: Note): string {
  const scope = n.scope ? ` · ${n.scope.kind} ${n.scope.name}` : '';
  return `- [note ${n.note_id.slice(0, 8)}${scope} · ${n.user ?? 'unknown'} ${new Date(n.createdAt).toISOString().slice(0, 10)}] ${n.text.replace(/\s+/g, ' ')}`;
}

export { RECALL_HEADING };

/** Words too common to say what a prompt is about. */
const STOP_WORDS = new Set('a an and are as at be but by can do does for from has have how i in is it its me my of on or our so that the their there this to was we what when where which who why will with you your'.split(' '));
const processTerm = (term: string) => {
  const t = term.toLowerCase();
  return STOP_WORDS.has(t) ? null : t;
};

interface Doc {
  id: string;
  kind: 'note' | 'runbook';
  text: string;
  scope: string;
  title: string;
  tags: string;
}

/** What a prompt recalled: the text that goes with it to the model, and which notes and runbooks it holds. */
export interface Recall {
  text: string;
  notes: string[];
  runbooks: string[];
}

export class Memory {
  private index?: MiniSearch<Doc>;
  private loading?: Promise<MiniSearch<Doc>>;
  private readonly notes = new Map<string, Note>();
  private readonly runbooks = new Map<string, Omit<Runbook, 'body'>>();
  /** The index is rebuilt at the next use (a subscription could not be opened, or it ended). */
  private stale = true;

  constructor(
    private readonly noteTable: () => MemoryTable | undefined,
    private readonly runbookTable: () => MemoryTable | undefined,
    /** Where the components' runbooks are; absent, there are none. */
    private readonly shipped?: ShippedSource,
    /** This node's name: a shipped runbook records the node that wrote it. */
    private readonly node: string | null = null
  ) {}

  private shippedSignature: string | undefined;
  private refreshing: Promise<{ written: number; removed: number } | null> | undefined;

  /** Syncs the components' runbooks when their files changed since the last sync that succeeded (one at a time);
   * answers what it wrote and removed, or null when nothing had changed. */
  refreshShipped(): Promise<{ written: number; removed: number } | null> {
    if (!this.shipped) return Promise.resolve(null);
    this.refreshing ??= (async () => {
      // Following the table: another node's change to a shipped runbook makes this node look again (gone).
      await this.ready();
      const look = await this.shipped!();
      if (look.signature === this.shippedSignature) return null;
      const result = await this.syncShipped(await look.read(), look.components);
      this.shippedSignature = look.signature;
      return result;
    })().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private table(which: 'notes' | 'runbooks'): MemoryTable {
    const t = which === 'notes' ? this.noteTable() : this.runbookTable();
    if (!t) throw new MemoryError(`the agent.${which === 'notes' ? 'AgentNote' : 'AgentRunbook'} table is not there yet`);
    return t;
  }

  // ---- notes ----

  async addNote(fields: { text: string; scope?: NoteScope | null; user: string | null; session_id?: string | null }): Promise<Note> {
    const text = fields.text.trim();
    if (!text) throw new MemoryError('a note needs text');
    if (text.length > MAX_NOTE_CHARS) throw new MemoryError(`a note is at most ${MAX_NOTE_CHARS} characters (this one has ${text.length}); put a longer text in a runbook`);
    refuseKeys('the note', text);
    const now = Date.now();
    const note: Note = { note_id: randomUUID(), text, scope: fields.scope ?? null, user: fields.user, session_id: fields.session_id ?? null, createdAt: now, updatedAt: now };
    await this.table('notes').put(note.note_id, { ...note, createdAt: new Date(now), updatedAt: new Date(now) });
    this.seen('note', note);
    return note;
  }

  async getNote(id: string): Promise<Note | undefined> {
    return toNote(await this.table('notes').get(id));
  }

  async updateNote(id: string, change: { text?: string; scope?: NoteScope | null }): Promise<Note | undefined> {
    const note = await this.getNote(id);
    if (!note) return undefined;
    const text = change.text !== undefined ? change.text.trim() : note.text;
    if (!text || text.length > MAX_NOTE_CHARS) throw new MemoryError(`a note has 1 to ${MAX_NOTE_CHARS} characters`);
    refuseKeys('the note', text);
    const next: Note = { ...note, text, scope: change.scope !== undefined ? change.scope : note.scope, updatedAt: Date.now() };
    await this.table('notes').put(id, { ...next, createdAt: new Date(next.createdAt), updatedAt: new Date(next.updatedAt) });
    this.seen('note', next);
    return next;
  }

  async deleteNote(id: string): Promise<boolean> {
    if (!(await this.getNote(id))) return false;
    await this.table('notes').delete!(id);
    this.gone('note', id);
    return true;
  }

  async listNotes(): Promise<Note[]> {
    const out: Note[] = [];
    for await (const row of this.table('notes').search({ conditions: [] })) out.push(toNote(row)!);
    return out.sort((a, b) => b.updatedAt - a.updatedAt);
  }

  // ---- runbooks ----

  async addRunbook(fields: { title: string; tags: string[]; body: string; user: string | null }): Promise<Runbook> {
    const bytes = Buffer.byteLength(fields.body);
    if (bytes > MAX_RUNBOOK_BYTES) throw new MemoryError(`a runbook is at most ${MAX_RUNBOOK_BYTES} bytes (this one has ${bytes})`);
    refuseKeys('the runbook', fields.body);
    const now = Date.now();
    const runbook: Runbook = { runbook_id: randomUUID(), title: fields.title.trim(), tags: fields.tags.map((t) => t.trim().toLowerCase()).filter(Boolean), body: fields.body, bytes, user: fields.user, source: null, createdAt: now, updatedAt: now };
    await this.table('runbooks').put(runbook.runbook_id, { ...runbook, createdAt: new Date(now), updatedAt: new Date(now) });
    this.seen('runbook', runbook);
    return runbook;
  }

  async getRunbook(id: string): Promise<Runbook | undefined> {
    return toRunbook(await this.table('runbooks').get(id));
  }

  async deleteRunbook(id: string): Promise<boolean> {
    if (!(await this.getRunbook(id))) return false;
    await this.table('runbooks').delete!(id);
    this.gone('runbook', id);
    return true;
  }

  /**
   * Makes the stored shipped runbooks (ids `component:...`) what this node's component files are: a new or changed file
   * is written (with this node's name), a runbook whose file is gone from a component this node has is deleted, and so
   * is one this node wrote of a component it no longer has. One another node wrote, of a component this node does not
   * have, is that node's (the table is replicated: a component deployed to one node keeps its runbooks there; one this
   * node removes that another still ships comes back at that node's next sync). Answers how many were written and
   * removed.
   */
  async syncShipped(found: readonly ShippedRunbook[], components: readonly string[]): Promise<{ written: number; removed: number }> {
    const here = new Set(components);
    const stored = new Map<string, Runbook>();
    // The shipped ones only (a range of the primary key): runbooks added by operation are never read here.
    for await (const row of this.table('runbooks').search({ conditions: [{ attribute: 'runbook_id', comparator: 'starts_with', value: SHIPPED_PREFIX }] })) {
      const r = toRunbook(row)!;
      const mine = here.has((r.source ?? '').split('/')[0]!) || (row as { node?: string | null }).node === this.node;
      if (r.runbook_id.startsWith(SHIPPED_PREFIX) && mine) stored.set(r.runbook_id, r);
    }
    let written = 0;
    for (const f of found) {
      const old = stored.get(f.runbook_id);
      stored.delete(f.runbook_id);
      if (old && old.title === f.title && old.body === f.body && old.source === f.source && old.tags.join('\n') === f.tags.join('\n')) continue;
      const now = Date.now();
      const runbook: Runbook = { runbook_id: f.runbook_id, title: f.title, tags: f.tags, body: f.body, bytes: Buffer.byteLength(f.body), user: null, source: f.source, createdAt: old?.createdAt ?? now, updatedAt: now };
      await this.table('runbooks').put(runbook.runbook_id, { ...runbook, node: this.node, createdAt: new Date(runbook.createdAt), updatedAt: new Date(now) });
      const { body: _body, ...rest } = runbook;
      this.seen('runbook', rest);
      written++;
    }
    for (const id of stored.keys()) {
      await this.table('runbooks').delete!(id);
      this.gone('runbook', id);
    }
    return { written, removed: stored.size };
  }

  async listRunbooks(): Promise<Omit<Runbook, 'body'>[]> {
    // What the operator reads is what the files say now, not at the last timed sync (a sync that fails leaves the list
    // as stored: worker 0's timed sync logs why).
    await this.refreshShipped().catch(() => undefined);
    const out: Omit<Runbook, 'body'>[] = [];
    for await (const row of this.table('runbooks').search({ conditions: [] })) {
      const { body: _body, ...rest } = toRunbook(row)!;
      out.push(rest);
    }
    return out.sort((a, b) => a.title.localeCompare(b.title));
  }

  // ---- the index ----

  /** Notes and runbooks matching `query`, best first: what search_memory answers. */
  async search(query: string, limit = 10): Promise<({ kind: 'note'; note: Note; score: number } | { kind: 'runbook'; runbook: Omit<Runbook, 'body'>; score: number })[]> {
    const index = await this.ready();
    const hits = index.search(query, { prefix: (term) => term.length > 3, fuzzy: (term) => (term.length > 5 ? 0.2 : false), combineWith: 'OR' });
    const out: ({ kind: 'note'; note: Note; score: number } | { kind: 'runbook'; runbook: Omit<Runbook, 'body'>; score: number })[] = [];
    for (const hit of hits) {
      const [kind, id] = splitId(hit.id as string);
      if (kind === 'note' && this.notes.has(id)) out.push({ kind, note: this.notes.get(id)!, score: round(hit.score) });
      if (kind === 'runbook' && this.runbooks.has(id)) out.push({ kind, runbook: this.runbooks.get(id)!, score: round(hit.score) });
      if (out.length >= limit) break;
    }
    return out;
  }

  /** The notes (and runbook titles) that matter for a prompt, best first, within `budgetBytes` of text. */
  async recall(prompt: string, budgetBytes: number): Promise<Recall | null> {
    if (budgetBytes <= 0) return null;
    const hits = await this.search(prompt, 50);
    const lines: string[] = [];
    const notes: string[] = [];
    const runbooks: string[] = [];
    let used = Buffer.byteLength(RECALL_HEADING) + 1;
    for (const hit of hits) {
      const line = hit.kind === 'note' ? noteLine(hit.note) : `- [runbook ${hit.runbook.runbook_id}] "${hit.runbook.title}"${hit.runbook.tags.length ? ` (tags: ${hit.runbook.tags.join(', ')})` : ''}: read it with read_runbook`;
      const bytes = Buffer.byteLength(line) + 1;
      if (used + bytes > budgetBytes) continue; // a shorter one further down may still fit
      used += bytes;
      lines.push(line);
      (hit.kind === 'note' ? notes : runbooks).push(hit.kind === 'note' ? hit.note.note_id : hit.runbook.runbook_id);
    }
    if (lines.length === 0) return null;
    return { text: [RECALL_HEADING, ...lines].join('\n'), notes, runbooks };
  }

  /** The index, loaded on first use and kept by the tables' subscriptions; loaded afresh when marked stale. */
  private async ready(): Promise<MiniSearch<Doc>> {
    if (this.index && !this.stale) return this.index;
    this.loading ??= this.load().finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async load(): Promise<MiniSearch<Doc>> {
    this.stale = false;
    const index = new MiniSearch<Doc>({ fields: ['text', 'scope', 'title', 'tags'], storeFields: [], processTerm, searchOptions: { processTerm, boost: { title: 2, tags: 2, scope: 1.5 } } });
    this.notes.clear();
    this.runbooks.clear();
    this.index = index;
    await this.follow();
    for await (const row of this.noteTable()?.search({ conditions: [] }) ?? []) this.seen('note', toNote(row)!);
    for await (const row of this.runbookTable()?.search({ conditions: [] }) ?? []) {
      const { body: _body, ...r } = toRunbook(row)!;
      this.seen('runbook', r);
    }
    return index;
  }

  private following = false;
  /** Subscribes to both tables once: every write from any thread or node updates the index. */
  private async follow(): Promise<void> {
    if (this.following) return;
    const tables: [MemoryTable | undefined, 'note' | 'runbook'][] = [[this.noteTable(), 'note'], [this.runbookTable(), 'runbook']];
    if (tables.some(([t]) => !t?.subscribe)) return void (this.stale = true);
    this.following = true;
    for (const [table, kind] of tables) {
      const queue = (await table!.subscribe!({ isCollection: true, omitCurrent: true })) as { on(e: string, l: (event: { type?: string; id?: unknown; value?: unknown }) => void): unknown };
      queue.on('data', (event) => {
        const id = String(event.id);
        // A shipped runbook written or removed (by any thread or node): the next sync reads the files again, so one
        // removed by a node that no longer ships it comes back from a node that does.
        if (kind === 'runbook' && id.startsWith(SHIPPED_PREFIX)) this.shippedSignature = undefined;
        if (event.type === 'delete' || !event.value) return this.gone(kind, id);
        if (kind === 'note') this.seen('note', toNote(event.value)!);
        else {
          const { body: _body, ...r } = toRunbook(event.value)!;
          this.seen('runbook', r);
        }
      });
      queue.on('close', () => ((this.following = false), (this.stale = true)));
    }
  }

  private seen(kind: 'note', value: Note): void;
  private seen(kind: 'runbook', value: Omit<Runbook, 'body'>): void;
  private seen(kind: 'note' | 'runbook', value: Note | Omit<Runbook, 'body'>): void {
    if (!this.index) return;
    const id = kind === 'note' ? (value as Note).note_id : (value as Runbook).runbook_id;
    const doc: Doc =
      kind === 'note'
        ? { id: `note:${id}`, kind, text: (value as Note).text, scope: (value as Note).scope ? `${(value as Note).scope!.kind} ${(value as Note).scope!.name}` : '', title: '', tags: '' }
        : { id: `runbook:${id}`, kind, text: '', scope: '', title: (value as Runbook).title, tags: (value as Runbook).tags.join(' ') };
    if (this.index.has(doc.id)) this.index.replace(doc);
    else this.index.add(doc);
    if (kind === 'note') this.notes.set(id, value as Note);
    else this.runbooks.set(id, value as Omit<Runbook, 'body'>);
  }

  private gone(kind: 'note' | 'runbook', id: string): void {
    if (this.index?.has(`${kind}:${id}`)) this.index.discard(`${kind}:${id}`);
    (kind === 'note' ? this.notes : this.runbooks).delete(id);
  }
}

const splitId = (id: string) => {
  const at = id.indexOf(':');
  return [id.slice(0, at) as 'note' | 'runbook', id.slice(at + 1)] as const;
};
const round = (x: number) => Math.round(x * 100) / 100;

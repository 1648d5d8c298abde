// Unit-test doubles: an in-memory table with Harper's get/put/search shape, a scripted backend, temp scopes.
import { EventEmitter } from 'node:events';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultConfig, type AgentConfig } from '../agent/agent.js';
import type { LoopDeps } from '../agent/loopDeps.js';
import { SessionStore, type SessionTable } from '../agent/session.js';
import { createToolRegistry, defaultTools } from '../agent/tools/index.js';
import type { Scopes } from '../agent/tools/scopes.js';
import type { Tool } from '../agent/tools/types.js';
import { Models } from '../resources/models/models.js';
import type { GenerateInput, GenerateOutput, ModelBackend } from '../resources/models/types.js';

/** Like a Harper record: fields (and those of nested objects) are inherited, not own properties. */
function harperLike(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(harperLike);
  if (value && typeof value === 'object') {
    const proto: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) proto[k] = harperLike(v);
    const record = Object.create(proto);
    Object.defineProperty(record, 'toJSON', { value: () => ({ ...proto }), enumerable: false });
    return record;
  }
  return value;
}

export class MemoryTable implements SessionTable {
  readonly rows = new Map<string, string>();
  puts = 0;
  /** Records search has yielded: what a reader paid for. */
  yielded = 0;
  /** Simulated latency, so interleavings of concurrent writers are real. */
  constructor(private readonly delayMs = 0) {}
  private async pause() {
    if (this.delayMs) await new Promise((r) => setTimeout(r, Math.random() * this.delayMs));
  }
  async get(id: string) {
    await this.pause();
    const row = this.rows.get(id);
    return row ? harperLike(JSON.parse(row)) : undefined;
  }
  async put(id: string, record: Record<string, unknown>) {
    await this.pause();
    this.puts++;
    this.rows.set(id, JSON.stringify(record));
    for (const s of this.subscribers) if (s.id === id) s.queue.emit('data', { id, type: 'put', value: harperLike(record) });
  }
  deletes = 0;
  async delete(id: string) {
    await this.pause();
    this.deletes++;
    this.rows.delete(id);
    for (const s of this.subscribers) if (s.id === id) s.queue.emit('data', { id, type: 'delete' });
  }
  private readonly subscribers = new Set<{ id: string; queue: EventEmitter }>();
  /** Harper's subscription on one record: a `data` event per later write, from any writer; `close` ends it. */
  subscribe(query: { id: string }) {
    const entry = { id: query.id, queue: new EventEmitter() };
    this.subscribers.add(entry);
    entry.queue.on('close', () => this.subscribers.delete(entry));
    return entry.queue;
  }
  /** Harper's search shape: `conditions` (equals by default; less_than, less_than_equal, greater_than_equal on dates and
   * numbers; between on keys), in key order, or by `sort`'s attribute. Counts the records it yields in `yielded`. */
  async *search(query: { conditions?: { attribute: string; comparator?: string; value: unknown }[]; sort?: { attribute: string; descending?: boolean } } = {}) {
    const comparable = (v: unknown) => (v instanceof Date ? v.getTime() : typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? Date.parse(v) : v);
    const holds = (record: Record<string, unknown>, c: { attribute: string; comparator?: string; value: unknown }) => {
      const a = comparable(record[c.attribute]) as number;
      const b = comparable(c.value) as number;
      if (c.comparator === 'less_than') return a < b;
      if (c.comparator === 'less_than_equal') return a <= b;
      if (c.comparator === 'greater_than_equal') return a >= b;
      if (c.comparator === 'starts_with') return String(record[c.attribute]).startsWith(String(c.value));
      if (c.comparator === 'between') return (record[c.attribute] as string) >= (c.value as string[])[0]! && (record[c.attribute] as string) <= (c.value as string[])[1]!;
      return record[c.attribute] === c.value;
    };
    let rows = [...this.rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => JSON.parse(row) as Record<string, unknown>);
    const sort = query.sort;
    const order = (a: unknown, b: unknown) => (typeof a === 'string' && typeof b === 'string' ? (a < b ? -1 : a > b ? 1 : 0) : (a as number) - (b as number));
    if (sort) rows = rows.sort((x, y) => order(comparable(x[sort.attribute]), comparable(y[sort.attribute])) * (sort.descending ? -1 : 1));
    for (const record of rows) {
      if (!(query.conditions ?? []).every((c) => holds(record, c))) continue;
      this.yielded++;
      yield harperLike(record);
    }
  }
}

/** A session store over two in-memory tables (rows and messages), as `agent/boot.ts` builds it over Harper's. */
export function memoryStore(delayMs = 0, node?: string) {
  const table = new MemoryTable(delayMs);
  const messages = new MemoryTable(delayMs);
  return { store: new SessionStore({ sessions: () => table, messages: () => messages, node }), table, messages };
}

/** Temp roots made by tempScopes: removed when the test process ends (each npm test used to leave a dozen). */
const tempDirs = new Set<string>();

export function tempScopes(): Scopes & { base: string } {
  const base = mkdtempSync(path.join(os.tmpdir(), 'agent-unit-'));
  if (tempDirs.size === 0) process.once('exit', () => tempDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  tempDirs.add(base);
  const rootPath = path.join(base, 'hdb');
  const scopes = {
    base,
    rootPath,
    components: path.join(rootPath, 'components'),
    logs: path.join(rootPath, 'log'),
    config: path.join(rootPath, 'harperdb-config.yaml'),
  };
  mkdirSync(scopes.components, { recursive: true });
  mkdirSync(scopes.logs, { recursive: true });
  mkdirSync(path.join(rootPath, 'keys'), { recursive: true });
  writeFileSync(scopes.config, 'http:\n  port: 9926\n');
  writeFileSync(path.join(rootPath, 'keys', 'privateKey.pem'), 'secret');
  return scopes;
}

export type Step = GenerateOutput | Error | ((input: GenerateInput, signal: AbortSignal) => Promise<GenerateOutput> | GenerateOutput);

/** A backend that replays a script of turns and records every input it was given. */
export class ScriptedBackend implements ModelBackend {
  readonly provider = 'scripted';
  readonly inputs: GenerateInput[] = [];
  constructor(public steps: Step[]) {}
  async generate(input: GenerateInput, signal: AbortSignal): Promise<GenerateOutput> {
    this.inputs.push(structuredClone(input));
    const step = this.steps.shift();
    if (!step) throw new Error('script exhausted');
    if (step instanceof Error) throw step;
    if (typeof step === 'function') return step(input, signal);
    return step;
  }
}

export function text(t: string): GenerateOutput {
  return { text: t, toolCalls: [], finishReason: 'stop' };
}

export function calls(...list: [string, Record<string, unknown>][]): GenerateOutput {
  return { text: '', toolCalls: list.map(([name, args], i) => ({ id: `c${Math.random().toString(36).slice(2)}${i}`, name, arguments: args })), finishReason: 'tool_calls' };
}

export interface Harness {
  deps: LoopDeps;
  store: SessionStore;
  table: MemoryTable;
  /** The AgentMessage records. */
  messages: MemoryTable;
  backend: ScriptedBackend;
  scopes: Scopes & { base: string };
  config: AgentConfig;
}

export function harness(steps: Step[], config: Partial<AgentConfig> = {}, extraTools: Tool[] = [], delayMs = 0): Harness {
  const backend = new ScriptedBackend(steps);
  Models.register({ provider: 'scripted', defaultModel: 'scripted-1', create: () => backend });
  const { store, table, messages } = memoryStore(delayMs);
  const scopes = tempScopes();
  const cfg: AgentConfig = { ...defaultConfig(), provider: 'scripted', ...config };
  const deps: LoopDeps = { store, tools: createToolRegistry([...defaultTools, ...extraTools]), scopes, config: () => cfg };
  return { deps, store, table, messages, backend, scopes, config: cfg };
}

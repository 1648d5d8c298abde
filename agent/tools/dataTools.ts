// The data tools: describe_tables and search_table, over Harper's `databases`. Records can be any size, so these
// results are the ones the loop's cap most often cuts; the advice says how to ask for less.
import { ToolError, type Tool, type ToolContext } from './types.js';

interface HarperTable {
  primaryKey?: string;
  attributes?: { name: string; type?: string }[];
  get(id: unknown): unknown;
  search(query: Record<string, unknown>): AsyncIterable<unknown>;
}

export type Databases = Record<string, Record<string, HarperTable>>;

/** Harper's own database: users, roles and their password hashes are never served. */
const HIDDEN_DATABASES = new Set(['system']);
/** The agent's settings hold the provider API key: never served either. */
const HIDDEN_TABLES = new Set(['agent.AgentSetting']);

const hidden = (database: string, table: string) => HIDDEN_DATABASES.has(database) || HIDDEN_TABLES.has(`${database}.${table}`);

function databasesOf(ctx: ToolContext): Databases {
  if (!ctx.databases) throw new ToolError('no Harper databases are available to this run');
  return ctx.databases as Databases;
}

function tableOf(ctx: ToolContext, database: string, table: string): HarperTable {
  if (HIDDEN_DATABASES.has(database)) throw new ToolError(`the ${database} database (Harper's users and roles) is never served`);
  if (hidden(database, table)) throw new ToolError(`the ${database}.${table} table (the agent's settings, with its API key) is never served`);
  const t = databasesOf(ctx)[database]?.[table];
  if (!t) throw new ToolError(`no table ${database}.${table}: call describe_tables to see what there is`);
  return t;
}

/** A record as plain JSON (Harper records expose their fields as getters). */
function plain(record: unknown): unknown {
  return record === undefined ? null : JSON.parse(JSON.stringify(record));
}

const describeTables: Tool = {
  name: 'describe_tables',
  core: true,
  needs: 'data',
  description: 'List the databases and tables of this Harper instance with their primary key and attributes.',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
  async handler(_args, ctx) {
    const out: { database: string; table: string; primaryKey?: string; attributes: string[] }[] = [];
    for (const [database, tables] of Object.entries(databasesOf(ctx))) {
      if (HIDDEN_DATABASES.has(database)) continue;
      for (const [table, t] of Object.entries(tables)) {
        if (hidden(database, table)) continue;
        out.push({ database, table, primaryKey: t.primaryKey, attributes: (t.attributes ?? []).map((a) => a.name) });
      }
    }
    return { tables: out };
  },
};

const searchTable: Tool = {
  name: 'search_table',
  needs: 'data',
  description:
    'Read records of a table: one by its primary key (id), or those matching conditions ' +
    '([{attribute, comparator: equals|greater_than|less_than|starts_with|contains, value}]), at most limit (default 20) ' +
    'from offset. Use select to return only some attributes. Large records are cut by the result cap: ask for fewer ' +
    'records or attributes. While more may match, the result has nextOffset.',
  parameters: {
    type: 'object',
    properties: {
      database: { type: 'string', minLength: 1 },
      table: { type: 'string', minLength: 1 },
      id: { type: ['string', 'number'] },
      conditions: {
        type: 'array',
        maxItems: 20,
        items: {
          type: 'object',
          properties: {
            attribute: { type: 'string', minLength: 1 },
            comparator: { type: 'string', enum: ['equals', 'not_equal', 'greater_than', 'greater_than_equal', 'less_than', 'less_than_equal', 'starts_with', 'contains', 'ends_with'] },
            value: {},
          },
          required: ['attribute', 'value'],
          additionalProperties: false,
        },
      },
      select: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 100 },
      limit: { type: 'integer', minimum: 1, maximum: 1000 },
      offset: { type: 'integer', minimum: 0 },
    },
    required: ['database', 'table'],
    additionalProperties: false,
  },
  advice: 'ask for fewer records (limit), fewer attributes (select), or a narrower condition',
  async handler(args, ctx) {
    const database = args.database as string;
    const tableName = args.table as string;
    const table = tableOf(ctx, database, tableName);
    if (args.id !== undefined) return { database, table: tableName, record: plain(await table.get(args.id)) };
    const limit = (args.limit as number | undefined) ?? 20;
    const offset = (args.offset as number | undefined) ?? 0;
    const query: Record<string, unknown> = { conditions: (args.conditions as unknown[]) ?? [], limit: limit + 1, offset };
    if (args.select) query.select = args.select;
    const records: unknown[] = [];
    for await (const r of table.search(query)) {
      if (ctx.signal.aborted) break;
      records.push(plain(r));
      if (records.length > limit) break;
    }
    const more = records.length > limit;
    return { database, table: tableName, offset, count: Math.min(records.length, limit), records: records.slice(0, limit), ...(more ? { nextOffset: offset + limit } : {}) };
  },
};

export const dataTools: Tool[] = [describeTables, searchTable];

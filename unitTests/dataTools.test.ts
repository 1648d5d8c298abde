import { expect } from 'chai';
import { dataTools } from '../agent/tools/dataTools.js';
import type { ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

const rows = Array.from({ length: 5 }, (_, i) => ({ id: `r${i}`, n: i }));
const table = {
  primaryKey: 'id',
  attributes: [{ name: 'id' }, { name: 'n' }],
  get: async (id: unknown) => rows.find((r) => r.id === id),
  async *search(q: { offset: number; limit: number }) {
    yield* rows.slice(q.offset, q.offset + q.limit);
  },
};
const ctx: ToolContext = { scopes: tempScopes(), maxResultBytes: 65536, signal: new AbortController().signal, databases: { app: { things: table }, system: { hdb_user: table }, agent: { AgentSetting: table } } };
const [describe_tables, search_table] = dataTools;

describe('data tools', () => {
  it('describe_tables lists tables, never the system database nor the agent settings', async () => {
    expect(await describe_tables!.handler({}, ctx)).to.deep.equal({ tables: [{ database: 'app', table: 'things', primaryKey: 'id', attributes: ['id', 'n'] }] });
  });
  it('search_table pages with limit and nextOffset, and reads by id', async () => {
    expect(await search_table!.handler({ database: 'app', table: 'things', limit: 2 }, ctx)).to.deep.equal({ database: 'app', table: 'things', offset: 0, count: 2, records: rows.slice(0, 2), nextOffset: 2 });
    expect(await search_table!.handler({ database: 'app', table: 'things', limit: 2, offset: 4 }, ctx)).to.deep.equal({ database: 'app', table: 'things', offset: 4, count: 1, records: rows.slice(4) });
    expect(await search_table!.handler({ database: 'app', table: 'things', id: 'r3' }, ctx)).to.deep.equal({ database: 'app', table: 'things', record: rows[3] });
  });
  it('refuses the system database, the agent settings and unknown tables', async () => {
    const e1 = await search_table!.handler({ database: 'system', table: 'hdb_user' }, ctx).catch((e: Error) => e);
    expect((e1 as Error).message).to.equal("the system database (Harper's users and roles) is never served");
    const e3 = await search_table!.handler({ database: 'agent', table: 'AgentSetting', id: 'apiKey' }, ctx).catch((e: Error) => e);
    expect((e3 as Error).message).to.equal("the agent.AgentSetting table (the agent's settings, with its API key) is never served");
    const e2 = await search_table!.handler({ database: 'app', table: 'nope' }, ctx).catch((e: Error) => e);
    expect((e2 as Error).message).to.equal('no table app.nope: call describe_tables to see what there is');
  });
});

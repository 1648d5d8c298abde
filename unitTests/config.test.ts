import { expect } from 'chai';
import { checkConfigChange, cliAgentFlags, defaultConfig, loadAgentConfig, MAX_TOOL_RESULT_BYTES, publicConfig } from '../agent/agent.js';
import { ConfigChangeError, ConfigStore, type SettingRow, type SettingTable } from '../agent/configStore.js';

describe('agent config', () => {
  it('has the cap bounds from the schema: default 65,536, floor 1,024, ceiling 1 MiB', () => {
    expect(MAX_TOOL_RESULT_BYTES).to.deep.equal({ default: 65536, min: 1024, max: 1048576 });
    expect(defaultConfig().maxToolResultBytes).to.equal(65536);
  });

  it('reads harperdb-config.yaml, then env, then CLI flags (each overriding the one before)', () => {
    const warnings: string[] = [];
    const file = { maxToolResultBytes: 2048, maxTurns: 7, provider: 'openai' };
    const env = { AGENT_MAXTOOLRESULTBYTES: '4096', AGENT_AUTOAPPROVE: 'true', PATH: '/bin' };
    const argv = ['node', 'x', '--AGENT_MAXTOOLRESULTBYTES', '8192', '--AGENT_MAXTURNS=9'];
    const c = loadAgentConfig(file, env, argv, (m) => warnings.push(m));
    expect(c.maxToolResultBytes).to.equal(8192);
    expect(c.maxTurns).to.equal(9);
    expect(c.autoApprove).to.equal(true);
    expect(c.provider).to.equal('openai');
    expect(warnings).to.deep.equal([]);
    expect(loadAgentConfig(file, env, [], () => undefined).maxToolResultBytes).to.equal(4096);
    expect(loadAgentConfig(file, {}, [], () => undefined).maxToolResultBytes).to.equal(2048);
  });

  for (const bad of ['1023', '1048577', 'abc', '1.5']) {
    it(`boot: AGENT_MAXTOOLRESULTBYTES=${bad} logs a warning naming key, value and default, and uses the default`, () => {
      const warnings: string[] = [];
      const c = loadAgentConfig(undefined, { AGENT_MAXTOOLRESULTBYTES: bad }, [], (m) => warnings.push(m));
      expect(c.maxToolResultBytes).to.equal(65536);
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.contain('agent.maxToolResultBytes').and.contain(JSON.stringify(bad)).and.contain('using 65536 (the default)');
      expect(warnings[0]).to.contain('from 1024 to 1048576');
    });
  }

  it('boot: an invalid env value falls back to the valid file value, and unknown keys are warned about', () => {
    const warnings: string[] = [];
    const c = loadAgentConfig({ maxToolResultBytes: 2048, bogus: 1 }, { AGENT_MAXTOOLRESULTBYTES: 'x' }, [], (m) => warnings.push(m));
    expect(c.maxToolResultBytes).to.equal(2048);
    expect(warnings.join('\n')).to.contain('unknown config key agent.bogus').and.contain('using 2048 (from harperdb-config.yaml)');
  });

  it('reads --AGENT_<KEY> value and --AGENT_<KEY>=value flags', () => {
    expect(cliAgentFlags(['--AGENT_A', '1', '--other', '--AGENT_B=two'])).to.deep.equal({ A: '1', B: 'two' });
  });

  it('spending keys: agent.prices from env as JSON, dollar limits as numbers; streaming on by default', () => {
    const warnings: string[] = [];
    const c = loadAgentConfig({ maxCostUsd: '0.5' }, { AGENT_PRICES: '{"llama3.1:8b":{"inputPerMTokens":0,"outputPerMTokens":0}}', AGENT_MAXSESSIONCOSTUSD: 'lots' }, [], (w) => warnings.push(w));
    expect(c).to.include({ stream: true, maxCostUsd: 0.5 });
    expect(c.prices).to.deep.equal({ 'llama3.1:8b': { inputPerMTokens: 0, outputPerMTokens: 0 } });
    expect(c.maxSessionCostUsd).to.equal(undefined);
    expect(warnings).to.deep.equal(['harper-agent: invalid agent.maxSessionCostUsd "lots" from env AGENT_MAXSESSIONCOSTUSD (agent.maxSessionCostUsd must be a number from 0 to 1000000); using unset (the default)']);
    const bad = checkConfigChange({ maxCostUsd: -1, prices: { m: { inputPerMTokens: 1 } } });
    expect(!bad.ok && bad.problems).to.deep.equal(['agent.maxCostUsd must be a number from 0 to 1000000', "agent.prices must have required property 'outputPerMTokens'"]);
  });

  describe('set_agent_config changes', () => {
    for (const bad of [1023, 1048577, 'abc', 1.5, '2048']) {
      it(`rejects maxToolResultBytes ${JSON.stringify(bad)} naming the bounds`, () => {
        const r = checkConfigChange({ maxToolResultBytes: bad });
        expect(r.ok).to.equal(false);
        expect(!r.ok && r.problems[0]).to.equal('agent.maxToolResultBytes must be an integer from 1024 to 1048576');
      });
    }
    for (const ok of [1024, 1048576]) {
      it(`accepts the bound ${ok}`, () => {
        const r = checkConfigChange({ maxToolResultBytes: ok });
        expect(r.ok && r.change).to.deep.equal({ maxToolResultBytes: ok });
      });
    }
    it('is all or nothing, and rejects unknown keys', () => {
      const r = checkConfigChange({ maxTurns: 3, nope: true });
      expect(r.ok).to.equal(false);
      expect(!r.ok && r.problems[0]).to.match(/agent\.nope is not a known key/);
    });
  });

  it('never shows the API key', () => {
    expect(publicConfig({ ...defaultConfig(), apiKey: 'sk-secret' })).to.include({ apiKey: '(set)' });
    expect(JSON.stringify(publicConfig({ ...defaultConfig(), apiKey: 'sk-secret' }))).to.not.contain('sk-secret');
  });

  describe('the config store (set_agent_config changes, persisted)', () => {
    /** The table's contract as Harper serves it: rows by key, a search over all, change events to subscribers. */
    class MemorySettings implements SettingTable {
      rows = new Map<string, SettingRow>();
      listeners: (() => void)[] = [];
      put(id: string, record: SettingRow) {
        this.rows.set(id, structuredClone(record));
        this.listeners.forEach((l) => l());
      }
      delete(id: string) {
        this.rows.delete(id);
        this.listeners.forEach((l) => l());
      }
      async *search() {
        yield* [...this.rows.values()].map((r) => structuredClone(r));
      }
      subscribe() {
        return { on: (_event: 'data', listener: () => void) => this.listeners.push(listener) };
      }
    }
    const base = () => ({ ...defaultConfig(), maxTurns: 7 }); // as if harperdb-config.yaml set maxTurns

    it('persists each key as its own row, in force at once, and read back by a new store (a restart)', async () => {
      const table = new MemorySettings();
      const a = new ConfigStore(base(), () => table, () => undefined);
      const r = await a.set({ maxToolResultBytes: 4096, apiKey: 'sk-secret', provider: 'openai' }, 'admin');
      expect(r.persisted).to.deep.equal({ maxToolResultBytes: 4096, apiKey: '(set)', provider: 'openai' });
      expect(a.current()).to.include({ maxToolResultBytes: 4096, apiKey: 'sk-secret', provider: 'openai', maxTurns: 7 });
      expect([...table.rows.keys()].sort()).to.deep.equal(['apiKey', 'maxToolResultBytes', 'provider']);
      expect(table.rows.get('maxToolResultBytes')).to.include({ key: 'maxToolResultBytes', value: 4096, updatedBy: 'admin' });
      expect(table.rows.get('maxToolResultBytes')!.updatedAt).to.be.instanceOf(Date);
      const b = new ConfigStore(base(), () => table, () => undefined);
      expect(b.current().maxToolResultBytes).to.equal(65536);
      await b.reload();
      expect(b.current()).to.include({ maxToolResultBytes: 4096, provider: 'openai', maxTurns: 7 });
      expect(b.persisted()).to.deep.equal({ maxToolResultBytes: 4096, provider: 'openai', apiKey: '(set)' });
    });

    it('a null takes a change back: the boot config applies again and the row is gone', async () => {
      const table = new MemorySettings();
      const a = new ConfigStore(base(), () => table, () => undefined);
      await a.set({ maxTurns: 77 }, null);
      expect(a.current().maxTurns).to.equal(77);
      const r = await a.set({ maxTurns: null }, null);
      expect(r.persisted).to.deep.equal({ maxTurns: null });
      expect(a.current().maxTurns).to.equal(7);
      expect(table.rows.has('maxTurns')).to.equal(false);
    });

    it('is all or nothing: one bad key writes nothing', async () => {
      const table = new MemorySettings();
      const a = new ConfigStore(base(), () => table, () => undefined);
      const e = await a.set({ maxTurns: 3, maxToolResultBytes: 10 }, null).catch((x) => x);
      expect(e).to.be.instanceOf(ConfigChangeError);
      expect(e.message).to.equal('agent.maxToolResultBytes must be an integer from 1024 to 1048576');
      expect(table.rows.size).to.equal(0);
      expect(a.current().maxTurns).to.equal(7);
    });

    it('another store following the table (another thread) has a change after its event', async () => {
      const table = new MemorySettings();
      const a = new ConfigStore(base(), () => table, () => undefined);
      const b = new ConfigStore(base(), () => table, () => undefined);
      await b.follow();
      await a.set({ maxTurns: 77 }, null);
      await b.reload(); // the event's reload is queued; this one runs after it
      expect(b.current().maxTurns).to.equal(77);
    });

    it('a reload whose read was taken before a change does not put the old value back after it', async () => {
      const table = new MemorySettings();
      table.rows.set('maxTurns', { key: 'maxTurns', value: 77 });
      const search = table.search.bind(table);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let held = true;
      // The first read takes its rows now and answers once released, as a read racing a write does on Harper.
      table.search = async function* () {
        const rows: SettingRow[] = [];
        for await (const row of search()) rows.push(row);
        if (held) (held = false), await gate;
        yield* rows;
      };
      const a = new ConfigStore(base(), () => table, () => undefined);
      const inFlight = a.reload();
      await new Promise((r) => setImmediate(r));
      const changed = a.set({ maxTurns: 5 }, null);
      release();
      await Promise.all([inFlight, changed]);
      expect(a.current().maxTurns).to.equal(5);
      expect((await changed).config.maxTurns).to.equal(5);
    });

    it('a failed read does not stop later reloads', async () => {
      const table = new MemorySettings();
      table.rows.set('maxTurns', { key: 'maxTurns', value: 77 });
      const search = table.search.bind(table);
      let fail = true;
      table.search = async function* () {
        if (fail) throw new Error('table not ready');
        yield* search();
      };
      const a = new ConfigStore(base(), () => table, () => undefined);
      expect(await a.reload().then(() => 'read', (e: Error) => e.message)).to.equal('table not ready');
      fail = false;
      await a.reload();
      expect(a.current().maxTurns).to.equal(77);
    });

    it('skips a stored value the schema no longer accepts, naming it', async () => {
      const table = new MemorySettings();
      table.rows.set('maxToolResultBytes', { key: 'maxToolResultBytes', value: 12 });
      const warnings: string[] = [];
      const a = new ConfigStore(base(), () => table, (m) => warnings.push(m));
      await a.reload();
      expect(a.current().maxToolResultBytes).to.equal(65536);
      expect(warnings).to.deep.equal(['harper-agent: ignoring the stored agent.maxToolResultBytes 12 (agent.maxToolResultBytes must be an integer from 1024 to 1048576); using 65536']);
    });
  });
});

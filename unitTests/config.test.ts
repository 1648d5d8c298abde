import { expect } from 'chai';
import { applyConfigChange, cliAgentFlags, defaultConfig, loadAgentConfig, MAX_TOOL_RESULT_BYTES, publicConfig } from '../agent/agent.js';

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

  describe('set_agent_config changes', () => {
    for (const bad of [1023, 1048577, 'abc', 1.5, '2048']) {
      it(`rejects maxToolResultBytes ${JSON.stringify(bad)} naming the bounds`, () => {
        const r = applyConfigChange(defaultConfig(), { maxToolResultBytes: bad });
        expect(r.ok).to.equal(false);
        expect(!r.ok && r.problems[0]).to.equal('agent.maxToolResultBytes must be an integer from 1024 to 1048576');
      });
    }
    for (const ok of [1024, 1048576]) {
      it(`accepts the bound ${ok}`, () => {
        const r = applyConfigChange(defaultConfig(), { maxToolResultBytes: ok });
        expect(r.ok && r.config.maxToolResultBytes).to.equal(ok);
      });
    }
    it('is all or nothing, and rejects unknown keys', () => {
      const r = applyConfigChange(defaultConfig(), { maxTurns: 3, nope: true });
      expect(r.ok).to.equal(false);
      expect(!r.ok && r.problems[0]).to.match(/agent\.nope is not a known key/);
    });
  });

  it('never shows the API key', () => {
    expect(publicConfig({ ...defaultConfig(), apiKey: 'sk-secret' })).to.include({ apiKey: '(set)' });
    expect(JSON.stringify(publicConfig({ ...defaultConfig(), apiKey: 'sk-secret' }))).to.not.contain('sk-secret');
  });
});

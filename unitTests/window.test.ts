// How a context window is shared out (agent/context/window.ts), the tool tiers it picks from (tools/index.ts), and the
// stand-in tokenizer a self-hosted model is counted with (agent/tokenCount.ts).
import { expect } from 'chai';
import { createRequire } from 'node:module';
import { defaultConfig } from '../agent/agent.js';
import { answerTokens, fitToWindow, smallestWindow, type ToolTier } from '../agent/context/window.js';
import { counterFor, STAND_IN_MARGIN } from '../agent/tokenCount.js';
import { createToolRegistry, defaultTools, firstSentence } from '../agent/tools/index.js';

const { countTokens } = createRequire(import.meta.url)('gpt-tokenizer/cjs/model/gpt-4o') as { countTokens(text: string): number };

describe('the window shared out', () => {
  it('the answer: agent.maxTokens when set, else 4,096, or an eighth of a window under 32,768 (at least 256)', () => {
    expect([answerTokens(undefined, undefined), answerTokens(undefined, 200_000), answerTokens(undefined, 32_768), answerTokens(undefined, 8192), answerTokens(undefined, 4096), answerTokens(undefined, 1024)]).to.deep.equal([4096, 4096, 4096, 1024, 512, 256]);
    expect(answerTokens(2000, 8192)).to.equal(2000);
  });

  it('a large window or none changes nothing but the answer; a small one fits the result, the working set, the head and the tier', () => {
    const config = defaultConfig();
    const fixed: Record<ToolTier, number> = { full: 4000, brief: 3300, core: 1400 };
    expect(fitToWindow(config, undefined, (t) => fixed[t])).to.deep.equal({ config: { ...config, maxTokens: 4096 }, tier: 'full', headBytes: 2048 });
    expect(fitToWindow(config, 200_000, (t) => fixed[t])).to.deep.equal({ config: { ...config, maxTokens: 4096 }, tier: 'full', headBytes: 2048 });
    // 8,192: an answer of 1,024 leaves 7,168; 40% of it (2,867) holds the core tier only; a result of 7,168 bytes (half
    // the budget at 2 bytes a token), a working set of three quarters of it, heads of an eighth.
    expect(fitToWindow(config, 8192, (t) => fixed[t])).to.deep.equal({ config: { ...config, maxTokens: 1024, maxToolResultBytes: 7168, workingSetBytes: 5376 }, tier: 'core', headBytes: 896 });
    // Below what the operator set, never above it; a working set turned off stays off.
    const set = { ...config, maxToolResultBytes: 4096, workingSetBytes: 0 };
    expect(fitToWindow(set, 8192, (t) => fixed[t]).config).to.include({ maxToolResultBytes: 4096, workingSetBytes: 0 });
    // The first tier that fits wins.
    expect(fitToWindow(config, 10_240, (t) => fixed[t]).tier).to.equal('brief');
    expect(fitToWindow(config, 16_384, (t) => fixed[t]).tier).to.equal('full');
  });

  it('the smallest window: the core tier within 40% of what the answer leaves, in steps of 256', () => {
    // 1,400 tokens need a budget of 3,500: with an eighth for the answer, a window of 4,000, so 4,096.
    expect(smallestWindow(undefined, 1400)).to.equal(4096);
    expect(fitToWindow(defaultConfig(), 4096, (t) => ({ full: 4000, brief: 3300, core: 1400 })[t]).tier).to.equal('core');
    // With agent.maxTokens 4,096 set: 4,096 + 3,500.
    expect(smallestWindow(4096, 1400)).to.equal(7680);
  });
});

describe('tool tiers', () => {
  const registry = createToolRegistry(defaultTools);
  const all = { operations: true, data: true, followups: true };

  it('full: every tool a run can use, as written; brief: the same tools, short descriptions, no parameter descriptions', () => {
    const full = registry.specs(all);
    const brief = registry.specs(all, 'brief');
    expect(brief.map((t) => t.name)).to.deep.equal(full.map((t) => t.name));
    const described = (schema: unknown): number => (schema && typeof schema === 'object' ? Object.entries(schema).reduce((n, [k, v]) => n + (k === 'description' && typeof v === 'string' ? 1 : described(v)), 0) : 0);
    expect(full.reduce((n, t) => n + described(t.parameters), 0)).to.be.above(20);
    expect(brief.reduce((n, t) => n + described(t.parameters), 0)).to.equal(0);
    for (const [i, t] of brief.entries()) {
      const tool = defaultTools.find((d) => d.name === t.name)!;
      expect(t.description).to.equal(tool.brief ?? firstSentence(full[i]!.description));
      expect(t.description.length).to.be.at.most(full[i]!.description.length);
    }
    expect(Buffer.byteLength(JSON.stringify(brief))).to.be.below(Buffer.byteLength(JSON.stringify(full)) * 0.75);
  });

  it('core: the file tools, the log, the config, replication and the tables, each paging tool saying how to page', () => {
    const core = registry.specs(all, 'core');
    expect(core.map((t) => t.name)).to.deep.equal(['read_file', 'tail_file', 'list_dir', 'grep_files', 'describe_tables', 'read_log', 'cluster_status', 'get_configuration']);
    const described = Object.fromEntries(core.map((t) => [t.name, t.description]));
    expect(described.read_file).to.contain('nextLine and nextOffset back as startLine and offset');
    expect(described.list_dir).to.contain('nextOffset back as offset');
    expect(described.read_log).to.contain('nextStart back as start');
    // Without operations, the operation tools go (as in every tier).
    expect(registry.specs({ ...all, operations: false }, 'core').map((t) => t.name)).to.deep.equal(['read_file', 'tail_file', 'list_dir', 'grep_files', 'describe_tables']);
  });
});

describe('counting a self-hosted model', () => {
  it('an OpenAI model with its own tokenizer is counted with it; one without, on Ollama or an OpenAI-compatible server, with o200k_base and a margin; Claude with none', async () => {
    const text = '2026-12-06T03:14:15.926Z [info] GET /api/orders/1234 200 17 ms\n'.repeat(40);
    const own = (await counterFor('openai', 'gpt-4o'))!;
    expect([own.name, own.count(text)]).to.deep.equal(['gpt-tokenizer gpt-4o', countTokens(text)]);
    for (const [provider, model] of [['ollama', 'llama3.1:8b'], ['openai', 'qwen2.5-7b-instruct']] as const) {
      const c = (await counterFor(provider, model))!;
      expect(c.name).to.equal(`gpt-tokenizer o200k_base × ${STAND_IN_MARGIN} (a stand-in: none for ${model})`);
      expect(c.count(text)).to.equal(Math.ceil(countTokens(text) * STAND_IN_MARGIN));
    }
    expect(await counterFor('anthropic', 'claude-sonnet-4-5')).to.equal(undefined);
  });
});

// harper_best_practice: Harper's own best-practice rules, from the @harperfast/skills package (a dependency, so it is
// there offline). A rule is served by read_file's paging, so one larger than a page comes in pages like any file.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { readPage } from './fsTools.js';
import { openChecked } from './scopes.js';
import { ToolError, type Tool } from './types.js';

const RULE_NAME = /^[a-z0-9][a-z0-9-]*$/;

/** The package's rules directory, or null when the package cannot be found (the tool then says so). */
export function rulesDirectory(): string | null {
  try {
    const entry = createRequire(import.meta.url).resolve('@harperfast/skills');
    for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const rules = path.join(dir, 'harper-best-practices', 'rules');
      if (existsSync(rules)) return rules;
    }
  } catch {
    // not installed
  }
  return null;
}

let cached: { dir: string; rules: string[] } | null | undefined;
function catalog(): { dir: string; rules: string[] } {
  cached ??= (() => {
    const dir = rulesDirectory();
    if (!dir) return null;
    const rules = readdirSync(dir).filter((f) => f.endsWith('.md')).map((f) => f.slice(0, -3)).filter((r) => RULE_NAME.test(r)).sort();
    return { dir, rules };
  })();
  if (!cached) throw new ToolError('the @harperfast/skills package is not installed with this agent, so no best-practice rules are available');
  return cached;
}

export const bestPracticeTool: Tool = {
  name: 'harper_best_practice',
  description:
    "Harper's own best-practice rules (from @harperfast/skills): call with no rule for the list of rule names, then with " +
    'rule to read one. A rule is read like read_file: a page of whole lines; while it continues the result has nextLine ' +
    'and nextOffset, pass them back as startLine and offset.',
  parameters: {
    type: 'object',
    properties: {
      rule: { type: 'string', maxLength: 100, description: 'A rule name from the list (e.g. "caching").' },
      startLine: { type: 'integer', minimum: 1, description: 'First line to return, 1-based (default 1).' },
      offset: { type: 'integer', minimum: 0, description: 'Byte offset of startLine, from a previous nextOffset.' },
    },
    additionalProperties: false,
  },
  advice: 'keep paging with nextLine and nextOffset',
  async handler(args, ctx) {
    const { dir, rules } = catalog();
    if (args.rule === undefined) return { rules };
    const rule = args.rule as string;
    if (!RULE_NAME.test(rule) || !rules.includes(rule)) throw new ToolError(`unknown rule ${JSON.stringify(rule)}: the rules are ${rules.join(', ')}`);
    const real = path.join(dir, `${rule}.md`);
    const display = `best-practices/${rule}.md`;
    const page = await readPage({ display, ...(await openChecked({ display, real, stats: statSync(real) })) }, args, ctx);
    return { rule, ...page };
  },
};

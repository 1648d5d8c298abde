// The README's agent.* table, generated from schema/config.schema.json so the two never drift: `npm run docs:config`
// rewrites it, and a unit test fails when the README's copy differs from what this prints.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { boundsText, CONFIG_KEYS, defaultText, describeKey } from '../agent/agent.js';

export const TABLE_START = '<!-- config table: generated from schema/config.schema.json by `npm run docs:config`; edit the schema -->';
export const TABLE_END = '<!-- end of config table -->';

const cell = (text: string) => text.replace(/\|/g, '\\|');

export function configTable(): string {
  const rows = CONFIG_KEYS.map((k) => `| \`${k}\` | ${cell(defaultText(k))} | ${cell(boundsText(k))} | ${cell(describeKey(k))} |`);
  return ['| key | default | bounds | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
}

/** The README with its table replaced by the generated one. */
export function withConfigTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README.md lacks the config table markers ${TABLE_START} … ${TABLE_END}`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${configTable()}\n${readme.slice(end)}`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const readme = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../README.md');
  const before = readFileSync(readme, 'utf8');
  const after = withConfigTable(before);
  writeFileSync(readme, after);
  console.log(after === before ? 'README.md: config table already up to date' : 'README.md: config table rewritten from schema/config.schema.json');
}

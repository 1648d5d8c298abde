// BENCHMARKS.md is written by more than one script: `npm run bench` writes the file, `npm run stress`,
// `npm run bench:cache` and `npm run bench:list` their own sections.
// A section lives between `<!-- name -->` and `<!-- /name -->`; each script replaces only its own.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const markers = (name: string) => [`<!-- ${name} -->`, `<!-- /${name} -->`] as const;

/** `file`'s section `name` (markers included), or '' when it has none. */
export function sectionOf(file: string, name: string): string {
  if (!existsSync(file)) return '';
  const text = readFileSync(file, 'utf8');
  const [open, close] = markers(name);
  const start = text.indexOf(open);
  const end = text.indexOf(close, start);
  return start < 0 || end < 0 ? '' : text.slice(start, end + close.length);
}

/** Writes `body` as `file`'s section `name`, in place of the one there, or at the end. */
export function replaceSection(file: string, name: string, body: string): void {
  const [open, close] = markers(name);
  const section = `${open}\n${body}\n${close}`;
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const old = sectionOf(file, name);
  writeFileSync(file, old ? text.replace(old, section) : `${text.trimEnd()}\n\n${section}\n`);
}

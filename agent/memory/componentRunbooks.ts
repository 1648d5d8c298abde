// Runbooks a component ships: markdown files in a `runbooks/` folder of any component in Harper's components folder,
// deployed with it and so on every node it lands on. They are kept in AgentRunbook like those added with
// add_agent_runbook (found by search_memory, read by read_runbook), with `source` naming the file: worker 0 syncs them at
// boot and every RUNBOOK_SYNC_MS, and list_agent_runbooks before it answers (Memory.refreshShipped: the files are read
// only when their names, sizes or times changed; a new or changed file is written, a file gone takes its runbook). A file over
// the size limit or holding key material is skipped and logged, never stored. Title and tags come from a YAML front
// matter (`title:`, `tags:`), else the first `# heading` and the file's name.
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { MAX_RUNBOOK_BYTES, MemoryError, refuseKeys, SHIPPED_PREFIX, type ShippedRunbook, type ShippedSource } from './memory.js';

export const RUNBOOK_SYNC_MS = 15_000;
/** Where a component keeps its runbooks. */
export const RUNBOOKS_FOLDER = 'runbooks';

/** A shipped runbook's id: readable (`component:<component>:<path>`), within the operations' id pattern and length. */
export function shippedId(source: string): string {
  const readable = SHIPPED_PREFIX + source.replace(/\//g, ':').replace(/[^A-Za-z0-9._:-]/g, '-');
  if (readable.length <= 128) return readable;
  return `${readable.slice(0, 111)}-${createHash('sha256').update(source).digest('hex').slice(0, 16)}`;
}

/** Title, tags and body of one markdown file: a YAML front matter's `title` and `tags` (a list, or words split by
 * commas), else the first `# heading` and the file's name. */
export function runbookFromMarkdown(fileName: string, text: string): { title: string; tags: string[]; body: string } {
  let body = text;
  let meta: Record<string, unknown> = {};
  const front = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  if (front) {
    try {
      const parsed = parse(front[1]!) as unknown;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) meta = parsed as Record<string, unknown>;
      body = text.slice(front[0].length);
    } catch {
      // not front matter after all: the file is all body
    }
  }
  const heading = /^#\s+(.+)$/m.exec(body)?.[1]?.trim();
  const title = (typeof meta.title === 'string' && meta.title.trim()) || heading || path.basename(fileName, path.extname(fileName));
  const rawTags = Array.isArray(meta.tags) ? meta.tags : typeof meta.tags === 'string' ? meta.tags.split(',') : [];
  const tags = rawTags.map((t) => String(t).trim().toLowerCase()).filter(Boolean).slice(0, 20);
  return { title: title.slice(0, 200), tags, body };
}

/** A shipped runbook's file: where it is, and what says it changed. */
export interface RunbookFile {
  file: string;
  /** Relative to the components folder, with `/`. */
  source: string;
  size: number;
  mtimeMs: number;
}

/** Every `<component>/runbooks/**.md` under `componentsDir` (node_modules and dot folders left out), in order, and the
 * component folders there are. */
export async function runbookFiles(componentsDir: string): Promise<{ files: RunbookFile[]; components: string[] }> {
  const out: RunbookFile[] = [];
  const names: string[] = [];
  const components = await readdir(componentsDir, { withFileTypes: true }).catch(() => []);
  for (const component of components.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (!component.isDirectory() || component.name.startsWith('.')) continue;
    names.push(component.name);
    for (const file of await markdownFiles(path.join(componentsDir, component.name, RUNBOOKS_FOLDER))) {
      const st = await stat(file).catch(() => undefined);
      if (st) out.push({ file, source: path.relative(componentsDir, file).split(path.sep).join('/'), size: st.size, mtimeMs: st.mtimeMs });
    }
  }
  return { files: out, components: names };
}

/** What the files are as one string: unchanged, nothing needs reading. */
export const filesSignature = (files: readonly RunbookFile[]) => files.map((f) => `${f.source}\u0000${f.size}\u0000${f.mtimeMs}`).join('\n');

/** The runbooks in `files`. A file refused (too large, key material) is logged and left out. */
export async function readShippedRunbooks(files: readonly RunbookFile[], log: (message: string) => void): Promise<ShippedRunbook[]> {
  const found: ShippedRunbook[] = [];
  for (const { file, source, size } of files) {
    try {
      if (size > MAX_RUNBOOK_BYTES) throw new MemoryError(`it is ${size} bytes, over the ${MAX_RUNBOOK_BYTES}-byte limit`);
      const text = await readFile(file, 'utf8');
      refuseKeys('it', text);
      found.push({ runbook_id: shippedId(source), source, ...runbookFromMarkdown(file, text) });
    } catch (error) {
      log(`harper-agent: runbook components/${source} is not served: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return found;
}

/** Where Memory finds the components' runbooks: a cheap look at the files (names, sizes, times), and their reading. */
export function shippedRunbooks(componentsDir: string, log: (message: string) => void): ShippedSource {
  return async () => {
    const { files, components } = await runbookFiles(componentsDir);
    return { signature: `${components.join('/')}\n${filesSignature(files)}`, components, read: () => readShippedRunbooks(files, log) };
  };
}

async function markdownFiles(dir: string, depth = 0): Promise<string[]> {
  if (depth > 4) return [];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.name.startsWith('.') || e.name === 'node_modules') continue;
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await markdownFiles(full, depth + 1)));
    else if (e.isFile() && /\.md$/i.test(e.name)) out.push(full);
  }
  return out;
}

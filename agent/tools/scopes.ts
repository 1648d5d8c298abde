// The filesystem scopes the tools may touch, fixed at boot, and the one path check every fs tool goes through.
import { closeSync, constants as fsConstants, fstatSync, lstatSync, openSync, readSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { ToolError } from './types.js';

export type ScopeName = 'components' | 'logs' | 'config';
export const SCOPE_NAMES: ScopeName[] = ['components', 'logs', 'config'];

export interface Scopes {
  /** Harper's components root: the only writable scope. */
  components: string;
  /** Harper's log directory, read-only. */
  logs: string;
  /** Harper's config file alone, read-only. */
  config: string;
  /** Harper's root path: its keys/ and ssh/ directories are never served. */
  rootPath: string;
  /** Scopes this run may not open, each with the reason the model is told (agent/access.ts: by the user's role). */
  closed?: Partial<Record<ScopeName, string>>;
}

export interface ResolvedPath {
  /** `<scope>/<relative path>` as the model sees it. */
  display: string;
  /** The checked absolute path with every symlink resolved; open this one, not the lexical path. */
  real: string;
  stats: Stats;
}

const KEY_FILE = /(\.pem|\.key)$|^\.jwtPass$/i;

export function isKeyFileName(name: string): boolean {
  return KEY_FILE.test(name);
}

function within(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

// Path checks use the synchronous calls: they touch only metadata, and on this kind of machine an async call costs
// five times its work in thread-pool hops, which dominated a page.

/** Real paths of scope roots and Harper's root: fixed at boot, so resolved once. */
const fixedReal = new Map<string, string>();
function realOrSelf(p: string): string {
  let real = fixedReal.get(p);
  if (real === undefined) {
    try {
      real = realpathSync.native(p);
    } catch {
      real = path.resolve(p);
    }
    fixedReal.set(p, real);
  }
  return real;
}

/** Is this absolute path inside Harper's key directories, lexically or once resolved? */
export function isKeyDirectoryPath(scopes: Scopes, absolute: string): boolean {
  const roots = [path.resolve(scopes.rootPath), realOrSelf(scopes.rootPath)];
  return roots.some((root) => within(path.join(root, 'keys'), absolute) || within(path.join(root, 'ssh'), absolute));
}

/** The checks on the text of a path, before it touches the filesystem. */
export function checkRelativePath(relative: string): string {
  if (relative.includes('\0')) throw new ToolError('path must not contain NUL bytes');
  if (relative.includes('\\')) throw new ToolError(`path ${JSON.stringify(relative)} uses "\\": use "/" as the separator`);
  if (relative.startsWith('/') || /^[A-Za-z]:/.test(relative)) {
    throw new ToolError(`path ${JSON.stringify(relative)} is absolute: give a path relative to the scope's root`);
  }
  if (Buffer.byteLength(relative) > 4096) throw new ToolError('path is longer than 4096 bytes');
  const parts = relative.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new ToolError(`path ${JSON.stringify(relative)} contains "..": paths may not leave the scope`);
  return parts.join('/');
}

export interface ResolveOptions {
  write?: boolean;
  /** For write_file: the target may not exist yet. */
  mayNotExist?: boolean;
}

/**
 * Resolves `root` + `relative` to a real path inside the scope, refusing escapes (.., absolute paths, symlinks
 * out of scope or dangling), writes outside `components`, and key material (Harper's keys/ and ssh/
 * directories, *.pem, *.key, .jwtPass).
 */
export async function resolveScoped(
  scopes: Scopes,
  root: unknown,
  relativeInput: unknown,
  options: ResolveOptions = {}
): Promise<ResolvedPath & { exists: boolean }> {
  if (typeof root !== 'string' || !SCOPE_NAMES.includes(root as ScopeName)) {
    throw new ToolError(`root must be one of ${SCOPE_NAMES.join(', ')}`);
  }
  const scope = root as ScopeName;
  const closed = scopes.closed?.[scope];
  if (closed) throw new ToolError(closed);
  if (options.write && scope !== 'components') {
    throw new ToolError(`the ${scope} scope is read-only: only root "components" can be written`);
  }
  const relative = checkRelativePath(typeof relativeInput === 'string' ? relativeInput : '');
  let lexical: string;
  let scopeBase: string;
  if (scope === 'config') {
    const name = path.basename(scopes.config);
    if (relative !== '' && relative !== name) {
      throw new ToolError(`the config scope holds only ${name}: pass path "${name}" or leave it out`);
    }
    lexical = scopes.config;
    scopeBase = scopes.config;
  } else {
    scopeBase = scopes[scope];
    lexical = path.resolve(scopeBase, relative);
    if (!within(scopeBase, lexical)) throw new ToolError(`path ${JSON.stringify(relative)} leaves the ${scope} scope`);
  }
  const display = scope === 'config' ? `config/${path.basename(scopes.config)}` : relative ? `${scope}/${relative}` : `${scope}/`;
  if (isKeyFileName(path.basename(lexical)) || isKeyDirectoryPath(scopes, lexical)) {
    throw new ToolError(`${display} is key material and is never served`);
  }

  let real: string;
  let exists = true;
  try {
    real = realpathSync.native(lexical);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ToolError(`cannot open ${display}: ${code}`);
    const link = lstatSync(lexical, { throwIfNoEntry: false });
    if (link?.isSymbolicLink()) throw new ToolError(`${display} is a dangling symlink`);
    if (!options.mayNotExist) throw new ToolError(`${display} does not exist`);
    // A new file: its nearest existing ancestor must resolve inside the scope.
    let ancestor = path.dirname(lexical);
    while (!lstatSync(ancestor, { throwIfNoEntry: false })) ancestor = path.dirname(ancestor);
    const realAncestor = realpathSync.native(ancestor);
    real = path.join(realAncestor, path.relative(ancestor, lexical));
    exists = false;
  }
  const realBase = realOrSelf(scopeBase);
  if (!within(realBase, real)) throw new ToolError(`${display} is a symlink that leaves the ${scope} scope`);
  if (isKeyFileName(path.basename(real)) || isKeyDirectoryPath(scopes, real)) {
    throw new ToolError(`${display} is key material and is never served`);
  }
  const stats = exists ? statSync(real) : (undefined as unknown as Stats);
  return { display, real, stats, exists };
}

/**
 * An open file the tools read. Its calls are synchronous under a promise-shaped face: a page is a few small reads
 * from the page cache, and on this kind of machine each thread-pool hop of an async call cost more than the read.
 */
export class CheckedFile {
  constructor(private readonly fd: number) {}
  async read(buf: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    return { bytesRead: readSync(this.fd, buf, offset, length, position) };
  }
  async close(): Promise<void> {
    closeSync(this.fd);
  }
}

/**
 * Opens the checked real path without following a symlink swapped in since the check, and refuses it if the file
 * it opened is not the one that was checked.
 */
export async function openChecked(resolved: ResolvedPath): Promise<{ handle: CheckedFile; size: number }> {
  if (!resolved.stats.isFile()) throw new ToolError(`${resolved.display} is not a regular file`);
  let fd: number;
  try {
    fd = openSync(resolved.real, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new ToolError(`${resolved.display} changed into a symlink while it was checked`);
    throw new ToolError(`cannot open ${resolved.display}: ${code ?? error}`);
  }
  const opened = fstatSync(fd);
  if (opened.ino !== resolved.stats.ino || opened.dev !== resolved.stats.dev) {
    closeSync(fd);
    throw new ToolError(`${resolved.display} changed while it was checked`);
  }
  return { handle: new CheckedFile(fd), size: opened.size };
}

/** An open, checked file and the name the model knows it by. */
export interface OpenedFile {
  display: string;
  handle: CheckedFile;
  size: number;
}

/** Paths read before, resolved (scope, realpath, stat, key checks), by scope root and path as given: read_file and
 * tail_file page through one file many times, and resolving it again cost more than reading a page. An entry is used
 * only through openChecked, which refuses any file but the inode that was checked; on any failure the path is resolved
 * afresh, so a rotated, removed or swapped file is seen as it is now. */
const resolvedReads = new Map<string, ResolvedPath>();
const MAX_RESOLVED_READS = 256;

/** Resolves and opens a file for reading (read_file, tail_file), reusing an earlier resolution of the same path. */
export async function openScoped(scopes: Scopes, root: unknown, relative: unknown): Promise<OpenedFile> {
  // Before the cache: a path another run resolved is still closed to this one.
  const closed = typeof root === 'string' ? scopes.closed?.[root as ScopeName] : undefined;
  if (closed) throw new ToolError(closed);
  const key = typeof root === 'string' && typeof relative === 'string' && SCOPE_NAMES.includes(root as ScopeName) ? [scopes.rootPath, root, scopes[root as ScopeName], relative].join('\0') : undefined;
  const known = key === undefined ? undefined : resolvedReads.get(key);
  if (known) {
    try {
      return { display: known.display, ...(await openChecked(known)) };
    } catch {
      resolvedReads.delete(key!);
    }
  }
  const resolved = await resolveScoped(scopes, root, relative);
  const opened = await openChecked(resolved);
  if (key !== undefined) {
    if (resolvedReads.size >= MAX_RESOLVED_READS) resolvedReads.delete(resolvedReads.keys().next().value!);
    resolvedReads.set(key, resolved);
  }
  return { display: resolved.display, ...opened };
}

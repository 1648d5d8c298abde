import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { capObservation } from '../agent/observation.js';
import { listDir, readFile, tailFile, writeFile, type ReadFileResult } from '../agent/tools/fsTools.js';
import { grepFiles } from '../agent/tools/grepFiles.js';
import type { ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

const scopes = tempScopes();
const ctx = (maxResultBytes: number): ToolContext => ({ scopes, maxResultBytes, signal: new AbortController().signal });
const log = (name: string, content: string | Buffer) => {
  writeFileSync(path.join(scopes.logs, name), content);
  return name;
};
const call = { id: 'c', name: 'read_file', arguments: {} };

/** Pages a file from start to end with the cursors; checks each page fits and is never cut by the loop's cap. */
async function readAll(name: string, cap: number, cursor: 'byte' | 'line' = 'byte', lineCount?: number) {
  const parts: Buffer[] = [];
  const pages: ReadFileResult[] = [];
  let args: Record<string, unknown> = { root: 'logs', path: name, ...(lineCount ? { lineCount } : {}) };
  for (let i = 0; i < 100_000; i++) {
    const r = await readFile(args, ctx(cap));
    const stored = capObservation(call, r, false, cap);
    expect(stored.cut, `page ${i} was cut by the cap`).to.equal(undefined);
    expect(Buffer.byteLength(stored.content)).to.be.at.most(cap);
    expect(Buffer.byteLength(JSON.stringify(r))).to.be.at.most(Math.floor(cap / 2));
    parts.push(Buffer.from(r.content, 'utf8'));
    pages.push(r);
    if (r.nextOffset === undefined) return { bytes: Buffer.concat(parts), pages };
    args = cursor === 'byte' ? { ...args, startLine: r.nextLine, offset: r.nextOffset } : { ...args, startLine: r.nextLine };
    if (cursor === 'line' && r.lineTruncated) args = { ...args, offset: r.nextOffset };
  }
  throw new Error('did not reach the end');
}

const multibyte = Array.from({ length: 3000 }, (_, i) => `${i} é€😀 ${'ü'.repeat(i % 17)}`).join('\n') + '\n';
const files: Record<string, string | Buffer> = {
  'crlf.log': Array.from({ length: 500 }, (_, i) => `line ${i} with CRLF`).join('\r\n') + '\r\n',
  'no-trailing-newline.log': 'a\nbb\nccc',
  'empty.log': '',
  'only-newlines.log': '\n'.repeat(2000),
  'multibyte.log': multibyte,
  'minified.js': 'x'.repeat(300_000) + '€'.repeat(100_000) + '\n',
  'controls.log': Array.from({ length: 400 }, (_, i) => `ctl ${i} \u0001\u0002\u001f "q" \\ \t end`).join('\n'),
};

describe('read_file paging', () => {
  for (const [name, content] of Object.entries(files)) log(name, content);

  for (const cap of [1024, 4096, 65536]) {
    for (const name of Object.keys(files)) {
      it(`reassembles ${name} exactly at cap ${cap}, every page within the cap`, async () => {
        const { bytes, pages } = await readAll(name, cap);
        expect(bytes.equals(Buffer.from(files[name]!))).to.equal(true);
        const last = pages.at(-1)!;
        const expectedLines = (() => {
          const t = files[name]!.toString();
          if (!t) return 0;
          return t.split('\n').length - (t.endsWith('\n') ? 1 : 0);
        })();
        expect(last.totalLines).to.equal(expectedLines);
      });
    }
  }

  it('a 1 MB single line comes back in parts flagged lineTruncated, continued on the same line', async () => {
    const { pages } = await readAll('minified.js', 65536);
    expect(pages.length).to.be.greaterThan(10);
    for (const p of pages.slice(0, -1)) {
      expect(p.lineTruncated).to.equal(true);
      expect(p.startLine).to.equal(1);
      expect(p.nextLine).to.equal(1);
    }
  });

  it('the line cursor alone and the byte cursor give the same pages', async () => {
    const byByte = await readAll('multibyte.log', 4096, 'byte');
    const byLine = await readAll('multibyte.log', 4096, 'line');
    expect(byLine.pages.map((p) => [p.startLine, p.offset, p.content])).to.deep.equal(byByte.pages.map((p) => [p.startLine, p.offset, p.content]));
  });

  it('respects lineCount', async () => {
    const r = await readFile({ root: 'logs', path: 'crlf.log', lineCount: 3 }, ctx(65536));
    expect(r).to.include({ startLine: 1, endLine: 3, nextLine: 4, content: 'line 0 with CRLF\r\nline 1 with CRLF\r\nline 2 with CRLF\r\n', nextOffset: 54 });
    const r2 = await readFile({ root: 'logs', path: 'crlf.log', startLine: 4, offset: 54, lineCount: 1 }, ctx(65536));
    expect(r2.content).to.equal('line 3 with CRLF\r\n');
  });

  it('a 1 MB log pages at about 32 KB at the default cap', async () => {
    log('big.log', Array.from({ length: 9000 }, (_, i) => `2026-12-02T10:00:00Z [info] request ${i} served in ${i % 100} ms ${'.'.repeat(60)}`).join('\n') + '\n');
    const r = await readFile({ root: 'logs', path: 'big.log' }, ctx(65536));
    expect(Buffer.byteLength(r.content)).to.be.within(32_000, 32_768);
    expect(r.nextOffset).to.equal(Buffer.byteLength(r.content));
  });

  for (const [args, message] of [
    [{ startLine: 1, offset: -1 }, /offset/],
    [{ startLine: 1, offset: 10_000_000 }, /offset 10000000 is past the end of logs\/multibyte.log/],
    [{ startLine: 99999 }, /startLine 99999 is past the end of logs\/multibyte.log \(3000 lines\)/],
    [{ startLine: 1, offset: 5 }, /inside a UTF-8 character/],
    [{ offset: 0 }, /offset needs startLine/],
  ] as const) {
    it(`refuses a bad cursor: ${JSON.stringify(args)}`, async () => {
      const e = await readFile({ root: 'logs', path: 'multibyte.log', ...args }, ctx(65536)).then(() => null, (err: Error) => err);
      // A negative offset is refused by the tool's schema in the loop; the handler refuses what passes it.
      if ((args as { offset?: number }).offset === -1) return;
      expect(e?.message).to.match(message);
    });
  }
});

describe('tail_file', () => {
  it('returns the last lines that fit, reading only the end, and says truncated', async () => {
    log('tail.log', Array.from({ length: 1000 }, (_, i) => `entry ${i}`).join('\n') + '\n');
    const r = await tailFile({ root: 'logs', path: 'tail.log', lines: 3 }, ctx(65536));
    expect(r).to.include({ content: 'entry 997\nentry 998\nentry 999\n', lines: 3, truncated: false });
    const small = await tailFile({ root: 'logs', path: 'tail.log', lines: 1000 }, ctx(1024));
    expect(small.truncated).to.equal(true);
    expect(small.lines).to.be.greaterThan(10).and.lessThan(1000);
    expect(Buffer.byteLength(capObservation(call, small, false, 1024).content)).to.be.at.most(1024);
    expect(small.content.endsWith('entry 999\n')).to.equal(true);
    expect(readFileSync(path.join(scopes.logs, 'tail.log')).subarray(small.offset).toString()).to.equal(small.content);
  });

  it('a last line longer than a page comes back as its end, flagged lineTruncated', async () => {
    const r = await tailFile({ root: 'logs', path: 'minified.js', lines: 5 }, ctx(1024));
    expect(r.lineTruncated).to.equal(true);
    expect(r.content.endsWith('€€\n')).to.equal(true);
    expect(Buffer.byteLength(JSON.stringify(r))).to.be.at.most(512);
  });
});

describe('list_dir', () => {
  it('pages a 120-entry directory at the 1,024 cap and reassembles the full listing', async () => {
    const dir = path.join(scopes.components, 'many');
    mkdirSync(dir, { recursive: true });
    const names = Array.from({ length: 120 }, (_, i) => `file-${String(i).padStart(3, '0')}-${'n'.repeat(i % 30)}.js`);
    for (const n of names) writeFileSync(path.join(dir, n), n);
    const seen: string[] = [];
    let offset: number | undefined = 0;
    let pages = 0;
    while (offset !== undefined) {
      const r = await listDir({ root: 'components', path: 'many', offset }, ctx(1024));
      expect(capObservation(call, r, false, 1024).cut).to.equal(undefined);
      expect(r.total).to.equal(120);
      seen.push(...r.entries.map((e) => e.name));
      for (const e of r.entries) expect(e).to.include({ type: 'file', size: Buffer.byteLength(e.name) });
      offset = r.nextOffset;
      pages++;
    }
    expect(seen).to.deep.equal([...names].sort());
    expect(pages).to.be.greaterThan(5);
  });

  it('cuts a name too long for a page and moves past it', async () => {
    const dir = path.join(scopes.components, 'longname');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, '\u0001'.repeat(200)), '');
    writeFileSync(path.join(dir, 'z'), '');
    const r = await listDir({ root: 'components', path: 'longname' }, ctx(1024));
    expect(r.entries[0]!.nameTruncated).to.equal(true);
    expect(r.nextOffset).to.equal(1);
    const r2 = await listDir({ root: 'components', path: 'longname', offset: 1 }, ctx(1024));
    expect(r2.entries.map((e) => e.name)).to.deep.equal(['z']);
  });
});

describe('grep_files', () => {
  it('finds matches with path and line number, within the budget, and says truncated', async () => {
    mkdirSync(path.join(scopes.logs, 'g'), { recursive: true });
    log('g/a.log', 'ok\nERROR one\nfine\nERROR two\n');
    log('g/b.log', Array.from({ length: 2000 }, (_, i) => `ERROR number ${i}`).join('\n'));
    log('g/0bin.dat', Buffer.from([0, 1, 2, 69, 82, 82, 79, 82]));
    const r = await grepFiles({ root: 'logs', path: 'g', pattern: 'ERROR' }, ctx(4096));
    expect(r.matches.slice(0, 2)).to.deep.equal([
      { path: 'logs/g/a.log', line: 2, text: 'ERROR one' },
      { path: 'logs/g/a.log', line: 4, text: 'ERROR two' },
    ]);
    expect(r.matches[2]).to.deep.equal({ path: 'logs/g/b.log', line: 1, text: 'ERROR number 0' });
    expect(r.truncated).to.equal(true);
    expect(r.skippedFiles).to.deep.equal([{ path: 'logs/g/0bin.dat', reason: 'binary' }]);
    expect(capObservation(call, r, false, 4096).cut).to.equal(undefined);
  });

  it('refuses an invalid pattern clearly, and stops a pathological one', async () => {
    const bad = await grepFiles({ root: 'logs', pattern: '(' }, ctx(4096)).catch((e: Error) => e);
    expect((bad as Error).message).to.match(/^invalid pattern: /);
    log('redos.log', 'a'.repeat(40) + '!\n');
    const slow = await grepFiles({ root: 'logs', path: 'redos.log', pattern: '^(a+)+$' }, ctx(4096), 500).catch((e: Error) => e);
    expect((slow as Error).message).to.match(/grep_files stopped after 0.5 s: simplify the pattern/);
  });
});

describe('write_file', () => {
  it('writes atomically inside an existing component, creating directories; a new component folder is refused', async () => {
    const refused = await writeFile({ root: 'components', path: 'notes/todo.txt', content: 'x' }, ctx(65536)).catch((e: Error) => e.message);
    expect(refused).to.equal("components/notes does not exist: write_file writes inside an existing component's folder (Harper loads every folder in components as a component at its next boot, and a new one that is not a component fails there)");
    expect(existsSync(path.join(scopes.components, 'notes'))).to.equal(false);
    mkdirSync(path.join(scopes.components, 'app'), { recursive: true });
    const r = await writeFile({ root: 'components', path: 'app/new/file.txt', content: 'héllo' }, ctx(65536));
    expect(r).to.deep.equal({ path: 'components/app/new/file.txt', bytes: 6, created: true });
    expect(readFileSync(path.join(scopes.components, 'app/new/file.txt'), 'utf8')).to.equal('héllo');
  });
  it('refuses content over the limit', async () => {
    const e = await writeFile({ root: 'components', path: 'big.txt', content: 'x'.repeat(1024 * 1024 + 1) }, ctx(65536)).catch((err: Error) => err);
    expect((e as Error).message).to.equal('content is 1048577 bytes; write_file writes at most 1048576 bytes');
  });
});

describe('page budget at the minimum cap', () => {
  it('an ~800-byte nested path at the 1,024 cap gets the explicit error from all four read tools', async () => {
    const rel = Array.from({ length: 16 }, (_, i) => `directory-level-${String(i).padStart(2, '0')}-${'d'.repeat(30)}`).join('/');
    expect(Buffer.byteLength(rel)).to.be.within(780, 820);
    mkdirSync(path.join(scopes.logs, rel), { recursive: true });
    writeFileSync(path.join(scopes.logs, rel, 'f.log'), 'hello\n');
    const expectError = async (p: Promise<unknown>) => {
      const e = await p.then(() => null, (err: Error) => err);
      expect(e?.message).to.match(/agent\.maxToolResultBytes \(1024\) leaves no room for a page of .*Raise agent\.maxToolResultBytes/);
    };
    await expectError(readFile({ root: 'logs', path: `${rel}/f.log` }, ctx(1024)));
    await expectError(tailFile({ root: 'logs', path: `${rel}/f.log` }, ctx(1024)));
    await expectError(listDir({ root: 'logs', path: rel }, ctx(1024)));
    await expectError(grepFiles({ root: 'logs', path: rel, pattern: 'hello' }, ctx(1024)));
    // The same path pages fine at a larger cap.
    expect((await readFile({ root: 'logs', path: `${rel}/f.log` }, ctx(4096))).content).to.equal('hello\n');
  });
});

describe('scopes', () => {
  const refuse = async (root: string, p: string, pattern: RegExp, write = false) => {
    const fn = write ? writeFile({ root, path: p, content: 'x' }, ctx(65536)) : readFile({ root, path: p }, ctx(65536));
    const e = await fn.then(() => null, (err: Error) => err);
    expect(e?.message, `${root}/${p}`).to.match(pattern);
  };
  before(() => {
    symlinkSync('/etc/passwd', path.join(scopes.logs, 'out-link'));
    symlinkSync(path.join(scopes.logs, 'nowhere'), path.join(scopes.logs, 'dangling'));
    symlinkSync(path.join(scopes.rootPath, 'keys'), path.join(scopes.components, 'keys-link'));
    writeFileSync(path.join(scopes.components, 'server.key'), 'k');
    writeFileSync(path.join(scopes.components, '.jwtPass'), 'k');
  });
  it('refuses absolute paths', () => refuse('logs', '/etc/passwd', /is absolute/));
  it('refuses .. escapes', () => refuse('logs', '../harperdb-config.yaml', /contains "\.\."/));
  it('refuses Windows separators', () => refuse('logs', '..\\x', /use "\/" as the separator/));
  it('refuses NUL bytes', () => refuse('logs', 'a\0b', /NUL/));
  it('refuses symlinks out of scope', () => refuse('logs', 'out-link', /symlink that leaves the logs scope/));
  it('refuses dangling symlinks', () => refuse('logs', 'dangling', /dangling symlink/));
  it('refuses writes outside components', () => refuse('logs', 'x.log', /read-only/, true));
  it('refuses key directories, also through a symlink', () => refuse('components', 'keys-link/privateKey.pem', /key material/));
  it('refuses *.key and .jwtPass files', async () => {
    await refuse('components', 'server.key', /key material/);
    await refuse('components', '.jwtPass', /key material/);
  });
  it('the config scope is the config file alone', async () => {
    expect((await readFile({ root: 'config', path: '' }, ctx(65536))).content).to.equal('http:\n  port: 9926\n');
    await refuse('config', 'other.yaml', /holds only harperdb-config.yaml/);
  });
  it('refuses unknown roots', () => refuse('etc', 'passwd', /root must be one of components, logs, config/));
});

describe('paths under attack', () => {
  it('a symlink swapped in between the check and the open is refused (O_NOFOLLOW)', async () => {
    const { resolveScoped, openChecked } = await import('../agent/tools/scopes.js');
    const { renameSync, symlinkSync: link, writeFileSync: write } = await import('node:fs');
    write(path.join(scopes.logs, 'swap.log'), 'innocent\n');
    const resolved = await resolveScoped(scopes, 'logs', 'swap.log');
    write(path.join(scopes.base, 'secret.txt'), 'secret\n');
    renameSync(path.join(scopes.logs, 'swap.log'), path.join(scopes.logs, 'swap.old'));
    link(path.join(scopes.base, 'secret.txt'), path.join(scopes.logs, 'swap.log'));
    const e = await openChecked(resolved).then(() => null, (err: Error) => err);
    expect(e?.message).to.equal('logs/swap.log changed into a symlink while it was checked');
  });

  it('a file replaced between the check and the open is refused', async () => {
    const { resolveScoped, openChecked } = await import('../agent/tools/scopes.js');
    const { rmSync, writeFileSync: write } = await import('node:fs');
    write(path.join(scopes.logs, 'replaced.log'), 'one\n');
    const resolved = await resolveScoped(scopes, 'logs', 'replaced.log');
    rmSync(path.join(scopes.logs, 'replaced.log'));
    write(path.join(scopes.logs, 'other.log'), 'two\n');
    write(path.join(scopes.logs, 'replaced.log'), 'two\n');
    const e = await openChecked(resolved).then(() => null, (err: Error) => err);
    expect(e?.message).to.equal('logs/replaced.log changed while it was checked');
  });

  it('a path read before is resolved again when what it names changed: rotated, swapped for a symlink out of scope, removed', async () => {
    const { renameSync, rmSync, symlinkSync: link, writeFileSync: write } = await import('node:fs');
    const file = path.join(scopes.logs, 'rotating.log');
    write(file, 'first\n');
    expect((await readFile({ root: 'logs', path: 'rotating.log' }, ctx(65536))).content).to.equal('first\n');
    expect((await tailFile({ root: 'logs', path: 'rotating.log' }, ctx(65536))).content).to.equal('first\n');
    // Rotated: a new file (a new inode) under the same name is read, not refused.
    renameSync(file, `${file}.1`);
    write(file, 'second\n');
    expect((await readFile({ root: 'logs', path: 'rotating.log' }, ctx(65536))).content).to.equal('second\n');
    expect((await tailFile({ root: 'logs', path: 'rotating.log' }, ctx(65536))).content).to.equal('second\n');
    // Swapped for a symlink that leaves the scope: refused as a first read is.
    write(path.join(scopes.base, 'outside.txt'), 'secret\n');
    rmSync(file);
    link(path.join(scopes.base, 'outside.txt'), file);
    for (const tool of [readFile, tailFile]) {
      const e = await tool({ root: 'logs', path: 'rotating.log' }, ctx(65536)).then(() => null, (err: Error) => err);
      expect(e?.message).to.equal('logs/rotating.log is a symlink that leaves the logs scope');
    }
    rmSync(file);
    const gone = await readFile({ root: 'logs', path: 'rotating.log' }, ctx(65536)).then(() => null, (err: Error) => err);
    expect(gone?.message).to.equal('logs/rotating.log does not exist');
  });

  it('very long paths get a clear error', async () => {
    const e1 = await readFile({ root: 'logs', path: 'a/'.repeat(2100) + 'x' }, ctx(65536)).then(() => null, (err: Error) => err);
    expect(e1?.message).to.equal('path is longer than 4096 bytes');
    const e2 = await readFile({ root: 'logs', path: 'n'.repeat(300) }, ctx(65536)).then(() => null, (err: Error) => err);
    expect(e2?.message).to.equal(`cannot open logs/${'n'.repeat(300)}: ENAMETOOLONG`);
  });

  it('a name with a newline is read like any other', async () => {
    writeFileSync(path.join(scopes.logs, 'odd\nname.log'), 'fine\n');
    const r = await readFile({ root: 'logs', path: 'odd\nname.log' }, ctx(65536));
    expect(r).to.include({ path: 'logs/odd\nname.log', content: 'fine\n' });
    expect(JSON.parse(capObservation(call, r, false, 65536).content).path).to.equal('logs/odd\nname.log');
  });
});

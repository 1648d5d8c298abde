import { expect } from 'chai';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { readFile, tailFile } from '../agent/tools/fsTools.js';
import { grepFiles } from '../agent/tools/grepFiles.js';
import { insideKey } from '../agent/tools/keyMaterial.js';
import type { ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

const scopes = tempScopes();
const ctx = (cap: number): ToolContext => ({ scopes, maxResultBytes: cap, signal: new AbortController().signal });

function base64Lines(bytes: number, width = 64): string {
  return (randomBytes(bytes).toString('base64').match(new RegExp(`.{1,${width}}`, 'g')) ?? []).join('\n') + '\n';
}

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
export const KEYS: Record<string, string> = {
  'PKCS#8': rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  'encrypted PKCS#8': rsa.privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' }) as string,
  RSA: rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string,
  EC: ec.privateKey.export({ type: 'sec1', format: 'pem' }) as string,
  DSA: `-----BEGIN DSA PRIVATE KEY-----\n${base64Lines(660)}-----END DSA PRIVATE KEY-----\n`,
  OpenSSH: `-----BEGIN OPENSSH PRIVATE KEY-----\n${base64Lines(1800, 70)}-----END OPENSSH PRIVATE KEY-----\n`,
  PGP: `-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n${base64Lines(3000)}-----END PGP PRIVATE KEY BLOCK-----\n`,
};

/** Key body lines: what must never appear in any tool result. */
function bodyLines(key: string): string[] {
  return key.split(/\r?\n/).map((l) => l.trim()).filter((l) => l.length >= 16 && !l.startsWith('-----') && !l.includes(':'));
}

const logLines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `2026-12-02T10:00:${String(i % 60).padStart(2, '0')}Z [info] ${tag} request ${i} ok`).join('\n') + '\n';

function place(key: string, where: 'start' | 'middle' | 'end', style: 'plain' | 'crlf' | 'yaml'): string {
  let k = key;
  if (style === 'yaml') k = 'tls:\n  privateKey: |\n' + key.split('\n').filter(Boolean).map((l) => `    ${l}`).join('\n') + '\n';
  let text = where === 'start' ? k + logLines(300, 'after') : where === 'middle' ? logLines(300, 'before') + k + logLines(300, 'after') : logLines(300, 'before') + k;
  if (style === 'crlf') text = text.replace(/\n/g, '\r\n');
  return text;
}

/** Pages the whole file with the cursors (resuming after a refused key as the error says); returns what was served. */
async function served(name: string, cap: number): Promise<{ text: string; refusals: string[] }> {
  let args: Record<string, unknown> = { root: 'logs', path: name };
  let text = '';
  const refusals: string[] = [];
  for (let i = 0; i < 20_000; i++) {
    try {
      const r = await readFile(args, ctx(cap));
      text += r.content;
      if (r.nextOffset === undefined) return { text, refusals };
      args = { root: 'logs', path: name, startLine: r.nextLine, offset: r.nextOffset };
    } catch (e) {
      const m = /Continue after it with startLine (\d+) and offset (\d+)\./.exec((e as Error).message);
      refusals.push((e as Error).message);
      if (!m) return { text, refusals };
      args = { root: 'logs', path: name, startLine: Number(m[1]), offset: Number(m[2]) };
    }
  }
  throw new Error('did not finish');
}

describe('key material is never served', () => {
  for (const [kind, key] of Object.entries(KEYS)) {
    for (const where of ['start', 'middle', 'end'] as const) {
      for (const style of ['plain', 'crlf', 'yaml'] as const) {
        it(`${kind} key at the ${where} of a log, ${style}: no body line in any page, and the rest of the log is served`, async () => {
          const name = `k-${kind.replace(/\W/g, '')}-${where}-${style}.log`;
          const content = place(key, where, style);
          writeFileSync(path.join(scopes.logs, name), content);
          for (const cap of [1024, 65536]) {
            const { text, refusals } = await served(name, cap);
            for (const line of bodyLines(key)) expect(text.includes(line), `${line} served at cap ${cap}`).to.equal(false);
            expect(refusals.length).to.be.greaterThan(0);
            expect(text).to.not.match(/PRIVATE KEY/);
            if (where !== 'end') expect(text, refusals.join(' | ')).to.contain('after request 299 ok');
            if (where !== 'start') expect(text).to.contain('before request 0 ok');
          }
        });
      }
    }
  }

  it('a page starting at any line of a key is refused', async () => {
    const content = logLines(50, 'before') + KEYS.RSA + logLines(50, 'after');
    writeFileSync(path.join(scopes.logs, 'every-line.log'), content);
    const keyStart = content.indexOf('-----BEGIN');
    const keyEnd = content.indexOf('\n', content.indexOf('-----END')) + 1;
    let line = 51;
    for (let off = keyStart; off < keyEnd; off = content.indexOf('\n', off) + 1, line++) {
      for (const lineCount of [undefined, 1]) {
        // lineCount 1: a page of the key's last body line alone holds no armor line; only the look-back refuses it.
        const args = { root: 'logs', path: 'every-line.log', startLine: line, offset: off, ...(lineCount ? { lineCount } : {}) };
        const e = await readFile(args, ctx(65536)).then(() => null, (err: Error) => err);
        expect(e?.message, `line ${line}, lineCount ${lineCount}`).to.match(/PEM private key/);
      }
    }
    // The first line after the key is served.
    const after = await readFile({ root: 'logs', path: 'every-line.log', startLine: line, offset: keyEnd }, ctx(65536));
    expect(after.content.startsWith('2026-12-02T10:00:00Z [info] after request 0 ok')).to.equal(true);
  });

  it('only armor lines that begin before the window count: a window on the last body line, END just after, is inside', () => {
    const before = 'log line\n-----BEGIN PRIVATE KEY-----\n' + 'A'.repeat(64) + '\n';
    const text = before + 'QUJD==\n-----END PRIVATE KEY-----\n';
    expect(insideKey(Buffer.from(text), before.length, true)).to.equal('begin');
    expect(insideKey(Buffer.from(text), text.length, true)).to.equal(false);
  });

  it('a synthetic ~187 KiB key block longer than the look-back fails closed deep inside it, plain and indented', async () => {
    for (const indent of ['', '    ']) {
      const body = base64Lines(140 * 1024).split('\n').filter(Boolean).map((l) => indent + l).join('\n') + '\n';
      const key = `${indent}-----BEGIN PRIVATE KEY-----\n${body}${indent}-----END PRIVATE KEY-----\n`;
      expect(Buffer.byteLength(key)).to.be.greaterThan(180 * 1024);
      const content = logLines(20, 'before') + key + logLines(20, 'after');
      const name = `huge${indent.length}.log`;
      writeFileSync(path.join(scopes.logs, name), content);
      const deep = content.indexOf('\n', content.indexOf('-----BEGIN') + 150 * 1024) + 1;
      const e = await readFile({ root: 'logs', path: name, startLine: 999, offset: deep }, ctx(65536)).then(() => null, (err: Error) => err);
      expect(e?.message).to.match(/may be inside a PEM private key \(the 128 KiB before it are nothing but key-body lines\)/);
      const { text } = await served(name, 65536);
      for (const line of bodyLines(key).slice(0, 50)) expect(text.includes(line)).to.equal(false);
    }
  });

  it('tail_file of a log ending inside a key is refused at the 1,024 cap; a tail after a key starts after it', async () => {
    const truncatedKey = KEYS.RSA.split('\n').slice(0, 12).join('\n') + '\n';
    writeFileSync(path.join(scopes.logs, 'ends-in-key.log'), logLines(100, 'x') + truncatedKey);
    const e = await tailFile({ root: 'logs', path: 'ends-in-key.log', lines: 5 }, ctx(1024)).then(() => null, (err: Error) => err);
    expect(e?.message).to.match(/PEM private key/);
    writeFileSync(path.join(scopes.logs, 'key-then-log.log'), logLines(5, 'x') + KEYS.EC + 'last line\n');
    const t = await tailFile({ root: 'logs', path: 'key-then-log.log', lines: 5 }, ctx(65536));
    expect(t.content).to.equal('last line\n');
    expect(t.truncated).to.equal(true);
  });

  it('a deep page of an ordinary 10 MB log is served', async () => {
    const content = logLines(140_000, 'ordinary');
    expect(Buffer.byteLength(content)).to.be.greaterThan(7_000_000);
    writeFileSync(path.join(scopes.logs, 'ordinary.log'), content);
    const offset = content.indexOf('\n', 6_000_000) + 1;
    const r = await readFile({ root: 'logs', path: 'ordinary.log', startLine: 2, offset }, ctx(65536));
    expect(r.content.length).to.be.greaterThan(30_000);
  });

  it('a public key and a certificate are served', async () => {
    const pub = rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string;
    const cert = `-----BEGIN CERTIFICATE-----\n${base64Lines(900)}-----END CERTIFICATE-----\n`;
    writeFileSync(path.join(scopes.logs, 'public.txt'), logLines(3, 'p') + pub + cert);
    const r = await readFile({ root: 'logs', path: 'public.txt' }, ctx(65536));
    expect(r.content).to.contain('-----BEGIN PUBLIC KEY-----').and.contain('-----BEGIN CERTIFICATE-----');
  });

  it('grep_files skips files holding key material and lists them in skippedFiles', async () => {
    writeFileSync(path.join(scopes.components, 'has-key.yaml'), place(KEYS.EC, 'middle', 'yaml'));
    writeFileSync(path.join(scopes.components, 'plain.txt'), 'MII not a key\n');
    const r = await grepFiles({ root: 'components', pattern: 'MII|request' }, ctx(65536));
    expect(r.skippedFiles).to.deep.include({ path: 'components/has-key.yaml', reason: 'key material' });
    expect(r.matches.map((m) => m.path)).to.not.include('components/has-key.yaml');
    expect(r.matches).to.deep.include({ path: 'components/plain.txt', line: 1, text: 'MII not a key' });
  });
});

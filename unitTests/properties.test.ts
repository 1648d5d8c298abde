// Property tests (fast-check, seeded): the cap, paging reassembly and key refusal hold for random inputs.
import { expect } from 'chai';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { capObservation } from '../agent/observation.js';
import { readFile } from '../agent/tools/fsTools.js';
import type { ToolContext } from '../agent/tools/types.js';
import { serializeToolResult } from '../resources/models/agentLoop.js';
import { tempScopes } from './helpers.js';

const SEED = 20261202;
const scopes = tempScopes();
const ctx = (cap: number): ToolContext => ({ scopes, maxResultBytes: cap, signal: new AbortController().signal });
const call = { id: 'p', name: 'read_file', arguments: {} };
export const PROPERTY_RUNS = { serializer: 3000, paging: 300, keys: 200 };

const validUtf8 = (s: string) => Buffer.from(Buffer.from(s, 'utf8').toString('utf8'), 'utf8').equals(Buffer.from(s, 'utf8')) && !s.includes('\ufffd');

describe('properties', function () {
  this.timeout(120_000);

  it(`serialized observations are within the cap and valid UTF-8 (${PROPERTY_RUNS.serializer} cases)`, () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: false, maxDepth: 3 }), fc.string({ unit: 'binary', maxLength: 3000 }), fc.integer({ min: 1024, max: 4096 }), (value, text, cap) => {
        for (const v of [value, text, { text }]) {
          const out = serializeToolResult(v, cap);
          expect(Buffer.byteLength(out)).to.be.at.most(cap);
          // Lone surrogates in the input are replaced on encoding; the output itself must re-encode to itself.
          expect(validUtf8(Buffer.from(out, 'utf8').toString('utf8'))).to.equal(true);
        }
      }),
      { seed: SEED, numRuns: PROPERTY_RUNS.serializer }
    );
  });

  it(`paging reassembles random files exactly and no page is cut, at random caps (${PROPERTY_RUNS.paging} cases)`, async () => {
    const piece = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.constantFrom('\n', '\r\n', '\t', '\u0001', '"', '\\', 'é', '€', '😀', '\u2028'),
      fc.string({ unit: 'grapheme-ascii', minLength: 200, maxLength: 3000 })
    );
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { maxLength: 200 }), fc.integer({ min: 1024, max: 16384 }), async (pieces, cap) => {
        const content = pieces.join('');
        const name = `prop-${n++}.log`;
        writeFileSync(path.join(scopes.logs, name), content);
        let args: Record<string, unknown> = { root: 'logs', path: name };
        const parts: string[] = [];
        for (let i = 0; i < 10_000; i++) {
          const r = await readFile(args, ctx(cap));
          expect(capObservation(call, r, false, cap).cut).to.equal(undefined);
          parts.push(r.content);
          if (r.nextOffset === undefined) break;
          args = { root: 'logs', path: name, startLine: r.nextLine, offset: r.nextOffset };
        }
        expect(Buffer.from(parts.join('')).equals(Buffer.from(content))).to.equal(true);
      }),
      { seed: SEED, numRuns: PROPERTY_RUNS.paging }
    );
  });

  it(`random keys at random places: no key body line in any page (${PROPERTY_RUNS.keys} cases)`, async () => {
    const kinds = ['PRIVATE KEY', 'RSA PRIVATE KEY', 'EC PRIVATE KEY', 'OPENSSH PRIVATE KEY', 'ENCRYPTED PRIVATE KEY', 'DSA PRIVATE KEY'];
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...kinds),
        fc.integer({ min: 200, max: 6000 }),
        fc.integer({ min: 0, max: 400 }),
        fc.integer({ min: 0, max: 400 }),
        fc.constantFrom('', '  ', '\t'),
        fc.boolean(),
        fc.integer({ min: 1024, max: 8192 }),
        async (kind, keyBytes, linesBefore, linesAfter, indent, crlf, cap) => {
          const body = (randomBytes(keyBytes).toString('base64').match(/.{1,64}/g) ?? []).map((l) => indent + l);
          const key = [`${indent}-----BEGIN ${kind}-----`, ...body, `${indent}-----END ${kind}-----`].join('\n') + '\n';
          const log = (k: number, tag: string) => Array.from({ length: k }, (_, i) => `${tag} line ${i} with some words`).join('\n') + (k ? '\n' : '');
          let content = log(linesBefore, 'before') + key + log(linesAfter, 'after');
          if (crlf) content = content.replace(/\n/g, '\r\n');
          const name = `propkey-${n++}.log`;
          writeFileSync(path.join(scopes.logs, name), content);
          let served = '';
          let args: Record<string, unknown> = { root: 'logs', path: name };
          for (let i = 0; i < 5000; i++) {
            try {
              const r = await readFile(args, ctx(cap));
              served += r.content;
              if (r.nextOffset === undefined) break;
              args = { root: 'logs', path: name, startLine: r.nextLine, offset: r.nextOffset };
            } catch (e) {
              const m = /startLine (\d+) and offset (\d+)/.exec((e as Error).message);
              if (!m) break;
              args = { root: 'logs', path: name, startLine: Number(m[1]), offset: Number(m[2]) };
            }
          }
          for (const line of body) if (line.trim().length >= 16) expect(served.includes(line.trim())).to.equal(false);
          expect(served).to.not.contain('PRIVATE KEY');
          if (linesAfter > 0) expect(served).to.contain(`after line ${linesAfter - 1} with some words`);
        }
      ),
      { seed: SEED, numRuns: PROPERTY_RUNS.keys }
    );
  });
});

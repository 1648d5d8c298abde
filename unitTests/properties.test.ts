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
import { boundedTokens, estimateTokens } from '../agent/contextBudget.js';
import { counterFor, tokenCounter } from '../agent/tokenCount.js';
import type { Message } from '../resources/models/types.js';
import { tempScopes } from './helpers.js';

const SEED = 20261202;
const scopes = tempScopes();
const ctx = (cap: number): ToolContext => ({ scopes, maxResultBytes: cap, signal: new AbortController().signal });
const call = { id: 'p', name: 'read_file', arguments: {} };
export const PROPERTY_RUNS = { serializer: 3000, paging: 300, keys: 200, estimate: 120 };

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

  it(`the pre-flight's bound never undercounts: random transcripts of logs, JSON and Unicode against the tokenizer's own count (${PROPERTY_RUNS.estimate} cases, two counters)`, async () => {
    const counters = [(await tokenCounter('gpt-4o'))!, (await counterFor('ollama', 'llama3.1:8b'))!];
    const logLine = fc.tuple(fc.integer({ min: 0, max: 59 }), fc.constantFrom('info', 'warn', 'error'), fc.string({ maxLength: 80 })).map(([s, level, text]) => `2026-12-07T00:00:${String(s).padStart(2, '0')}Z [http/1] [${level}]: ${text}`);
    const content = fc.oneof(
      fc.array(logLine, { minLength: 20, maxLength: 30, size: 'max' }).map((lines) => lines.join('\n')),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
      fc.string({ unit: 'binary', minLength: 1024, maxLength: 1600, size: 'max' }),
      fc.string({ unit: 'grapheme', minLength: 600, maxLength: 900, size: 'max' })
    );
    const message = fc.tuple(fc.constantFrom('user', 'assistant', 'tool'), content).map(([role, text]): Message => (role === 'tool' ? { role, toolCallId: 'c', name: 'read_file', content: text } : role === 'assistant' ? { role, content: text, toolCalls: [{ id: 'c', name: 'read_file', arguments: { path: text.slice(0, 40) } }] } : { role: 'user', content: text }));
    let boundedCases = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), fc.integer({ min: 0, max: 400 }).map((p) => p / 100), fc.integer({ min: 0, max: 1 }), async (messages, share, which) => {
        const counter = counters[which]!;
        const input = { system: 'You investigate a Harper instance.', tools: [], messages };
        // The bound first, while its long parts are new to the counter's memo (the exact count memoizes them).
        const bytes = Buffer.byteLength(JSON.stringify(messages));
        const bounded = boundedTokens(input, counter, Math.floor(bytes * share));
        if (!bounded.exact) boundedCases++;
        const exact = estimateTokens(input, counter);
        expect(bounded.tokens).to.be.at.least(exact);
        if (bounded.exact) expect(bounded.tokens).to.equal(exact);
        expect(boundedTokens(input, counter, 0).tokens).to.equal(exact);
      }),
      { seed: SEED, numRuns: PROPERTY_RUNS.estimate }
    );
    // The bound was what answered in a good share of the cases (else this tested only the exact count).
    expect(boundedCases).to.be.above(PROPERTY_RUNS.estimate / 10);
    console.log(`      ${boundedCases} of ${PROPERTY_RUNS.estimate} cases answered by the bound, none under the count`);
  });
});

import { expect } from 'chai';
import { errorInfo, serializeToolResult, toolResultText, truncateWithMarker } from '../resources/models/agentLoop.js';

const bytes = (s: string) => Buffer.byteLength(s);
/** Valid UTF-8: decoding and re-encoding gives the same bytes, with no replacement character introduced. */
function isValidUtf8Text(s: string): boolean {
  const buf = Buffer.from(s, 'utf8');
  return buf.toString('utf8') === s && !/[\ud800-\udfff]/.test(s.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''));
}

describe('serializeToolResult / truncateWithMarker', () => {
  it('keeps a result that fits exactly, and cuts one byte over', () => {
    const value = 'a'.repeat(1024);
    expect(serializeToolResult(value, 1024)).to.equal(value);
    const over = serializeToolResult('a'.repeat(1025), 1024);
    expect(bytes(over)).to.be.at.most(1024);
    expect(over).to.match(/…\[truncated; full result is 1025 bytes\. Ask for less: .+\]$/);
  });

  it('serializes objects as JSON and measures the serialized size', () => {
    const value = { content: 'x'.repeat(2000) };
    const full = JSON.stringify(value);
    const out = serializeToolResult(value, 1024);
    expect(bytes(out)).to.be.at.most(1024);
    expect(out).to.contain(`full result is ${bytes(full)} bytes`);
    expect(out.startsWith(full.slice(0, 100))).to.equal(true);
  });

  for (const [label, ch] of [['2-byte', 'é'], ['3-byte', '€'], ['4-byte (surrogate pair)', '😀']] as const) {
    it(`never exceeds the cap nor splits a ${label} character, at every position around the cut`, () => {
      for (let pad = 0; pad < 8; pad++) {
        for (const cap of [1024, 1025, 1026, 1027, 1500]) {
          const text = 'a'.repeat(pad) + ch.repeat(2000);
          const out = truncateWithMarker(text, cap);
          expect(bytes(out), `pad ${pad} cap ${cap}`).to.be.at.most(cap);
          expect(bytes(out), `pad ${pad} cap ${cap}`).to.be.greaterThan(cap - 4);
          expect(isValidUtf8Text(out)).to.equal(true);
          expect(out.includes('\ufffd')).to.equal(false);
        }
      }
    });
  }

  it('advice names the narrowing the model can use', () => {
    const out = serializeToolResult('z'.repeat(5000), 1024, 'pass a smaller lineCount');
    expect(out).to.match(/Ask for less: pass a smaller lineCount\]$/);
  });

  it('a value whose toJSON throws a plain { message } becomes that message', () => {
    const value = { n: { toJSON() { throw { message: 'Cannot serialize BigInt 12n' }; } } };
    expect(toolResultText(value)).to.equal(JSON.stringify({ error: 'Cannot serialize BigInt 12n' }));
  });

  it('undefined serializes as null', () => {
    expect(serializeToolResult(undefined, 1024)).to.equal('null');
  });
});

describe('errorInfo', () => {
  it('reads Error, string, { message }, other objects and nullish values', () => {
    expect(errorInfo(new Error('boom'))).to.equal('boom');
    expect(errorInfo('plain')).to.equal('plain');
    expect(errorInfo({ message: 'from object' })).to.equal('from object');
    expect(errorInfo({ code: 7 })).to.equal('{"code":7}');
    expect(errorInfo(null)).to.equal('unknown error');
    expect(errorInfo({})).to.equal('unknown error');
    expect(errorInfo(Object.create(null))).to.not.equal('[object Object]');
  });
});

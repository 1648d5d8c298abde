// npm start and npm run dev set trust in local requests and the inspector in the root's config file (Harper reads
// `false` from an env var as truthy text): scripts/harper.ts setModeInConfig.
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setModeInConfig } from '../scripts/harper.js';

describe('setModeInConfig', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-mode-'));
  const file = path.join(dir, 'harperdb-config.yaml');
  after(() => rmSync(dir, { recursive: true, force: true }));
  const devConfig = '# a comment Harper wrote\nhttp:\n  port: 9926\nthreads:\n  count: 1\n  debug: true\nauthentication:\n  authorizeLocal: true\n  cacheTTL: 30000\n';

  it('locks down a root first booted with dev defaults, keeping every other line', () => {
    writeFileSync(file, devConfig);
    expect(setModeInConfig(file, false)).to.equal(true);
    expect(readFileSync(file, 'utf8')).to.equal(devConfig.replace('debug: true', 'debug: false').replace('authorizeLocal: true', 'authorizeLocal: false'));
    expect(setModeInConfig(file, false)).to.equal(false); // nothing left to change: the file is not rewritten
  });

  it('turns the dev conveniences back on for npm run dev, and does nothing before a first boot', () => {
    writeFileSync(file, devConfig.replace('debug: true', 'debug: false').replace('authorizeLocal: true', 'authorizeLocal: false'));
    expect(setModeInConfig(file, true)).to.equal(true);
    expect(readFileSync(file, 'utf8')).to.equal(devConfig);
    expect(setModeInConfig(path.join(dir, 'missing.yaml'), false)).to.equal(false);
  });
});

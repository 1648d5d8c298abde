// The root `npm pack` tarball, made once per test run and shared by the tests that deploy it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO } from '../scripts/harper.js';

const run = promisify(execFile);
let packed: Promise<string> | undefined;

/** `npm pack` at the root, as an operator would run it, less its `prepare` (the build): `npm test` built dist/ just
 * before, and building it again took half of the pack's 40 s. Deploy it as a payload, or copy it per node:
 * `deploy_component` with `package: file:…` deletes the file it installs. */
export function packedTarball(): Promise<string> {
  packed ??= (async () => {
    const dest = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-pack-'));
    // 10 MB a test process: gone when the process ends, not left in the temp dir run after run.
    process.once('exit', () => rmSync(dest, { recursive: true, force: true }));
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dest, '--json'], { cwd: REPO, maxBuffer: 256 * 1024 * 1024 });
    const [file] = JSON.parse(stdout) as { filename: string }[];
    return path.join(dest, file!.filename);
  })();
  return packed;
}

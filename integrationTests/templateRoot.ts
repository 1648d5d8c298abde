// A Harper root installed once per `npm test` and copied for each test Harper that would otherwise install one afresh.
// A first boot spends about 4 of its 8.7 CPU-s installing Harper (config, system database, admin user, keys); a copy
// of a stopped plain root boots like a restart. The copy is a plain Harper (no agent database): the agent's own first
// boot, creating its tables, still happens in every test Harper.
//
// Used only when the runner names a folder (HARPER_TEMPLATE_DIR, set by scripts/test.ts, removed with its work folder)
// and only for the default boot: dev mode, the default admin, a root the harness picks, no replication name (a
// node's certificates name its host). The runner starts installing it as the lanes start; whichever process gets
// there first installs it (mkdir is the lock), the others wait. The install or the wait is a lane's setup, not the
// time of the file that first asked (scripts/mocha-reporter.cjs, LANE_SETUP).
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, startHarper } from '../scripts/harper.js';

/** The files of a root that name the root's own path. */
const PATH_FILES = ['harperdb-config.yaml', '.home/.harperdb/hdb_boot_properties.file'];

let template: Promise<string | undefined> | undefined;

/** scripts/mocha-reporter.cjs's event for a lane's setup (the harness sends it too). */
export const LANE_SETUP = 'harper-agent:lane-setup';

/** Installs the template in `dir` unless another process already is; resolves when this one is done (or not it). */
export async function installTemplate(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  try {
    mkdirSync(path.join(dir, 'lock'));
  } catch {
    return; // another process installs it
  }
  try {
    const root = path.join(dir, 'root');
    const harper = await startHarper({ rootPath: root, httpPort: await freePort(), opsPort: await freePort(), component: null, output: path.join(dir, 'install.out') });
    await harper.stop();
    rmSync(path.join(root, 'log'), { recursive: true, force: true });
    writeFileSync(path.join(dir, 'ready'), '');
  } catch (error) {
    writeFileSync(path.join(dir, 'failed'), String(error));
  }
}

/** The installed template root, or undefined when there is none (no folder named, or its install failed). */
export function templateRoot(): Promise<string | undefined> {
  template ??= (async () => {
    const dir = process.env.HARPER_TEMPLATE_DIR;
    if (!dir) return undefined;
    const ready = path.join(dir, 'ready');
    const failed = path.join(dir, 'failed');
    (process as NodeJS.EventEmitter).emit(LANE_SETUP, 'start');
    try {
      await installTemplate(dir);
      const deadline = Date.now() + 120_000;
      while (!existsSync(ready) && !existsSync(failed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    } finally {
      (process as NodeJS.EventEmitter).emit(LANE_SETUP, 'end');
    }
    return existsSync(ready) ? path.join(dir, 'root') : undefined;
  })();
  return template;
}

/** Copies the template into `rootPath` (new or empty), naming `rootPath` where it named itself. */
export function copyTemplate(from: string, rootPath: string): void {
  cpSync(from, rootPath, { recursive: true });
  for (const file of PATH_FILES) {
    const at = path.join(rootPath, file);
    writeFileSync(at, readFileSync(at, 'utf8').replaceAll(from, rootPath));
  }
  mkdirSync(path.join(rootPath, 'log'), { recursive: true });
}

// A Harper root installed once per `npm test` and copied for each test Harper that would otherwise install one afresh.
// A first boot spends about 4 of its 8.7 CPU-s installing Harper (config, system database, admin user, keys); a copy
// of a stopped plain root boots like a restart. The copy is a plain Harper (no agent database): the agent's own first
// boot, creating its tables, still happens in every test Harper.
//
// Used only when the runner names a folder (HARPER_TEMPLATE_DIR, set by scripts/test.ts, removed with its work folder)
// and only for the default boot: dev mode, the default admin, a root the harness picks, no replication name (a
// node's certificates name its host). Whichever test process needs it first installs it; mkdir is the lock.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, startHarper } from '../scripts/harper.js';

/** The files of a root that name the root's own path. */
const PATH_FILES = ['harperdb-config.yaml', '.home/.harperdb/hdb_boot_properties.file'];

let template: Promise<string | undefined> | undefined;

/** The installed template root, or undefined when there is none (no folder named, or its install failed). */
export function templateRoot(): Promise<string | undefined> {
  template ??= (async () => {
    const dir = process.env.HARPER_TEMPLATE_DIR;
    if (!dir) return undefined;
    const root = path.join(dir, 'root');
    const ready = path.join(dir, 'ready');
    const failed = path.join(dir, 'failed');
    let installer = false;
    mkdirSync(dir, { recursive: true });
    try {
      mkdirSync(path.join(dir, 'lock'));
      installer = true;
    } catch {
      // another test process installs it
    }
    if (installer) {
      try {
        const harper = await startHarper({ rootPath: root, httpPort: await freePort(), opsPort: await freePort(), component: null, output: path.join(dir, 'install.out') });
        await harper.stop();
        rmSync(path.join(root, 'log'), { recursive: true, force: true });
        writeFileSync(ready, '');
      } catch (error) {
        writeFileSync(failed, String(error));
      }
    }
    const deadline = Date.now() + 120_000;
    while (!existsSync(ready) && !existsSync(failed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    return existsSync(ready) ? root : undefined;
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

// The last step of `npm run build`: what Harper loads, each as one file with the libraries it uses compiled in
// (esbuild, from tsc's output). A deployed component is then a few dozen files instead of 16,000, which is what
// deploy_component's time goes on (it copies the unpacked tarball file by file, twice). See DESIGN.md, "One file per
// component". Left outside: `harperdb` (Harper links its own in), gpt-tokenizer (one module per model, loaded by id
// at run time: its ES modules are copied beside the bundle, 244 of the package's 1,537 files) and @harperfast/skills
// (read as files).
import { build, type BuildOptions } from 'esbuild';
import { cpSync, rmSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { REPO } from './harper.js';

const BACKENDS = ['openai', 'anthropic', 'bedrock', 'ollama'] as const;

const common: BuildOptions = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['harperdb', 'gpt-tokenizer', '@harperfast/skills'],
  // CommonJS libraries (ajv, the AWS SDK) call require() for Node's own modules: give the ES module one.
  banner: { js: "import { createRequire as __bundleCreateRequire } from 'node:module';\nconst require = __bundleCreateRequire(import.meta.url);" },
  logLevel: 'warning',
  // The model-id lookup in agent/tokenCount.ts is meant to stay a run-time import.
  logOverride: { 'unsupported-dynamic-import': 'silent' },
  define: { BUNDLED_TOKENIZER: 'true' },
  absWorkingDir: REPO,
};

/** gpt-tokenizer's ES modules (their imports are all relative) and its licence, without the CommonJS, TypeScript and
 * data copies that make up 25 of its 30 MB: deploy_component's time goes with the tarball. */
function copyTokenizer(): void {
  const from = path.join(REPO, 'node_modules/gpt-tokenizer');
  const to = path.join(REPO, 'dist/component/gpt-tokenizer');
  rmSync(to, { recursive: true, force: true });
  cpSync(path.join(from, 'esm'), to, { recursive: true, filter: (f) => !/\.(d\.ts|map)$/.test(f) });
  cpSync(path.join(from, 'LICENSE'), path.join(to, 'LICENSE'));
}

/** The admin page's libraries, as the browser loads them (ES modules, no build step): marked renders an answer's
 * Markdown, DOMPurify cleans the HTML before it is shown. Into admin/vendor/ (ignored by git, packed with admin/). */
function copyPageLibraries(): void {
  const to = path.join(REPO, 'admin/vendor');
  mkdirSync(to, { recursive: true });
  cpSync(path.join(REPO, 'node_modules/marked/lib/marked.esm.js'), path.join(to, 'marked.js'));
  cpSync(path.join(REPO, 'node_modules/dompurify/dist/purify.es.mjs'), path.join(to, 'purify.js'));
}

async function bundle(): Promise<void> {
  copyTokenizer();
  copyPageLibraries();
  await Promise.all([
    // The agent: its jsResource, the grep worker it starts beside itself (new URL('./grepWorker.js', import.meta.url))
    // and the CLI (the package's bin).
    build({
      ...common,
      entryPoints: { boot: 'dist/agent/boot.js', grepWorker: 'dist/agent/tools/grepWorker.js', cli: 'dist/cli/main.js' },
      outdir: path.join(REPO, 'dist/component'),
    }),
    ...BACKENDS.map((p) =>
      build({ ...common, entryPoints: [`components/${p}/dist/index.js`], outfile: path.join(REPO, `components/${p}/dist/component.js`) }),
    ),
  ]);
}

await bundle();

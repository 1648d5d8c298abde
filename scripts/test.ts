// `npm test`'s runner: every unit and integration test file, in a few mocha processes ("lanes") at once. Most of the
// suite waits on Harper (booting, restarting threads, a deploy), so two cores serve more than two lanes. Each lane is
// one ordinary mocha run of its files, with its own shared Harper (harness.ts); files are dealt to lanes longest first
// by the seconds in integrationTests/durations.json (a scheduling hint: a wrong figure costs time, never a test).
// Lines stream prefixed with their lane; the end prints every failure, the time per file and one total line.
//
//   node dist/scripts/test.js [--lanes N] [--record] [file filter ...]
//   --record rewrites durations.json with this run's times.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { installTemplate } from '../integrationTests/templateRoot.js';
import { REPO } from './harper.js';

interface LaneSummary {
  passes: number;
  failures: number;
  pending: number;
  /** Wall and CPU milliseconds per file (the CPU of the lane's whole process tree, Harpers included). */
  files: Record<string, number>;
  cpu: Record<string, number>;
  /** The lane's shared Harper boot (any lane boots one at most): apart from the files, whose figures deal them. */
  setup?: { ms: number; cpuMs: number };
  failed: string[];
}

/** The reporter's line format, so a lane's file times and the runner's read alike. */
const { timeLine } = createRequire(import.meta.url)(path.join(REPO, 'scripts', 'mocha-reporter.cjs')) as { timeLine(ms: number, cpuMs?: number): string };

const DURATIONS = path.join(REPO, 'integrationTests', 'durations.json');
const UNLISTED_SECONDS = 5;
/** How long a lane may run on after its reporter wrote the summary (every hook done) before it counts as hung. */
const EXIT_GRACE_MS = 30_000;

function testFiles(filters: string[]): string[] {
  const files = ['unitTests', 'integrationTests'].flatMap((dir) =>
    readdirSync(path.join(REPO, 'dist', dir))
      .filter((f) => f.endsWith('.test.js'))
      .map((f) => `dist/${dir}/${f}`),
  );
  return filters.length ? files.filter((f) => filters.some((x) => f.includes(x))) : files;
}

/** CPU milliseconds of this process's children that ended (utime and stime of the reaped, /proc/self/stat); 0
 * without /proc. */
function reapedCpuMs(): number {
  try {
    const f = readFileSync('/proc/self/stat', 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return ((Number(rest[13]) + Number(rest[14])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/** Longest first, each to the lane with the least expected time so far. */
function dealToLanes(files: string[], seconds: Record<string, number>, lanes: number): string[][] {
  const expected = (f: string) => seconds[f] ?? UNLISTED_SECONDS;
  const dealt = Array.from({ length: lanes }, () => ({ files: [] as string[], total: 0 }));
  for (const f of [...files].sort((a, b) => expected(b) - expected(a) || a.localeCompare(b))) {
    const lane = dealt.reduce((min, l) => (l.total < min.total ? l : min));
    lane.files.push(f);
    lane.total += expected(f);
  }
  return dealt.filter((l) => l.files.length).map((l) => l.files);
}

function runLane(n: number, files: string[], summaryFile: string): Promise<{ code: number | null; hung: boolean }> {
  const mocha = path.join(REPO, 'node_modules', 'mocha', 'bin', 'mocha.js');
  // Colors only for a terminal: a lane's output is a pipe, so mocha would decide for itself wrongly either way.
  const color = process.stdout.isTTY ? '--color' : '--no-color';
  const child = spawn(process.execPath, [mocha, '--config', '.mocharc.json', color, ...files], {
    cwd: REPO,
    // One installed Harper root for every lane to copy (integrationTests/templateRoot.ts), gone with the work folder.
    // Ports of its own (scripts/harper.ts freePort), below the kernel's ephemeral range (32768 on).
    env: { ...process.env, MOCHA_SUMMARY_FILE: summaryFile, HARPER_TEMPLATE_DIR: path.join(path.dirname(summaryFile), 'template'), TEST_PORTS: `${20_000 + n * 1000}-${20_999 + n * 1000}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = `${n} | `;
  for (const stream of [child.stdout!, child.stderr!]) {
    let rest = '';
    stream.on('data', (d: Buffer) => {
      const lines = (rest + d.toString('utf8')).split('\n');
      rest = lines.pop()!;
      for (const line of lines) process.stdout.write(prefix + line + '\n');
    });
    stream.on('end', () => rest && process.stdout.write(prefix + rest + '\n'));
  }
  // A lane whose tests are all done but whose process stays (a server or socket a failed teardown left open) would
  // hold npm test until CI's limit: it is killed and reported instead.
  let summarizedAt = 0;
  let hung = false;
  const watch = setInterval(() => {
    if (!summarizedAt && existsSync(summaryFile)) summarizedAt = Date.now();
    if (summarizedAt && Date.now() - summarizedAt > EXIT_GRACE_MS) {
      hung = true;
      child.kill('SIGKILL');
    }
  }, 1000);
  return new Promise((resolve) => child.on('close', (code) => (clearInterval(watch), resolve({ code, hung }))));
}

async function main() {
  const args = process.argv.slice(2);
  const flag = (name: string) => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    return args.splice(i, name === '--record' ? 1 : 2)[1] ?? 'yes';
  };
  const lanes = Number(flag('--lanes') ?? process.env.TEST_LANES ?? 3);
  const record = flag('--record') !== undefined;
  const seconds = JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  const dealt = dealToLanes(testFiles(args), seconds, lanes);
  const work = mkdtempSync(path.join(os.tmpdir(), 'harper-agent-test-'));
  // The Harper root every lane copies (integrationTests/templateRoot.ts), installed from here as the lanes start: no
  // lane's first file pays for it, so a file's time does not depend on where it was dealt.
  const template = dealt.flat().some((f) => f.includes('integrationTests/')) ? installTemplate(path.join(work, 'template')).then(reapedCpuMs) : Promise.resolve(0);
  const started = Date.now();
  process.stdout.write(`${dealt.flat().length} test files in ${dealt.length} lanes\n`);
  const laneSeconds: number[] = [];
  const ends = await Promise.all(
    dealt.map((files, i) => runLane(i + 1, files, path.join(work, `lane${i + 1}.json`)).finally(() => (laneSeconds[i] = (Date.now() - started) / 1000))),
  );
  // The install's Harper was this process's child: its CPU is what this process had reaped when it ended (the lanes
  // are reaped later).
  const templateCpuMs = await template;

  const total: LaneSummary = { passes: 0, failures: 0, pending: 0, files: {}, cpu: {}, failed: [] };
  const broken: string[] = [];
  const setups: (LaneSummary['setup'] | undefined)[] = [];
  ends.forEach(({ code, hung }, i) => {
    if (hung) broken.push(`lane ${i + 1} did not exit ${EXIT_GRACE_MS / 1000} s after its last test (something its files opened was left open): killed; its files ${dealt[i]!.join(', ')}`);
    let s: LaneSummary;
    try {
      s = JSON.parse(readFileSync(path.join(work, `lane${i + 1}.json`), 'utf8'));
    } catch {
      broken.push(`lane ${i + 1} ended (exit ${code}) without a summary: its files ${dealt[i]!.join(', ')}`);
      return;
    }
    total.passes += s.passes;
    total.failures += s.failures;
    total.pending += s.pending;
    Object.assign(total.files, s.files);
    Object.assign(total.cpu, s.cpu);
    setups[i] = s.setup;
    total.failed.push(...s.failed);
  });
  rmSync(work, { recursive: true, force: true });

  process.stdout.write('\nlanes:\n');
  const bootNote = (i: number) => (setups[i]?.ms ? ` (its shared Harper's boot ${(setups[i]!.ms / 1000).toFixed(1)} s)` : '');
  dealt.forEach((files, i) => process.stdout.write(`  ${laneSeconds[i]!.toFixed(1).padStart(7)} s  lane ${i + 1}${bootNote(i)}: ${files.map((f) => path.basename(f, '.test.js')).join(' ')}\n`));
  process.stdout.write('\ntime per file (wall, CPU):\n');
  for (const [file, ms] of Object.entries(total.files).sort((a, b) => b[1] - a[1])) process.stdout.write(`${timeLine(ms, total.cpu[file])}  ${file}\n`);
  const setupCpu = setups.reduce((sum, x) => sum + (x?.cpuMs ?? 0), templateCpuMs);
  if (setupCpu) process.stdout.write(`${timeLine(setups.reduce((sum, x) => sum + (x?.ms ?? 0), 0), setupCpu)}  (setup: the Harper template, each lane's shared Harper)\n`);
  const cpuTotal = Object.values(total.cpu).reduce((a, b) => a + b, setupCpu);
  if (total.failed.length) process.stdout.write(`\nfailed:\n${total.failed.map((t) => `  ${t}\n`).join('')}`);
  for (const b of broken) process.stdout.write(`\n${b}\n`);
  if (record) {
    const next = { ...seconds, ...Object.fromEntries(Object.entries(total.files).map(([f, ms]) => [f, Math.round(ms / 100) / 10])) };
    writeFileSync(DURATIONS, JSON.stringify(Object.fromEntries(Object.entries(next).sort(([a], [b]) => a.localeCompare(b))), null, 2) + '\n');
  }
  const skipped = total.pending ? `, ${total.pending} skipped` : '';
  const cpuNote = cpuTotal ? `, ${(cpuTotal / 1000).toFixed(0)} s of CPU` : '';
  process.stdout.write(`\ntests: ${total.passes} passed, ${total.failures} failed${skipped} (${dealt.length} lanes, ${((Date.now() - started) / 1000).toFixed(0)} s${cpuNote})\n`);
  process.exitCode = total.failures || broken.length || ends.some((e) => e.code !== 0) ? 1 : 0;
}

await main();

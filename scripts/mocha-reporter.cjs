// Mocha's spec reporter, plus a time per test file (where the suite's minutes go: wall time, and the CPU time of this
// process and every process under it, Harpers included, where /proc tells it) and one plain closing line that any CI
// can read: "tests: N passed, N failed[, N skipped]". Run as one of scripts/test.ts's lanes (env MOCHA_SUMMARY_FILE),
// it writes those figures to that file instead, for the runner to add up. The lane's shared Harper boots while
// whichever file first asks for it runs: that time (event LANE_SETUP, sent by integrationTests/harness.ts) is counted
// as the lane's setup, not the file's, so a file's figure does not depend on where in its lane it was dealt.
'use strict';
const { readdirSync, readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

const LANE_SETUP = 'harper-agent:lane-setup';
const TICKS_PER_MS = 100 / 1000; // USER_HZ, 100 on Linux

/** utime, stime, cutime, cstime and the parent of a process, from /proc/<pid>/stat (the name may hold spaces). */
function stat(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(rest[1]), own: Number(rest[11]) + Number(rest[12]), reaped: Number(rest[13]) + Number(rest[14]) };
}

/** CPU milliseconds of this process, its children that ended, and every process under it still running; null
 * without /proc. */
function treeCpuMs() {
  try {
    const all = new Map();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        all.set(Number(name), stat(name));
      } catch {
        // ended while we looked
      }
    }
    const self = all.get(process.pid) ?? stat(process.pid);
    let ticks = self.own + self.reaped;
    const under = (pid) => {
      for (let p = all.get(pid)?.ppid; p; p = all.get(p)?.ppid) if (p === process.pid) return true;
      return false;
    };
    for (const [pid, s] of all) if (pid !== process.pid && under(pid)) ticks += s.own + s.reaped;
    return ticks / TICKS_PER_MS;
  } catch {
    return null;
  }
}

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const started = new Map();
    const took = new Map();
    const cpuAt = new Map();
    const cpu = new Map();
    const failed = [];
    // Setup (wall and CPU ms) in all, and during the file in progress; `setupAt` while a setup runs (setups nest: the
    // shared Harper's boot waits for the template's install).
    const setup = { ms: 0, cpuMs: 0 };
    let during = { ms: 0, cpuMs: 0 };
    let setupAt;
    let depth = 0;
    process.on(LANE_SETUP, (phase) => {
      if (phase === 'start' && depth++ === 0) setupAt = { ms: Date.now(), cpuMs: treeCpuMs() };
      if (phase !== 'end' || depth === 0 || --depth > 0 || !setupAt) return;
      const cpuNow = treeCpuMs();
      const spent = { ms: Date.now() - setupAt.ms, cpuMs: cpuNow === null || setupAt.cpuMs === null ? 0 : cpuNow - setupAt.cpuMs };
      for (const t of [setup, during]) (t.ms += spent.ms), (t.cpuMs += spent.cpuMs);
      setupAt = undefined;
    });
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test) => failed.push(`${test.fullTitle()} (${path.relative(process.cwd(), test.file ?? '')})`));
    // A file's top-level suites: from the first one's start to the last one's end.
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && !started.has(suite.file)) {
        started.set(suite.file, Date.now());
        cpuAt.set(suite.file, treeCpuMs());
        during = { ms: 0, cpuMs: 0 };
      }
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      if (!suite.file || !suite.parent?.root) return;
      took.set(suite.file, Date.now() - started.get(suite.file) - during.ms);
      const now = treeCpuMs();
      if (now !== null && cpuAt.get(suite.file) !== null) cpu.set(suite.file, now - cpuAt.get(suite.file) - during.cpuMs);
    });
    runner.once(EVENT_RUN_END, () => {
      const s = this.stats;
      const files = [...took].sort((a, b) => b[1] - a[1]);
      if (process.env.MOCHA_SUMMARY_FILE) {
        const rel = (f) => path.relative(process.cwd(), f);
        const summary = { passes: s.passes, failures: s.failures, pending: s.pending, failed, files: Object.fromEntries(files.map(([f, ms]) => [rel(f), ms])), cpu: Object.fromEntries([...cpu].map(([f, ms]) => [rel(f), ms])), setup };
        writeFileSync(process.env.MOCHA_SUMMARY_FILE, JSON.stringify(summary));
        return;
      }
      if (files.length > 1) {
        process.stdout.write('\ntime per file (wall, CPU):\n');
        for (const [file, ms] of files) process.stdout.write(`${timeLine(ms, cpu.get(file))}  ${path.relative(process.cwd(), file)}\n`);
        if (setup.ms) process.stdout.write(`${timeLine(setup.ms, setup.cpuMs)}  (setup: the Harper template, the shared Harper's boot)\n`);
      }
      const skipped = s.pending ? `, ${s.pending} skipped` : '';
      process.stdout.write(`\ntests: ${s.passes} passed, ${s.failures} failed${skipped}\n`);
    });
  }
}

/** "   12.3 s    20.1 s" (the CPU column blank without /proc). */
function timeLine(ms, cpuMs) {
  return `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${cpuMs === undefined ? '         ' : `${(cpuMs / 1000).toFixed(1).padStart(7)} s`}`;
}

SpecWithSummary.timeLine = timeLine;
SpecWithSummary.LANE_SETUP = LANE_SETUP;
module.exports = SpecWithSummary;

// Mocha's spec reporter, plus a time per test file (where the suite's minutes go) and one plain closing line that any
// CI can read: "tests: N passed, N failed[, N skipped]". Run as one of scripts/test.ts's lanes (env MOCHA_SUMMARY_FILE),
// it writes those figures to that file instead, for the runner to add up.
'use strict';
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const started = new Map();
    const took = new Map();
    const failed = [];
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test) => failed.push(`${test.fullTitle()} (${path.relative(process.cwd(), test.file ?? '')})`));
    // A file's top-level suites: from the first one's start to the last one's end.
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && !started.has(suite.file)) started.set(suite.file, Date.now());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      if (suite.file && suite.parent?.root) took.set(suite.file, Date.now() - started.get(suite.file));
    });
    runner.once(EVENT_RUN_END, () => {
      const s = this.stats;
      const files = [...took].sort((a, b) => b[1] - a[1]);
      if (process.env.MOCHA_SUMMARY_FILE) {
        const summary = { passes: s.passes, failures: s.failures, pending: s.pending, failed, files: Object.fromEntries(files.map(([f, ms]) => [path.relative(process.cwd(), f), ms])) };
        writeFileSync(process.env.MOCHA_SUMMARY_FILE, JSON.stringify(summary));
        return;
      }
      if (files.length > 1) {
        process.stdout.write('\ntime per file:\n');
        for (const [file, ms] of files) process.stdout.write(`  ${(ms / 1000).toFixed(1).padStart(7)} s  ${path.relative(process.cwd(), file)}\n`);
      }
      const skipped = s.pending ? `, ${s.pending} skipped` : '';
      process.stdout.write(`\ntests: ${s.passes} passed, ${s.failures} failed${skipped}\n`);
    });
  }
}

module.exports = SpecWithSummary;

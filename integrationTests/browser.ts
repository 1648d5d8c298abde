// The headless Chromium the page tests drive through playwright-core. It comes from the npm registry with
// `npm install` (@sparticuz/chromium ships the browser inside its package and unpacks it on first use), so the tests
// need nothing a fresh machine lacks; CHROMIUM_PATH points them at another build instead.
import sparticuz from '@sparticuz/chromium';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

// Without the background-networking flags Chromium keeps dialling Google's hosts, which this network refuses.
const FLAGS = ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export async function chromiumPath(): Promise<string> {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  try {
    return await sparticuz.executablePath();
  } catch (error) {
    throw new Error(`could not unpack the headless Chromium of @sparticuz/chromium (run \`npm install\`; or set CHROMIUM_PATH to a Chromium build): ${error}`);
  }
}

/**
 * A headless Chromium with a new, empty profile directory, without the sandbox (tests run as root). A launch is tried
 * twice: once, in a full suite run, Chromium closed itself at start ("Target page, context or browser has been
 * closed"), and 90 launches three at a time under CPU load did not do it again; the error keeps the browser's own
 * log for the next time.
 */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = await chromiumPath();
  for (let attempt = 1; ; attempt++) {
    try {
      return await chromium.launch({ executablePath, headless: true, chromiumSandbox: false, args: FLAGS });
    } catch (error) {
      if (attempt < 2) {
        console.log(`      Chromium did not start (${String(error).split('\n')[0]}); trying once more`);
        continue;
      }
      throw new Error(`Chromium at ${executablePath} did not start twice (set CHROMIUM_PATH to use another build): ${String(error).slice(0, 4000)}`);
    }
  }
}

/** Where browser tests leave their screenshots (TEST_OUTPUT_DIR, else a folder in the temp dir). */
export const OUTPUT = process.env.TEST_OUTPUT_DIR ?? path.join(os.tmpdir(), 'harper-agent-test-output');

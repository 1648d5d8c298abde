// The headless Chromium the page tests drive through playwright-core. It comes from the npm registry with
// `npm install` (@sparticuz/chromium ships the browser inside its package and unpacks it on first use), so the tests
// need nothing a fresh machine lacks; CHROMIUM_PATH points them at another build instead.
import sparticuz from '@sparticuz/chromium';
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

/** A headless Chromium with a new, empty profile directory, without the sandbox (tests run as root). */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = await chromiumPath();
  try {
    return await chromium.launch({ executablePath, headless: true, chromiumSandbox: false, args: FLAGS });
  } catch (error) {
    throw new Error(`Chromium at ${executablePath} did not start (set CHROMIUM_PATH to use another build): ${String(error).split('\n')[0]}`);
  }
}

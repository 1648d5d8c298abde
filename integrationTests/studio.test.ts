// The agent's tables as an operator sees them in Harper's own admin console (Studio, shipped in harperdb 4.7.29):
// signed in through Studio's form in headless Chromium, the AgentSession grid opens on the columns scanned first, with
// the first prompt as a title and times as dates, and AgentMessage shows each message's text.
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser } from './browser.js';
import { bootHarper, type TestHarper } from './harness.js';

/** The grid Studio shows once a column named `column` is in it and `rows` rows of full width are (Studio swaps tables
 * in place and shows a one-cell row while it loads): header texts, and each row's cell texts. */
async function grid(page: Page, column: string, rows: number): Promise<{ header: string[]; rows: string[][] }> {
  await page.locator('thead th', { hasText: new RegExp(`^${column}$`) }).first().waitFor({ timeout: 30_000 });
  await page.waitForFunction(
    (n) => {
      const width = document.querySelectorAll('thead th').length;
      const trs = [...document.querySelectorAll('tbody tr')];
      return trs.length === n && trs.every((tr) => tr.querySelectorAll('td').length === width);
    },
    rows,
    { timeout: 30_000 },
  );
  return page.evaluate(() => ({
    header: [...document.querySelectorAll('thead th')].map((th) => th.textContent!.trim()),
    rows: [...document.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent!.trim())),
  }));
}

describe("the agent's tables in Harper's Studio", function () {
  this.timeout(180_000);
  let h: TestHarper;
  let browser: Browser;
  let page: Page;
  let sessionId: string;
  const prompt = 'summarize logs/hdb.log for   the\nweekly review';

  before(async function () {
    this.timeout(300_000);
    h = await bootHarper({ env: { LOCALSTUDIO_ENABLED: 'true' } });
    browser = await launchBrowser();
    const started = await h.op({ operation: 'agent_prompt', message: prompt });
    expect(started.status).to.equal(200);
    sessionId = started.body.session_id;
    for (let i = 0; i < 100 && (await h.op({ operation: 'get_agent_session', session_id: sessionId })).body.status !== 'completed'; i++) await new Promise((r) => setTimeout(r, 100));
    page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
    await page.goto(h.harper.opsUrl);
    await page.getByLabel('Username').fill(h.harper.admin.username);
    await page.getByLabel('Password').fill(h.harper.admin.password);
    await page.getByRole('button', { name: 'Sign In' }).click();
    await page.getByRole('link', { name: 'Databases' }).first().waitFor({ timeout: 30_000 });
  });
  after(async () => {
    try {
      await browser?.close();
    } finally {
      await h?.stop();
    }
  });

  it('AgentSession opens on session_id, its indexed times, title, status, messageCount, bytes and lastError, times as dates', async () => {
    const session = (await h.op({ operation: 'get_agent_session', session_id: sessionId })).body;
    await page.goto(`${h.harper.opsUrl}#/databases/agent/AgentSession`);
    const { header, rows } = await grid(page, 'title', 1);
    // Studio puts indexed attributes first: the two the lists read (updatedAt, ownerRecent) come before the rest.
    expect(header.slice(0, 8)).to.deep.equal(['session_id', 'updatedAt', 'ownerRecent', 'title', 'status', 'messageCount', 'bytes', 'lastError']);
    expect(rows).to.have.length(1);
    const cells = Object.fromEntries(header.map((name, i) => [name, rows[0]![i]]));
    expect(cells).to.include({
      session_id: sessionId,
      title: 'summarize logs/hdb.log for the weekly review',
      status: 'completed',
      messageCount: String(session.messageCount),
      bytes: String(session.bytes),
      updatedAt: new Date(session.updatedAt).toISOString(),
      createdAt: new Date(session.createdAt).toISOString(),
    });
  });

  it('AgentMessage shows each message as its own row: session, sequence, time, role and text', async () => {
    const session = (await h.op({ operation: 'get_agent_session', session_id: sessionId })).body;
    await page.goto(`${h.harper.opsUrl}#/databases/agent/AgentMessage`);
    const { header, rows } = await grid(page, 'seq', session.messages.length);
    expect(header.slice(0, 7)).to.deep.equal(['id', 'session_id', 'seq', 'at', 'role', 'name', 'content']);
    const cells = rows.map((r) => Object.fromEntries(header.map((name, i) => [name, r[i]])));
    expect(cells.map((c) => c.seq).sort()).to.deep.equal(session.messages.map((_: unknown, i: number) => String(i)).sort());
    const first = cells.find((c) => c.seq === '0')!;
    expect(first).to.include({ session_id: sessionId, role: 'user', content: prompt, at: new Date(session.messages[0].at).toISOString() });
  });
});

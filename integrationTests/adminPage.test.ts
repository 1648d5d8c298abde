// The admin page (/agent/ on Harper's HTTP port) in headless Chromium (integrationTests/browser.ts, driven by
// playwright-core): prompt, watch the run live, cancel, approve a write, see cut results marked, survive a restart
// of Harper's worker threads. Screenshots go to $TEST_OUTPUT_DIR (default <tmp>/harper-agent-test-output).
import { expect } from 'chai';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { messageBytes } from '../agent/session.js';
import { launchBrowser, OUTPUT } from './browser.js';
import { followupResponder } from './providerServer/pager.js';
import { providerSuite, useLocal } from './providerSuite.js';

// Outside the repository: Harper reloads its components when a file appears in one (this repository is one).


const fmt = (n: number) => `${n.toLocaleString('en-US')} B`;

describe('the admin page in headless Chromium', function () {
  const suite = providerSuite();
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  before(async function () {
    this.timeout(120_000);
    browser = await launchBrowser();
    const { admin } = suite.h.harper;
    context = await browser.newContext({ httpCredentials: { username: admin.username, password: admin.password }, viewport: { width: 1360, height: 900 } });
    mkdirSync(OUTPUT, { recursive: true });
    writeFileSync(path.join(suite.h.logsDir, 'page.log'), Array.from({ length: 8000 }, (_, i) => `entry ${i}${i % 500 === 0 ? ' ERROR: replication lag' : ''}`).join('\n') + '\n');
  });
  after(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    page = await context.newPage();
    page.on('pageerror', (e) => console.log(`admin page error: ${e.message}`));
  });
  afterEach(async () => {
    await page.close();
    await useLocal(suite.h);
  });

  const open = (hash = '') => page.goto(`${suite.h.harper.httpUrl}agent/${hash}`);
  const status = () => page.locator('#session-status');
  const waitForStatus = (value: string) => page.waitForFunction((v) => document.getElementById('session-status')?.textContent === v, value, { timeout: 30_000 });
  const currentId = () => page.locator('#session-title').textContent() as Promise<string>;

  /** Each transcript item as [role class, byte text]: what the operator reads off the page. */
  async function shownMessages() {
    return page.locator('#transcript > li').evaluateAll((items) => items.map((li) => [li.className, li.querySelector('.bytes')?.textContent ?? '']));
  }

  it('a prompt from the page completes; every message shows its stored size; the list shows title, owner, status, messages and cost', async () => {
    await open();
    expect(await page.locator('#session-title').textContent()).to.equal('New session');
    await page.fill('#prompt', 'summarize logs/page.log');
    await page.click('#send');
    await waitForStatus('completed');
    const id = await currentId();
    const row = await suite.h.row(id);
    const s = (await suite.h.op({ operation: 'get_agent_session', session_id: id })).body;
    await page.waitForFunction((n) => document.querySelectorAll('#transcript > li').length === n, row.messages.length);
    // Each message with its class (a result the working set cut is marked) and its stored size.
    expect(await shownMessages()).to.deep.equal(row.messages.map((m: any) => [['message', m.role, m.cut ? `cut-${m.cut}` : ''].filter(Boolean).join(' '), fmt(messageBytes(m))]));
    expect(await page.locator('#transcript > li').last().locator('pre').textContent()).to.equal(row.messages.at(-1).content);
    expect(await page.locator('#session-meta').textContent()).to.equal(`local / local-deterministic · ${row.messages.length} messages · ${fmt(s.bytes)}`);
    // The list is kept by its own feed, apart from the transcript's: the row, with its cost (fetched once the run
    // stopped), comes when it comes.
    await page.waitForFunction((sid) => !!document.querySelector(`#sessions tr[data-id="${sid}"] td.cost`)?.textContent, id);
    const listed = page.locator(`#sessions tr[data-id="${id}"] td`);
    const cells = await listed.allTextContents();
    expect([cells[0], cells[1], cells[2], cells[3], cells[4], cells[6]]).to.deep.equal([`summarize logs/page.log${id.slice(0, 8)}`, suite.h.harper.admin.username, 'completed', String(row.messages.length), '$0.0000', '']);
    expect(cells[5]).to.match(/^\d+ s ago$/);
    expect(await page.locator('#last-error').isHidden()).to.equal(true);
  });

  it('a run that ends while the list\'s first page is on its way stays listed, with its cost (the page predates it)', async () => {
    // The first page is read at once but handed to the page only once the run has ended and the page has its row.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let heldOnce = false;
    await page.route('**/agent/api/operation', async (route) => {
      if (heldOnce || route.request().postDataJSON()?.operation !== 'list_agent_sessions') return route.continue();
      heldOnce = true;
      const response = await route.fetch();
      // A row of the held page's own, so the test sees when the page has taken it.
      const page1 = await response.json();
      const at = Date.now() - 60_000;
      page1.sessions.push({ session_id: 'held-page', title: 'the held page', user: 'admin', status: 'completed', provider: 'local', model: null, node: null, createdAt: at, updatedAt: at, lastError: null, runner: null, messageCount: 0, bytes: 2, pendingApprovals: 0, costUsd: 0 });
      await held;
      await route.fulfill({ response, json: page1 });
    });
    await open();
    await page.waitForFunction(() => document.getElementById('connection')?.textContent === 'live');
    const started = await suite.h.op({ operation: 'agent_prompt', message: 'summarize logs/page.log' });
    const id = started.body.session_id as string;
    expect((await suite.h.waitForSession(id)).status).to.equal('completed');
    await page.waitForFunction((sid) => document.querySelector(`#sessions tr[data-id="${sid}"]`)?.textContent?.includes('completed'), id);
    expect(heldOnce, 'the first page was held').to.equal(true);
    release();
    await page.waitForFunction(() => !!document.querySelector('#sessions tr[data-id="held-page"]'), undefined, { timeout: 15_000 });
    await page.waitForFunction((sid) => !!document.querySelector(`#sessions tr[data-id="${sid}"] td.cost`)?.textContent, id, { timeout: 15_000 });
    const cells = await page.locator(`#sessions tr[data-id="${id}"] td`).allTextContents();
    expect([cells[2], cells[4]]).to.deep.equal(['completed', '$0.0000']);
    await page.unroute('**/agent/api/operation');
  });

  it('updates live: a tool result shows while the next model call runs; Cancel run ends it with its last error', async () => {
    await suite.h.setConfig({ provider: 'openai', baseUrl: `${suite.server.url}/v1`, apiKey: 'k', maxRetries: 0 });
    suite.server.reset([{ toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'page.log' } }] }, { hang: true }]);
    await open();
    await page.fill('#prompt', 'read logs/page.log');
    await page.click('#send');
    await page.waitForSelector('#transcript > li.tool', { timeout: 30_000 });
    const id = await currentId();
    expect(await status().textContent()).to.equal('running');
    expect((await suite.h.row(id)).status).to.equal('running');
    expect(await page.locator('#send').isDisabled()).to.equal(true);
    const row = await suite.h.row(id);
    expect(await page.locator('#transcript > li.tool .bytes').textContent()).to.equal(fmt(messageBytes(row.messages[2])));
    await page.click('#cancel-run');
    await waitForStatus('aborted');
    expect(await page.locator('#last-error').textContent()).to.equal('Cancelled with cancel_agent_run.');
    expect(await page.locator(`#sessions tr[data-id="${id}"] td.error`).textContent()).to.equal('Cancelled with cancel_agent_run.');
    expect((await suite.h.row(id)).status).to.equal('aborted');
  });

  it('a write waits for approval; Approve on the page resumes the run and the file is written', async () => {
    mkdirSync(path.join(suite.h.componentsDir, 'page-notes'), { recursive: true });
    await open();
    await page.fill('#prompt', 'write components/page-notes/hello.txt: approved on the admin page');
    await page.click('#send');
    await waitForStatus('awaiting_approval');
    const approval = page.locator('#approvals .approval');
    expect(await approval.locator('strong').textContent()).to.equal('write_file needs your approval');
    expect(JSON.parse((await approval.locator('pre').textContent())!)).to.deep.equal({ root: 'components', path: 'page-notes/hello.txt', content: 'approved on the admin page' });
    await page.screenshot({ path: path.join(OUTPUT, 'admin-page-approval.png') });
    await approval.locator('button.approve').click();
    await waitForStatus('completed');
    expect(readFileSync(path.join(suite.h.componentsDir, 'page-notes/hello.txt'), 'utf8')).to.equal('approved on the admin page');
    expect(await page.locator('#approvals .approval').count()).to.equal(0);
    expect(await page.locator('#transcript > li').last().locator('pre').textContent()).to.equal('I wrote 26 bytes to components/page-notes/hello.txt.');
  });

  it('marks results cut by the cap and by a context-window shrink, and keeps them across a reload', async () => {
    expect((await suite.h.op({ operation: 'create_database', database: 'pagedata' })).status).to.equal(200);
    expect((await suite.h.op({ operation: 'create_table', database: 'pagedata', table: 'blobs', primary_key: 'id' })).status).to.equal(200);
    let inserted = { status: 0 };
    for (let i = 0; i < 20 && inserted.status !== 200; i++) {
      inserted = await suite.h.op({ operation: 'insert', database: 'pagedata', table: 'blobs', records: [{ id: 'big', payload: 'p'.repeat(100_000) }] });
      if (inserted.status !== 200) await new Promise((r) => setTimeout(r, 250)); // the new table reaches every thread
    }
    expect(inserted.status).to.equal(200);
    // A model of its own: the rejection teaches the pre-flight a limit for this provider and model.
    await suite.h.setConfig({ provider: 'openai', baseUrl: `${suite.server.url}/v1`, apiKey: 'k', maxRetries: 0, maxToolResultBytes: 16384, model: 'page-marks-model' });
    suite.server.reset([
      { toolCalls: [{ name: 'search_table', arguments: { database: 'pagedata', table: 'blobs', id: 'big' } }] },
      { toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'page.log' } }] },
      { contextError: true }, // the newest large result (the page just read) is cut to 2 KiB, and the call retried
      { text: 'The blob is 100 KB of p; the log has replication lag errors.' },
    ]);
    await open();
    await page.fill('#prompt', 'look at the big blob, then read logs/page.log');
    await page.click('#send');
    await waitForStatus('completed');
    const id = await currentId();
    const row = await suite.h.row(id);
    expect(row.messages.map((m: any) => m.cut ?? null)).to.deep.equal([null, null, 'cap', null, 'context', null]);
    await page.waitForFunction(() => document.querySelectorAll('#transcript > li').length === 6);
    expect(await shownMessages()).to.deep.equal(
      row.messages.map((m: any) => [`message ${m.role}${m.cut ? ` cut-${m.cut}` : ''}`, fmt(messageBytes(m))])
    );
    expect(messageBytes(row.messages[4])).to.equal(2048);
    const context = page.locator('#transcript > li.cut-context .badge');
    expect(await context.textContent()).to.equal('cut: context window');
    expect(await context.getAttribute('title')).to.equal('cut to 2 KiB after the model rejected the conversation as longer than its context window');
    const cap = page.locator('#transcript > li.cut-cap .badge');
    expect(await cap.textContent()).to.equal('cut: cap');
    expect(await cap.getAttribute('title')).to.equal('cut to agent.maxToolResultBytes when it was stored');
    expect(messageBytes(row.messages[2])).to.equal(16384);
    await page.screenshot({ path: path.join(OUTPUT, 'admin-page.png'), fullPage: true });
    // A reload shows the same from a fresh snapshot (the URL keeps the session).
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('#transcript > li').length === 6);
    expect(await page.locator('#transcript > li.cut-context').count()).to.equal(1);
    expect(await currentId()).to.equal(id);
  });

  it('marks a result the working set cut, and says why in its title', async () => {
    await suite.h.setConfig({ provider: 'openai', baseUrl: `${suite.server.url}/v1`, apiKey: 'k', maxRetries: 0, maxToolResultBytes: 16384, workingSetBytes: 4096, model: 'page-working-set-model' });
    const read = { toolCalls: [{ name: 'read_file', arguments: { root: 'logs', path: 'page.log' } }] };
    suite.server.reset([read, read, { text: 'Read it twice.' }]);
    await open();
    await page.fill('#prompt', 'read logs/page.log twice');
    await page.click('#send');
    await waitForStatus('completed');
    const row = await suite.h.row(await currentId());
    // Before the third call the first page (about 8 KB) is older than a 4 KiB working set: cut to a 2 KiB head.
    expect(row.messages.map((m: any) => m.cut ?? null)).to.deep.equal([null, null, 'workingSet', null, null, null]);
    expect(messageBytes(row.messages[2])).to.be.at.most(2048);
    await page.waitForFunction(() => document.querySelectorAll('#transcript > li').length === 6);
    const badge = page.locator('#transcript > li.cut-workingSet .badge');
    expect(await badge.textContent()).to.equal('cut: working set');
    expect(await badge.getAttribute('title')).to.equal('cut to 2 KiB before a model call: older than the working set of newest results kept whole (agent.workingSetBytes)');
    expect((await suite.h.setConfig({ workingSetBytes: null })).status).to.equal(200);
  });

  it('draws a compaction\'s boundary above the summary the model sees, live, and again after a reload', async () => {
    await open();
    await page.fill('#prompt', 'summarize logs/page.log');
    await page.click('#send');
    await waitForStatus('completed');
    const id = await currentId();
    const before = (await suite.h.row(id)).messages.length;
    const compacted = await suite.h.op({ operation: 'compact_agent_session', session_id: id, wait: true });
    expect(compacted.status, JSON.stringify(compacted.body)).to.equal(200);
    const record = compacted.body.compaction;
    const boundary = `the model sees a deterministic digest below instead of messages #0-#${before - 1} (the local backend is not a model)`;
    expect(record.boundary).to.equal(boundary);
    for (const reload of [false, true]) {
      if (reload) await page.reload();
      await page.waitForFunction((n) => document.querySelectorAll('#transcript > li').length === n, before + 1);
      const item = page.locator('#transcript > li.compaction');
      expect(await item.count()).to.equal(1);
      expect(await item.locator('.boundary').textContent()).to.equal(boundary);
      expect(await item.locator('.who').textContent()).to.equal('compaction');
      expect(await item.locator('.bytes').textContent()).to.equal(fmt(messageBytes({ role: 'compaction', content: record.content, keepFrom: before, compactedBy: 'digest' })));
      expect(await item.locator('pre').textContent()).to.equal(record.content);
    }
    await page.screenshot({ path: path.join(OUTPUT, 'admin-compaction.png'), fullPage: true });
  });

  it('lists a pending follow-up with a Cancel button that cancels it; a follow-up that fires shows live, marked', async () => {
    const { h, server } = suite;
    server.reset();
    server.responder = followupResponder();
    expect((await h.setConfig({ provider: 'openai', baseUrl: `${server.url}/v1`, apiKey: 'k', maxRetries: 0, followupMinSeconds: 1 })).status).to.equal(200);
    await open();
    await page.fill('#prompt', 'come back in 600 s: is the index rebuilt?');
    await page.click('#send');
    await waitForStatus('completed');
    const box = page.locator('#followups .followup');
    await box.waitFor({ timeout: 10_000 });
    expect(await box.locator('pre').textContent()).to.equal('is the index rebuilt?');
    const id = (await box.getAttribute('data-followup'))!;
    await box.locator('button.cancel-followup').click();
    await page.waitForFunction(() => document.querySelectorAll('#followups .followup').length === 0, undefined, { timeout: 10_000 });
    const [row] = (await h.op({ operation: 'list_agent_followups', session_id: await currentId() })).body.followups;
    expect(row).to.include({ followup_id: id, status: 'cancelled', cancelReason: 'cancel_agent_followup' });

    await page.fill('#prompt', 'come back in 2 s: has the lag cleared?');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelector('#transcript > li:last-child pre')?.textContent === 'followed up: has the lag cleared?', undefined, { timeout: 20_000 });
    const marked = page.locator('#transcript > li.user .badge.followup');
    expect(await marked.count()).to.equal(1);
    expect(await marked.locator('xpath=../..').locator('pre').textContent()).to.match(/^Follow-up you scheduled at \S+: has the lag cleared\?$/);
    await page.screenshot({ path: path.join(OUTPUT, 'admin-followup.png'), fullPage: true });
    expect((await h.setConfig({ followupMinSeconds: null })).status).to.equal(200);
  });

  it('Delete session asks first: dismissed, nothing changes; confirmed, the session is gone from the page and from Harper', async () => {
    await open();
    await page.fill('#prompt', 'summarize logs/page.log');
    await page.click('#send');
    await waitForStatus('completed');
    const id = await currentId();
    const asked: string[] = [];
    let accept = false;
    page.on('dialog', (d) => {
      asked.push(d.message());
      void (accept ? d.accept() : d.dismiss());
    });
    await page.click('#delete-session');
    expect(asked).to.deep.equal([`Delete session ${id} with its messages, model calls and follow-ups? This cannot be undone.`]);
    expect((await suite.h.op({ operation: 'get_agent_session', session_id: id })).status).to.equal(200);
    accept = true;
    await page.click('#delete-session');
    await page.waitForFunction((sid) => !document.querySelector(`#sessions tr[data-id="${sid}"]`) && document.getElementById('session-title')?.textContent === 'New session', id, { timeout: 10_000 });
    expect((await suite.h.op({ operation: 'get_agent_session', session_id: id })).status).to.equal(404);
    await page.reload();
    await page.waitForFunction(() => document.getElementById('connection')?.textContent === 'live');
    expect(await page.locator(`#sessions tr[data-id="${id}"]`).count()).to.equal(0);
  });

  it('lists watches; one created from the page fires on Test, its report shows and opens its session; Pause, Resume and Delete work', async () => {
    await open();
    await page.click('#new-watch summary');
    await page.fill('#watch-definition', JSON.stringify({ name: 'page watch', status: 'paused', trigger: { type: 'schedule', everySeconds: 3600 }, prompt: 'summarize logs/page.log' }));
    await page.click('#watch-form button[type=submit]');
    const row = page.locator('#watches tr', { hasText: 'page watch' });
    await row.waitFor();
    const id = (await row.getAttribute('data-id'))!;
    expect(await row.locator('td').allTextContents()).to.deep.equal(['page watch', 'paused', 'every 3600 s', 'never', '', '', 'TestResumeDelete']);
    await row.locator('button.test').click();
    await page.waitForFunction((watchId) => !!document.querySelector(`#watches tr[data-id="${watchId}"] td.report a`), id, { timeout: 30_000 });
    const w = (await suite.h.op({ operation: 'get_agent_watch', watch_id: id })).body;
    expect(await row.locator('td.report a').getAttribute('href')).to.equal(`#session=${w.lastSessionId}`);
    expect(await row.locator('td.report a').getAttribute('title')).to.equal(w.lastReport.answer);
    await row.locator('td.report a').click();
    await page.waitForFunction((sid) => document.getElementById('session-title')?.textContent === sid, w.lastSessionId);
    await row.locator('button.resume').click();
    await page.waitForFunction((watchId) => document.querySelector(`#watches tr[data-id="${watchId}"] .status`)?.textContent === 'active', id);
    await row.locator('button.pause').click();
    await page.waitForFunction((watchId) => document.querySelector(`#watches tr[data-id="${watchId}"] .status`)?.textContent === 'paused', id);
    page.once('dialog', (d) => void d.accept());
    await row.locator('button.delete').click();
    await page.waitForFunction((watchId) => !document.querySelector(`#watches tr[data-id="${watchId}"]`), id);
    expect((await suite.h.op({ operation: 'get_agent_watch', watch_id: id })).status).to.equal(404);
  });

  it('shows the notes; one added from the page is listed, edited in place and deleted, as Harper has them', async () => {
    await open();
    await page.fill('#note-text', 'Warnings from component pagelog are harmless.');
    await page.click('#note-form button[type=submit]');
    await page.locator('#notes tr', { hasText: 'pagelog' }).waitFor();
    const id = (await page.locator('#notes tr', { hasText: 'pagelog' }).getAttribute('data-id'))!;
    const row = page.locator(`#notes tr[data-id="${id}"]`);
    expect(await row.locator('td').allTextContents()).to.deep.equal(['Warnings from component pagelog are harmless.', '', suite.h.harper.admin.username, 'EditDelete']);
    await row.locator('button.edit').click();
    await row.locator('td.text textarea').fill('Warnings from component pagelog are harmless: it retries.');
    await row.locator('button.save').click();
    await page.waitForFunction((noteId) => document.querySelector(`#notes tr[data-id="${noteId}"] td.text`)?.textContent === 'Warnings from component pagelog are harmless: it retries.', id);
    expect((await suite.h.op({ operation: 'list_agent_notes' })).body.notes.find((n: any) => n.note_id === id).text).to.equal('Warnings from component pagelog are harmless: it retries.');
    // A key is refused, with the reason on the page, and nothing changes.
    await row.locator('button.edit').click();
    await row.locator('td.text textarea').fill('-----BEGIN PRIVATE KEY-----');
    await row.locator('button.save').click();
    await page.waitForFunction(() => !document.getElementById('notice')!.hidden);
    expect(await page.locator('#notice').textContent()).to.equal('400: the note holds key material (a PEM armor line): it is not stored; leave the key out');
    page.once('dialog', (d) => void d.accept());
    await page.locator(`#notes tr[data-id="${id}"] button.delete`).click();
    await page.waitForFunction((noteId) => !document.querySelector(`#notes tr[data-id="${noteId}"]`), id);
    expect((await suite.h.op({ operation: 'list_agent_notes' })).body.notes.some((n: any) => n.note_id === id)).to.equal(false);
  });

  it('keeps following across a restart of Harper\'s worker threads: the page reconnects by itself', async () => {
    const done = await suite.h.prompt('hello');
    await open(`#session=${done.session_id}`);
    await page.waitForFunction(() => document.querySelectorAll('#transcript > li').length === 2);
    const restart = await suite.h.op({ operation: 'restart_service', service: 'http_workers' });
    expect(restart.status, JSON.stringify(restart.body)).to.equal(200);
    // The old thread stops answering, then the new one answers.
    const deadline = Date.now() + 30_000;
    const answers = () => suite.h.op({ operation: 'get_agent_config' }).then((r) => r.status === 200, () => false);
    while ((await answers()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    let answered = false;
    while (!answered && Date.now() < deadline) {
      answered = await answers();
      if (!answered) await new Promise((r) => setTimeout(r, 250));
    }
    expect(answered, 'Harper answered within 30 s of the restart').to.equal(true);
    const again = await suite.h.prompt('hello again', done.session_id);
    expect(again.status).to.equal('completed');
    // The page reconnected by itself and shows the new prompt's messages.
    await page.waitForFunction(() => document.querySelectorAll('#transcript > li').length === 4, undefined, { timeout: 30_000 });
    expect(await page.locator('#transcript > li').nth(2).locator('pre').textContent()).to.equal('hello again');
    expect(await status().textContent()).to.equal('completed');
  });

  it('a user of a role agent.roles does not name gets 403 from the page and its API; once named, the page shows the policy in force for the role', async () => {
    await suite.h.op({ operation: 'add_role', role: 'page_reader', permission: { super_user: false } });
    await suite.h.op({ operation: 'add_user', role: 'page_reader', username: 'page_reader', password: 'reader-pass', active: true });
    // Sent with every request: a browser sends httpCredentials only after a 401, and this Harper trusts local requests.
    const basic = 'Basic ' + Buffer.from('page_reader:reader-pass').toString('base64');
    const reader = await browser.newContext({ extraHTTPHeaders: { authorization: basic } });
    try {
      const other = await reader.newPage();
      const response = await other.goto(`${suite.h.harper.httpUrl}agent/`);
      expect(response!.status()).to.equal(403);
      expect(JSON.parse(await other.locator('body').textContent() as string)).to.deep.equal({ error: 'the agent admin page needs a super_user role or a role named in agent.roles (the role page_reader is not)' });
      const api = await reader.request.post(`${suite.h.harper.httpUrl}agent/api/operation`, { data: { operation: 'list_agent_sessions' } });
      expect(api.status()).to.equal(403);
      // Once agent.roles names the role, the page opens, and shows the policy in force for it: readOnly denies writes.
      expect((await suite.h.setConfig({ roles: ['page_reader'], toolPolicy: { page_reader: 'readOnly' } })).status).to.equal(200);
      const opened = await other.goto(`${suite.h.harper.httpUrl}agent/`);
      expect(opened!.status()).to.equal(200);
      await other.click('#access summary');
      await other.waitForSelector('#access-tools tr[data-tool="write_file"]');
      expect(await other.locator('#access-who').textContent()).to.equal('page_reader · role page_reader · file scopes: logs');
      const policy = async (tool: string) => other.locator(`#access-tools tr[data-tool="${tool}"] td`).allTextContents();
      expect([await policy('write_file'), await policy('read_file'), await policy('harper_operation')]).to.deep.equal([
        ['write_file', 'deny'],
        ['read_file', 'allow'],
        ['harper_operation', 'deny'],
      ]);
    } finally {
      await reader.close();
      await suite.h.setConfig({ roles: null, toolPolicy: null });
    }
  });
});

// The admin page and its API under /agent/ on Harper's HTTP port (and on the operations port, where the CLI follows
// runs): static files from admin/, the agent's operations as JSON POSTs, and live sessions as server-sent events.
// Harper authenticates first (request.user); everything here needs a super_user, like the operations.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { authorize, isSuperUser, sees } from './access.js';
import type { AgentConfig } from './agent.js';
import { answerOperation, bodyTooLarge, header, json, MAX_AGENT_BODY_BYTES, readExactly, type HarperRequest, type HarperResponse, type Operations } from './http.js';
import { HttpError } from './operations.js';
import { followSession, followSessionList, type SubscribableTable } from './sessionFeed.js';
import type { SessionStore } from './session.js';

export const ADMIN_PATH = '/agent/';

/** Adds `WWW-Authenticate: Basic` to a 401 on the page's paths that lacks one (Harper's own "Login failed"), so a
 * browser shown the page with a wrong password asks for credentials again. */
export async function challengeOnRejection(request: HarperRequest, next: (r: HarperRequest) => Promise<unknown>): Promise<unknown> {
  const response = (await next(request)) as { status?: number; headers?: Headers | Record<string, string> } | undefined;
  if (response?.status !== 401 || !new URL(request.url ?? '/', 'http://x').pathname.startsWith(ADMIN_PATH)) return response;
  const headers = response.headers;
  if (headers instanceof Headers) {
    if (!headers.has('www-authenticate')) headers.set('www-authenticate', 'Basic realm="Harper Agent"');
  } else if (headers) {
    if (!Object.keys(headers).some((k) => k.toLowerCase() === 'www-authenticate')) headers['WWW-Authenticate'] = 'Basic realm="Harper Agent"';
  } else response.headers = new Headers({ 'www-authenticate': 'Basic realm="Harper Agent"' });
  return response;
}

const PAGE_FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'vendor/marked.js': 'text/javascript; charset=utf-8',
  'vendor/purify.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
};

interface PageFile {
  type: string;
  body: string;
}

export interface AdminDeps {
  operations: Operations;
  store: SessionStore;
  table(): SubscribableTable;
  /** Where streaming model calls publish their text (AgentLiveText); absent, followers see only stored messages. */
  liveTable?(): SubscribableTable;
  /** The folder holding index.html, app.js and style.css. */
  pageDir: string;
  /** The config in force: agent.roles says who besides a super_user may use the page. */
  config(): Pick<AgentConfig, 'roles'>;
  log(message: string): void;
}

/** The page's files, read once at boot; `/agent/` is index.html. */
function loadPage(dir: string): Map<string, PageFile> {
  const files = new Map<string, PageFile>();
  for (const [name, type] of Object.entries(PAGE_FILES)) files.set(name, { type, body: readFileSync(path.join(dir, name), 'utf8') });
  files.set('', files.get('index.html')!);
  return files;
}

function eventResponse(body: HarperResponse['body']): HarperResponse {
  // no-transform and X-Accel-Buffering keep proxies from holding events back.
  return { status: 200, headers: new Headers({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' }), body };
}

async function readJsonBody(request: HarperRequest): Promise<Record<string, unknown>> {
  if (!(header(request, 'content-type') ?? '').startsWith('application/json')) {
    // Also what keeps another site's form from posting here with the browser's cached credentials.
    throw new HttpError(415, 'send the operation as JSON (content-type: application/json)');
  }
  const length = Number(header(request, 'content-length'));
  if (!Number.isInteger(length) || length <= 0) throw new HttpError(411, 'send a content-length with the operation');
  if (length > MAX_AGENT_BODY_BYTES) throw bodyTooLarge(length);
  const body = request._nodeRequest ? await readExactly(request._nodeRequest, length) : null;
  let input: unknown;
  try {
    input = JSON.parse(body?.toString('utf8') ?? '');
  } catch {
    throw new HttpError(400, 'the body is not valid JSON');
  }
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new HttpError(400, 'the body must be a JSON object with an "operation"');
  return input as Record<string, unknown>;
}

export function adminListener(deps: AdminDeps) {
  const page = loadPage(deps.pageDir);
  const route = async (request: HarperRequest, url: URL): Promise<HarperResponse> => {
    const rest = url.pathname.slice(ADMIN_PATH.length);
    const method = request.method ?? 'GET';
    const user = authorize(request.user, 'the agent admin page', deps.config());
    if (rest === 'api/operation') {
      if (method !== 'POST') throw new HttpError(405, 'POST an operation here');
      const input = await readJsonBody(request);
      const name = input.operation;
      if (typeof name !== 'string' || !Object.hasOwn(deps.operations, name)) throw new HttpError(404, `${JSON.stringify(name)} is not an agent operation (${Object.keys(deps.operations).join(', ')})`);
      return answerOperation(deps.operations, name, input, request, deps.log);
    }
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, `${method} is not served under ${ADMIN_PATH}`);
    if (rest === 'api/sessions/events') {
      const limit = Math.min(Math.max(Number(url.searchParams.get('limit')) || 50, 1), 1000);
      return eventResponse(followSessionList(deps.table(), deps.store, limit, isSuperUser(user) ? undefined : (user.username ?? '')));
    }
    const follow = /^api\/sessions\/([A-Za-z0-9._:-]{1,128})\/events$/.exec(rest);
    if (follow) {
      const id = follow[1]!;
      const header = await deps.store.header(id);
      if (!header || !sees(user, header.user)) throw new HttpError(404, `session ${JSON.stringify(id)} not found`);
      const from = Math.max(0, Math.floor(Number(url.searchParams.get('from')) || 0));
      return eventResponse(followSession(deps.table(), deps.store, id, from, deps.liveTable?.()));
    }
    const file = page.get(rest);
    if (file === undefined) throw new HttpError(404, `${url.pathname} is not part of the agent admin page`);
    return { status: 200, headers: new Headers({ 'content-type': file.type, 'cache-control': 'no-cache' }), body: file.body };
  };

  return async (request: HarperRequest, next: (request: HarperRequest) => unknown) => {
    const url = new URL(request.url ?? '/', 'http://harper');
    if (url.pathname === '/agent') return { status: 301, headers: new Headers({ location: ADMIN_PATH }), body: '' };
    if (!url.pathname.startsWith(ADMIN_PATH)) return next(request);
    try {
      return await route(request, url);
    } catch (error) {
      request._nodeRequest?.resume(); // an unread body would stall the connection's next request
      if (!(error instanceof HttpError)) {
        deps.log(`harper-agent: ${url.pathname} failed: ${String((error as Error)?.stack ?? error)}`);
        return json(500, { error: `${url.pathname} failed: ${String((error as Error)?.message ?? error)}` });
      }
      // On a 401 Harper adds `WWW-Authenticate: Basic` itself, which is what makes a browser ask for credentials.
      return json(error.status, { error: error.message });
    }
  };
}

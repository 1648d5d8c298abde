// The CLI's connection to Harper: operations POSTed to the operations API, a session's live events read from
// /agent/api/sessions/<id>/events on the same port, and every failure turned into one message and exit code.

/** Exit codes, documented in `harper-agent --help`. */
export const EXIT = {
  ok: 0,
  runFailed: 1,
  usage: 2,
  unreachable: 3,
  auth: 4,
  notFound: 5,
  conflict: 6,
  rejected: 7,
  awaitingApproval: 10,
} as const;

export class CliError extends Error {
  constructor(readonly exitCode: number, message: string) {
    super(message);
  }
}

export interface Connection {
  /** The operations API URL, e.g. http://localhost:9925/ (no credentials in it). */
  url: string;
  username?: string;
  password?: string;
}

/** --url / --user / --password, else HARPER_AGENT_URL / _USER / _PASSWORD (Harper's CLI_TARGET_* too), else localhost. */
export function connectionFrom(flags: { url?: string; user?: string; password?: string }, env: NodeJS.ProcessEnv): Connection {
  const raw = flags.url ?? env.HARPER_AGENT_URL ?? 'http://localhost:9925/';
  let url: URL;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw new CliError(EXIT.usage, `--url ${JSON.stringify(raw)} is not a URL; use the operations API URL, e.g. http://localhost:9925/`);
  }
  // An empty env var counts as unset, as in a shell's `HARPER_AGENT_USER= harper-agent …`.
  const username = flags.user ?? (env.HARPER_AGENT_USER || env.CLI_TARGET_USERNAME || (url.username ? decodeURIComponent(url.username) : undefined));
  const password = flags.password ?? (env.HARPER_AGENT_PASSWORD || env.CLI_TARGET_PASSWORD || (url.password ? decodeURIComponent(url.password) : undefined));
  if (username !== undefined && password === undefined) throw new CliError(EXIT.usage, `a user (${username}) needs a password: --password or HARPER_AGENT_PASSWORD`);
  // Never send a password without its user: the request would go out with no credentials at all.
  if (password !== undefined && username === undefined) throw new CliError(EXIT.usage, 'a password needs a user: --user or HARPER_AGENT_USER');
  url.username = '';
  url.password = '';
  return { url: url.href, username, password };
}

function unreachable(url: string, error: unknown): CliError {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const why =
    cause?.code === 'ECONNREFUSED' ? 'connection refused' : cause?.code === 'ENOTFOUND' ? 'host not found' : cause?.code === 'ECONNRESET' ? 'connection reset' : (cause?.message ?? String((error as Error)?.message ?? error));
  return new CliError(EXIT.unreachable, `cannot reach Harper's operations API at ${url} (${why}). Is Harper running? Point --url (or HARPER_AGENT_URL) at its operations API.`);
}

/** An HTTP failure as the operator should read it: what happened and what to do. */
export function httpFailure(status: number, error: string, connection: Connection): CliError {
  switch (status) {
    case 401:
      return new CliError(EXIT.auth, `401 Unauthorized: Harper rejected ${connection.username ? `the credentials of ${connection.username}` : 'a request without credentials'} (${error}). Pass --user and --password (or HARPER_AGENT_USER and HARPER_AGENT_PASSWORD).`);
    case 403:
      return new CliError(EXIT.auth, `403 Forbidden: ${error}. Use a user with the super_user role, or one whose role agent.roles names.`);
    case 404:
      return new CliError(EXIT.notFound, `404 Not Found: ${error}.${/session/.test(error) ? ' `harper-agent sessions` lists the sessions.' : ''}`);
    case 409:
      return new CliError(EXIT.conflict, `409 Conflict: ${error}.`);
    default:
      return new CliError(EXIT.rejected, `${status}: ${error}`);
  }
}

function errorText(body: string): string {
  try {
    const parsed = JSON.parse(body);
    if (typeof parsed?.error === 'string') return parsed.error;
    if (typeof parsed?.message === 'string') return parsed.message;
  } catch {
    // not JSON
  }
  return body.trim() || 'no body';
}

export interface FeedEvent {
  event: string;
  data: any;
}

export class AgentClient {
  constructor(readonly connection: Connection) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const { username, password } = this.connection;
    const auth: Record<string, string> = username !== undefined ? { authorization: 'Basic ' + Buffer.from(`${username}:${password}`).toString('base64') } : {};
    return { ...auth, ...extra };
  }

  private async request(path: string, init: RequestInit): Promise<Response> {
    const url = new URL(path, this.connection.url).href;
    let res: Response;
    try {
      res = await fetch(url, { ...init, headers: this.headers(init.headers as Record<string, string>) });
    } catch (error) {
      throw unreachable(this.connection.url, error);
    }
    if (!res.ok) throw httpFailure(res.status, errorText(await res.text()), this.connection);
    return res;
  }

  async op<T = any>(body: Record<string, unknown>): Promise<T> {
    const res = await this.request('', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await res.json()) as T;
  }

  /** An operation whose answer is streamed (export_agent_session): each chunk of text to `write` as it arrives. */
  async stream(body: Record<string, unknown>, write: (chunk: string) => unknown): Promise<void> {
    const res = await this.request('', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) write(decoder.decode(chunk, { stream: true }));
    const rest = decoder.decode();
    if (rest) write(rest);
  }

  /** A session's server-sent events, from message `from` on, until the caller stops or the server closes. */
  async *events(id: string, from: number, signal?: AbortSignal): AsyncGenerator<FeedEvent> {
    const res = await this.request(`agent/api/sessions/${encodeURIComponent(id)}/events?from=${from}`, { headers: { accept: 'text/event-stream' }, signal });
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const parsed = parseEvent(block);
          if (parsed) yield parsed;
        }
      }
    } catch (error) {
      if (signal?.aborted) return;
      throw new CliError(EXIT.unreachable, `lost the connection to Harper while following session ${id} (${(error as Error)?.message ?? error}); the run goes on: \`harper-agent show ${id}\``);
    }
  }
}

/** One event block of a text/event-stream; comments (keep-alives) give null. */
export function parseEvent(block: string): FeedEvent | null {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length === 0) return null;
  return { event, data: JSON.parse(data.join('\n')) };
}

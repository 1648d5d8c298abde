// Serves the agent's operations on Harper's operations API port: peeks the JSON body of each POST, answers the
// agent's operations, and hands every other request to Harper untouched (the peeked bytes are put back).
import type { Readable } from 'node:stream';
import { errorInfo } from '../resources/models/agentLoop.js';
import { FORWARDED_HEADER, type Via } from './cluster.js';
import { Readable as ReadableStream } from 'node:stream';
import { checkInput, HttpError, StreamedAnswer, type User } from './operations.js';

/** Largest body an agent operation accepts; larger bodies are peeked only far enough to answer 413. */
export const MAX_AGENT_BODY_BYTES = 1024 * 1024;
const PEEK_BYTES_OF_LARGE_BODY = 64 * 1024;

export const bodyTooLarge = (length: number) => new HttpError(413, `request body is ${length} bytes; agent operations accept at most ${MAX_AGENT_BODY_BYTES}`);

export interface HarperRequest {
  url?: string;
  method?: string;
  headers: { get?(name: string): string | null | undefined } & Record<string, unknown>;
  user?: User;
  _nodeRequest?: Readable;
  /** Node's own response, for a listener that writes the answer itself (the MCP transport). */
  _nodeResponse?: import('node:http').ServerResponse;
}

export interface HarperResponse {
  status: number;
  /** A Headers object: Harper itself adds to it (e.g. WWW-Authenticate on a 401). */
  headers: Headers;
  body: string | Readable;
}

export type Operations = Record<string, { schema: Record<string, unknown>; handle(input: Record<string, unknown>, user: User, via?: Via): Promise<unknown> }>;

export function header(request: HarperRequest, name: string): string | undefined {
  const value = request.headers.get ? request.headers.get(name) : (request.headers[name] as string | undefined);
  return value ?? undefined;
}

/** Reads exactly `n` bytes (or what there is before the end) without consuming past them. */
export function readExactly(stream: Readable, n: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const done = (value: Buffer | null, error?: unknown) => {
      stream.off('readable', attempt);
      stream.off('end', onEnd);
      stream.off('error', onError);
      if (error) reject(error);
      else resolve(value);
    };
    const attempt = () => {
      const chunk = stream.read(n) as Buffer | null;
      if (chunk !== null) done(chunk);
    };
    const onEnd = () => done((stream.read() as Buffer | null) ?? null);
    const onError = (error: unknown) => done(null, error);
    stream.on('readable', attempt);
    stream.on('end', onEnd);
    stream.on('error', onError);
    attempt();
  });
}

export function json(status: number, payload: unknown): HarperResponse {
  return { status, headers: new Headers({ 'content-type': 'application/json' }), body: JSON.stringify(payload) };
}

/** Every request needs a user; which users may do what each operation checks itself (agent/access.ts). */
export function authenticated(user: User | undefined): User {
  if (!user) throw new HttpError(401, 'authentication required: send Basic credentials or an operation token');
  return user;
}

/** What an operation sent on to the node that owns its session carries: the caller's credentials. */
export function viaOf(request: HarperRequest): Via {
  return { authorization: header(request, 'authorization'), forwardedBy: header(request, FORWARDED_HEADER) };
}

/** Runs one agent operation for `user`: the one path from an input to an answer (status and body), for every port
 * and for MCP. */
export async function runOperation(operations: Operations, name: string, input: Record<string, unknown>, user: User | undefined, via: Via, log: (message: string) => void): Promise<{ status: number; body: unknown }> {
  const op = operations[name]!;
  try {
    const who = authenticated(user);
    checkInput(op, input);
    return { status: 200, body: await op.handle(input, who, via) };
  } catch (error) {
    if (error instanceof HttpError) return { status: error.status, body: { error: error.message } };
    log(`harper-agent: ${name} failed: ${errorInfo(error)}`);
    return { status: 500, body: { error: `${name} failed: ${errorInfo(error)}` } };
  }
}

/** runOperation answered as JSON over HTTP. */
export async function answerOperation(operations: Operations, name: string, input: Record<string, unknown>, request: HarperRequest, log: (message: string) => void): Promise<HarperResponse> {
  const answer = await runOperation(operations, name, input, request.user, viaOf(request), log);
  if (answer.body instanceof StreamedAnswer) {
    // Written as it is produced; a failure part way ends the body with a line saying so (the status is sent already).
    const { contentType, chunks } = answer.body;
    const body = ReadableStream.from(
      (async function* () {
        try {
          yield* chunks;
        } catch (error) {
          log(`harper-agent: ${name} failed while streaming: ${errorInfo(error)}`);
          yield `\n\n[export failed part way: ${errorInfo(error)}]\n`;
        }
      })()
    );
    return { status: 200, headers: new Headers({ 'content-type': contentType }), body };
  }
  return json(answer.status, answer.body);
}

const OPERATION_FIELD = /"operation"\s*:\s*"([A-Za-z_]+)"/;

export function operationsListener(operations: Operations, log: (message: string) => void) {
  return async (request: HarperRequest, next: (request: HarperRequest) => unknown) => {
    const stream = request._nodeRequest;
    const length = Number(header(request, 'content-length'));
    if (request.method !== 'POST' || !stream || !Number.isInteger(length) || length <= 0) return next(request);
    const peek = await readExactly(stream, Math.min(length, length > MAX_AGENT_BODY_BYTES ? PEEK_BYTES_OF_LARGE_BODY : length));
    if (!peek) return next(request);
    if (length > MAX_AGENT_BODY_BYTES) {
      const name = OPERATION_FIELD.exec(peek.toString('latin1', 0, peek.length))?.[1];
      if (name && name in operations) {
        // Discard the rest, so the client finishes sending and reads the 413 (closing the connection instead made a
        // client still writing its body fail with EPIPE before it saw the answer).
        stream.resume();
        return json(413, { error: bodyTooLarge(length).message });
      }
      stream.unshift(peek);
      return next(request);
    }
    let input: unknown;
    try {
      input = JSON.parse(peek.toString('utf8'));
    } catch {
      input = undefined;
    }
    const name = (input as { operation?: unknown } | undefined)?.operation;
    if (typeof name !== 'string' || !Object.hasOwn(operations, name) || typeof input !== 'object' || Array.isArray(input)) {
      stream.unshift(peek);
      return next(request);
    }
    return answerOperation(operations, name, input as Record<string, unknown>, request, log);
  };
}

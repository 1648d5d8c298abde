// http_fetch: GET or HEAD a URL the operator allows (agent.fetchAllow; by default this Harper's own HTTP and operations
// ports on loopback), the body paged by byte cursor within half the cap like read_file. Every hop, redirects included,
// must be an allowed origin whose name resolves only to addresses that are not private, link-local or metadata; the
// connection goes to the address that was checked (no second lookup to rebind). No credentials are ever sent.
import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { holdsArmorLine } from './keyMaterial.js';
import { isValidUtf8, utf8Boundary } from './paging.js';
import { ToolError, type Tool, type ToolContext } from './types.js';

const MAX_REDIRECTS = 5;
const TIMEOUT_MS = 15_000;
/** The most of a body read to reach one page (offset included). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Addresses never fetched, whatever the allow list says: private, link-local (cloud metadata), unspecified, multicast. */
const REFUSED = new BlockList();
for (const [net, bits] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.168.0.0', 16], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) REFUSED.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['fd00:ec2::', 32]] as const) REFUSED.addSubnet(net, bits, 'ipv6');

export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>;
const systemResolve: Resolve = (host) => dnsLookup(host, { all: true, verbatim: true });

/** What kind of refused address this is ("link-local …"), or null. IPv4-mapped IPv6 addresses are judged as the IPv4 they carry. */
export function refusedAddress(address: string): string | null {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const [ip, family] = mapped ? [mapped, 'ipv4' as const] : [address, isIP(address) === 6 ? ('ipv6' as const) : ('ipv4' as const)];
  if (!REFUSED.check(ip, family)) return null;
  if (ip.startsWith('169.254.') || /^f[e][89ab]/i.test(ip) || /^fd00:ec2:/i.test(ip)) return 'link-local (cloud metadata lives there)';
  return 'a private, unspecified or multicast address';
}

/** An allowed origin for a URL, by exact origin (scheme, host and port). */
function allowedOrigin(url: URL, allow: string[]): boolean {
  return allow.some((a) => {
    try {
      return new URL(a).origin === url.origin;
    } catch {
      return false;
    }
  });
}

/** Checks one hop: scheme, allow list, then every address the name resolves to. Returns the address to connect to. */
async function checkHop(url: URL, allow: string[], resolve: Resolve): Promise<{ address: string; family: number }> {
  checkScheme(url);
  if (!allowedOrigin(url, allow)) throw new ToolError(`${url.origin} is not in agent.fetchAllow (allowed: ${allow.join(', ') || 'none'}); the operator can add it`);
  return checkAddresses(url, resolve);
}

function checkScheme(url: URL): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ToolError(`${url.href}: only http and https URLs are fetched`);
  if (url.username || url.password) throw new ToolError(`${url.href}: URLs with credentials are not fetched`);
}

/** The SSRF rules without an allow list (a watch's webhook, agent/watches/delivery.ts): http or https, no credentials,
 * and every address the name resolves to neither private, link-local nor metadata. Returns the address to connect to. */
export async function checkUrl(url: URL, resolve: Resolve = systemResolve): Promise<{ address: string; family: number }> {
  checkScheme(url);
  return checkAddresses(url, resolve);
}

async function checkAddresses(url: URL, resolve: Resolve): Promise<{ address: string; family: number }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolve(host);
  } catch (error) {
    throw new ToolError(`${url.host} does not resolve: ${(error as Error).message}`);
  }
  if (addresses.length === 0) throw new ToolError(`${url.host} does not resolve`);
  for (const a of addresses) {
    const why = refusedAddress(a.address);
    if (why) throw new ToolError(`${url.href} is refused: ${host === a.address ? `${a.address} is` : `${host} resolves to ${a.address},`} ${why}`);
  }
  return addresses[0]!;
}

interface Hop {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
  size: number;
}

/** One request to the checked address: reads the body up to `upTo` bytes (the rest is counted, not kept). */
type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export function send(url: URL, method: Method, at: { address: string; family: number }, upTo: number, signal: AbortSignal, body?: { text: string; type: string }, headers: Record<string, string> = {}): Promise<Hop> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
      url,
      {
        method,
        headers: { 'user-agent': 'harper-agent http_fetch', accept: '*/*', ...headers, ...(body ? { 'content-type': body.type, 'content-length': String(Buffer.byteLength(body.text)) } : {}) },
        // The connection goes to the address that was checked: a second lookup could answer differently.
        lookup: ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
          options?.all ? callback(null, [{ address: at.address, family: at.family }]) : callback(null, at.address, at.family)) as unknown as LookupFunction,
        timeout: TIMEOUT_MS,
        signal,
      },
      (response) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (kept < upTo) {
            chunks.push(chunk.subarray(0, upTo - kept));
            kept += Math.min(chunk.length, upTo - kept);
          }
          if (size > MAX_BODY_BYTES) response.destroy(new ToolError(`${url.href}: the body is over ${MAX_BODY_BYTES} bytes`));
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks), size }));
        response.on('error', reject);
      }
    );
    request.on('timeout', () => request.destroy(new ToolError(`${url.href}: no answer within ${TIMEOUT_MS / 1000} s`)));
    request.on('error', (error) => reject(error instanceof ToolError ? error : new ToolError(`${url.href}: ${error.message}`)));
    request.end(body?.text);
  });
}

const SHOWN_HEADERS = ['content-type', 'content-length', 'last-modified', 'etag', 'location', 'server', 'date'];

/** Methods that only read: anything else changes the target, so the call waits for approval (and is not redirected). */
const READ_METHODS = ['GET', 'HEAD'];
const MAX_SENT_BODY_BYTES = 64 * 1024;

export async function httpFetch(args: Record<string, unknown>, ctx: ToolContext, resolve: Resolve = systemResolve): Promise<Record<string, unknown>> {
  const method = (args.method as Method | undefined) ?? 'GET';
  const sent = args.body as string | undefined;
  if (sent !== undefined && READ_METHODS.includes(method)) throw new ToolError(`a ${method} sends no body; use POST, PUT or PATCH to send one`);
  const offset = (args.offset as number | undefined) ?? 0;
  const allow = ctx.fetchAllow ?? [];
  let url: URL;
  try {
    url = new URL(args.url as string);
  } catch {
    throw new ToolError(`${JSON.stringify(args.url)} is not a URL`);
  }
  const page = Math.max(256, Math.floor(ctx.maxResultBytes / 2) - 1024);
  const redirects: string[] = [];
  for (;;) {
    const at = await checkHop(url, allow, resolve);
    const body = sent !== undefined ? { text: sent, type: (args.contentType as string | undefined) ?? 'application/json' } : undefined;
    const hop = await send(url, method, at, offset + page * 6, ctx.signal, body); // escaping can grow text up to 6x
    const location = hop.headers.location;
    // Only reads follow redirects: a changing request goes where it was approved to go, and no further.
    if (hop.status >= 300 && hop.status < 400 && location && READ_METHODS.includes(method)) {
      if (redirects.length >= MAX_REDIRECTS) throw new ToolError(`${args.url}: more than ${MAX_REDIRECTS} redirects`);
      redirects.push(url.href);
      url = new URL(location, url); // checked like the first hop on the next turn of the loop
      continue;
    }
    const headers = Object.fromEntries(SHOWN_HEADERS.filter((h) => hop.headers[h] !== undefined).map((h) => [h, hop.headers[h]]));
    const result: Record<string, unknown> = { url: url.href, status: hop.status, headers, size: hop.size, ...(redirects.length ? { redirectedFrom: redirects } : {}) };
    if (method === 'HEAD') return result;
    if (offset > hop.size) throw new ToolError(`offset ${offset} is past the end of the body (${hop.size} bytes)`);
    let window = hop.body.subarray(offset);
    // Within the page, measured as the model gets it (JSON-escaped), on a UTF-8 boundary.
    let end = Math.min(window.length, page);
    while (end > 0 && Buffer.byteLength(JSON.stringify(window.subarray(0, end).toString('utf8'))) > page) end = Math.floor(end * 0.8);
    end = end < window.length ? utf8Boundary(window, end, 0) : end;
    window = window.subarray(0, end);
    if (holdsArmorLine(window)) throw new ToolError(`${url.href}: this part of the body holds a PEM private key and is never served`);
    if (!isValidUtf8(window)) return { ...result, offset, binary: true, note: 'the body is not UTF-8 text; only its headers and size are shown' };
    Object.assign(result, { offset, content: window.toString('utf8') });
    if (offset + end < hop.size) result.nextOffset = offset + end;
    return result;
  }
}

export const httpFetchTool: Tool = {
  name: 'http_fetch',
  description:
    'GET (or HEAD) a URL the operator allows (agent.fetchAllow; by default this Harper\'s own HTTP and operations ' +
    'ports on loopback), e.g. to check that an endpoint answers. Returns status, main headers, size and one page of ' +
    'the body; while it continues the result has nextOffset: pass it back as offset. POST, PUT, PATCH and DELETE (with ' +
    'body and contentType) change the target: each waits for the operator\'s approval and follows no redirect. No ' +
    'credentials are sent; private and link-local addresses are refused.',
  parameters: {
    type: 'object',
    properties: {
      url: { type: 'string', minLength: 1, maxLength: 2048 },
      method: { type: 'string', enum: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] },
      offset: { type: 'integer', minimum: 0 },
      body: { type: 'string', maxLength: MAX_SENT_BODY_BYTES },
      contentType: { type: 'string', minLength: 1, maxLength: 200 },
    },
    required: ['url'],
    additionalProperties: false,
  },
  advice: 'fetch less: HEAD for the status alone, or page with offset',
  destructive: (args) => !READ_METHODS.includes((args.method as string | undefined) ?? 'GET'),
  handler: (args, ctx) => httpFetch(args, ctx),
};

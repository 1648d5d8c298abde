// http_fetch against a real local HTTP server: allowed origins only, addresses checked after resolution and on every
// redirect hop, the connection pinned to the checked address, the body paged by byte cursor, key material refused.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpFetch, httpFetchTool, refusedAddress, type Resolve } from '../agent/tools/httpFetch.js';
import { isDestructive, type ToolContext } from '../agent/tools/types.js';
import { tempScopes } from './helpers.js';

const BODY = Array.from({ length: 3000 }, (_, i) => `row ${i} é ${'q'.repeat(i % 30)}`).join('\n');

describe('http_fetch', () => {
  let server: Server;
  let origin: string;
  const hosts: string[] = [];

  before(async () => {
    server = createServer(async (req, res) => {
      if (req.url === '/echo') {
        let got = '';
        for await (const c of req) got += c;
        return void res.writeHead(req.method === 'DELETE' ? 303 : 201, { 'content-type': 'application/json', location: '/body' }).end(JSON.stringify({ method: req.method, type: req.headers['content-type'] ?? null, got }));
      }
      hosts.push(`${req.headers.host}${req.headers.authorization ? ' with credentials' : ''}${req.headers.cookie ? ' with cookies' : ''}`);
      if (req.url === '/to-private') return void res.writeHead(302, { location: 'http://10.0.0.1/' }).end();
      if (req.url === '/to-self') return void res.writeHead(301, { location: '/body' }).end();
      if (req.url === '/key') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('config\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n');
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(BODY);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  const ctx = (fetchAllow: string[], maxResultBytes = 16384): ToolContext => ({ scopes: tempScopes(), maxResultBytes, signal: new AbortController().signal, fetchAllow });
  const refusal = async (args: Record<string, unknown>, c: ToolContext, resolve?: Resolve) => {
    try {
      await httpFetch(args, c, resolve);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('not refused');
  };

  it('serves an allowed origin a page at a time; the pages reassemble the body, each within half the cap', async () => {
    let text = '';
    let offset: number | undefined = 0;
    let pages = 0;
    while (offset !== undefined) {
      const r: Record<string, any> = await httpFetch({ url: `${origin}/body`, offset }, ctx([origin]));
      expect(r).to.include({ status: 200, size: Buffer.byteLength(BODY), offset });
      expect(r.headers['content-type']).to.equal('text/plain; charset=utf-8');
      expect(Buffer.byteLength(JSON.stringify(r))).to.be.at.most(8192);
      text += r.content;
      offset = r.nextOffset;
      pages++;
    }
    expect(text).to.equal(BODY);
    expect(pages).to.be.greaterThan(5);
  });

  it('POST, PUT, PATCH and DELETE wait for approval (GET and HEAD do not), send their body, and follow no redirect', async () => {
    for (const method of [undefined, 'GET', 'HEAD']) expect(isDestructive(httpFetchTool, { url: origin, ...(method ? { method } : {}) }), String(method)).to.equal(false);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) expect(isDestructive(httpFetchTool, { url: origin, method }), method).to.equal(true);
    const posted = await httpFetch({ url: `${origin}/echo`, method: 'POST', body: '{"restart":true}' }, ctx([origin]));
    expect(posted).to.include({ url: `${origin}/echo`, status: 201 });
    expect(JSON.parse(posted.content as string)).to.deep.equal({ method: 'POST', type: 'application/json', got: '{"restart":true}' });
    const put = await httpFetch({ url: `${origin}/echo`, method: 'PUT', body: 'a=1', contentType: 'application/x-www-form-urlencoded' }, ctx([origin]));
    expect(JSON.parse(put.content as string)).to.deep.equal({ method: 'PUT', type: 'application/x-www-form-urlencoded', got: 'a=1' });
    const deleted = await httpFetch({ url: `${origin}/echo`, method: 'DELETE' }, ctx([origin]));
    expect(deleted).to.include({ url: `${origin}/echo`, status: 303 });
    expect((deleted.headers as Record<string, string>).location).to.equal('/body');
    expect(await refusal({ url: `${origin}/echo`, body: 'x' }, ctx([origin]))).to.equal('a GET sends no body; use POST, PUT or PATCH to send one');
  });

  it('HEAD gives the status, headers and size only; a redirect within allowed origins is followed and named', async () => {
    expect(await httpFetch({ url: `${origin}/body`, method: 'HEAD' }, ctx([origin]))).to.not.have.property('content');
    const r = await httpFetch({ url: `${origin}/to-self` }, ctx([origin]));
    expect(r).to.include({ url: `${origin}/body`, status: 200 });
    expect(r.redirectedFrom).to.deep.equal([`${origin}/to-self`]);
  });

  it('refuses what the operator did not allow, and metadata or private addresses even when allowed', async () => {
    expect(await refusal({ url: `${origin}/body` }, ctx(['http://127.0.0.1:1']))).to.equal(`${origin} is not in agent.fetchAllow (allowed: http://127.0.0.1:1); the operator can add it`);
    expect(await refusal({ url: 'http://169.254.169.254/latest/meta-data/' }, ctx(['http://169.254.169.254']))).to.equal('http://169.254.169.254/latest/meta-data/ is refused: 169.254.169.254 is link-local (cloud metadata lives there)');
    expect(await refusal({ url: 'http://10.0.0.1/' }, ctx(['http://10.0.0.1']))).to.equal('http://10.0.0.1/ is refused: 10.0.0.1 is a private, unspecified or multicast address');
    expect(await refusal({ url: 'file:///etc/passwd' }, ctx(['file://']))).to.equal('file:///etc/passwd: only http and https URLs are fetched');
  });

  it('checks every redirect hop: a redirect to a private address is refused', async () => {
    expect(await refusal({ url: `${origin}/to-private` }, ctx([origin, 'http://10.0.0.1']))).to.equal('http://10.0.0.1/ is refused: 10.0.0.1 is a private, unspecified or multicast address');
  });

  it('checks what a name resolves to, and connects to the address it checked, sending no credentials', async () => {
    const port = new URL(origin).port;
    const resolve: Resolve = async (host) => (host === 'internal.example' ? [{ address: '10.1.2.3', family: 4 }] : host === 'svc.example' ? [{ address: '127.0.0.1', family: 4 }] : []);
    expect(await refusal({ url: `http://internal.example:${port}/` }, ctx([`http://internal.example:${port}`]), resolve)).to.equal(`http://internal.example:${port}/ is refused: internal.example resolves to 10.1.2.3, a private, unspecified or multicast address`);
    hosts.length = 0;
    const r = await httpFetch({ url: `http://svc.example:${port}/body`, method: 'HEAD' }, ctx([`http://svc.example:${port}`]), resolve);
    expect(r.status).to.equal(200);
    expect(hosts).to.deep.equal([`svc.example:${port}`]);
  });

  it('never serves a private key in a body', async () => {
    expect(await refusal({ url: `${origin}/key` }, ctx([origin]))).to.equal(`${origin}/key: this part of the body holds a PEM private key and is never served`);
  });

  it('judges addresses by range, IPv4-mapped IPv6 as IPv4', () => {
    expect(['127.0.0.1', '::1', '192.0.2.2', '8.8.8.8'].map(refusedAddress)).to.deep.equal([null, null, null, null]);
    expect(['172.16.0.1', '192.168.1.1', '100.64.0.1', '0.0.0.0', '::ffff:10.0.0.1', 'fc00::1', 'fe80::1', 'fd00:ec2::254'].every((a) => refusedAddress(a) !== null)).to.equal(true);
  });
});

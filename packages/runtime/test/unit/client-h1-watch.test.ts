/**
 * Watches over HTTP/1.1 read without Node's HTTP client (h1-watch.ts, h1-response.ts): the response
 * reader at every split point, the request head, and real TLS and TCP servers.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as https from 'node:https';
import type * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { requestHead } from '../../src/client/h1-requests.ts';
import { MAX_HEAD_BYTES, MalformedResponseError, ResponseReader } from '../../src/client/h1-response.ts';
import {
  ConnectionError,
  configFromKubeConfig,
  createClient,
  NotFoundError,
} from '../../src/client/index.ts';
import { dropIdleSockets } from '../../src/client/pools.ts';
import { createCa, DAY_MS, issueLeaf } from '../../src/pki/index.ts';
import { eventually } from '../../src/testing/eventually.ts';

/** Feeds `raw` in the given pieces; returns the body and whether it completed. */
function read(
  pieces: Buffer[],
  end = false,
): { head: ResponseReader['head']; body: string; complete: boolean } {
  const out: Buffer[] = [];
  const r = new ResponseReader((b) => out.push(Buffer.from(b)));
  for (const p of pieces) r.write(p);
  if (end) r.end();
  return { head: r.head, body: Buffer.concat(out).toString('utf8'), complete: r.complete };
}

function chunked(parts: string[], trailer = ''): Buffer {
  let raw = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  parts.forEach((p, i) => {
    const ext = i === 1 ? ';name=value' : '';
    raw += `${Buffer.byteLength(p).toString(16)}${ext}\r\n${p}\r\n`;
  });
  return Buffer.from(`${raw}0\r\n${trailer}\r\n`);
}

/** Listens on a free loopback port, keeping `sockets` to the server's open connections; returns the port. */
async function serve(server: net.Server, sockets: Set<net.Socket>): Promise<number> {
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function stop(server: net.Server, sockets: Set<net.Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  await new Promise((r) => server.close(r));
}

const event = (name: string, type = 'ADDED'): string =>
  `${JSON.stringify({ type, object: { metadata: { name, namespace: 'ns', resourceVersion: '1' } } })}\n`;

describe('ResponseReader', () => {
  const parts = [event('a'), event('é-multi-byte'), event('c')];
  const body = parts.join('');

  test('a chunked body, split at every point (inside heads, sizes, data and CRLFs), with extensions and trailers', () => {
    const raw = chunked(parts, 'X-Trailer: 1\r\n');
    for (let i = 1; i < raw.length; i++) {
      const got = read([raw.subarray(0, i), raw.subarray(i)]);
      assert.equal(got.body, body, `split at ${i}`);
      assert.equal(got.complete, true, `split at ${i}`);
      assert.equal(got.head?.status, 200);
      assert.equal(got.head?.headers['content-type'], 'application/json');
    }
    // One byte at a time.
    const bytes = [...raw].map((b) => Buffer.from([b]));
    assert.deepEqual(read(bytes).body, body);
  });

  test('not complete until the last chunk; bytes after the response are ignored', () => {
    const raw = chunked(parts);
    const cut = raw.length - 5; // before "0\r\n\r\n"
    const partial = read([raw.subarray(0, cut)]);
    assert.equal(partial.body, body);
    assert.equal(partial.complete, false);
    assert.equal(read([raw, Buffer.from('HTTP/1.1 200 OK\r\n\r\n')]).body, body);
  });

  test('interim 1xx responses are skipped; Content-Length and close-delimited bodies', () => {
    const got = read([
      Buffer.from(
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nA: 1\r\nA: 2\r\n\r\nhello',
      ),
    ]);
    assert.deepEqual(got, {
      head: { status: 404, headers: { 'content-length': '5', a: '1, 2' } },
      body: 'hello',
      complete: true,
    });
    const closeDelimited = Buffer.from('HTTP/1.1 200 OK\r\n\r\nuntil the end');
    assert.equal(read([closeDelimited]).complete, false);
    assert.deepEqual(read([closeDelimited], true).body, 'until the end');
    assert.equal(read([closeDelimited], true).complete, true);
    assert.equal(read([Buffer.from('HTTP/1.1 204 No Content\r\n\r\n')]).complete, true);
  });

  test('malformed responses are MalformedResponseErrors', () => {
    const bad = (text: string | Buffer): void => {
      assert.throws(() => read([Buffer.isBuffer(text) ? text : Buffer.from(text)]), MalformedResponseError);
    };
    bad('SMTP ready\r\n\r\n');
    bad('HTTP/1.1 200 OK\r\nno colon\r\n\r\n');
    bad('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
    bad('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY');
    bad('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n');
    bad(Buffer.alloc(MAX_HEAD_BYTES + 10, 'a'));
  });
});

describe('requestHead', () => {
  test('GET, the path, Host (with the port unless the default), headers and basic credentials', () => {
    const head = requestHead('GET', {
      protocol: 'https:',
      hostname: '::1',
      port: 6443,
      path: '/api/v1/configmaps?watch=1',
      auth: 'user:pw',
      headers: { Accept: 'application/json', 'X-Unset': undefined, 'User-Agent': 'ua' },
    });
    assert.equal(
      head,
      'GET /api/v1/configmaps?watch=1 HTTP/1.1\r\nHost: [::1]:6443\r\nAccept: application/json\r\nUser-Agent: ua\r\n' +
        `Authorization: Basic ${Buffer.from('user:pw').toString('base64')}\r\n\r\n`,
    );
    assert.match(
      requestHead('GET', { protocol: 'https:', hostname: 'k', port: 443, path: '/' }),
      /\r\nHost: k\r\n/,
    );
  });

  test('refuses a header value or a path that would split the request', () => {
    assert.throws(
      () => requestHead('GET', { path: '/', headers: { Authorization: 'Bearer x\r\nEvil: 1' } }),
      TypeError,
    );
    assert.throws(() => requestHead('GET', { path: '/a b' }), TypeError);
  });

  test('refuses header values Latin-1 cannot carry, and control characters; keeps tabs and Latin-1', () => {
    for (const bad of ['opkit \u20ac', 'a\u0001b', 'a\u007fb', 'a\u0000b']) {
      assert.throws(() => requestHead('GET', { path: '/', headers: { 'User-Agent': bad } }), TypeError, bad);
    }
    const head = requestHead('GET', { path: '/', headers: { 'User-Agent': 'caf\u00e9\tx' } });
    assert.match(head, /\r\nUser-Agent: caf\u00e9\tx\r\n/);
  });
});

describe('a watch over TLS, on a connection of its own', () => {
  let server: https.Server;
  let port = 0;
  let caPem = '';
  let otherCaPem = '';
  let client = { certPem: '', keyPem: '' };
  const peers: string[] = [];
  const sockets = new Set<net.Socket>();

  before(async () => {
    const notBefore = new Date(Date.now() - DAY_MS);
    const notAfter = new Date(Date.now() + DAY_MS);
    const ca = await createCa({ subject: 'CN=h1-watch-ca', notBefore, notAfter });
    const other = await createCa({ subject: 'CN=another-ca', notBefore, notAfter });
    caPem = ca.certPem;
    otherCaPem = other.certPem;
    const leaf = await issueLeaf(ca, {
      subject: 'CN=api',
      usage: 'server',
      hosts: ['127.0.0.1'],
      notBefore,
      notAfter,
    });
    client = await issueLeaf(ca, { subject: 'CN=operator', usage: 'client', hosts: [], notBefore, notAfter });
    server = https.createServer(
      { cert: leaf.certPem, key: leaf.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        const peer = (req.socket as import('node:tls').TLSSocket).getPeerCertificate();
        peers.push(String(peer.subject?.CN ?? ''));
        if (req.url?.includes('missing')) {
          res.writeHead(404, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound', message: 'not here' }));
          return;
        }
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(event('a'));
        res.write(event('b', 'MODIFIED'));
        if (req.url?.includes('cut')) {
          // Half of an event's chunk, then the connection drops.
          res.socket?.write('40\r\n{"type":"ADDED"');
          setTimeout(() => res.socket?.destroy(), 20);
          return;
        }
        res.end();
      },
    );
    port = await serve(server, sockets);
  });

  after(() => stop(server, sockets));

  function clientWith(ca: string, keyPem = client.keyPem) {
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      {
        name: 'c',
        server: `https://127.0.0.1:${port}`,
        caData: Buffer.from(ca).toString('base64'),
        skipTLSVerify: false,
      },
      {
        name: 'u',
        certData: Buffer.from(client.certPem).toString('base64'),
        keyData: Buffer.from(keyPem).toString('base64'),
      },
    );
    return createClient(configFromKubeConfig(kc), { transport: 'http1' });
  }

  test('presents the client certificate, checks the server against the CA, and ends when the server does', async () => {
    const c = clientWith(caPem);
    const seen: string[] = [];
    for await (const ev of c.watch(ConfigMaps, { namespace: 'ns' }))
      seen.push(`${ev.type} ${ev.object.metadata?.name}`);
    assert.deepEqual(seen, ['ADDED a', 'MODIFIED b']);
    assert.equal(peers.at(-1), 'operator');
    c.close();
  });

  test('a server certificate from another CA, or a client key Node refuses, is a ConnectionError', async () => {
    for (const c of [
      clientWith(otherCaPem),
      clientWith(caPem, '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n'),
    ]) {
      await assert.rejects(async () => {
        for await (const _ of c.watch(ConfigMaps, { namespace: 'ns' })) assert.fail('no events expected');
      }, ConnectionError);
      c.close();
    }
  });

  test('a non-2xx answer is its typed error; a connection dropped inside a chunk is a ConnectionError', async () => {
    const c = clientWith(caPem);
    await assert.rejects(async () => {
      for await (const _ of c.watch(ConfigMaps, { namespace: 'missing' })) assert.fail('no events expected');
    }, NotFoundError);
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const ev of c.watch(ConfigMaps, { namespace: 'cut' })) seen.push(ev.type);
    }, ConnectionError);
    assert.deepEqual(seen, ['ADDED', 'MODIFIED']);
    c.close();
  });
});

describe('the connections of ended watches are kept for the next ones', () => {
  let server: http.Server;
  let port = 0;
  /** Requests per connection, in the order the connections opened. */
  const perConnection: number[] = [];
  const sockets = new Set<net.Socket>();
  const counts = new WeakMap<net.Socket, number>();
  const ids = new WeakMap<net.Socket, number>();

  before(async () => {
    server = http.createServer((req, res) => {
      const n = (counts.get(req.socket) ?? 0) + 1;
      counts.set(req.socket, n);
      perConnection[ids.get(req.socket) ?? -1] = n;
      if (req.url?.includes('hold')) {
        // A watch that runs until the client goes.
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(event('a'));
        return;
      }
      if (req.url?.includes('drop-second') && n === 2) {
        // A kept connection the server dropped just as the next watch arrived on it.
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(event('a'));
      res.end(event('b', 'MODIFIED'));
    });
    server.on('connection', (s: net.Socket) => {
      ids.set(s, perConnection.length);
      perConnection.push(0);
    });
    port = await serve(server, sockets);
  });

  after(() => stop(server, sockets));

  function plainClient() {
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      { name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true },
      { name: 'u', token: 't' },
    );
    return createClient(configFromKubeConfig(kc), { transport: 'http1' });
  }

  async function watchAll(c: ReturnType<typeof plainClient>, namespace: string): Promise<string[]> {
    const seen: string[] = [];
    for await (const ev of c.watch(ConfigMaps, { namespace })) seen.push(ev.type);
    return seen;
  }

  test('three watches in a row run on one connection; dropping the pool idle connections closes it', async () => {
    const c = plainClient();
    const before = perConnection.length;
    for (let i = 0; i < 3; i++) assert.deepEqual(await watchAll(c, 'ns'), ['ADDED', 'MODIFIED']);
    assert.deepEqual(perConnection.slice(before), [3]);
    assert.equal(sockets.size, 1);
    assert.equal(dropIdleSockets(c.transport.agent), 1);
    await eventually('the server to see the close', () => sockets.size === 0);
    c.close();
  });

  test('a kept connection the server closed meanwhile, or drops at the next watch: that watch goes on a new one', async () => {
    const c = plainClient();
    assert.deepEqual(await watchAll(c, 'ns'), ['ADDED', 'MODIFIED']);
    for (const s of sockets) s.destroy();
    await eventually('the close to arrive', () => sockets.size === 0);
    assert.deepEqual(await watchAll(c, 'ns'), ['ADDED', 'MODIFIED']);
    const before = perConnection.length;
    assert.deepEqual(await watchAll(c, 'drop-second'), ['ADDED', 'MODIFIED']);
    assert.deepEqual(await watchAll(c, 'drop-second'), ['ADDED', 'MODIFIED']);
    // Each kept connection answered its second request by closing; a new one took that watch each time
    // (and was kept in turn, to close at its own second).
    assert.deepEqual(perConnection.slice(before - 1), [2, 2, 1]);
    c.close();
    await eventually('closing the client to close every connection', () => sockets.size === 0);
  });

  test('closing the client ends its watches in flight with a ConnectionError and closes their connections', async () => {
    const c = plainClient();
    const it = c.watch(ConfigMaps, { namespace: 'hold' })[Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.type, 'ADDED');
    assert.equal(sockets.size, 1);
    c.close();
    await assert.rejects(it.next(), ConnectionError);
    await eventually('the server to see the close', () => sockets.size === 0);
  });
});

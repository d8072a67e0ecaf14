/**
 * Requests over HTTP/1.1 on the pool's own connections (h1-requests.ts, h1-connections.ts), against a
 * raw TCP server that writes the exact bytes of each answer.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import { afterEach, describe, test } from 'node:test';
import type { RestConfig } from '../../src/client/config.ts';
import { ConnectionError, RequestTimeoutError } from '../../src/client/errors.ts';
import { H1Connections } from '../../src/client/h1-connections.ts';
import { HttpTransport } from '../../src/client/http.ts';
import { connectionsOf } from '../../src/client/pools.ts';
import { eventually } from '../../src/testing/eventually.ts';

/** A request as the raw server read it, with where it came from. */
interface Received {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** The connection's number (1 for the first the server accepted). */
  connection: number;
  /** The request's number on its connection (1 for the first). */
  nth: number;
  socket: net.Socket;
}

interface RawServer {
  config: RestConfig;
  received: Received[];
  connections(): number;
  close(): Promise<void>;
}

/** A server that reads requests (head and Content-Length body) and lets `answer` write raw bytes. */
async function rawServer(answer: (req: Received) => void): Promise<RawServer> {
  const received: Received[] = [];
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((socket) => {
    const connection = ++accepted;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    let nth = 0;
    socket.on('data', (bytes) => {
      buf = Buffer.concat([buf, bytes]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (buf.length < end + 4 + length) return;
        const body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
        buf = buf.subarray(end + 4 + length);
        const [method = '', path = ''] = (lines[0] ?? '').split(' ');
        const req = { method, path, headers, body, connection, nth: ++nth, socket };
        received.push(req);
        answer(req);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    config: {
      server: `http://127.0.0.1:${port}`,
      host: `127.0.0.1:${port}`,
      namespace: 'ns',
      authenticate: async () => ({ headers: {} }),
    },
    received,
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const json = (body: string, extra = ''): string =>
  `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

let cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function setUp(
  answer: (req: Received) => void,
  maxSockets?: number,
): Promise<{ server: RawServer; transport: HttpTransport }> {
  const server = await rawServer(answer);
  const transport = new HttpTransport(server.config, { maxSockets, timeoutMs: 5_000 });
  cleanup.push(
    () => server.close(),
    () => transport.close(),
  );
  return { server, transport };
}

describe('requests over HTTP/1.1 on the pool connections', () => {
  test('a kept connection the server closed as it was reused: a GET is sent again on a new one, quietly', async () => {
    const { server, transport } = await setUp((req) => {
      // The second request on a connection meets a server that has just closed it.
      if (req.nth === 2) req.socket.destroy();
      else req.socket.write(json(`{"n":${req.connection}}`));
    });
    assert.deepEqual(await transport.request({ method: 'GET', path: '/a' }), { n: 1 });
    assert.deepEqual(await transport.request({ method: 'GET', path: '/b' }), { n: 2 });
    assert.equal(server.connections(), 2);
    assert.deepEqual(
      server.received.map((r) => [r.path, r.connection, r.nth]),
      [
        ['/a', 1, 1],
        ['/b', 1, 2],
        ['/b', 2, 1],
      ],
    );
  });

  test('a POST on such a connection is not sent again (the server may have acted on it): ConnectionError', async () => {
    const { server, transport } = await setUp((req) => {
      if (req.nth === 2) req.socket.destroy();
      else req.socket.write(json('{}'));
    });
    await transport.request({ method: 'GET', path: '/a' });
    await assert.rejects(transport.request({ method: 'POST', path: '/b', body: { x: 1 } }), ConnectionError);
    assert.equal(server.received.filter((r) => r.method === 'POST').length, 1);
  });

  test('the request head and body on the wire: method, path, Host, Content-Length in UTF-8 bytes', async () => {
    const { server, transport } = await setUp((req) => req.socket.write(json('{}')));
    await transport.request({ method: 'PUT', path: '/x/y', query: { a: 'b c' }, body: { name: 'é€' } });
    const [got] = server.received;
    assert.equal(got?.method, 'PUT');
    assert.equal(got?.path, '/x/y?a=b%20c');
    assert.equal(got?.headers.host, server.config.host);
    assert.equal(got?.headers['content-type'], 'application/json');
    assert.equal(got?.body, '{"name":"é€"}');
    assert.equal(got?.headers['content-length'], String(Buffer.byteLength(got?.body ?? '')));
  });

  test('responses split anywhere, chunked, 204 and empty ones: read whole, and the connection reused', async () => {
    const { server, transport } = await setUp((req) => {
      if (req.path === '/chunked') {
        const bytes = Buffer.from(
          'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n4\r\n"é"\r\n1\r\n}\r\n0\r\n\r\n',
        );
        // One byte at a time, each its own write.
        void (async () => {
          for (const b of bytes) {
            req.socket.write(Buffer.of(b));
            await new Promise((r) => setImmediate(r));
          }
        })();
      } else if (req.path === '/204') req.socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      else req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    });
    assert.deepEqual(await transport.request({ method: 'GET', path: '/chunked' }), { a: 'é' });
    assert.equal(await transport.request({ method: 'DELETE', path: '/204' }), undefined);
    assert.equal(await transport.request({ method: 'GET', path: '/empty' }), undefined);
    assert.equal(server.connections(), 1, 'every response left the connection reusable');
  });

  test('a connection is not reused after Connection: close, a close-delimited body, or bytes after the response', async () => {
    const { server, transport } = await setUp((req) => {
      if (req.path === '/close') req.socket.write(json('{}', 'Connection: close\r\n'));
      else if (req.path === '/extra') req.socket.write(`${json('{}')}HTTP/1.1 200 OK\r\n`);
      else if (req.path === '/until-close') req.socket.end('HTTP/1.1 200 OK\r\n\r\n{"till":"close"}');
      else req.socket.write(json('{}'));
    });
    for (const path of ['/close', '/extra', '/until-close', '/next']) {
      await transport.request({ method: 'GET', path });
    }
    assert.deepEqual(
      server.received.map((r) => [r.path, r.connection]),
      [
        ['/close', 1],
        ['/extra', 2],
        ['/until-close', 3],
        ['/next', 4],
      ],
    );
    assert.deepEqual(await transport.request({ method: 'GET', path: '/until-close' }), { till: 'close' });
  });

  test('a malformed response is a ConnectionError that names what is wrong', async () => {
    const { transport } = await setUp((req) =>
      req.socket.write('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n'),
    );
    await assert.rejects(transport.request({ method: 'GET', path: '/a' }), (err: Error) => {
      assert.ok(err instanceof ConnectionError);
      assert.match(err.message, /malformed Content-Length "x"/);
      return true;
    });
  });

  test('at most maxSockets connections; the requests behind them wait, and an aborted one leaves the queue', async () => {
    const held: Received[] = [];
    const { server, transport } = await setUp((req) => held.push(req), 2);
    const answer = (req: Received): boolean => req.socket.write(json(JSON.stringify({ p: req.path })));
    const results = ['/1', '/2', '/3'].map((path) => transport.request({ method: 'GET', path }));
    const quit = new AbortController();
    const aborted = transport.request({ method: 'GET', path: '/aborted', signal: quit.signal });
    const last = transport.request({ method: 'GET', path: '/5' });
    await eventually('two requests at the server', () => held.length === 2);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(held.length, 2, 'no third connection');
    quit.abort();
    await assert.rejects(aborted, { name: 'AbortError' });
    while (server.received.length < 4 || held.length > 0) {
      const next = held.shift();
      if (next) answer(next);
      else await new Promise((r) => setTimeout(r, 5));
    }
    assert.deepEqual(await Promise.all([...results, last]), [
      { p: '/1' },
      { p: '/2' },
      { p: '/3' },
      { p: '/5' },
    ]);
    assert.equal(server.connections(), 2);
    assert.ok(!server.received.some((r) => r.path === '/aborted'), 'the aborted request was never sent');
    assert.equal(connectionsOf(transport.agent).inUse(), 0);
  });

  test('a request that times out waiting for a connection is withdrawn, and frees nothing it never held', async () => {
    const held: Received[] = [];
    const { transport } = await setUp((req) => held.push(req), 1);
    const first = transport.request({ method: 'GET', path: '/held' });
    await eventually('the first request at the server', () => held.length === 1);
    await assert.rejects(
      transport.request({ method: 'GET', path: '/late', timeoutMs: 100 }),
      RequestTimeoutError,
    );
    held[0]?.socket.write(json('{}'));
    await first;
    assert.equal(connectionsOf(transport.agent).inUse(), 0);
  });

  test('an idle connection the server closes is dropped from the pool: the next request opens a new one at once', async () => {
    const { server, transport } = await setUp((req) => {
      req.socket.write(json('{}'));
      if (req.path === '/then-close') setTimeout(() => req.socket.end(), 10);
    });
    await transport.request({ method: 'GET', path: '/then-close' });
    await new Promise((r) => setTimeout(r, 100));
    await transport.request({ method: 'GET', path: '/next' });
    assert.deepEqual(
      server.received.map((r) => [r.path, r.connection, r.nth]),
      [
        ['/then-close', 1, 1],
        ['/next', 2, 1],
      ],
      'sent once, on a new connection (not tried on the closed one first)',
    );
  });

  test('close() ends a request in flight with a ConnectionError', async () => {
    const held: Received[] = [];
    const { transport } = await setUp((req) => held.push(req));
    const pending = transport.request({ method: 'GET', path: '/held', timeoutMs: 0 });
    await eventually('the request at the server', () => held.length === 1);
    transport.close();
    await assert.rejects(pending, ConnectionError);
  });
});

describe('H1Connections, the pool of connections', () => {
  /** An unconnected socket stands for a connection: the pool only holds, listens to and destroys it. */
  const fresh = (): net.Socket => new net.Socket();

  test('a waiting request whose connection failed to open leaves the slot to the next one', () => {
    const pool = new H1Connections(1);
    let opened = 0;
    const open = (): net.Socket => {
      opened++;
      if (opened === 2) throw new Error('refused key');
      return fresh();
    };
    const got: string[] = [];
    let first: net.Socket | undefined;
    pool.acquire('k', open, (g) => {
      if ('socket' in g) first = g.socket;
    });
    pool.acquire('k', open, (g) => got.push('error' in g ? `error: ${g.error.message}` : 'socket'));
    pool.acquire('k', open, (g) => got.push('error' in g ? `error: ${g.error.message}` : 'socket'));
    assert.deepEqual(got, []);
    pool.release('k', first as net.Socket, false, open);
    assert.deepEqual(got, ['error: refused key', 'socket']);
    assert.equal(pool.inUse(), 1);
    pool.destroy();
  });

  test('an idle connection is reused first (the most recent), and a server identity left with nothing is forgotten', async () => {
    const pool = new H1Connections(4);
    const sockets: net.Socket[] = [];
    for (let i = 0; i < 2; i++) pool.acquire('old', fresh, (g) => 'socket' in g && sockets.push(g.socket));
    const [a, b] = sockets as [net.Socket, net.Socket];
    pool.release('old', a, true, fresh);
    pool.release('old', b, true, fresh);
    let reused: net.Socket | undefined;
    pool.acquire('old', fresh, (g) => {
      if ('socket' in g && g.reused) reused = g.socket;
    });
    assert.equal(reused, b, 'the most recently released');
    pool.release('old', b, true, fresh);
    assert.equal(pool.identities, 1);
    // The server closes both idle connections: nothing is left for that identity.
    a.destroy();
    b.destroy();
    await new Promise((r) => setImmediate(r)); // their 'close' events
    assert.equal(pool.identities, 0);
    assert.equal(pool.takeIdle('old'), undefined);
    assert.equal(pool.identities, 0, 'looking for an idle connection keeps nothing');
  });
});

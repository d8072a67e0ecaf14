/**
 * Half-open connections (the far end gone without FIN, or a middlebox forwarding nothing while new
 * connections work): once one connection of a pool is found dead, the pool's other connections in use
 * must prove alive within 2 s or be closed, so that a request in flight does not wait out its 60 s timeout.
 * Real sockets: an HTTP server behind a TCP proxy that can leave every open connection half-open.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import { type AddressInfo, createServer, type Server, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { WatchSilenceError } from '../../src/cache/watcher.ts';
import {
  configFromKubeConfig,
  createClient,
  DeadConnectionError,
  isUnreachable,
  RequestTimeoutError,
  type RestClient,
  type RestConfig,
  type StaleConnectionError,
} from '../../src/client/index.ts';
import { informerLogLine } from '../../src/log/informer-errors.ts';
import { createCa, DAY_MS, issueLeaf } from '../../src/pki/index.ts';

/** A TCP proxy whose open connections can be made half-open: never forwarded, never closed. */
class HalfOpenProxy {
  readonly pairs = new Set<{ client: Socket; upstream: Socket; dead: boolean }>();
  server: Server | undefined;
  port = 0;

  async start(targetPort: number): Promise<void> {
    this.server = createServer((client) => {
      const upstream = new Socket();
      const pair = { client, upstream, dead: false };
      this.pairs.add(pair);
      const close = (): void => {
        if (pair.dead) return;
        client.destroy();
        upstream.destroy();
      };
      for (const s of [client, upstream]) {
        s.on('error', close);
        s.on('close', close);
      }
      client.on('data', (d: Buffer) => pair.dead || upstream.write(d));
      upstream.on('data', (d: Buffer) => pair.dead || client.write(d));
      upstream.connect(targetPort, '127.0.0.1');
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  halfOpen(): number {
    let n = 0;
    for (const p of this.pairs) if (!p.dead && !p.client.destroyed) [p.dead, n] = [true, n + 1];
    return n;
  }

  async close(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    await new Promise((r) => this.server?.close(r));
  }
}

const event = (name: string): string =>
  `${JSON.stringify({ type: 'ADDED', object: { metadata: { name, namespace: 'ns', resourceVersion: '1' } } })}\n`;

describe('a pool with half-open connections', () => {
  let api: http.Server;
  const watches: http.ServerResponse[] = [];
  const received: string[] = [];
  const proxy = new HalfOpenProxy();
  let client: RestClient;

  before(async () => {
    // The API server: watches stay open; POSTs and GETs of `slow` answered after 300 ms, the rest at once.
    api = http.createServer((req, res) => {
      received.push(`${req.method} ${req.url}`);
      if (req.url?.includes('watch=1')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(event('w'));
        watches.push(res);
        return;
      }
      const answer = (): void => {
        res.writeHead(req.method === 'POST' ? 201 : 200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'ConfigMap', metadata: { name: 'slow', namespace: 'ns' } }));
      };
      if (req.url?.includes('slow') || req.method === 'POST') setTimeout(answer, 300);
      else answer();
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    await proxy.start((api.address() as AddressInfo).port);
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      { name: 'c', server: `http://127.0.0.1:${proxy.port}`, skipTLSVerify: true },
      { name: 'u', token: 't' },
    );
    client = createClient(configFromKubeConfig(kc));
  });

  /** A client of its own pool (a config of its own) to the same proxy. */
  function ownClient(maxSockets: number): RestClient {
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      { name: 'c', server: `http://127.0.0.1:${proxy.port}`, skipTLSVerify: true },
      { name: 'u', token: 't' },
    );
    return createClient(configFromKubeConfig(kc), { maxSockets });
  }

  /** 'still open' if `next` neither yields nor fails within `ms`. */
  function stillOpenAfter(next: Promise<unknown>, ms: number): Promise<string> {
    return Promise.race([
      next.then(
        () => 'event',
        (err: unknown) => `error ${String(err)}`,
      ),
      new Promise<string>((r) => setTimeout(() => r('still open'), ms)),
    ]);
  }

  after(async () => {
    client.close();
    for (const w of watches) w.destroy();
    await proxy.close();
    api.closeAllConnections();
    await new Promise((r) => api.close(r));
  });

  /** Resolves once the API server has received a request matching `what`. */
  async function arrived(what: RegExp): Promise<void> {
    for (let i = 0; i < 200 && !received.some((r) => what.test(r)); i++)
      await new Promise((r) => setTimeout(r, 10));
    assert.ok(
      received.some((r) => what.test(r)),
      `the API server never received ${what}`,
    );
  }

  test('one silent watch found dead: requests and watches in flight end within 2 s, not at their 60 s timeout', {
    timeout: 20_000,
  }, async () => {
    // Two watches, a GET and a POST in flight, an idle keep-alive connection in the pool.
    const silent = new AbortController();
    const first = client
      .watch(ConfigMaps, { namespace: 'ns', signal: silent.signal })
      [Symbol.asyncIterator]();
    await first.next();
    const other = client.watch(ConfigMaps, { namespace: 'ns' })[Symbol.asyncIterator]();
    await other.next();
    await Promise.all([1, 2, 3].map((i) => client.get(ConfigMaps, { namespace: 'ns', name: `fast-${i}` })));
    const t0 = performance.now();
    const get = client.get(ConfigMaps, { namespace: 'ns', name: 'slow-get' });
    const post = client.create(ConfigMaps, { metadata: { name: 'slow-post', namespace: 'ns' } });
    const postFailed = post.then(
      () => undefined,
      (err: unknown) => err,
    );
    await arrived(/GET .*slow-get/);
    await arrived(/POST /);
    assert.equal(proxy.halfOpen(), 5, 'the idle connection, two watches, the GET and the POST');

    // The watcher finds the first watch silent and aborts it as a dead connection.
    const silence = new WatchSilenceError(40_000);
    silent.abort(silence);
    await first.next().catch(() => {});
    const sweep = (silence as StaleConnectionError).sweep;
    assert.deepEqual(sweep, { idleClosed: 1, requests: 2, watches: 1, proveAliveMs: 2000 });

    // The GET is retried once on a new connection and succeeds; the POST fails (its caller retries);
    // the other watch ends with the same error (the watcher re-opens it at once).
    const got = await get;
    assert.equal(got.metadata.name, 'slow');
    const postErr = await postFailed;
    assert.ok(postErr instanceof DeadConnectionError, String(postErr));
    assert.match(
      String(postErr),
      /another connection of its pool was found dead .*delivered nothing within 2000 ms/,
    );
    await assert.rejects(other.next(), DeadConnectionError);
    const seconds = (performance.now() - t0) / 1000;
    assert.ok(seconds < 10, `took ${seconds} s (the request timeout is 60 s)`);
  });

  test('a connection that delivers within the check is left open', { timeout: 20_000 }, async () => {
    const silent = new AbortController();
    const first = client
      .watch(ConfigMaps, { namespace: 'ns', signal: silent.signal })
      [Symbol.asyncIterator]();
    await first.next();
    const stop = new AbortController();
    const live = client.watch(ConfigMaps, { namespace: 'ns', signal: stop.signal })[Symbol.asyncIterator]();
    await live.next();
    const liveRes = watches.at(-1);
    silent.abort(new WatchSilenceError(40_000));
    await first.next().catch(() => {});
    // The server sends on the live watch within the check: it stays open past it.
    setTimeout(() => liveRes?.write(event('x')), 500);
    const ev = await live.next();
    assert.equal(ev.done, false);
    assert.equal(await stillOpenAfter(live.next(), 3000), 'still open');
    stop.abort();
  });

  test('a second watch reaching its own deadline during the check joins it: one sweep, one warning', {
    timeout: 20_000,
  }, async () => {
    const stops = [new AbortController(), new AbortController()];
    const [a, b] = stops.map((stop) =>
      client.watch(ConfigMaps, { namespace: 'ns', signal: stop.signal })[Symbol.asyncIterator](),
    );
    await a?.next();
    await b?.next();
    const first = new WatchSilenceError(35_000);
    const second = new WatchSilenceError(35_000);
    stops[0]?.abort(first);
    await new Promise((r) => setTimeout(r, 500));
    stops[1]?.abort(second);
    assert.equal(first.sweep?.joined, undefined);
    assert.equal(first.sweep?.watches, 1);
    assert.deepEqual(second.sweep, { ...first.sweep, joined: true });
    assert.equal(informerLogLine(first, { phase: 'watch', action: 'rewatch' }).level, 'warn');
    assert.equal(informerLogLine(second, { phase: 'watch', action: 'rewatch' }).level, 'debug');
  });

  test('a request that times out waiting for a free socket of a full pool closes nothing', {
    timeout: 20_000,
  }, async () => {
    const small = ownClient(1);
    const stop = new AbortController();
    try {
      const watch = small.watch(ConfigMaps, { namespace: 'ns', signal: stop.signal })[Symbol.asyncIterator]();
      await watch.next();
      // Answered after 300 ms: holds the pool's only socket meanwhile.
      const slow = small.transport.request<{ kind: string }>({
        method: 'GET',
        path: '/api/v1/namespaces/ns/configmaps/slow',
      });
      await assert.rejects(
        small.transport.request({ method: 'GET', path: '/api/v1/namespaces', timeoutMs: 100 }),
        RequestTimeoutError,
      );
      assert.equal((await slow).kind, 'ConfigMap');
      assert.equal(await stillOpenAfter(watch.next(), 3000), 'still open');
    } finally {
      stop.abort();
      small.close();
    }
  });
});

describe('an HTTP/2 session gone half-open', () => {
  let h2: http2.Http2SecureServer;
  const proxy = new HalfOpenProxy();
  let config: RestConfig;

  before(async () => {
    const notBefore = new Date(Date.now() - DAY_MS);
    const notAfter = new Date(Date.now() + DAY_MS);
    const ca = await createCa({ subject: 'CN=h2-test-ca', notBefore, notAfter });
    const leaf = await issueLeaf(ca, {
      subject: 'CN=h2',
      usage: 'server',
      hosts: ['127.0.0.1'],
      notBefore,
      notAfter,
    });
    // Watches stay open after one event; everything else is answered at once.
    h2 = http2.createSecureServer({ cert: leaf.certPem, key: leaf.keyPem });
    h2.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      stream.respond({ ':status': 200, 'content-type': 'application/json' });
      if (String(headers[':path']).includes('watch=1')) stream.write(event('w'));
      else stream.end(JSON.stringify({ kind: 'ConfigMap', metadata: { name: 'c', namespace: 'ns' } }));
    });
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    await proxy.start((h2.address() as AddressInfo).port);
    config = {
      server: `https://127.0.0.1:${proxy.port}`,
      host: `127.0.0.1:${proxy.port}`,
      namespace: 'default',
      authenticate: async () => ({ headers: {}, ca: ca.certPem }),
    };
  });

  after(async () => {
    await proxy.close();
    h2.close();
  });

  test('a watch found silent has its session PINGed: unanswered within 2 s, the session closes and its other watches fail as unreachable', {
    timeout: 20_000,
  }, async () => {
    const client = createClient(config, { transport: 'http2' });
    const silent = new AbortController();
    try {
      const other = client.watch(ConfigMaps, { namespace: 'ns' })[Symbol.asyncIterator]();
      const watched = client
        .watch(ConfigMaps, { namespace: 'ns', signal: silent.signal })
        [Symbol.asyncIterator]();
      assert.equal((await other.next()).value?.object.metadata.name, 'w');
      assert.equal((await watched.next()).value?.object.metadata.name, 'w');
      assert.equal(client.transport.h2.sessions.length, 1, 'both watches on one session');
      assert.equal(proxy.halfOpen(), 1);
      const t0 = Date.now();
      silent.abort(new WatchSilenceError(40_000));
      const err = await other.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      const elapsed = Date.now() - t0;
      assert.ok(isUnreachable(err), `got ${String(err)}`);
      // 2 s PING deadline; the bound is a generous safety bound, not a performance figure.
      assert.ok(elapsed >= 1500 && elapsed < 10_000, `closed after ${elapsed} ms`);
      // New connections work: the next request opens a new session.
      const got = await client.get(ConfigMaps, { namespace: 'ns', name: 'c' });
      assert.equal(got.metadata.name, 'c');
      assert.equal(client.transport.h2.sessions.length, 1);
    } finally {
      client.close();
    }
  });
});

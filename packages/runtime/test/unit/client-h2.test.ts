/**
 * The HTTP/2 transport: the pure pieces of session management (which session a stream goes to, which
 * failed streams may be sent again, the mode from OPKIT_TRANSPORT, headers), then the transport against
 * node's own HTTP/2 and HTTPS servers (real protocol stacks, TLS with ALPN) for what the API server cannot
 * be made to do on demand: refuse a stream, advertise 2 concurrent streams, speak HTTP/1.1 only, drop a
 * session. The API server itself: test/integration/client-http2.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as http2 from 'node:http2';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import type { RequestAuth, RestConfig } from '../../src/client/config.ts';
import { ConnectionError, isUnreachable, NotFoundError } from '../../src/client/errors.ts';
import { h2Headers } from '../../src/client/h2-requests.ts';
import {
  DEFAULT_MAX_STREAMS,
  NGHTTP2_CANCEL,
  NGHTTP2_REFUSED_STREAM,
  pickSession,
  refusedStream,
  type SessionSlot,
  tlsIdentity,
  transportModeFrom,
} from '../../src/client/h2-sessions.ts';
import { createClient } from '../../src/client/index.ts';
import { createCa, DAY_MS, issueLeaf } from '../../src/pki/index.ts';

const slot = (over: Partial<SessionSlot> = {}): SessionSlot => ({
  usable: true,
  identity: 'a',
  active: 0,
  maxStreams: 2,
  ...over,
});

describe('HTTP/2 session management (pure)', () => {
  test('a stream goes to the first usable session of its TLS identity with a free stream', () => {
    const full = slot({ active: 2 });
    const gone = slot({ usable: false });
    const other = slot({ identity: 'b' });
    const free = slot({ active: 1 });
    assert.equal(pickSession([full, gone, other, free], 'a'), free);
    assert.equal(pickSession([full, gone, other], 'a'), undefined, 'none: open a session');
    assert.equal(pickSession([full, gone, other], 'b'), other);
    assert.equal(pickSession([], 'a'), undefined);
  });

  test('refused streams (REFUSED_STREAM, above GOAWAY lastStreamId, never sent) may be sent again; others not', () => {
    const refused = http2.constants.NGHTTP2_REFUSED_STREAM;
    assert.equal(refusedStream({ id: 5, rstCode: refused }, undefined), true);
    assert.equal(refusedStream({ id: 5, rstCode: http2.constants.NGHTTP2_CANCEL }, undefined), false);
    assert.equal(refusedStream({ id: 7 }, 5), true, 'the server did not process stream 7');
    assert.equal(refusedStream({ id: 5 }, 5), false, 'stream 5 may have been processed');
    assert.equal(refusedStream({ id: undefined }, 0), true, 'never got an id: never sent');
    assert.equal(refusedStream({ id: 3 }, undefined), false, 'no GOAWAY: a broken stream');
  });

  test('the error codes the transport uses without loading node:http2 are http2.constants', () => {
    assert.equal(NGHTTP2_REFUSED_STREAM, http2.constants.NGHTTP2_REFUSED_STREAM);
    assert.equal(NGHTTP2_CANCEL, http2.constants.NGHTTP2_CANCEL);
  });

  test('the runtime loads node:http2 only for an HTTP/2 session, and ws only for an exec', () => {
    // A child process: this one has loaded both. http2Module() is what the first session calls.
    const index = new URL('../../src/index.ts', import.meta.url).href;
    const sessions = new URL('../../src/client/h2-sessions.ts', import.meta.url).href;
    const script = [
      `import { createRequire } from 'node:module';`,
      `await import(${JSON.stringify(index)});`,
      `const ws = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('/node_modules/ws/'));`,
      `const h2 = () => process.moduleLoadList.includes('NativeModule http2');`,
      'const before = { http2: h2(), ws: ws() };',
      `(await import(${JSON.stringify(sessions)})).http2Module();`,
      'console.log(JSON.stringify({ before, after: { http2: h2() } }));',
    ].join('\n');
    const out: unknown = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }),
    );
    assert.deepEqual(out, { before: { http2: false, ws: false }, after: { http2: true } });
  });

  test('OPKIT_TRANSPORT: auto, http1, http2 (any case); unset is http1; anything else is an error naming it', () => {
    assert.equal(transportModeFrom(undefined), 'http1');
    assert.equal(transportModeFrom(''), 'http1');
    assert.equal(transportModeFrom('HTTP2'), 'http2');
    assert.equal(transportModeFrom('auto'), 'auto');
    assert.throws(() => transportModeFrom('h2'), /OPKIT_TRANSPORT=h2: expected one of auto, http1, http2/);
  });

  test('sessions are per TLS identity: another client certificate or CA is another session', () => {
    const base: RequestAuth = { headers: {}, ca: 'CA', cert: Buffer.from('C1'), key: 'K' };
    assert.equal(tlsIdentity(base), tlsIdentity({ ...base, cert: Buffer.from('C1') }));
    assert.notEqual(tlsIdentity(base), tlsIdentity({ ...base, cert: Buffer.from('C2') }));
    assert.notEqual(tlsIdentity(base), tlsIdentity({ ...base, ca: 'CA2' }));
    assert.notEqual(tlsIdentity(base), tlsIdentity({ ...base, rejectUnauthorized: false }));
    // Bearer tokens are headers: they do not split sessions.
    assert.equal(tlsIdentity(base), tlsIdentity({ ...base, headers: { Authorization: 'Bearer x' } }));
  });

  test('headers: lower-case names, basic auth as a header, no connection-specific headers', () => {
    const h = h2Headers(
      'GET',
      '/api',
      { headers: { Authorization: 'Bearer t' } },
      { 'User-Agent': 'u', Connection: 'x' },
    );
    assert.deepEqual(h, { ':method': 'GET', ':path': '/api', 'user-agent': 'u', authorization: 'Bearer t' });
    const basic = h2Headers('GET', '/api', { headers: {}, auth: 'u:p' }, {});
    assert.equal(basic.authorization, `Basic ${Buffer.from('u:p').toString('base64')}`);
  });
});

/** A CA and a serving certificate for 127.0.0.1. */
async function tlsMaterial(): Promise<{ ca: string; cert: string; key: string }> {
  const notBefore = new Date(Date.now() - DAY_MS);
  const notAfter = new Date(Date.now() + DAY_MS);
  const ca = await createCa({ subject: 'CN=h2-test-ca', notBefore, notAfter });
  const leaf = await issueLeaf(ca, {
    subject: 'CN=h2-test',
    usage: 'server',
    hosts: ['127.0.0.1'],
    notBefore,
    notAfter,
  });
  return { ca: ca.certPem, cert: leaf.certPem, key: leaf.keyPem };
}

function configFor(port: number, ca: string): RestConfig {
  return {
    server: `https://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    namespace: 'default',
    authenticate: async () => ({ headers: { Authorization: 'Bearer t' }, ca }),
  };
}

const cmJson = (name: string): string =>
  JSON.stringify({ kind: 'ConfigMap', metadata: { name, namespace: 'ns' } });

describe('the HTTP/2 transport against node:http2 and node:https servers', () => {
  let material: { ca: string; cert: string; key: string };
  let h2: http2.Http2SecureServer;
  let h2port: number;
  /** Sessions the server accepted, streams it saw (method path). */
  const sessions = new Set<http2.ServerHttp2Session>();
  const seen: string[] = [];
  let refuseNext = 0;
  const openWatches: http2.ServerHttp2Stream[] = [];

  before(async () => {
    material = await tlsMaterial();
    h2 = http2.createSecureServer({
      cert: material.cert,
      key: material.key,
      settings: { maxConcurrentStreams: 2 },
    });
    h2.on('session', (s) => {
      sessions.add(s);
      s.on('close', () => sessions.delete(s));
    });
    h2.on('stream', (stream, headers) => {
      stream.on('error', () => undefined); // refused and cancelled streams
      const path = String(headers[':path']);
      seen.push(`${headers[':method']} ${path} ${headers.authorization}`);
      if (refuseNext > 0) {
        refuseNext--;
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      if (path.includes('watch=1')) {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        stream.write(`${JSON.stringify({ type: 'ADDED', object: JSON.parse(cmJson('w')) })}\n`);
        openWatches.push(stream);
        return;
      }
      if (path.includes('missing')) {
        stream.respond({ ':status': 404, 'content-type': 'application/json' });
        stream.end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound', message: 'not found' }));
        return;
      }
      stream.respond({
        ':status': headers[':method'] === 'POST' ? 201 : 200,
        'content-type': 'application/json',
      });
      stream.end(cmJson('c'));
    });
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    h2port = (h2.address() as AddressInfo).port;
  });

  after(async () => {
    for (const w of openWatches) w.close();
    for (const s of sessions) s.destroy();
    await new Promise((r) => h2.close(r));
  });

  test('requests are streams of one session; typed errors as on HTTP/1.1', async () => {
    const client = createClient(configFor(h2port, material.ca), { transport: 'http2' });
    try {
      const before = seen.length;
      for (let i = 0; i < 3; i++) await client.get(ConfigMaps, { namespace: 'ns', name: 'c' });
      await Promise.all([1, 2].map(() => client.get(ConfigMaps, { namespace: 'ns', name: 'c' })));
      await assert.rejects(client.get(ConfigMaps, { namespace: 'ns', name: 'missing' }), NotFoundError);
      assert.equal(seen.length - before, 6);
      assert.ok(seen.at(-1)?.endsWith('Bearer t'), 'the bearer token is sent');
      assert.equal(client.transport.h2.sessions.length, 1, 'one session');
      assert.equal(sessions.size, 1, 'the server saw one connection');
    } finally {
      client.close();
    }
  });

  test('a refused stream (REFUSED_STREAM) is sent again, even a POST: the server never processed it', async () => {
    const client = createClient(configFor(h2port, material.ca), { transport: 'http2' });
    try {
      refuseNext = 2;
      const before = seen.length;
      const created = await client.create(ConfigMaps, { metadata: { name: 'c', namespace: 'ns' } });
      assert.equal(created.metadata.name, 'c');
      assert.deepEqual(
        seen.slice(before).map((s) => s.split(' ')[0]),
        ['POST', 'POST', 'POST'],
      );
    } finally {
      refuseNext = 0;
      client.close();
    }
  });

  test("the server's SETTINGS_MAX_CONCURRENT_STREAMS (2): 5 watches open 3 sessions", async () => {
    const client = createClient(configFor(h2port, material.ca), { transport: 'http2' });
    const ac = new AbortController();
    try {
      // The first session learns the server's limit from its SETTINGS before more streams are opened.
      await client.get(ConfigMaps, { namespace: 'ns', name: 'c' });
      const firsts = await Promise.all(
        [1, 2, 3, 4, 5].map(async () => {
          const it = client.watch(ConfigMaps, { namespace: 'ns', signal: ac.signal })[Symbol.asyncIterator]();
          return (await it.next()).value;
        }),
      );
      assert.equal(firsts.length, 5);
      const pool = client.transport.h2.sessions;
      assert.equal(pool.length, 3);
      assert.ok(pool.every((s) => s.maxStreams === 2 && s.active <= 2));
    } finally {
      ac.abort();
      client.close();
    }
  });

  test('a session the server drops fails its watch with a ConnectionError (the watcher backs off as unreachable)', async () => {
    const client = createClient(configFor(h2port, material.ca), { transport: 'http2' });
    try {
      const it = client.watch(ConfigMaps, { namespace: 'ns' })[Symbol.asyncIterator]();
      assert.equal((await it.next()).value?.object.metadata.name, 'w');
      for (const s of sessions) s.destroy();
      const err = await it.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof ConnectionError, `got ${String(err)}`);
      assert.equal(isUnreachable(err), true);
      // The next request opens a new session.
      await client.get(ConfigMaps, { namespace: 'ns', name: 'c' });
    } finally {
      client.close();
    }
  });

  test("'auto' falls back to HTTP/1.1 when the server does not negotiate h2; 'http2' says so", async () => {
    const versions: string[] = [];
    const h1 = https.createServer({ cert: material.cert, key: material.key }, (req, res) => {
      versions.push(req.httpVersion);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(cmJson('c'));
    });
    await new Promise<void>((resolve) => h1.listen(0, '127.0.0.1', resolve));
    const port = (h1.address() as AddressInfo).port;
    const auto = createClient(configFor(port, material.ca), { transport: 'auto' });
    const strict = createClient(configFor(port, material.ca), { transport: 'http2' });
    try {
      await auto.get(ConfigMaps, { namespace: 'ns', name: 'c' });
      await auto.get(ConfigMaps, { namespace: 'ns', name: 'c' });
      assert.deepEqual(versions, ['1.1', '1.1']);
      assert.equal(auto.transport.h2.http1Only, true);
      await assert.rejects(strict.get(ConfigMaps, { namespace: 'ns', name: 'c' }), (err: unknown) => {
        assert.ok(err instanceof ConnectionError);
        assert.match(err.message, /did not negotiate HTTP\/2 .*use transport 'auto' or 'http1'/);
        return true;
      });
    } finally {
      auto.close();
      strict.close();
      h1.closeAllConnections();
      await new Promise((r) => h1.close(r));
    }
  });

  test('an idle session does not keep the process alive', { timeout: 30_000 }, async () => {
    // A child process makes one request over HTTP/2 and must then exit by itself.
    const index = new URL('../../src/client/index.ts', import.meta.url).href;
    const code = `
      import { createClient } from ${JSON.stringify(index)};
      const config = { server: process.env.SERVER, host: 'h', namespace: 'default',
        authenticate: async () => ({ headers: {}, ca: process.env.CA }) };
      const client = createClient(config, { transport: 'http2' });
      const got = await client.transport.request({ method: 'GET', path: '/api/v1/namespaces/ns/configmaps/c' });
      console.log(got.metadata.name, client.transport.h2.sessions.length);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      env: { ...process.env, SERVER: `https://127.0.0.1:${h2port}`, CA: material.ca },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const started = Date.now();
    const [exitCode] = (await once(child, 'exit')) as [number | null];
    assert.equal(out.trim(), 'c 1', 'one request over one session');
    assert.equal(exitCode, 0);
    // Safety bound: the PING interval (30 s) would otherwise hold it; it exits at once.
    assert.ok(Date.now() - started < 20_000);
  });

  test("the default session limit before the SETTINGS arrive is kube-apiserver's 100", () => {
    assert.equal(DEFAULT_MAX_STREAMS, 100);
  });
});

import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigMaps, Deployments, Namespaces } from '../../src/api/builtin.ts';
import {
  AlreadyExistsError,
  agentFor,
  BadRequestError,
  buildQuery,
  ConfigError,
  ConflictError,
  ConnectionError,
  createClient,
  DEFAULT_POOL,
  deleteBody,
  errorFromStatus,
  ForbiddenError,
  GoneError,
  HttpTransport,
  InvalidError,
  JsonLineDecoder,
  jsonLines,
  LEADER_ELECTION_POOL,
  listQuery,
  loadConfig,
  NotFoundError,
  type RequestMetric,
  RequestTimeoutError,
  type RestConfig,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnauthorizedError,
  watchQuery,
  writeQuery,
} from '../../src/client/index.ts';
import { ProtobufDecoder } from '../../src/client/protobuf/decode.ts';
import { envelope, PROTOBUF } from '../../src/client/protobuf/frames.ts';

function kubeconfigYaml(
  server: string,
  extra: { context?: string; namespace?: string; token?: string } = {},
): string {
  const ctx = extra.context ?? 'test';
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${ctx}-cluster`,
    '  cluster:',
    `    server: ${server}`,
    'users:',
    `- name: ${ctx}-user`,
    '  user:',
    `    token: ${extra.token ?? 'secret-token'}`,
    'contexts:',
    `- name: ${ctx}`,
    '  context:',
    `    cluster: ${ctx}-cluster`,
    `    user: ${ctx}-user`,
    ...(extra.namespace ? [`    namespace: ${extra.namespace}`] : []),
    `current-context: ${ctx}`,
    '',
  ].join('\n');
}

describe('buildQuery', () => {
  test('skips undefined/null, encodes keys and values, repeats arrays', () => {
    assert.equal(buildQuery(), '');
    assert.equal(buildQuery({ a: undefined, b: null }), '');
    assert.equal(
      buildQuery({ labelSelector: 'app in (a,b),tier!=db', limit: 10, watch: true, x: ['1', '2'] }),
      '?labelSelector=app%20in%20(a%2Cb)%2Ctier!%3Ddb&limit=10&watch=true&x=1&x=2',
    );
    assert.equal(buildQuery({ continue: 'eyJ2Ijoi+/=' }), '?continue=eyJ2Ijoi%2B%2F%3D');
    assert.equal(new URLSearchParams(buildQuery({ s: 'a=b&c d+é' }).slice(1)).get('s'), 'a=b&c d+é');
  });

  test('list, watch and write queries', () => {
    assert.equal(
      buildQuery(listQuery({ labelSelector: 'a=b', limit: 5, resourceVersion: '0', namespace: 'x' })),
      '?labelSelector=a%3Db&limit=5&resourceVersion=0',
    );
    assert.equal(buildQuery(listQuery({ labelSelector: '', fieldSelector: '' })), '');
    assert.equal(
      buildQuery(watchQuery({ resourceVersion: '42', allowWatchBookmarks: true, timeoutSeconds: 30 })),
      '?watch=1&resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=30',
    );
    // sendInitialEvents requires resourceVersionMatch=NotOlderThan and bookmarks.
    assert.equal(
      buildQuery(watchQuery({ sendInitialEvents: true, fieldSelector: 'metadata.name=a' })),
      '?watch=1&fieldSelector=metadata.name%3Da&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&sendInitialEvents=true',
    );
    assert.equal(buildQuery(writeQuery('opkit')), '?fieldManager=opkit');
    assert.equal(
      buildQuery(writeQuery('opkit', { fieldManager: 'me', dryRun: true }, true)),
      '?fieldManager=me&dryRun=All&force=true',
    );
  });

  test('delete options body', () => {
    assert.deepEqual(deleteBody(), { kind: 'DeleteOptions', apiVersion: 'v1' });
    assert.deepEqual(
      deleteBody({
        propagationPolicy: 'Foreground',
        gracePeriodSeconds: 0,
        preconditions: { uid: 'u', resourceVersion: '7' },
        dryRun: true,
      }),
      {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        propagationPolicy: 'Foreground',
        gracePeriodSeconds: 0,
        preconditions: { uid: 'u', resourceVersion: '7' },
        dryRun: ['All'],
      },
    );
  });
});

describe('JSON lines', () => {
  const events = [
    { type: 'ADDED', object: { metadata: { name: 'a' }, data: { k: 'héllo ✓ 𝄞' } } },
    { type: 'MODIFIED', object: { metadata: { name: 'b' } } },
    { type: 'DELETED', object: { metadata: { name: 'c' } } },
  ];
  const bytes = Buffer.from(events.map((e) => `${JSON.stringify(e)}\n`).join(''), 'utf8');

  test('every split point, including inside multi-byte characters', () => {
    for (let i = 0; i <= bytes.length; i++) {
      const d = new JsonLineDecoder();
      const out = [...d.write(bytes.subarray(0, i)), ...d.write(bytes.subarray(i)), ...d.end()];
      assert.deepEqual(out, events, `split at ${i}`);
    }
  });

  test('one byte at a time, blank lines, CRLF and a final line without newline', async () => {
    const text = `\n${JSON.stringify(events[0])}\r\n\n${JSON.stringify(events[1])}\n${JSON.stringify(events[2])}`;
    const buf = Buffer.from(text, 'utf8');
    async function* bytewise() {
      for (let i = 0; i < buf.length; i++) yield buf.subarray(i, i + 1);
    }
    const out: unknown[] = [];
    for await (const v of jsonLines(bytewise())) out.push(v);
    assert.deepEqual(out, events);
  });

  test('many lines in one chunk; strings work too', () => {
    const d = new JsonLineDecoder();
    assert.deepEqual(d.write('{"a":1}\n{"a":2}\n{"a"'), [{ a: 1 }, { a: 2 }]);
    assert.deepEqual(d.write(':3}\n'), [{ a: 3 }]);
    assert.deepEqual(d.end(), []);
  });

  test('malformed line is a SyntaxError', () => {
    const d = new JsonLineDecoder();
    assert.throws(() => d.write('{"a":\n'), SyntaxError);
  });

  test('stopping early returns the source', async () => {
    let closed = false;
    async function* source() {
      try {
        for (let i = 0; ; i++) yield `{"i":${i}}\n`;
      } finally {
        closed = true;
      }
    }
    for await (const v of jsonLines(source())) {
      if ((v as { i: number }).i === 3) break;
    }
    assert.equal(closed, true);
  });
});

describe('errorFromStatus', () => {
  const status = (code: number, reason: string) => ({
    kind: 'Status',
    status: 'Failure',
    code,
    reason,
    message: reason,
  });
  test('maps codes and reasons to classes', () => {
    assert.ok(errorFromStatus(404, status(404, 'NotFound')) instanceof NotFoundError);
    assert.ok(errorFromStatus(409, status(409, 'AlreadyExists')) instanceof AlreadyExistsError);
    assert.ok(errorFromStatus(409, status(409, 'Conflict')) instanceof ConflictError);
    assert.ok(errorFromStatus(410, status(410, 'Expired')) instanceof GoneError);
    assert.ok(errorFromStatus(403, status(403, 'Forbidden')) instanceof ForbiddenError);
    assert.ok(errorFromStatus(401, status(401, 'Unauthorized')) instanceof UnauthorizedError);
    assert.ok(errorFromStatus(400, status(400, 'BadRequest')) instanceof BadRequestError);
    assert.ok(errorFromStatus(504, status(504, 'Timeout')) instanceof TimeoutError);
    assert.ok(errorFromStatus(500, 'boom') instanceof ServerError);
    const invalid = errorFromStatus(422, {
      ...status(422, 'Invalid'),
      details: { causes: [{ field: 'metadata.name', reason: 'FieldValueInvalid' }] },
    });
    assert.ok(invalid instanceof InvalidError);
    assert.equal(invalid.causes[0]?.field, 'metadata.name');
  });

  test('Retry-After header wins over details, details over the default', () => {
    const body = { ...status(429, 'TooManyRequests'), details: { retryAfterSeconds: 7 } };
    const e1 = errorFromStatus(429, body, '3');
    assert.ok(e1 instanceof TooManyRequestsError);
    assert.equal(e1.retryAfterSeconds, 3);
    assert.equal((errorFromStatus(429, body, null) as TooManyRequestsError).retryAfterSeconds, 7);
    assert.equal((errorFromStatus(429, 'slow down') as TooManyRequestsError).retryAfterSeconds, 1);
  });
});

describe('loadConfig', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'opkit-client-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('explicit path, context and namespace', () => {
    const file = join(dir, 'explicit.yaml');
    writeFileSync(file, kubeconfigYaml('https://10.0.0.1:6443/', { namespace: 'team-a' }));
    const cfg = loadConfig({ kubeconfig: file, env: {} });
    assert.equal(cfg.server, 'https://10.0.0.1:6443');
    assert.equal(cfg.host, '10.0.0.1:6443');
    assert.equal(cfg.namespace, 'team-a');
    assert.throws(() => loadConfig({ kubeconfig: file, context: 'nope', env: {} }), ConfigError);
    assert.throws(() => loadConfig({ kubeconfig: join(dir, 'missing'), env: {} }), ConfigError);
  });

  test('KUBECONFIG first (merging files), then in-cluster, then ~/.kube/config', () => {
    const a = join(dir, 'a.yaml');
    const b = join(dir, 'b.yaml');
    writeFileSync(a, kubeconfigYaml('https://a.example:443', { context: 'a' }));
    writeFileSync(b, kubeconfigYaml('https://b.example:443', { context: 'b' }));
    const home = join(dir, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    writeFileSync(
      join(home, '.kube', 'config'),
      kubeconfigYaml('https://home.example:6443', { context: 'h' }),
    );
    const sa = join(dir, 'sa');
    mkdirSync(join(sa, 'var/run/secrets/kubernetes.io/serviceaccount'), { recursive: true });
    writeFileSync(join(sa, 'var/run/secrets/kubernetes.io/serviceaccount/token'), 'sa-token');
    writeFileSync(join(sa, 'var/run/secrets/kubernetes.io/serviceaccount/namespace'), 'ops');
    const inCluster = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const base = { homeDir: home, inClusterPathPrefix: sa };

    const merged = loadConfig({
      ...base,
      env: { ...inCluster, KUBECONFIG: `${join(dir, 'gone')}:${a}:${b}` },
    });
    assert.equal(merged.server, 'https://a.example:443');
    assert.equal(
      loadConfig({ ...base, context: 'b', env: { KUBECONFIG: `${a}:${b}` } }).server,
      'https://b.example:443',
    );

    const pod = loadConfig({ ...base, env: inCluster });
    assert.equal(pod.server, 'https://10.96.0.1:443');
    assert.equal(pod.namespace, 'ops');

    assert.equal(loadConfig({ ...base, env: {} }).server, 'https://home.example:6443');

    assert.throws(
      () => loadConfig({ homeDir: join(dir, 'nohome'), inClusterPathPrefix: sa, env: {} }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /no Kubernetes configuration found: set KUBECONFIG or pass --kubeconfig/.test(err.message),
    );
    assert.throws(() => loadConfig({ ...base, env: { KUBECONFIG: join(dir, 'gone') } }), ConfigError);
  });

  test('authenticate yields the bearer token and never an agent', async () => {
    const file = join(dir, 'token.yaml');
    writeFileSync(file, kubeconfigYaml('https://10.0.0.1:6443', { token: 'abc' }));
    const auth = await loadConfig({ kubeconfig: file, env: {} }).authenticate();
    assert.equal(auth.headers.Authorization, 'Bearer abc');
    assert.equal('agent' in auth, false);
  });
});

/** A scripted HTTP API server for transport tests. */
interface Fake {
  config: RestConfig;
  server: http.Server;
  requests: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string; raw: Buffer }[];
  sockets: Set<import('node:net').Socket>;
}

async function fakeServer(
  dir: string,
  handler: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void,
): Promise<Fake> {
  const requests: Fake['requests'] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const body = raw.toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, raw });
      handler(req, res, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const file = join(dir, `fake-${port}.yaml`);
  writeFileSync(file, kubeconfigYaml(`http://127.0.0.1:${port}`));
  return { config: loadConfig({ kubeconfig: file, env: {} }), server, requests, sockets };
}

function json(
  res: http.ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

describe('transport and client against a fake server', () => {
  let dir: string;
  let fake: Fake;
  const watchResponses: http.ServerResponse[] = [];
  const metrics: RequestMetric[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'opkit-client-http-'));
    fake = await fakeServer(dir, (req, res, body) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (
        url.pathname === '/api/v1/namespaces/default/configmaps' &&
        req.method === 'GET' &&
        url.searchParams.get('watch')
      ) {
        watchResponses.push(res);
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const mode = url.searchParams.get('labelSelector');
        if (mode === 'gone') {
          res.end(
            `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } })}\n`,
          );
          return;
        }
        // Two events split awkwardly, then hold the stream open.
        const line = `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n${JSON.stringify({ type: 'MODIFIED', object: { metadata: { name: 'a' } } })}\n`;
        res.write(line.slice(0, 17));
        setTimeout(() => res.write(line.slice(17)), 5);
        if (mode === 'end') setTimeout(() => res.end(), 10);
        return;
      }
      switch (`${req.method} ${url.pathname}`) {
        case 'GET /api/v1/namespaces/default/configmaps': {
          if (url.searchParams.get('continue') === 'expired') {
            json(res, 410, {
              kind: 'Status',
              code: 410,
              reason: 'Expired',
              message: 'continue token expired',
            });
            return;
          }
          if (url.searchParams.get('labelSelector') === 'expire' && url.searchParams.get('limit')) {
            json(res, 200, {
              metadata: { resourceVersion: '5', continue: 'expired' },
              items: [{ metadata: { name: 'p' } }],
            });
            return;
          }
          const cont = Number(url.searchParams.get('continue') ?? '0');
          const limit = Number(url.searchParams.get('limit') ?? '1000');
          const total = 25;
          const items = Array.from({ length: Math.min(limit, total - cont) }, (_, i) => ({
            metadata: { name: `cm-${cont + i}` },
          }));
          const next = cont + items.length < total ? String(cont + items.length) : undefined;
          json(res, 200, {
            kind: 'ConfigMapList',
            metadata: { resourceVersion: '100', continue: next },
            items,
          });
          return;
        }
        case 'POST /api/v1/namespaces/json-only/configmaps':
          if (String(req.headers['content-type']).startsWith(PROTOBUF)) {
            json(res, 415, {
              kind: 'Status',
              code: 415,
              reason: 'UnsupportedMediaType',
              message: 'the body of the request was in an unknown format',
            });
          } else json(res, 201, JSON.parse(body));
          return;
        case 'POST /api/v1/namespaces/default/configmaps': {
          // A protobuf body (the client's default for built-in kinds) is answered with its object as JSON.
          const raw = fake.requests.at(-1)?.raw ?? Buffer.alloc(0);
          if (!String(req.headers['content-type']).startsWith(PROTOBUF)) json(res, 201, JSON.parse(body));
          else {
            const e = envelope(raw);
            json(res, 201, new ProtobufDecoder().object(e.apiVersion, e.kind, raw, e.start, e.end));
          }
          return;
        }
        case 'GET /api/v1/namespaces/default/configmaps/slow':
          setTimeout(() => json(res, 200, {}), 2000);
          return;
        case 'GET /api/v1/namespaces/default/configmaps/busy':
          json(
            res,
            429,
            { kind: 'Status', code: 429, reason: 'TooManyRequests', message: 'slow down' },
            { 'Retry-After': '9' },
          );
          return;
        case 'GET /api/v1/namespaces/default/configmaps/missing':
          json(res, 404, {
            kind: 'Status',
            code: 404,
            reason: 'NotFound',
            message: 'configmaps "missing" not found',
          });
          return;
        case 'PATCH /apis/apps/v1/namespaces/default/deployments/d':
        case 'PATCH /apis/apps/v1/namespaces/default/deployments/d/status':
        case 'DELETE /api/v1/namespaces/default/configmaps/x':
          json(res, 200, { echo: true });
          return;
        case 'GET /apis/apps/v1':
          json(res, 404, { kind: 'Status', code: 404, reason: 'NotFound', message: 'not found' });
          return;
        case 'GET /api/v1':
          json(res, 200, {
            groupVersion: 'v1',
            resources: [{ name: 'configmaps', namespaced: true, kind: 'ConfigMap', verbs: [] }],
          });
          return;
        default:
          res.writeHead(500, { 'Content-Type': 'text/plain' });
          res.end('unexpected');
      }
    });
  });
  after(async () => {
    for (const r of watchResponses) r.destroy();
    for (const s of fake.sockets) s.destroy();
    await new Promise((r) => fake.server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  test('sends auth, user agent, fieldManager, type meta; reuses the connection', async () => {
    const client = createClient(fake.config, {
      wireFormat: 'json',
      fieldManager: 'unit',
      userAgent: 'ua/1',
      onRequest: (m) => metrics.push(m),
    });
    const before = fake.requests.length;
    const created = await client.create(ConfigMaps, {
      metadata: { name: 'x', namespace: 'default' },
      data: { a: '1' },
    });
    assert.equal(created.kind, 'ConfigMap');
    assert.equal(created.apiVersion, 'v1');
    await client.create(ConfigMaps, { metadata: { name: 'y', namespace: 'default' } }, { dryRun: true });
    const [r1, r2] = fake.requests.slice(before);
    assert.equal(r1?.url, '/api/v1/namespaces/default/configmaps?fieldManager=unit');
    assert.equal(r2?.url, '/api/v1/namespaces/default/configmaps?fieldManager=unit&dryRun=All');
    assert.equal(r1?.headers.authorization, 'Bearer secret-token');
    assert.equal(r1?.headers['user-agent'], 'ua/1');
    assert.equal(r1?.headers['content-type'], 'application/json');
    assert.equal(fake.sockets.size, 1, 'keep-alive reuses one connection');
    const m = metrics.at(-1);
    assert.equal(m?.method, 'POST');
    assert.equal(m?.code, '201');
    assert.match(m?.host ?? '', /^127\.0\.0\.1:\d+$/);
  });

  test('a built-in kind is created from a protobuf body: its Content-Type, the envelope naming the kind, the object', async () => {
    const client = createClient(fake.config, { fieldManager: 'unit' });
    const data = { greeting: 'grüße, 世界 ✓ 🚀', long: 'ü'.repeat(40_000) };
    const before = fake.requests.length;
    const created = await client.create(ConfigMaps, { metadata: { name: 'pb', namespace: 'default' }, data });
    assert.deepEqual(created.data, data, 'echoed back whole');
    const sent = fake.requests[before];
    assert.equal(sent?.headers['content-type'], 'application/vnd.kubernetes.protobuf');
    assert.equal(Number(sent?.headers['content-length']), sent?.raw.length);
    const e = envelope(sent?.raw ?? Buffer.alloc(0));
    assert.deepEqual([e.apiVersion, e.kind], ['v1', 'ConfigMap']);
    // What the encoder cannot say exactly goes as JSON.
    await client.create(ConfigMaps, { metadata: { name: 'odd', namespace: 'default' }, extra: 1 } as never);
    assert.equal(fake.requests.at(-1)?.headers['content-type'], 'application/json');
  });

  test('a server that refuses protobuf bodies (415) gets the request again in JSON, and JSON from then on', async () => {
    const client = createClient(fake.config, { fieldManager: 'unit' });
    const before = fake.requests.length;
    const first = await client.create(ConfigMaps, { metadata: { name: 'a', namespace: 'json-only' } });
    assert.equal(first.metadata.name, 'a');
    await client.create(ConfigMaps, { metadata: { name: 'b', namespace: 'json-only' } });
    const types = fake.requests.slice(before).map((r) => r.headers['content-type']);
    assert.deepEqual(types, ['application/vnd.kubernetes.protobuf', 'application/json', 'application/json']);
  });

  test('a body with multi-byte characters: Content-Length counts its UTF-8 bytes; the server gets all of it', async () => {
    const client = createClient(fake.config, { fieldManager: 'unit', wireFormat: 'json' });
    const data = { greeting: 'grüße, 世界 ✓ 🚀', long: 'ü'.repeat(40_000) };
    const before = fake.requests.length;
    const created = await client.create(ConfigMaps, {
      metadata: { name: 'utf8', namespace: 'default' },
      data,
    });
    assert.deepEqual(created.data, data, 'echoed back whole');
    const sent = fake.requests[before];
    const bytes = Buffer.byteLength(
      JSON.stringify({
        metadata: { name: 'utf8', namespace: 'default' },
        data,
        apiVersion: 'v1',
        kind: 'ConfigMap',
      }),
    );
    assert.equal(Number(sent?.headers['content-length']), bytes);
    assert.ok(
      bytes > JSON.stringify(data).length,
      'more bytes than UTF-16 units: the test can tell them apart',
    );
  });

  test('list follows continue and merges; explicit continue returns one page', async () => {
    const client = createClient(fake.config);
    const all = await client.list(ConfigMaps, { namespace: 'default', limit: 10 });
    assert.equal(all.items.length, 25);
    assert.equal(all.items[24]?.metadata.name, 'cm-24');
    assert.equal(all.metadata.continue, undefined);
    assert.equal(all.metadata.resourceVersion, '100');
    const page = await client.list(ConfigMaps, { namespace: 'default', limit: 10, continue: '20' });
    assert.equal(page.items.length, 5);
    const first = await client.list(ConfigMaps, { namespace: 'default', limit: 10, onePage: true });
    assert.equal(first.items.length, 10, 'onePage: the first page only');
    assert.equal(first.items[9]?.metadata.name, 'cm-9');
    assert.ok(first.metadata.continue, 'with its continue token');
    // An expired continue token mid-way falls back to one unpaginated list.
    const before = fake.requests.length;
    const fallback = await client.list(ConfigMaps, {
      namespace: 'default',
      limit: 1,
      labelSelector: 'expire',
    });
    assert.equal(fallback.items.length, 25);
    assert.deepEqual(
      fake.requests.slice(before).map((r) => r.url.split('?')[1]),
      [
        'labelSelector=expire&limit=1',
        'labelSelector=expire&limit=1&continue=expired',
        'labelSelector=expire',
      ],
    );
    // An explicit (expired) continue token is the caller's to handle.
    await assert.rejects(
      client.list(ConfigMaps, { namespace: 'default', limit: 1, continue: 'expired' }),
      GoneError,
    );
  });

  test('patch content types, force, status subresource; delete body', async () => {
    const client = createClient(fake.config);
    const key = { namespace: 'default', name: 'd' };
    const before = fake.requests.length;
    await client.patch(Deployments, key, { type: 'merge', body: { spec: { replicas: 2 } } });
    await client.patch(Deployments, key, { type: 'strategic', body: { spec: { replicas: 2 } } });
    await client.patch(Deployments, key, {
      type: 'json',
      body: [{ op: 'replace', path: '/spec/replicas', value: 3 }],
    });
    await client.patch(Deployments, key, { type: 'apply', body: { metadata: {} }, force: true });
    await client.patchStatus(Deployments, key, { type: 'merge', body: { status: {} } });
    await client.delete(
      ConfigMaps,
      { namespace: 'default', name: 'x' },
      { preconditions: { resourceVersion: '1' } },
    );
    const rs = fake.requests.slice(before);
    assert.deepEqual(
      rs.map((r) => r.headers['content-type']),
      [
        'application/merge-patch+json',
        'application/strategic-merge-patch+json',
        'application/json-patch+json',
        'application/apply-patch+yaml',
        'application/merge-patch+json',
        'application/json',
      ],
    );
    assert.equal(rs[3]?.url, '/apis/apps/v1/namespaces/default/deployments/d?fieldManager=opkit&force=true');
    assert.deepEqual(JSON.parse(rs[3]?.body ?? ''), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd', namespace: 'default' },
    });
    assert.equal(rs[4]?.url, '/apis/apps/v1/namespaces/default/deployments/d/status?fieldManager=opkit');
    assert.deepEqual(JSON.parse(rs[5]?.body ?? ''), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      preconditions: { resourceVersion: '1' },
    });
  });

  test('typed errors incl. Retry-After; local validation', async () => {
    const client = createClient(fake.config);
    await assert.rejects(client.get(ConfigMaps, { namespace: 'default', name: 'missing' }), NotFoundError);
    await assert.rejects(client.get(ConfigMaps, { namespace: 'default', name: 'busy' }), (err: unknown) => {
      assert.ok(err instanceof TooManyRequestsError);
      assert.equal(err.retryAfterSeconds, 9);
      return true;
    });
    await assert.rejects(client.get(ConfigMaps, { namespace: 'default', name: 'other' }), (err: unknown) => {
      assert.ok(err instanceof ServerError);
      assert.equal(err.message, 'unexpected');
      return true;
    });
    await assert.rejects(client.get(ConfigMaps, { name: 'no-namespace' }), BadRequestError);
    assert.equal(await client.isServed(ConfigMaps), true);
    assert.equal(await client.isServed(Namespaces), false);
    assert.equal(await client.isServed(Deployments), false, 'group-version not served (404)');
    assert.equal(await client.isServed({ ...ConfigMaps, plural: 'nothings' }), false);
  });

  test('timeout and abort', async () => {
    const client = createClient(fake.config, { timeoutMs: 50 });
    await assert.rejects(client.get(ConfigMaps, { namespace: 'default', name: 'slow' }), RequestTimeoutError);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 20);
    await assert.rejects(
      createClient(fake.config).get(
        ConfigMaps,
        { namespace: 'default', name: 'slow' },
        { signal: ac.signal },
      ),
      { name: 'AbortError' },
    );
  });

  test('connection refused is a ConnectionError', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const { port } = srv.address() as AddressInfo;
    await new Promise((r) => srv.close(r));
    const file = join(dir, 'refused.yaml');
    writeFileSync(file, kubeconfigYaml(`http://127.0.0.1:${port}`));
    const seen: RequestMetric[] = [];
    const client = createClient(loadConfig({ kubeconfig: file, env: {} }), {
      onRequest: (m) => seen.push(m),
    });
    await assert.rejects(client.get(ConfigMaps, { namespace: 'default', name: 'x' }), ConnectionError);
    assert.equal(seen[0]?.code, '<error>');
  });

  test('watch: events across chunks; ends on server close; ERROR is typed', async () => {
    const client = createClient(fake.config);
    const types: string[] = [];
    for await (const ev of client.watch(ConfigMaps, { namespace: 'default', labelSelector: 'end' }))
      types.push(ev.type);
    assert.deepEqual(types, ['ADDED', 'MODIFIED']);
    await assert.rejects(async () => {
      for await (const _ of client.watch(ConfigMaps, { namespace: 'default', labelSelector: 'gone' })) {
        // nothing
      }
    }, GoneError);
  });

  test('watch: break and abort destroy the connection and remove listeners', async () => {
    const transport = new HttpTransport(fake.config);
    const client = createClient(fake.config);
    const shared = new AbortController();
    const countListeners = () => getEventListeners(shared.signal, 'abort').length;

    for (let i = 0; i < 20; i++) {
      for await (const ev of client.watch(ConfigMaps, { namespace: 'default', signal: shared.signal })) {
        assert.equal(ev.type, 'ADDED');
        break;
      }
    }
    assert.equal(countListeners(), 0);

    for (let i = 0; i < 20; i++) {
      const ac = new AbortController();
      const seen: string[] = [];
      for await (const ev of client.watch(ConfigMaps, { namespace: 'default', signal: ac.signal })) {
        seen.push(ev.type);
        if (seen.length === 2) ac.abort();
      }
      assert.deepEqual(seen, ['ADDED', 'MODIFIED']);
    }
    // Abort before the response arrives: the iterable just ends.
    const early = new AbortController();
    const it = transport.stream('/api/v1/namespaces/default/configmaps?watch=1', early.signal);
    early.abort();
    for await (const _ of it) assert.fail('no events expected');

    await new Promise((r) => setTimeout(r, 50));
    // Only keep-alive connections of plain requests may remain; every watch connection is gone.
    const open = watchResponses.filter((r) => !r.destroyed && !r.writableEnded && !r.socket?.destroyed);
    assert.equal(open.length, 0);
  });
});

describe('401 Unauthorized: one retry with fresh credentials', () => {
  let dir: string;
  let server: http.Server;
  let port = 0;
  /** The only token the server accepts right now. */
  let accepted = 'token-1';
  const seen: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'opkit-client-auth-'));
    server = http.createServer((req, res) => {
      const auth = req.headers.authorization ?? '';
      seen.push(auth);
      if (auth !== `Bearer ${accepted}`) {
        json(res, 401, { kind: 'Status', code: 401, reason: 'Unauthorized', message: 'Unauthorized' });
        return;
      }
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.searchParams.get('watch')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'w' } } })}\n`);
        return;
      }
      json(res, 200, { metadata: { name: 'x', namespace: 'default' } });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  /** A kubeconfig for the server whose user is given as YAML lines (under `user:`). */
  function kubeconfig(name: string, user: string[]): string {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: c',
        '  cluster:',
        `    server: http://127.0.0.1:${port}`,
        'users:',
        '- name: u',
        '  user:',
        ...user.map((l) => `    ${l}`),
        'contexts:',
        '- name: ctx',
        '  context: { cluster: c, user: u }',
        'current-context: ctx',
        '',
      ].join('\n'),
    );
    return file;
  }
  const cm = { namespace: 'default', name: 'x' };

  test('a rotated token file is read again after a 401 and the request retried once', async () => {
    accepted = 'token-1';
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'token-1');
    // client-node reads a user's token file (its spelling: token-file) only when loading the kubeconfig.
    const client = createClient(
      loadConfig({ kubeconfig: kubeconfig('tf', [`token-file: ${tokenFile}`]), env: {} }),
    );
    try {
      assert.equal((await client.get(ConfigMaps, cm)).metadata.name, 'x');
      // The token rotates: the server only accepts the new one, which is in the file.
      accepted = 'token-2';
      writeFileSync(tokenFile, 'token-2');
      seen.length = 0;
      assert.equal((await client.get(ConfigMaps, cm)).metadata.name, 'x');
      assert.deepEqual(seen, ['Bearer token-1', 'Bearer token-2'], 'one 401, then one retry');
      seen.length = 0;
      await client.get(ConfigMaps, cm);
      assert.deepEqual(seen, ['Bearer token-2'], 'later requests use the fresh token at once');
    } finally {
      client.close();
    }
  });

  test('exec plugin credentials (cached by client-node without expiry) are fetched again after a 401', async () => {
    accepted = 'exec-1';
    const tokenFile = join(dir, 'exec-token');
    const runs = join(dir, 'exec-runs');
    writeFileSync(tokenFile, 'exec-1');
    writeFileSync(runs, '');
    const plugin = join(dir, 'plugin.mjs');
    writeFileSync(
      plugin,
      [
        "import { appendFileSync, readFileSync } from 'node:fs';",
        'const [tokenFile, runs] = process.argv.slice(2);',
        "appendFileSync(runs, 'x');",
        'process.stdout.write(JSON.stringify({',
        "  apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',",
        "  status: { token: readFileSync(tokenFile, 'utf8').trim() },",
        '}));',
      ].join('\n'),
    );
    const file = kubeconfig('exec', [
      'exec:',
      '  apiVersion: client.authentication.k8s.io/v1',
      `  command: ${JSON.stringify(process.execPath)}`,
      `  args: [${JSON.stringify(plugin)}, ${JSON.stringify(tokenFile)}, ${JSON.stringify(runs)}]`,
      '  interactiveMode: Never',
    ]);
    const client = createClient(loadConfig({ kubeconfig: file, env: {} }));
    const execRuns = () => readFileSync(runs, 'utf8').length;
    try {
      await client.get(ConfigMaps, cm);
      await client.get(ConfigMaps, cm);
      assert.equal(execRuns(), 1, 'client-node caches the credential');
      accepted = 'exec-2';
      writeFileSync(tokenFile, 'exec-2');
      seen.length = 0;
      // Several requests hit the 401 at once: the plugin runs again, but not once per request.
      const results = await Promise.all([1, 2, 3, 4].map(() => client.get(ConfigMaps, cm)));
      assert.equal(results.length, 4);
      assert.equal(execRuns(), 2, 'the plugin ran once more, not once per request');
      assert.equal(seen.filter((s) => s === 'Bearer exec-1').length, 4);
      assert.equal(seen.filter((s) => s === 'Bearer exec-2').length, 4);
      // A watch whose open gets a 401 is retried the same way.
      accepted = 'exec-3';
      writeFileSync(tokenFile, 'exec-3');
      const events: string[] = [];
      for await (const ev of client.watch(ConfigMaps, { namespace: 'default' })) events.push(ev.type);
      assert.deepEqual(events, ['ADDED']);
    } finally {
      client.close();
    }
  });

  test('credentials that stay the same are not retried: the 401 surfaces as UnauthorizedError', async () => {
    accepted = 'something-else';
    const client = createClient(
      loadConfig({ kubeconfig: kubeconfig('static', ['token: revoked']), env: {} }),
    );
    try {
      seen.length = 0;
      await assert.rejects(client.get(ConfigMaps, cm), UnauthorizedError);
      assert.deepEqual(seen, ['Bearer revoked'], 'no pointless retry');
      seen.length = 0;
      await assert.rejects(async () => {
        for await (const _ of client.watch(ConfigMaps, { namespace: 'default' })) assert.fail('no events');
      }, UnauthorizedError);
      assert.deepEqual(seen, ['Bearer revoked']);
    } finally {
      client.close();
    }
  });
});

describe('connection pools', () => {
  test('watches hold no socket of the pool, and a request on its own pool does not wait behind requests that hold every socket of the shared one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'opkit-pools-'));
    const open: http.ServerResponse[] = [];
    const fake = await fakeServer(dir, (req, res) => {
      if (req.url?.includes('watch=1')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`);
        open.push(res);
      } else if (req.url?.includes('hang')) open.push(res);
      else json(res, 200, { kind: 'Lease', metadata: { name: 'l' } });
    });
    const shared = createClient(fake.config, { maxSockets: 1 });
    const own = createClient(fake.config, { connectionPool: LEADER_ELECTION_POOL });
    const watching = new AbortController();
    try {
      assert.equal(agentFor(fake.config), shared.transport.agent);
      assert.equal(agentFor(fake.config, undefined, DEFAULT_POOL), shared.transport.agent);
      assert.equal(agentFor(fake.config, undefined, LEADER_ELECTION_POOL), own.transport.agent);
      assert.notEqual(own.transport.agent, shared.transport.agent);
      const events = shared.watch(ConfigMaps, { signal: watching.signal })[Symbol.asyncIterator]();
      await events.next();
      // The watch runs on a connection of its own: the pool's only socket is free.
      const lease = { method: 'GET', path: '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l' } as const;
      assert.equal(
        (await shared.transport.request<{ kind: string }>({ ...lease, timeoutMs: 5_000 })).kind,
        'Lease',
      );
      // A request the server never answers holds it.
      const hanging = shared.transport.request({ method: 'GET', path: '/api/v1/namespaces/hang' });
      hanging.catch(() => undefined);
      await assert.rejects(
        shared.transport.request({ method: 'GET', path: '/api/v1/namespaces', timeoutMs: 300 }),
        RequestTimeoutError,
      );
      const got = await own.transport.request<{ kind: string }>({
        method: 'GET',
        path: '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l',
        timeoutMs: 5_000,
      });
      assert.equal(got.kind, 'Lease');
    } finally {
      watching.abort();
      for (const res of open) res.end();
      shared.close();
      own.close();
      await new Promise<void>((resolve) => fake.server.close(() => resolve()));
      for (const s of fake.sockets) s.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

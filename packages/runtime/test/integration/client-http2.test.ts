/**
 * The HTTP/2 transport against a real kube-apiserver (etcd + kube-apiserver from @opkit/controlplane):
 * CRUD and watches as streams of one session, many concurrent watches, an API server restart (GOAWAY,
 * refused connections) that informers recover from, and a rotated bearer token re-read after a 401.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { type ConfigMap, ConfigMaps, Namespaces } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { SharedInformer } from '../../src/cache/informer.ts';
import {
  createClient,
  isUnreachable,
  loadConfig,
  type RequestMetric,
  type RestClient,
  UnauthorizedError,
} from '../../src/client/index.ts';

const ServiceAccounts = defineResource<KubeObject>({
  group: '',
  version: 'v1',
  kind: 'ServiceAccount',
  plural: 'serviceaccounts',
  namespaced: true,
});
const ClusterRoleBindings = defineResource<KubeObject & { roleRef: unknown; subjects: unknown[] }>({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  kind: 'ClusterRoleBinding',
  plural: 'clusterrolebindings',
  namespaced: false,
});

const cm = (ns: string, name: string, data: Record<string, string> = {}): ConfigMap => ({
  metadata: { namespace: ns, name },
  data,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 50 ms; fails after a generous safety bound (not a performance figure). */
async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Retries `fn` while the API server is unreachable (during a restart). */
async function resilient<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i > 200) throw err;
      await sleep(100);
    }
  }
}

describe('HTTP/2 transport against a real API server', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let client: RestClient;
  const metrics: RequestMetric[] = [];

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), {
        transport: 'http2',
        fieldManager: 'h2-test',
        onRequest: (m) => metrics.push(m),
      });
    },
    { timeout: 180_000 },
  );
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  test('get, list, create, patch (merge, apply), delete and a watch: streams of one HTTP/2 session', async () => {
    const ns = 'h2-crud';
    await client.create(Namespaces, { metadata: { name: ns } });
    const ac = new AbortController();
    const events: string[] = [];
    const watching = (async () => {
      for await (const ev of client.watch(ConfigMaps, { namespace: ns, signal: ac.signal })) {
        events.push(`${ev.type} ${ev.object.metadata.name} ${ev.object.data?.v ?? ''}`);
      }
    })();
    const created = await client.create(ConfigMaps, cm(ns, 'a', { v: '1' }));
    assert.equal(created.metadata.name, 'a');
    await client.patch(
      ConfigMaps,
      { namespace: ns, name: 'a' },
      { type: 'merge', body: { data: { v: '2' } } },
    );
    await client.patch(
      ConfigMaps,
      { namespace: ns, name: 'b' },
      {
        type: 'apply',
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b' }, data: { v: '3' } } as ConfigMap,
        force: true,
      },
    );
    const got = await client.get(ConfigMaps, { namespace: ns, name: 'a' });
    assert.equal(got.data?.v, '2');
    const list = await client.list(ConfigMaps, { namespace: ns, limit: 1 });
    assert.deepEqual(list.items.map((i) => i.metadata.name).sort(), ['a', 'b']);
    await client.delete(ConfigMaps, { namespace: ns, name: 'a' });
    await until(() => events.includes('DELETED a 2'), 'the DELETED event');
    assert.deepEqual(events.slice(0, 3), ['ADDED a 1', 'MODIFIED a 2', 'ADDED b 3']);
    const sessions = client.transport.h2.sessions;
    assert.equal(sessions.length, 1, 'one session');
    assert.equal(sessions[0]?.session.alpnProtocol, 'h2');
    assert.equal(client.transport.h2.http1Only, false);
    ac.abort();
    await watching;
    assert.ok(
      metrics.some((m) => m.method === 'PATCH' && m.code === '201'),
      'the apply created b (metrics)',
    );
  });

  test('200 concurrent watches over HTTP/2 (beyond 100 streams: a second session); a long watch survives them', async () => {
    const ns = 'h2-many';
    await client.create(Namespaces, { metadata: { name: ns } });
    const ac = new AbortController();
    const longSeen: string[] = [];
    const long = (async () => {
      for await (const ev of client.watch(ConfigMaps, { namespace: ns, signal: ac.signal })) {
        longSeen.push(ev.object.metadata.name ?? '');
      }
    })();
    const N = 200;
    const seen = new Set<number>();
    const watches = Array.from({ length: N }, async (_, i) => {
      for await (const ev of client.watch(ConfigMaps, {
        namespace: ns,
        fieldSelector: `metadata.name=w${i}`,
        signal: ac.signal,
      })) {
        if (ev.type === 'ADDED') seen.add(i);
      }
    });
    // Every watch must be open before its ConfigMap exists: wait until the sessions carry them all.
    await until(
      () => client.transport.h2.sessions.reduce((n, s) => n + s.active, 0) >= N + 1,
      'all watches open',
    );
    const pool = client.transport.h2.sessions;
    assert.ok(pool.length >= 2, `${pool.length} sessions for ${N + 1} streams`);
    for (const s of pool) assert.ok(s.active <= s.maxStreams, `${s.active} <= ${s.maxStreams}`);
    for (let i = 0; i < N; i += 20) {
      await Promise.all(Array.from({ length: 20 }, (_, j) => client.create(ConfigMaps, cm(ns, `w${i + j}`))));
    }
    await until(() => seen.size === N, 'every watch saw its ConfigMap');
    await client.create(ConfigMaps, cm(ns, 'last'));
    await until(() => longSeen.includes('last'), 'the long watch still delivers');
    assert.equal(longSeen.length, N + 1);
    ac.abort();
    await Promise.all([long, ...watches]);
  });

  test('an API server restart: a watch ends or fails as unreachable, new sessions are opened, an informer recovers', async () => {
    const ns = 'h2-restart';
    await client.create(Namespaces, { metadata: { name: ns } });
    await client.create(ConfigMaps, cm(ns, 'before'));
    const errors: unknown[] = [];
    const informer = new SharedInformer(client, ConfigMaps, {
      namespace: ns,
      backoff: { initialMs: 100, maxMs: 1000 },
      onError: (err) => errors.push(err),
    });
    const ac = new AbortController();
    const running = informer.start(ac.signal);
    assert.equal(await informer.waitForSync(), true);
    const raw = (async (): Promise<string> => {
      try {
        for await (const _ of client.watch(ConfigMaps, { namespace: ns, signal: ac.signal })) {
          // events before the restart
        }
        return 'ended';
      } catch (err) {
        return isUnreachable(err) ? 'unreachable' : `other: ${String(err)}`;
      }
    })();
    const before = client.transport.h2.sessions[0];
    await cp.restartApiServer({ downtimeMs: 500 });
    assert.match(await raw, /^(ended|unreachable)$/);
    await resilient(() => client.create(ConfigMaps, cm(ns, 'after')));
    await until(
      () => informer.store.list().some((o) => o.metadata.name === 'after'),
      'the informer to see the object created after the restart',
    );
    assert.equal(before?.usable, false, 'the old session takes no new streams');
    assert.ok(!client.transport.h2.sessions.includes(before as never), 'and left the pool');
    assert.equal(client.transport.h2.http1Only, false, 'still HTTP/2');
    assert.ok(errors.length >= 1, 'the outage was noticed');
    ac.abort();
    await running;
  });

  test('401 over HTTP/2: a rotated token file is read again and the request and a watch retried', async () => {
    const ns = 'h2-auth';
    await client.create(Namespaces, { metadata: { name: ns } });
    await client.create(ServiceAccounts, { metadata: { namespace: ns, name: 'bot' } });
    await client.create(ClusterRoleBindings, {
      metadata: { name: 'h2-auth-bot' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: ns }],
    });
    const issued = await client.transport.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${ns}/serviceaccounts/bot/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    });
    const admin = readFileSync(cp.kubeconfigPath, 'utf8');
    const caData = /certificate-authority-data:\s*(\S+)/.exec(admin)?.[1];
    const server = /server:\s*(\S+)/.exec(admin)?.[1];
    assert.ok(caData && server);
    const dir = mkdtempSync(join(tmpdir(), 'h2-auth-'));
    try {
      const tokenFile = join(dir, 'token');
      writeFileSync(tokenFile, 'not-a-valid-token');
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'c', cluster: { server, 'certificate-authority-data': caData } }],
          users: [{ name: 'bot', user: { tokenFile } }],
          contexts: [{ name: 'c', context: { cluster: 'c', user: 'bot' } }],
          'current-context': 'c',
        }),
      );
      const bot = createClient(loadConfig({ kubeconfig }), { transport: 'http2' });
      try {
        await assert.rejects(bot.get(Namespaces, { name: ns }), UnauthorizedError);
        writeFileSync(tokenFile, issued.status.token);
        const got = await bot.get(Namespaces, { name: ns });
        assert.equal(got.metadata.name, ns);
        assert.equal(bot.transport.h2.sessions.length, 1, 'one session: tokens are headers');
      } finally {
        bot.close();
      }
      // A watch: a client of its own whose token is rejected first, then rotated.
      writeFileSync(tokenFile, 'not-a-valid-token');
      const watcher = createClient(loadConfig({ kubeconfig }), { transport: 'http2' });
      try {
        await assert.rejects(watcher.get(Namespaces, { name: ns }), UnauthorizedError);
        writeFileSync(tokenFile, issued.status.token);
        const ac = new AbortController();
        const it = watcher.watch(ConfigMaps, { namespace: ns, signal: ac.signal })[Symbol.asyncIterator]();
        const first = it.next();
        await client.create(ConfigMaps, cm(ns, 'seen-by-bot'));
        assert.equal((await first).value?.object.metadata.name, 'seen-by-bot');
        ac.abort();
      } finally {
        watcher.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

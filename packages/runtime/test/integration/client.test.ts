/**
 * The API client against a real kube-apiserver (etcd + kube-apiserver from @opkit/controlplane).
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { readdirSync, readlinkSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  type ConfigMap,
  ConfigMaps,
  CustomResourceDefinitions,
  type Deployment,
  Deployments,
  Namespaces,
} from '../../src/api/builtin.ts';
import type { KubeObject, WatchEvent } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import {
  AlreadyExistsError,
  ApiError,
  ConflictError,
  createClient,
  GoneError,
  InvalidError,
  loadConfig,
  NotFoundError,
  type RequestMetric,
  type RestClient,
  type RestConfig,
} from '../../src/client/index.ts';

type PodTemplate = KubeObject & { template?: { spec?: { containers: { name: string; image: string }[] } } };
const PodTemplates = defineResource<PodTemplate>({
  group: '',
  version: 'v1',
  kind: 'PodTemplate',
  plural: 'podtemplates',
  namespaced: true,
});

let cp: ControlPlane;
let config: RestConfig;
let client: RestClient;
const metrics: RequestMetric[] = [];

async function namespace(name: string): Promise<string> {
  await client.create(Namespaces, { metadata: { name } });
  return name;
}

const cm = (ns: string, name: string, data: Record<string, string> = {}): ConfigMap => ({
  metadata: { namespace: ns, name },
  data,
});

function openFds(): { total: number; sockets: number } {
  let total = 0;
  let sockets = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    total++;
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) sockets++;
    } catch {
      // closed meanwhile (the readdir handle itself)
    }
  }
  return { total, sockets };
}

before(
  async () => {
    // PodTemplates bypass the watch cache, so a compacted resourceVersion gives 410 Gone (see the watch tests).
    cp = await start({ mode: 'apiserver', apiServerArgs: ['--watch-cache-sizes=podtemplates#0'] });
    config = loadConfig({ kubeconfig: cp.kubeconfigPath });
    client = createClient(config, { fieldManager: 'opkit-test', onRequest: (m) => metrics.push(m) });
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

describe('ConfigMap CRUD and typed errors', () => {
  let ns: string;
  before(async () => {
    ns = await namespace('crud');
  });

  test('create, get, update, list, delete', async () => {
    const created = await client.create(ConfigMaps, cm(ns, 'one', { a: '1' }));
    assert.equal(created.apiVersion, 'v1');
    assert.equal(created.kind, 'ConfigMap');
    assert.ok(created.metadata.uid);
    assert.equal(created.metadata.managedFields?.[0]?.manager, 'opkit-test');

    const got = await client.get(ConfigMaps, { namespace: ns, name: 'one' });
    assert.deepEqual(got.data, { a: '1' });

    const updated = await client.update(ConfigMaps, { ...got, data: { a: '2' } });
    assert.deepEqual(updated.data, { a: '2' });
    assert.notEqual(updated.metadata.resourceVersion, got.metadata.resourceVersion);

    const list = await client.list(ConfigMaps, { namespace: ns });
    assert.ok(list.items.some((i) => i.metadata.name === 'one'));
    assert.ok(list.metadata.resourceVersion);

    await client.delete(ConfigMaps, { namespace: ns, name: 'one' });
    await assert.rejects(client.get(ConfigMaps, { namespace: ns, name: 'one' }), NotFoundError);
    await assert.rejects(client.delete(ConfigMaps, { namespace: ns, name: 'one' }), NotFoundError);

    const m = metrics.find((x) => x.method === 'DELETE' && x.code === '404');
    assert.ok(m, 'the metrics hook saw the 404');
    assert.equal(m.host, new URL(cp.server).host);
  });

  test('AlreadyExists, Conflict on a stale resourceVersion', async () => {
    const created = await client.create(ConfigMaps, cm(ns, 'two', { a: '1' }));
    await assert.rejects(client.create(ConfigMaps, cm(ns, 'two')), AlreadyExistsError);
    await client.update(ConfigMaps, { ...created, data: { a: '2' } });
    await assert.rejects(client.update(ConfigMaps, { ...created, data: { a: '3' } }), (err: unknown) => {
      assert.ok(err instanceof ConflictError);
      assert.equal(err.code, 409);
      assert.equal(err.reason, 'Conflict');
      return true;
    });
  });

  test('Invalid with field causes', async () => {
    await assert.rejects(client.create(ConfigMaps, cm(ns, 'Bad_Name')), (err: unknown) => {
      assert.ok(err instanceof InvalidError);
      assert.equal(err.code, 422);
      assert.ok(
        err.causes.some((c) => c.field === 'metadata.name'),
        JSON.stringify(err.causes),
      );
      return true;
    });
    await assert.rejects(
      client.create(ConfigMaps, cm(ns, 'bad-key', { 'no spaces!': 'x' })),
      (err: unknown) => {
        assert.ok(err instanceof InvalidError);
        assert.ok(
          err.causes.some((c) => c.field?.startsWith('data')),
          JSON.stringify(err.causes),
        );
        return true;
      },
    );
  });

  test('dry run writes nothing', async () => {
    await client.create(ConfigMaps, cm(ns, 'dry'), { dryRun: true });
    await assert.rejects(client.get(ConfigMaps, { namespace: ns, name: 'dry' }), NotFoundError);
  });

  test('delete preconditions mismatch is a Conflict', async () => {
    const obj = await client.create(ConfigMaps, cm(ns, 'pre'));
    await assert.rejects(
      client.delete(ConfigMaps, { namespace: ns, name: 'pre' }, { preconditions: { uid: 'not-the-uid' } }),
      ConflictError,
    );
    await assert.rejects(
      client.delete(ConfigMaps, { namespace: ns, name: 'pre' }, { preconditions: { resourceVersion: '1' } }),
      ConflictError,
    );
    await client.delete(
      ConfigMaps,
      { namespace: ns, name: 'pre' },
      {
        preconditions: { uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion },
        propagationPolicy: 'Background',
        gracePeriodSeconds: 0,
      },
    );
    await assert.rejects(client.get(ConfigMaps, { namespace: ns, name: 'pre' }), NotFoundError);
  });
});

describe('list pagination', () => {
  test('limit 10 over 25 objects returns all 25', async () => {
    const ns = await namespace('pages');
    for (let i = 0; i < 25; i++) {
      await client.create(ConfigMaps, {
        ...cm(ns, `cm-${String(i).padStart(2, '0')}`),
        metadata: { namespace: ns, name: `cm-${String(i).padStart(2, '0')}`, labels: { set: 'paged' } },
      });
    }
    const before = metrics.length;
    const all = await client.list(ConfigMaps, { namespace: ns, limit: 10, labelSelector: 'set=paged' });
    assert.equal(all.items.length, 25);
    assert.equal(new Set(all.items.map((i) => i.metadata.name)).size, 25);
    assert.equal(all.metadata.continue, undefined);
    assert.equal(metrics.length - before, 3, 'three pages');

    const first = await client.list(ConfigMaps, { namespace: ns, limit: 10, continue: '' });
    // An empty continue is "not given": all pages.
    assert.equal(first.items.length >= 25, true);
    const page = await client.list(ConfigMaps, {
      namespace: ns,
      limit: 10,
      labelSelector: 'set=paged',
      continue: undefined,
    });
    assert.equal(page.items.length, 25);

    // An explicit continue token returns just that page.
    const raw = await client.transport.request<{ metadata: { continue?: string } }>({
      method: 'GET',
      path: `/api/v1/namespaces/${ns}/configmaps`,
      query: { limit: 10, labelSelector: 'set=paged' },
    });
    assert.ok(raw.metadata.continue);
    const second = await client.list(ConfigMaps, {
      namespace: ns,
      limit: 10,
      labelSelector: 'set=paged',
      continue: raw.metadata.continue,
    });
    assert.equal(second.items.length, 10);
    assert.ok(second.metadata.continue);
  });
});

describe('patch and server-side apply', () => {
  let ns: string;
  const deployment = (name: string): Deployment => ({
    metadata: { namespace: ns, name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            { name: 'app', image: 'nginx:1' },
            { name: 'sidecar', image: 'busybox:1' },
          ],
        },
      },
    },
  });
  before(async () => {
    ns = await namespace('patches');
  });

  test('merge, strategic and JSON patch', async () => {
    await client.create(Deployments, deployment('web'));
    const key = { namespace: ns, name: 'web' };

    const strategic = await client.patch(Deployments, key, {
      type: 'strategic',
      body: { spec: { template: { spec: { containers: [{ name: 'app', image: 'nginx:2' }] } } } },
    });
    const containers = strategic.spec?.template.spec?.containers ?? [];
    assert.deepEqual(
      containers.map((c) => `${c.name}=${c.image}`),
      ['app=nginx:2', 'sidecar=busybox:1'],
      'strategic merge merges lists by name',
    );

    const merged = await client.patch(Deployments, key, {
      type: 'merge',
      body: {
        metadata: { labels: { tier: 'web' } },
        spec: { template: { spec: { containers: [{ name: 'app', image: 'nginx:3' }] } } },
      },
    });
    assert.equal(merged.metadata.labels?.tier, 'web');
    assert.deepEqual(
      merged.spec?.template.spec?.containers.map((c) => c.name),
      ['app'],
      'JSON merge patch replaces lists',
    );

    const json = await client.patch(Deployments, key, {
      type: 'json',
      body: [
        { op: 'test', path: '/spec/replicas', value: 1 },
        { op: 'replace', path: '/spec/replicas', value: 3 },
        { op: 'remove', path: '/metadata/labels/tier' },
      ],
    });
    assert.equal(json.spec?.replicas, 3);
    assert.equal(json.metadata.labels?.tier, undefined);

    await assert.rejects(
      client.patch(Deployments, key, {
        type: 'json',
        body: [{ op: 'test', path: '/spec/replicas', value: 99 }],
      }),
      ApiError,
    );
    await assert.rejects(
      client.patch(Deployments, { namespace: ns, name: 'nope' }, { type: 'merge', body: {} }),
      NotFoundError,
    );
  });

  test('server-side apply: field managers, conflicts and force', async () => {
    const key = { namespace: ns, name: 'applied' };
    const alpha = await client.patch(
      ConfigMaps,
      key,
      {
        type: 'apply',
        body: { metadata: { name: 'applied', namespace: ns }, data: { owned: 'alpha', a: '1' } } as ConfigMap,
      },
      { fieldManager: 'alpha' },
    );
    assert.deepEqual(alpha.data, { owned: 'alpha', a: '1' });
    assert.ok(alpha.metadata.managedFields?.some((f) => f.manager === 'alpha' && f.operation === 'Apply'));

    // apiVersion/kind/name are filled in from the resource and key.
    const beta = { type: 'apply' as const, body: { metadata: {}, data: { owned: 'beta' } } as ConfigMap };
    await assert.rejects(client.patch(ConfigMaps, key, beta, { fieldManager: 'beta' }), (err: unknown) => {
      assert.ok(err instanceof ConflictError);
      assert.ok(
        err.status.details?.causes?.some((c) => c.field === '.data.owned'),
        JSON.stringify(err.status),
      );
      return true;
    });
    const forced = await client.patch(ConfigMaps, key, { ...beta, force: true }, { fieldManager: 'beta' });
    assert.deepEqual(forced.data, { owned: 'beta', a: '1' });
    assert.ok(forced.metadata.managedFields?.some((f) => f.manager === 'beta' && f.operation === 'Apply'));

    // The client's default field manager applies too.
    const mine = await client.patch(ConfigMaps, key, {
      type: 'apply',
      body: { metadata: {}, data: { mine: 'x' } } as ConfigMap,
    });
    assert.ok(mine.metadata.managedFields?.some((f) => f.manager === 'opkit-test'));
  });
});

describe('status subresource', () => {
  test('Deployment: updateStatus and patchStatus touch only status', async () => {
    const ns = await namespace('status');
    const created = await client.create(Deployments, {
      metadata: { namespace: ns, name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'app', image: 'nginx' }] },
        },
      },
    });
    const withStatus = await client.updateStatus(Deployments, {
      ...created,
      spec: { ...created.spec!, replicas: 5 },
      status: {
        observedGeneration: 1,
        replicas: 1,
        readyReplicas: 1,
        availableReplicas: 1,
        updatedReplicas: 1,
      },
    });
    assert.equal(withStatus.status?.readyReplicas, 1);
    assert.equal(withStatus.spec?.replicas, 1, 'spec changes through /status are ignored');
    assert.equal(withStatus.metadata.generation, created.metadata.generation);

    const patched = await client.patchStatus(
      Deployments,
      { namespace: ns, name: 'web' },
      { type: 'merge', body: { status: { observedGeneration: 2 } } },
    );
    assert.equal(patched.status?.observedGeneration, 2);
    assert.equal(patched.status?.readyReplicas, 1);
  });

  test('custom resource: discovery, isServed and the status subresource', async () => {
    type Widget = KubeObject & { spec?: { size?: number }; status?: { phase?: string } };
    const Widgets = defineResource<Widget>({
      group: 'test.opkit.dev',
      version: 'v1',
      kind: 'Widget',
      plural: 'widgets',
      namespaced: true,
    });
    assert.equal(await client.isServed(Widgets), false);
    await client.create(CustomResourceDefinitions, {
      metadata: { name: 'widgets.test.opkit.dev' },
      spec: {
        group: 'test.opkit.dev',
        names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
        scope: 'Namespaced',
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            subresources: { status: {} },
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {
                  spec: { type: 'object', properties: { size: { type: 'integer' } } },
                  status: { type: 'object', properties: { phase: { type: 'string' } } },
                },
              },
            },
          },
        ],
      },
    });
    await client.waitForServed(Widgets, { timeoutMs: 30_000 });
    assert.equal(await client.isServed(Widgets), true);
    const list = await client.discover('test.opkit.dev/v1');
    assert.ok(list.resources.some((r) => r.name === 'widgets/status'));

    const ns = await namespace('widgets');
    // The CRD may be served a moment before its REST storage accepts writes everywhere: retry NotFound.
    let w: Widget | undefined;
    for (let i = 0; i < 50 && !w; i++) {
      try {
        w = await client.create(Widgets, { metadata: { namespace: ns, name: 'w1' }, spec: { size: 1 } });
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    assert.ok(w);
    assert.equal(w.apiVersion, 'test.opkit.dev/v1');
    const st = await client.patchStatus(
      Widgets,
      { namespace: ns, name: 'w1' },
      { type: 'merge', body: { status: { phase: 'Ready' }, spec: { size: 9 } } },
    );
    assert.equal(st.status?.phase, 'Ready');
    assert.equal(st.spec?.size, 1);
    const st2 = await client.updateStatus(Widgets, { ...st, status: { phase: 'Done' } });
    assert.equal(st2.status?.phase, 'Done');
    assert.equal(st2.metadata.generation, w.metadata.generation);
    const applied = await client.patchStatus(
      Widgets,
      { namespace: ns, name: 'w1' },
      { type: 'apply', body: { metadata: {}, status: { phase: 'Applied' } } as Widget, force: true },
    );
    assert.equal(applied.status?.phase, 'Applied');
  });
});

describe('watch', () => {
  let ns: string;
  before(async () => {
    ns = await namespace('watches');
  });

  test('ADDED, MODIFIED, DELETED in order; ends at timeoutSeconds', async () => {
    const rv = (await client.list(ConfigMaps, { namespace: ns })).metadata.resourceVersion;
    const ac = new AbortController();
    const events: WatchEvent<ConfigMap>[] = [];
    const done = (async () => {
      for await (const ev of client.watch(ConfigMaps, {
        namespace: ns,
        resourceVersion: rv,
        allowWatchBookmarks: true,
        signal: ac.signal,
      })) {
        if (ev.type === 'BOOKMARK') continue;
        events.push(ev);
        if (events.length === 3) ac.abort();
      }
    })();
    const c = await client.create(ConfigMaps, cm(ns, 'w', { v: '1' }));
    await client.update(ConfigMaps, { ...c, data: { v: '2' } });
    await client.delete(ConfigMaps, { namespace: ns, name: 'w' });
    await done;
    assert.deepEqual(
      events.map((e) => `${e.type}:${e.object.metadata.name}:${e.object.data?.v}`),
      ['ADDED:w:1', 'MODIFIED:w:2', 'DELETED:w:2'],
    );
    assert.equal(events[0]?.object.kind, 'ConfigMap');

    // The server closes the stream after timeoutSeconds: the iterable simply ends.
    const t0 = Date.now();
    for await (const _ of client.watch(ConfigMaps, {
      namespace: ns,
      resourceVersion: rv,
      timeoutSeconds: 1,
    })) {
      // replayed events, if any
    }
    assert.ok(Date.now() - t0 < 10_000);
  });

  test('label and field selectors, and sendInitialEvents', async () => {
    await client.create(ConfigMaps, { metadata: { namespace: ns, name: 'sel-a', labels: { pick: 'yes' } } });
    await client.create(ConfigMaps, { metadata: { namespace: ns, name: 'sel-b', labels: { pick: 'no' } } });
    const firstOf = async (opts: Parameters<RestClient['watch']>[1]) => {
      const ac = new AbortController();
      const seen: WatchEvent<ConfigMap>[] = [];
      for await (const ev of client.watch(ConfigMaps, { ...opts, namespace: ns, signal: ac.signal })) {
        seen.push(ev as WatchEvent<ConfigMap>);
        if (ev.type === 'BOOKMARK' || !opts?.sendInitialEvents) break;
      }
      ac.abort();
      return seen;
    };
    const byLabel = await firstOf({ labelSelector: 'pick=yes' });
    assert.equal(byLabel[0]?.object.metadata.name, 'sel-a');
    const byField = await firstOf({ fieldSelector: 'metadata.name=sel-b' });
    assert.equal(byField[0]?.object.metadata.name, 'sel-b');

    try {
      const initial = await firstOf({ sendInitialEvents: true, labelSelector: 'pick' });
      assert.deepEqual(
        initial.map((e) => e.type),
        ['ADDED', 'ADDED', 'BOOKMARK'],
      );
      assert.equal(initial[2]?.object.metadata.annotations?.['k8s.io/initial-events-end'], 'true');
    } catch (err) {
      // Older servers without the WatchList feature reject sendInitialEvents.
      if (!(err instanceof ApiError)) throw err;
      process.stderr.write(`# sendInitialEvents not supported by this server: ${err.message}\n`);
    }
  });

  test('a compacted resourceVersion surfaces GoneError (watch, list, continue)', async () => {
    // PodTemplates skip the watch cache (see before()), so requests reach etcd and see the compaction.
    const tpl = (name: string): PodTemplate => ({
      metadata: { namespace: ns, name },
      template: { spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
    for (let i = 0; i < 12; i++) await client.create(PodTemplates, tpl(`t-${i}`));
    const first = await client.list(PodTemplates, { namespace: ns, limit: 5, continue: undefined });
    assert.equal(first.items.length, 12);
    const old = first.metadata.resourceVersion;
    assert.ok(old);
    const page = await client.transport.request<{ metadata: { continue?: string } }>({
      method: 'GET',
      path: `/api/v1/namespaces/${ns}/podtemplates`,
      query: { limit: 5 },
    });
    for (let i = 12; i < 15; i++) await client.create(PodTemplates, tpl(`t-${i}`));
    await cp.compact();

    await assert.rejects(async () => {
      for await (const _ of client.watch(PodTemplates, {
        namespace: ns,
        resourceVersion: old,
        timeoutSeconds: 10,
      })) {
        assert.fail('no event expected before the error');
      }
    }, GoneError);
    await assert.rejects(
      client.list(PodTemplates, { namespace: ns, resourceVersion: old, resourceVersionMatch: 'Exact' }),
      GoneError,
    );
    await assert.rejects(
      client.list(PodTemplates, { namespace: ns, limit: 5, continue: page.metadata.continue }),
      GoneError,
    );
    // Paginating lists are not affected: every page is read at the current revision.
    assert.equal((await client.list(PodTemplates, { namespace: ns, limit: 5 })).items.length, 15);
  });

  test('2000 open/abort cycles leak no fd, socket or listener', { timeout: 300_000 }, async () => {
    await client.create(ConfigMaps, cm(ns, 'target'));
    const shared = new AbortController();
    const cycle = async (i: number) => {
      const ac = new AbortController();
      const onShared = () => ac.abort();
      shared.signal.addEventListener('abort', onShared, { once: true });
      try {
        const stream = client.watch(ConfigMaps, {
          namespace: ns,
          fieldSelector: 'metadata.name=target',
          signal: i % 3 === 2 ? shared.signal : ac.signal,
        });
        for await (const ev of stream) {
          assert.equal(ev.type, 'ADDED');
          // Three ways to stop: abort while iterating, break, abort before the first event.
          if (i % 3 === 0) ac.abort();
          else break;
        }
      } finally {
        shared.signal.removeEventListener('abort', onShared);
      }
    };
    const abortEarly = async () => {
      const ac = new AbortController();
      const it = client.watch(ConfigMaps, { namespace: ns, signal: ac.signal })[Symbol.asyncIterator]();
      const next = it.next();
      setTimeout(() => ac.abort(), 1);
      // Over HTTP/2 (a stream on an open session) the first event can arrive within the 1 ms: then,
      // once the abort happened, the iteration ends (no event decoded before it is delivered after it).
      const first = await next;
      if (!first.done) {
        if (!ac.signal.aborted)
          await new Promise((r) => ac.signal.addEventListener('abort', r, { once: true }));
        assert.equal((await it.next()).done, true);
      }
    };

    for (let i = 0; i < 50; i++) await cycle(i);
    await new Promise((r) => setTimeout(r, 200));
    const base = openFds();
    const t0 = Date.now();
    for (let i = 0; i < 2000; i++) {
      if (i % 100 === 99) await abortEarly();
      else await cycle(i);
    }
    const elapsed = Date.now() - t0;
    // Let destroyed sockets finish closing.
    let now = openFds();
    for (let i = 0; i < 50 && (now.total > base.total + 3 || now.sockets > base.sockets + 3); i++) {
      await new Promise((r) => setTimeout(r, 100));
      now = openFds();
    }
    process.stderr.write(
      `# 2000 watch cycles in ${elapsed} ms; fds ${base.total} -> ${now.total}, sockets ${base.sockets} -> ${now.sockets}\n`,
    );
    assert.ok(now.total <= base.total + 3, `fds ${base.total} -> ${now.total}`);
    assert.ok(now.sockets <= base.sockets + 3, `sockets ${base.sockets} -> ${now.sockets}`);
    assert.equal(getEventListeners(shared.signal, 'abort').length, 0);

    // Plain requests reuse keep-alive connections.
    for (let i = 0; i < 200; i++) await client.get(ConfigMaps, { namespace: ns, name: 'target' });
    const afterGets = openFds();
    assert.ok(afterGets.sockets <= now.sockets + 1, `sockets ${now.sockets} -> ${afterGets.sockets}`);
  });
});

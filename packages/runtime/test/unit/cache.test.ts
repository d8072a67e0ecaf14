import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps, type Namespace, Namespaces, Secrets } from '../../src/api/builtin.ts';
import { Cache, CacheNotStartedError, forResource, NamespaceNotCachedError } from '../../src/cache/cache.ts';
import { FakeClient } from '../../src/testing/fake-client.ts';
import { ScriptedClient } from '../../src/testing/index.ts';

const cm = (ns: string, name: string, labels: Record<string, string> = {}, ownerUID?: string): ConfigMap => ({
  metadata: {
    namespace: ns,
    name,
    labels,
    ...(ownerUID
      ? { ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'o', uid: ownerUID, controller: true }] }
      : {}),
  },
  data: { v: name },
});

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
function signal(): AbortSignal {
  const ac = new AbortController();
  cleanups.push(() => ac.abort());
  return ac.signal;
}
async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function seeded(): Promise<FakeClient> {
  const client = new FakeClient();
  await client.create(ConfigMaps, cm('a', 'one', { app: 'web', tier: 'front' }, 'owner-1'));
  await client.create(ConfigMaps, cm('a', 'two', { app: 'db' }, 'owner-1'));
  await client.create(ConfigMaps, cm('b', 'three', { app: 'web' }, 'owner-2'));
  await client.create(Namespaces, { metadata: { name: 'a' } } as Namespace);
  return client;
}

describe('Cache', () => {
  it('throws CacheNotStartedError for reads before start', async () => {
    const cache = new Cache(new FakeClient());
    await assert.rejects(cache.get(ConfigMaps, { namespace: 'a', name: 'x' }), CacheNotStartedError);
    await assert.rejects(cache.list(ConfigMaps), CacheNotStartedError);
    assert.equal(cache.hasSynced(), false);
  });

  it('starts informers lazily on first read and waits for their sync', async () => {
    const client = await seeded();
    const cache = new Cache(client);
    void cache.start(signal());
    assert.equal(client.actions({ verb: ['list', 'watch'] }).length, 0, 'nothing read before the first read');
    const one = await cache.get(ConfigMaps, { namespace: 'a', name: 'one' });
    assert.equal(one?.data?.v, 'one');
    assert.ok(Object.isFrozen(one));
    assert.equal(one?.metadata.managedFields, undefined);
    assert.equal(await cache.get(ConfigMaps, { namespace: 'a', name: 'missing' }), undefined);
    assert.equal((await cache.get(Namespaces, { name: 'a' }))?.metadata.name, 'a');
    // one informer (one watch streaming the initial state, no LIST) per resource, shared by all reads
    await cache.list(ConfigMaps);
    assert.equal(client.actions({ verb: 'watch', resource: ConfigMaps }).length, 1);
    assert.equal(client.actions({ verb: 'list' }).length, 0, 'watchList by default: no LIST');
    assert.equal(cache.hasSynced(), true);
    assert.equal(cache.getInformer(ConfigMaps), cache.getInformer(ConfigMaps));
  });

  it('lists by namespace, label selector, field selector and index', async () => {
    const cache = new Cache(await seeded());
    void cache.start(signal());
    const names = async (p: Promise<readonly { metadata: { name?: string } }[]>) =>
      (await p).map((o) => o.metadata.name).sort();
    assert.deepEqual(await names(cache.list(ConfigMaps)), ['one', 'three', 'two']);
    assert.deepEqual(await names(cache.list(ConfigMaps, { namespace: 'a' })), ['one', 'two']);
    assert.deepEqual(await names(cache.list(ConfigMaps, { labelSelector: 'app=web' })), ['one', 'three']);
    assert.deepEqual(
      await names(cache.list(ConfigMaps, { namespace: 'a', labelSelector: 'app in (web,db),!tier' })),
      ['two'],
    );
    assert.deepEqual(await names(cache.list(ConfigMaps, { fieldSelector: 'metadata.name!=one' })), [
      'three',
      'two',
    ]);
    assert.deepEqual(
      await names(cache.list(ConfigMaps, { index: { name: 'controllerUID', value: 'owner-1' } })),
      ['one', 'two'],
    );
  });

  it('sees writes once the watch delivers them', async () => {
    const client = await seeded();
    const cache = new Cache(client);
    void cache.start(signal());
    await cache.list(ConfigMaps);
    await client.create(ConfigMaps, cm('a', 'four'));
    const informer = cache.getInformer(ConfigMaps);
    await until(() => informer.store.has('a/four'), 'the new object in the cache');
    await client.delete(ConfigMaps, { namespace: 'a', name: 'one' });
    await until(() => !informer.store.has('a/one'), 'the deletion in the cache');
  });

  it('applies per-resource namespace scope, selectors and transform', async () => {
    const client = await seeded();
    const cache = new Cache(client, {
      byResource: [
        forResource(ConfigMaps, {
          namespace: 'a',
          labelSelector: 'app=web',
          transform: (o) => ({ ...o, data: { slim: 'yes' } }),
        }),
      ],
    });
    void cache.start(signal());
    const all = await cache.list(ConfigMaps);
    assert.deepEqual(
      all.map((o) => o.metadata.name),
      ['one'],
    );
    assert.deepEqual(all[0]!.data, { slim: 'yes' });
    const watchCall = client.actions({ verb: 'watch', resource: ConfigMaps })[0]!;
    assert.equal(watchCall.namespace, 'a', 'the namespace restriction is sent to the API');
    await assert.rejects(cache.get(ConfigMaps, { namespace: 'b', name: 'three' }), NamespaceNotCachedError);
    await assert.rejects(cache.list(ConfigMaps, { namespace: 'b' }), NamespaceNotCachedError);
    // Cluster-scoped resources ignore the namespace scope.
    assert.equal((await cache.list(Namespaces)).length, 1);
  });

  it('with watchList off, lists (page by page) with the namespace and selectors, then watches', async () => {
    const client = await seeded();
    const cache = new Cache(client, {
      watchList: false,
      byResource: [forResource(ConfigMaps, { namespace: 'a', labelSelector: 'app=web' })],
    });
    void cache.start(signal());
    assert.deepEqual(
      (await cache.list(ConfigMaps)).map((o) => o.metadata.name),
      ['one'],
    );
    const lists = client.actions({ verb: 'list', resource: ConfigMaps });
    assert.equal(lists.length, 1);
    assert.equal(lists[0]!.namespace, 'a', 'the namespace restriction is sent to the API');
    await until(() => client.actions({ verb: 'watch', resource: ConfigMaps }).length === 1, 'the watch');
    await client.create(ConfigMaps, cm('a', 'four', { app: 'web' }));
    const informer = cache.getInformer(ConfigMaps);
    await until(() => informer.store.has('a/four'), 'the new object in the cache');
  });

  it('applies a cache-wide default namespace and transform', async () => {
    const client = await seeded();
    const cache = new Cache(client, {
      namespace: 'b',
      transform: (o) => ({ ...o, metadata: { ...o.metadata, labels: {} } }),
    });
    void cache.start(signal());
    const items = await cache.list(ConfigMaps);
    assert.deepEqual(
      items.map((o) => o.metadata.name),
      ['three'],
    );
    assert.deepEqual(items[0]!.metadata.labels, {});
  });

  it('configure() only before the informer exists', async () => {
    const cache = new Cache(await seeded());
    cache.configure(ConfigMaps, { namespace: 'a' });
    assert.equal(cache.optionsFor(ConfigMaps).namespace, 'a');
    cache.getInformer(ConfigMaps);
    assert.throws(() => cache.configure(ConfigMaps, {}), /already exists/);
  });

  it('shares one informer per resource and selector', () => {
    const cache = new Cache(new FakeClient());
    const a = cache.getInformer(ConfigMaps, { labelSelector: 'x=1' });
    assert.equal(cache.getInformer(ConfigMaps, { labelSelector: 'x=1' }), a);
    assert.notEqual(cache.getInformer(ConfigMaps, { labelSelector: 'x=2' }), a);
    assert.notEqual(cache.getInformer(ConfigMaps), a);
    assert.notEqual(cache.getInformer(Secrets), cache.getInformer(ConfigMaps));
  });

  it('shares one informer between equivalent selectors, and rejects invalid ones', () => {
    const cache = new Cache(new FakeClient());
    const a = cache.getInformer(ConfigMaps, { labelSelector: 'x=1,y' });
    assert.equal(cache.getInformer(ConfigMaps, { labelSelector: 'y, x==1' }), a);
    assert.equal(cache.getInformer(ConfigMaps, { labelSelector: 'x in (1),y' }), a);
    assert.throws(() => cache.getInformer(ConfigMaps, { labelSelector: 'Example.com/x=1' }), /prefix/);
  });

  it("answers a read with the selectors of a watch from that watch's informer", async () => {
    const client = await seeded();
    // The default informer of ConfigMaps is restricted to namespace "b"; a watch's informer holds the
    // app=web ConfigMaps of every namespace.
    const cache = new Cache(client, { namespace: 'b' });
    const watched = cache.getInformer(ConfigMaps, { labelSelector: 'app=web' });
    void cache.start(signal());
    const inA = await cache.list(ConfigMaps, { namespace: 'a', labelSelector: 'app==web' });
    assert.deepEqual(
      inA.map((o) => o.metadata.name),
      ['one'],
    );
    const inB = await cache.list(ConfigMaps, { labelSelector: 'app=web' });
    assert.deepEqual(
      inB.map((o) => o.metadata.name),
      ['three'],
      "without a namespace: the cache's namespace, as before",
    );
    const one = await cache.get(ConfigMaps, { namespace: 'a', name: 'one' }, { labelSelector: 'app=web' });
    assert.equal(one?.metadata.name, 'one');
    assert.equal(
      await cache.get(ConfigMaps, { namespace: 'a', name: 'two' }, { labelSelector: 'app=web' }),
      undefined,
    );
    assert.ok(watched.hasSynced());
    const watches = client.actions({ verb: 'watch' }).filter((a) => a.resource === ConfigMaps);
    assert.equal(watches.length, 1, "only the watch's informer watched: the reads did not start another");
    // Other selectors: the resource's informer (namespace "b") filters in memory.
    await assert.rejects(
      cache.list(ConfigMaps, { namespace: 'a', labelSelector: 'app=db' }),
      NamespaceNotCachedError,
    );
    const db = await cache.get(ConfigMaps, { namespace: 'b', name: 'three' }, { labelSelector: 'app=db' });
    assert.equal(db, undefined, 'a get with selectors returns only a matching object');
    assert.equal(
      (await cache.get(ConfigMaps, { namespace: 'b', name: 'three' }, { labelSelector: 'app' }))?.metadata
        .name,
      'three',
    );
  });

  it('waitForCacheSync waits for start and for every informer, and returns false on abort', async () => {
    const client = new ScriptedClient();
    // LIST pages: the scripted answers are lists.
    const cache = new Cache(client, { watchList: false });
    cache.getInformer(ConfigMaps);
    const ac = new AbortController();
    const early = cache.waitForCacheSync(ac.signal);
    ac.abort();
    assert.equal(await early, false);

    const sync = cache.waitForCacheSync(signal());
    void cache.start(signal());
    cache.getInformer(Secrets);
    client.queueList(ConfigMaps, { items: [], resourceVersion: '1' });
    await until(() => cache.getInformer(ConfigMaps).hasSynced(), 'configmaps synced');
    assert.equal(cache.hasSynced(), false, 'secrets not yet');
    client.queueList(Secrets, { items: [], resourceVersion: '1' });
    assert.equal(await sync, true);
    assert.equal(cache.hasSynced(), true);
  });

  it('a read aborted while waiting for sync rejects with the abort reason', async () => {
    const cache = new Cache(new ScriptedClient());
    void cache.start(signal());
    const ac = new AbortController();
    const read = cache.get(ConfigMaps, { namespace: 'a', name: 'x' }, { signal: ac.signal });
    ac.abort(new Error('gave up'));
    await assert.rejects(read, /gave up/);
  });

  it('start() resolves after the signal aborts and all informers stopped', async () => {
    const client = await seeded();
    const cache = new Cache(client);
    const ac = new AbortController();
    const running = cache.start(ac.signal);
    await cache.list(ConfigMaps);
    await cache.list(Namespaces);
    assert.equal(client.activeWatches(), 2);
    ac.abort();
    await running;
    assert.equal(client.activeWatches(), 0);
  });
});

/**
 * Watcher / reflector / informer against a real kube-apiserver (etcd + kube-apiserver from
 * @opkit/controlplane): ordering, an API server restart with writes during the outage, etcd compaction
 * forcing 410 Gone, and no spurious events after reconnects and relists.
 *
 * A GatedClient wraps the real client to (a) count list/watch requests, (b) hold new watch requests
 * at a gate, so that a test can keep the informer disconnected while it changes things, and (c) on
 * request, answer the next watch with 410 Gone as the API server does for a resourceVersion it no
 * longer has. It alters no response of the server's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { type ConfigMap, ConfigMaps, Namespaces } from '../../src/api/builtin.ts';
import type { KubeObject, ObjectKey, ObjectList, WatchEvent } from '../../src/api/object.ts';
import type { Resource } from '../../src/api/resource.ts';
import { type InformerErrorContext, SharedInformer } from '../../src/cache/informer.ts';
import type { ResourceEventHandler } from '../../src/cache/reflector.ts';
import type { DeepReadonly } from '../../src/cache/store.ts';
import { type WatcherEvent, watcher } from '../../src/cache/watcher.ts';
import {
  AlreadyExistsError,
  type Client,
  ConflictError,
  createClient,
  type DeleteOptions,
  GoneError,
  type ListOptions,
  loadConfig,
  NotFoundError,
  type Patch,
  type RestClient,
  type WatchOptions,
  type WriteOptions,
} from '../../src/client/index.ts';
import { goneError } from '../../src/testing/errors.ts';

class GatedClient implements Client {
  readonly inner: Client;
  lists = 0;
  watches = 0;
  /** Watch requests currently held at the gate. */
  held = 0;
  #goneNext = false;
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;

  constructor(inner: Client) {
    this.inner = inner;
  }
  get fieldManager(): string {
    return this.inner.fieldManager;
  }
  closeGate(): void {
    if (this.#gate) return;
    this.#gate = new Promise((resolve) => {
      this.#open = resolve;
    });
  }
  openGate(): void {
    this.#open?.();
    this.#gate = undefined;
    this.#open = undefined;
  }
  /** The next watch request fails with 410 Gone (too old resourceVersion), as after etcd compaction. */
  goneOnNextWatch(): void {
    this.#goneNext = true;
  }
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: { signal?: AbortSignal }): Promise<T> {
    return this.inner.get(res, key, opts);
  }
  list<T extends KubeObject>(res: Resource<T>, opts?: ListOptions): Promise<ObjectList<T>> {
    this.lists++;
    return this.inner.list(res, opts);
  }
  create<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.inner.create(res, obj, opts);
  }
  update<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.inner.update(res, obj, opts);
  }
  patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    return this.inner.patch(res, key, patch, opts);
  }
  delete<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: DeleteOptions): Promise<void> {
    return this.inner.delete(res, key, opts);
  }
  updateStatus<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    return this.inner.updateStatus(res, obj, opts);
  }
  patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    return this.inner.patchStatus(res, key, patch, opts);
  }
  async *watch<T extends KubeObject>(
    res: Resource<T>,
    opts: WatchOptions = {},
  ): AsyncGenerator<WatchEvent<T>> {
    this.watches++;
    const gate = this.#gate;
    if (gate) {
      this.held++;
      try {
        await Promise.race([
          gate,
          new Promise<void>((_, reject) => {
            if (opts.signal?.aborted) reject(opts.signal.reason);
            opts.signal?.addEventListener('abort', () => reject(opts.signal?.reason), { once: true });
          }),
        ]);
      } finally {
        this.held--;
      }
    }
    if (this.#goneNext) {
      this.#goneNext = false;
      throw goneError();
    }
    yield* this.inner.watch(res, opts);
  }
}

const cm = (ns: string, name: string, data: Record<string, string> = {}): ConfigMap => ({
  metadata: { namespace: ns, name },
  data,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Handler that records events and rebuilds name -> resourceVersion purely from them. */
function tracker() {
  const events: string[] = [];
  const state = new Map<string, string>();
  const handler: ResourceEventHandler<ConfigMap> = {
    onAdd: (o) => {
      events.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`);
      state.set(o.metadata.name!, o.metadata.resourceVersion!);
    },
    onUpdate: (a, b) => {
      events.push(`update ${b.metadata.name}@${a.metadata.resourceVersion}->${b.metadata.resourceVersion}`);
      state.set(b.metadata.name!, b.metadata.resourceVersion!);
    },
    onDelete: (o) => {
      events.push(`delete ${o.metadata.name}@${o.metadata.resourceVersion}`);
      state.delete(o.metadata.name!);
    },
  };
  return { events, state, handler };
}

const versions = (items: readonly (ConfigMap | DeepReadonly<ConfigMap>)[]) =>
  new Map(items.map((o) => [o.metadata.name!, o.metadata.resourceVersion!]));

/** Waits until the informer's store equals a fresh list (objects compared in full, sans managedFields). */
async function assertConverges(
  client: Client,
  informer: SharedInformer<ConfigMap>,
  ns: string,
): Promise<ConfigMap[]> {
  let fresh: ConfigMap[] = [];
  const strip = (o: ConfigMap | DeepReadonly<ConfigMap>) => {
    const c = structuredClone(o) as ConfigMap;
    delete c.metadata.managedFields;
    c.apiVersion ??= 'v1';
    c.kind ??= 'ConfigMap';
    return c;
  };
  await until(async () => {
    fresh = (await client.list(ConfigMaps, { namespace: ns })).items;
    const cached = informer.store.listByNamespace(ns);
    return (
      cached.length === fresh.length &&
      fresh.every((o) => {
        const c = informer.store.get({ namespace: ns, name: o.metadata.name! });
        return c !== undefined && c.metadata.resourceVersion === o.metadata.resourceVersion;
      })
    );
  }, 'the store to equal a fresh list');
  const byName = (a: ConfigMap, b: ConfigMap) => (a.metadata.name! < b.metadata.name! ? -1 : 1);
  assert.deepEqual(informer.store.listByNamespace(ns).map(strip).sort(byName), fresh.map(strip).sort(byName));
  return fresh;
}

/** Retries a write across an API server outage; ambiguous outcomes (it may have landed) are accepted. */
async function resilient(write: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write();
      return;
    } catch (err) {
      if (err instanceof AlreadyExistsError || err instanceof NotFoundError || err instanceof ConflictError)
        return;
      if (attempt > 300) throw err;
      await sleep(50);
    }
  }
}

describe('reflector against a real API server (watch cache on)', { timeout: 240_000 }, () => {
  let cp: ControlPlane;
  let rest: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'reflector-test' });
    },
    { timeout: 180_000 },
  );
  after(async () => {
    rest?.close();
    await cp?.stop();
  });

  test('the watcher delivers list then events in resourceVersion order', async () => {
    const ns = 'order';
    await rest.create(Namespaces, { metadata: { name: ns } });
    await rest.create(ConfigMaps, cm(ns, 'pre-1'));
    await rest.create(ConfigMaps, cm(ns, 'pre-2'));
    const ac = new AbortController();
    const got: string[] = [];
    let synced!: () => void;
    const syncedP = new Promise<void>((r) => {
      synced = r;
    });
    const show = (ev: WatcherEvent<ConfigMap>) =>
      ev.type === 'init' || ev.type === 'initDone'
        ? ev.type
        : `${ev.type} ${ev.object.metadata.name}@${ev.object.metadata.resourceVersion}`;
    const consuming = (async () => {
      for await (const ev of watcher(rest, ConfigMaps, { namespace: ns, signal: ac.signal, pageSize: 1 })) {
        got.push(show(ev));
        if (ev.type === 'initDone') synced();
      }
    })();
    await syncedP;
    assert.deepEqual(got.slice(0, 1), ['init']);
    assert.deepEqual(
      got
        .slice(1, 3)
        .map((s) => s.split('@')[0])
        .sort(),
      ['initApply pre-1', 'initApply pre-2'],
    );
    assert.equal(got[3], 'initDone');
    const expected: string[] = [];
    for (let i = 0; i < 10; i++) {
      const c = await rest.create(ConfigMaps, cm(ns, `c${i}`, { i: String(i) }));
      expected.push(`apply c${i}@${c.metadata.resourceVersion}`);
      if (i % 3 === 0) {
        const u = await rest.patch(
          ConfigMaps,
          { namespace: ns, name: `c${i}` },
          { type: 'merge', body: { data: { i: `${i}-updated` } } },
        );
        expected.push(`apply c${i}@${u.metadata.resourceVersion}`);
      }
      if (i % 4 === 0) {
        await rest.delete(ConfigMaps, { namespace: ns, name: `c${i}` });
        expected.push(`delete c${i}`);
      }
    }
    await until(() => got.length >= 4 + expected.length, 'all events');
    const live = got.slice(4).map((s) => (s.startsWith('delete') ? s.split('@')[0]! : s));
    assert.deepEqual(live, expected);
    const rvs = got.slice(4).map((s) => Number(s.split('@')[1]));
    assert.deepEqual(
      rvs,
      [...rvs].sort((a, b) => a - b),
      'resourceVersions increase',
    );
    ac.abort();
    await consuming;
  });

  test('API server restarted mid-watch, writes during the outage: store converges, no final state lost', async () => {
    const ns = 'restart';
    await rest.create(Namespaces, { metadata: { name: ns } });
    for (let i = 0; i < 10; i++) await rest.create(ConfigMaps, cm(ns, `o${i}`, { v: '0' }));
    const gated = new GatedClient(rest);
    const errors: unknown[] = [];
    const informer = new SharedInformer(gated, ConfigMaps, {
      namespace: ns,
      backoff: { initialMs: 100, maxMs: 1000 },
      onError: (err) => errors.push(err),
    });
    const t = tracker();
    informer.addEventHandler(t.handler);
    const ac = new AbortController();
    const running = informer.start(ac.signal);
    assert.equal(await informer.waitForSync(), true);
    await until(() => gated.watches === 1 && rest !== undefined, 'the watch to open');

    // The informer stays disconnected from the restart until the gate opens again.
    gated.closeGate();
    let writes = 0;
    let stopWriting = false;
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const writer = (async () => {
      while (!stopWriting) {
        const name = `o${rand(20)}`;
        const op = rand(3);
        if (op === 0) await resilient(() => rest.create(ConfigMaps, cm(ns, name, { v: String(writes) })));
        else if (op === 1)
          await resilient(() =>
            rest.patch(
              ConfigMaps,
              { namespace: ns, name },
              { type: 'merge', body: { data: { v: String(writes) } } },
            ),
          );
        else await resilient(() => rest.delete(ConfigMaps, { namespace: ns, name }));
        writes++;
        await sleep(5);
      }
    })();
    await sleep(200);
    await cp.restartApiServer({ downtimeMs: 500 });
    const afterRestart = writes;
    await until(() => writes >= afterRestart + 20, 'writes after the restart');
    assert.ok(gated.held >= 1, 'the informer is trying to reconnect (held at the gate)');
    gated.openGate(); // reconnect while the writer keeps going
    await until(() => writes >= afterRestart + 40, 'writes while reconnecting');
    stopWriting = true;
    await writer;

    const fresh = await assertConverges(rest, informer, ns);
    assert.deepEqual(t.state, versions(fresh), 'handlers saw every final state (and every deletion)');
    assert.ok(errors.length >= 1, 'the outage was noticed');
    ac.abort();
    await running;
  });

  test('watchList: the initial state streamed through the watch (no LIST), re-streamed across an API server restart', async () => {
    const ns = 'watchlist';
    await rest.create(Namespaces, { metadata: { name: ns } });
    for (let i = 0; i < 25; i++) await rest.create(ConfigMaps, cm(ns, `w${i}`, { v: '0' }));
    const gated = new GatedClient(rest);
    const errors: unknown[] = [];
    // Several informers at once, each streaming its own initial state.
    const informers = [undefined, 'metadata.name=w3', 'metadata.name!=w3'].map(
      (fieldSelector) =>
        new SharedInformer(gated, ConfigMaps, {
          namespace: ns,
          ...(fieldSelector ? { fieldSelector } : {}),
          watchList: true,
          backoff: { initialMs: 100, maxMs: 1000 },
          onError: (err) => errors.push(err),
        }),
    );
    const t = tracker();
    informers[0]!.addEventHandler(t.handler);
    const ac = new AbortController();
    const running = informers.map((i) => i.start(ac.signal));
    for (const i of informers) assert.equal(await i.waitForSync(), true);
    assert.equal(gated.lists, 0, 'no LIST: the watches streamed the initial state');
    assert.equal(informers[0]!.store.listByNamespace(ns).length, 25);
    assert.deepEqual(
      informers[1]!.store.listByNamespace(ns).map((o) => o.metadata.name),
      ['w3'],
    );
    assert.equal(informers[2]!.store.listByNamespace(ns).length, 24);
    assert.equal(errors.length, 0, String(errors[0]));

    await rest.patch(
      ConfigMaps,
      { namespace: ns, name: 'w1' },
      { type: 'merge', body: { data: { v: '1' } } },
    );
    await rest.delete(ConfigMaps, { namespace: ns, name: 'w2' });
    await assertConverges(rest, informers[0]!, ns);

    await cp.restartApiServer({ downtimeMs: 500 });
    await resilient(() => rest.create(ConfigMaps, cm(ns, 'after-restart')));
    await resilient(() =>
      rest.patch(ConfigMaps, { namespace: ns, name: 'w4' }, { type: 'merge', body: { data: { v: '2' } } }),
    );
    const fresh = await assertConverges(rest, informers[0]!, ns);
    assert.deepEqual(t.state, versions(fresh), 'handlers saw every final state (and the deletion)');
    assert.equal(gated.lists, 0, 'still no LIST after the restart');
    ac.abort();
    await Promise.all(running);
  });

  test('after a reconnect (restart, 410, relist) handlers get no spurious events', async () => {
    const ns = 'storm';
    await rest.create(Namespaces, { metadata: { name: ns } });
    for (let i = 0; i < 25; i++) await rest.create(ConfigMaps, cm(ns, `s${i}`));
    const gated = new GatedClient(rest);
    const errors: unknown[] = [];
    const informer = new SharedInformer(gated, ConfigMaps, {
      namespace: ns,
      watchList: false, // counts LISTs (the relist through initial events: the watchList test above)
      backoff: { initialMs: 100, maxMs: 1000 },
      onError: (err) => errors.push(err),
    });
    const t = tracker();
    informer.addEventHandler(t.handler);
    const ac = new AbortController();
    const running = informer.start(ac.signal);
    await informer.waitForSync();
    assert.equal(t.events.length, 25);
    t.events.length = 0;
    const listsBefore = gated.lists;

    // The restart breaks the watch; the re-watch is held at the gate and then answered with 410. (The
    // new API server's watch cache answers 410 by itself only if the revision moved past the informer's
    // last resourceVersion, which a bookmark may already have brought up to date: not a given.)
    gated.closeGate();
    await cp.restartApiServer();
    await until(() => gated.held >= 1, 'the re-watch (held at the gate)');
    gated.goneOnNextWatch();
    gated.openGate();
    await until(() => gated.lists > listsBefore, 'the relist');
    await until(() => informer.hasSynced() && gated.watches >= 3 && gated.held === 0, 'the new watch');
    await sleep(500);
    assert.ok(
      errors.some((e) => e instanceof GoneError),
      'the 410 was seen',
    );
    assert.deepEqual(t.events, [], 'an unchanged relist emits nothing');

    // And a real change after that still arrives exactly once.
    const changed = await rest.patch(
      ConfigMaps,
      { namespace: ns, name: 's3' },
      { type: 'merge', body: { data: { x: '1' } } },
    );
    await until(() => t.events.length === 1, 'the change');
    await sleep(200);
    assert.equal(t.events.length, 1);
    assert.match(t.events[0]!, new RegExp(`^update s3@\\d+->${changed.metadata.resourceVersion}$`));
    ac.abort();
    await running;
  });
});

describe('reflector against a real API server (watch cache off: etcd compaction means 410)', {
  timeout: 240_000,
}, () => {
  let cp: ControlPlane;
  let rest: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver', apiServerArgs: ['--watch-cache=false'] });
      rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'reflector-test' });
    },
    { timeout: 180_000 },
  );
  after(async () => {
    rest?.close();
    await cp?.stop();
  });

  test('compaction forces 410 on re-watch: relist, store right, only real changes emitted', async () => {
    const ns = 'compact';
    await rest.create(Namespaces, { metadata: { name: ns } });
    for (let i = 0; i < 6; i++) await rest.create(ConfigMaps, cm(ns, `k${i}`));
    const gated = new GatedClient(rest);
    const errors: { err: unknown; ctx: InformerErrorContext }[] = [];
    const informer = new SharedInformer(gated, ConfigMaps, {
      namespace: ns,
      watchList: false, // counts LISTs
      // The server ends each watch after 1 s; the next one is then held at the gate.
      watchTimeoutSeconds: 1,
      backoff: { initialMs: 100, maxMs: 1000 },
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    const t = tracker();
    informer.addEventHandler(t.handler);
    const ac = new AbortController();
    const running = informer.start(ac.signal);
    await informer.waitForSync();
    t.events.length = 0;
    const listsBefore = gated.lists;

    gated.closeGate();
    await until(() => gated.held === 1, 'the informer to be between watches');
    const k1 = await rest.patch(
      ConfigMaps,
      { namespace: ns, name: 'k1' },
      { type: 'merge', body: { data: { a: '1' } } },
    );
    await rest.delete(ConfigMaps, { namespace: ns, name: 'k2' });
    const k9 = await rest.create(ConfigMaps, cm(ns, 'k9'));
    await rest.delete(ConfigMaps, { namespace: ns, name: 'k3' });
    const k3 = await rest.create(ConfigMaps, cm(ns, 'k3', { again: 'yes' })); // re-created: new UID
    const k4 = await rest.patch(
      ConfigMaps,
      { namespace: ns, name: 'k4' },
      { type: 'merge', body: { data: { a: '1' } } },
    );
    const k4b = await rest.patch(
      ConfigMaps,
      { namespace: ns, name: 'k4' },
      { type: 'merge', body: { data: { a: '2' } } },
    );
    assert.notEqual(k4.metadata.resourceVersion, k4b.metadata.resourceVersion);
    await cp.compact();
    gated.openGate();

    await until(() => gated.lists > listsBefore, 'the relist');
    const fresh = await assertConverges(rest, informer, ns);
    assert.ok(
      errors.some((e) => e.err instanceof GoneError && 'action' in e.ctx && e.ctx.action === 'relist'),
      'a 410 made the informer relist',
    );
    assert.deepEqual(t.state, versions(fresh), 'handlers saw every final state');
    const normalized = t.events
      .map((e) => e.replace(/^delete (\S+)@\d+$/, 'delete $1').replace(/^update (\S+)@\d+->/, 'update $1->'))
      .sort();
    assert.deepEqual(
      normalized,
      [
        `add k3@${k3.metadata.resourceVersion}`,
        `add k9@${k9.metadata.resourceVersion}`,
        'delete k2',
        'delete k3',
        `update k1->${k1.metadata.resourceVersion}`,
        `update k4->${k4b.metadata.resourceVersion}`,
      ].sort(),
      'one event per real change (intermediate states collapsed by the relist); unchanged objects: none',
    );
    ac.abort();
    await running;
  });
});

describe('reflector against a real API server with the WatchList feature off', { timeout: 240_000 }, () => {
  let cp: ControlPlane;
  let rest: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver', apiServerArgs: ['--feature-gates=WatchList=false'] });
      rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'reflector-test' });
    },
    { timeout: 180_000 },
  );
  after(async () => {
    rest?.close();
    await cp?.stop();
  });

  test('the default (watchList) falls back to LIST once the server refuses sendInitialEvents, and stays there', async () => {
    const ns = 'nowatchlist';
    await rest.create(Namespaces, { metadata: { name: ns } });
    for (let i = 0; i < 5; i++) await rest.create(ConfigMaps, cm(ns, `n${i}`));
    const gated = new GatedClient(rest);
    const errors: { err: unknown; ctx: InformerErrorContext }[] = [];
    const informer = new SharedInformer(gated, ConfigMaps, {
      namespace: ns,
      watchTimeoutSeconds: 1, // re-watches every second: they must not ask for initial events again
      backoff: { initialMs: 100, maxMs: 1000 },
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    const t = tracker();
    informer.addEventHandler(t.handler);
    const ac = new AbortController();
    const running = informer.start(ac.signal);
    assert.equal(await informer.waitForSync(), true);
    assert.equal(informer.store.listByNamespace(ns).length, 5);
    assert.equal(gated.lists, 1, 'listed once, after the refusal');
    const refusals = errors.filter((e) => 'action' in e.ctx && e.ctx.action === 'relist');
    assert.equal(refusals.length, 1, `one refusal reported: ${errors.map((e) => String(e.err)).join('; ')}`);
    await rest.create(ConfigMaps, cm(ns, 'later'));
    await assertConverges(rest, informer, ns);
    await sleep(2500); // two more watch timeouts
    assert.equal(gated.lists, 1, 'no relist: the re-watches resume from the resourceVersion');
    assert.equal(errors.length, 1, String(errors.at(-1)?.err));
    ac.abort();
    await running;
  });
});

import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { ScriptedClient } from '@opkit/runtime/testing';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import { Backoff } from '../../src/cache/backoff.ts';
import type { InformerErrorContext } from '../../src/cache/informer.ts';
import { SharedInformer } from '../../src/cache/informer.ts';
import type { ResourceEventHandler } from '../../src/cache/reflector.ts';
import { MalformedObjectError } from '../../src/cache/reflector.ts';
import type { DeepReadonly } from '../../src/cache/store.ts';
import type { WatchOptions } from '../../src/client/types.ts';
import { FakeClient } from '../../src/testing/fake-client.ts';
import { FakeClock } from '../../src/util/clock.ts';

const cm = (name: string, data: Record<string, string> = {}, labels?: Record<string, string>): ConfigMap => ({
  metadata: { namespace: 'ns', name, ...(labels ? { labels } : {}) },
  data,
});

function recorder(rec: string[], tag = ''): ResourceEventHandler<ConfigMap> {
  const id = (o: DeepReadonly<ConfigMap>) => `${o.metadata.name}`;
  return {
    onAdd: (o, initial) => rec.push(`${tag}add ${id(o)}${initial ? ' (initial)' : ''}`),
    onUpdate: (a, b) => rec.push(`${tag}update ${id(a)}${a === b ? ' (resync)' : ''}`),
    onDelete: (o) => rec.push(`${tag}delete ${id(o)}`),
  };
}

const tick = () => new Promise((r) => setImmediate(r));
async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
function signal(): AbortSignal {
  const ac = new AbortController();
  cleanups.push(() => ac.abort());
  return ac.signal;
}

describe('SharedInformer', () => {
  it('lists, syncs, then delivers watch events to every handler', async () => {
    const client = new FakeClient();
    await client.create(ConfigMaps, cm('a'));
    const inf = new SharedInformer(client, ConfigMaps, { namespace: 'ns' });
    const rec1: string[] = [];
    const rec2: string[] = [];
    inf.addEventHandler(recorder(rec1, '1:'));
    inf.addEventHandler(recorder(rec2, '2:'));
    void inf.start(signal());
    assert.equal(await inf.waitForSync(signal()), true);
    assert.equal(inf.hasSynced(), true);
    assert.equal(inf.lastSyncResourceVersion, client.resourceVersion);
    await client.create(ConfigMaps, cm('b'));
    await client.patch(
      ConfigMaps,
      { namespace: 'ns', name: 'a' },
      { type: 'merge', body: { data: { x: '1' } } },
    );
    await client.delete(ConfigMaps, { namespace: 'ns', name: 'b' });
    await until(() => rec1.length === 4, 'events');
    assert.deepEqual(rec1, ['1:add a (initial)', '1:add b', '1:update a', '1:delete b']);
    assert.deepEqual(
      rec2,
      rec1.map((r) => r.replace('1:', '2:')),
    );
    assert.deepEqual(inf.store.keys(), ['ns/a']);
    assert.equal(inf.lastSyncResourceVersion, client.resourceVersion);
  });

  it('replays the current store as adds to a handler added late', async () => {
    const client = new FakeClient();
    await client.create(ConfigMaps, cm('a'));
    await client.create(ConfigMaps, cm('b'));
    const inf = new SharedInformer(client, ConfigMaps);
    const early: string[] = [];
    inf.addEventHandler(recorder(early));
    void inf.start(signal());
    await inf.waitForSync();
    const late: string[] = [];
    const reg = inf.addEventHandler(recorder(late));
    assert.deepEqual(late.sort(), ['add a (initial)', 'add b (initial)'], 'replayed synchronously');
    assert.equal(reg.hasSynced(), true);
    await client.create(ConfigMaps, cm('c'));
    await until(() => late.length === 3, 'live event');
    assert.equal(late[2], 'add c');
    reg.remove();
    await client.create(ConfigMaps, cm('d'));
    await until(() => early.length === 4, 'early handler event');
    assert.equal(late.length, 3, 'removed handler gets nothing');
  });

  it('re-delivers onUpdate(obj, obj) on resync, and only when enabled', async () => {
    const client = new ScriptedClient();
    const clock = new FakeClock();
    const inf = new SharedInformer(client, ConfigMaps, { clock, resyncPeriodMs: 10_000, watchList: false });
    const rec: string[] = [];
    inf.addEventHandler(recorder(rec));
    client.queueList(ConfigMaps, {
      items: [
        { metadata: { namespace: 'ns', name: 'a', resourceVersion: '1' } },
        { metadata: { namespace: 'ns', name: 'b', resourceVersion: '2' } },
      ],
      resourceVersion: '2',
    });
    const ac = new AbortController();
    const run = inf.start(ac.signal);
    await inf.waitForSync();
    rec.length = 0;
    clock.advance(9_999);
    assert.deepEqual(rec, []);
    clock.advance(1);
    assert.deepEqual(rec, ['update a (resync)', 'update b (resync)']);
    clock.advance(10_000);
    assert.equal(rec.length, 4);
    ac.abort();
    await run;
    clock.advance(100_000);
    assert.equal(rec.length, 4, 'no resync after stop');
    assert.equal(clock.pendingTimers(), 0);

    // A pending LIST starts no timer (a watch would start its silence timer).
    const off = new SharedInformer(new ScriptedClient(), ConfigMaps, { clock, watchList: false });
    void off.start(signal());
    assert.equal(clock.pendingTimers(), 0, 'resync is off by default: no timer');
  });

  it('start is idempotent and never rejects; handler errors are reported, not thrown', async () => {
    const client = new FakeClient();
    await client.create(ConfigMaps, cm('a'));
    const errors: InformerErrorContext[] = [];
    const inf = new SharedInformer(client, ConfigMaps, { onError: (_e, ctx) => errors.push(ctx) });
    const sig = signal();
    const p1 = inf.start(sig);
    assert.equal(inf.start(sig), p1);
    await inf.waitForSync();
    inf.addEventHandler({
      onAdd: () => {
        throw new Error('replay bug');
      },
    });
    assert.deepEqual(errors, [{ phase: 'replay', key: 'ns/a' }]);
    cleanups.pop()?.();
    await p1;
    assert.equal(inf.started, true);
  });

  for (const watchList of [true, false]) {
    const how = watchList ? 'initial events through the watch' : 'LIST pages';
    it(`keeps its store right across watch closes, errors and compaction (store == fresh list; ${how})`, async () => {
      const client = new FakeClient();
      // Each (re)list: a LIST, or a watch streaming the initial state.
      let initialReads = 0;
      client.onRequest((req) => {
        if (req.verb === 'list' || (req.verb === 'watch' && (req.options as WatchOptions).sendInitialEvents))
          initialReads++;
      });
      const inf = new SharedInformer(client, ConfigMaps, {
        namespace: 'ns',
        watchList,
        backoff: { initialMs: 1, maxMs: 5 },
      });
      // Rebuild state purely from handler events: must end equal to the API's state too.
      const seen = new Map<string, string>();
      inf.addEventHandler({
        onAdd: (o) => seen.set(o.metadata.name!, o.metadata.resourceVersion!),
        onUpdate: (_a, b) => seen.set(b.metadata.name!, b.metadata.resourceVersion!),
        onDelete: (o) => seen.delete(o.metadata.name!),
      });
      void inf.start(signal());
      await inf.waitForSync();
      let seed = 42;
      const rand = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      for (let i = 0; i < 300; i++) {
        const name = `o${rand(15)}`;
        const op = rand(10);
        const existing = client.getStored(ConfigMaps, `ns/${name}`);
        if (!existing) await client.create(ConfigMaps, cm(name, { i: String(i) }));
        else if (op < 6)
          await client.patch(
            ConfigMaps,
            { namespace: 'ns', name },
            { type: 'merge', body: { data: { i: String(i) } } },
          );
        else await client.delete(ConfigMaps, { namespace: 'ns', name });
        if (op === 7) client.closeWatches();
        if (op === 8 && rand(3) === 0) {
          client.compact();
          client.closeWatches();
        }
        if (op === 9 && rand(4) === 0) await tick();
      }
      const relists = initialReads - 1;
      if (watchList) assert.equal(client.actions({ verb: 'list' }).length, 0, 'no LIST');
      assert.ok(relists >= 1, `compaction forced relists (${relists})`);
      const fresh = await client.list(ConfigMaps, { namespace: 'ns' });
      await until(
        () =>
          inf.store.size === fresh.items.length &&
          fresh.items.every(
            (o) =>
              inf.store.get(`ns/${o.metadata.name}`)?.metadata.resourceVersion === o.metadata.resourceVersion,
          ),
        'store to converge',
        5000,
      );
      assert.deepEqual(
        new Map(fresh.items.map((o) => [o.metadata.name!, o.metadata.resourceVersion!])),
        seen,
        'handlers saw every final state',
      );
    });
  }

  it('a malformed watch event does not stop the informer: later events still reach handlers and store', async () => {
    const client = new ScriptedClient();
    const errors: { err: unknown; ctx: InformerErrorContext }[] = [];
    const inf = new SharedInformer(client, ConfigMaps, {
      watchList: false, // scripted LIST answers
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    const rec: string[] = [];
    inf.addEventHandler(recorder(rec));
    let stopped = false;
    const run = inf.start(signal()).then(() => {
      stopped = true;
    });
    client.queueList(ConfigMaps, {
      items: [{ ...cm('a'), metadata: { ...cm('a').metadata, resourceVersion: '1' } }],
      resourceVersion: '1',
    });
    const w = await client.nextWatch();
    // An object without metadata used to throw in the reflector, which killed the informer for good
    // while hasSynced() stayed true: the cache then served stale data forever.
    w.push({ type: 'ADDED', object: { kind: 'ConfigMap' } as unknown as ConfigMap });
    w.push({
      type: 'ADDED',
      object: { ...cm('b'), metadata: { ...cm('b').metadata, resourceVersion: '2' } },
    });
    await until(() => rec.length === 2, 'the event after the malformed one');
    assert.deepEqual(rec, ['add a (initial)', 'add b']);
    assert.deepEqual(inf.store.keys(), ['ns/a', 'ns/b']);
    assert.equal(stopped, false);
    assert.equal(errors.length, 1);
    assert.ok(errors[0]!.err instanceof MalformedObjectError);
    assert.deepEqual(errors[0]!.ctx, { phase: 'event', event: 'apply', key: '' });
    cleanups.pop()?.();
    await run;
  });

  it('restarts a failed reflector after a backoff (relisting) instead of stopping for good', async () => {
    // A reflector run can only fail through an internal fault; simulate one with a backoff that throws
    // the first time the watcher asks it for a delay.
    class FaultyBackoff extends Backoff {
      faults = 1;
      override next(): number {
        if (this.faults-- > 0) throw new Error('internal fault');
        return super.next();
      }
    }
    const client = new ScriptedClient();
    const errors: { err: unknown; ctx: InformerErrorContext }[] = [];
    const inf = new SharedInformer(client, ConfigMaps, {
      watchList: false, // scripted LIST answers
      backoff: new FaultyBackoff({ initialMs: 5, maxMs: 5, jitter: 0 }),
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    const rec: string[] = [];
    inf.addEventHandler(recorder(rec));
    const run = inf.start(signal());
    client.queueList(ConfigMaps, { error: new Error('connection refused') });
    await until(() => errors.some((e) => e.ctx.phase === 'restart'), 'the restart report');
    const restart = errors.find((e) => e.ctx.phase === 'restart')!;
    assert.match(String(restart.err), /internal fault/);
    assert.deepEqual(restart.ctx, { phase: 'restart', resourceVersion: '', delayMs: 5 });
    client.queueList(ConfigMaps, { items: [cm('a')], resourceVersion: '3' });
    const w = await client.nextWatch();
    assert.equal(inf.hasSynced(), true);
    assert.equal(client.listCalls.length, 2, 'listed again after the restart');
    w.push({ type: 'ADDED', object: cm('b') });
    await until(() => rec.length === 2, 'events after the restart');
    assert.deepEqual(rec, ['add a (initial)', 'add b']);
    cleanups.pop()?.();
    await run;
  });

  it('throwing and rejecting (async) handlers never stop the informer or the other handlers', async () => {
    const client = new FakeClient();
    const errors: InformerErrorContext[] = [];
    const inf = new SharedInformer(client, ConfigMaps, {
      resyncPeriodMs: 0,
      onError: (_e, ctx) => errors.push(ctx),
    });
    inf.addEventHandler({
      onAdd: () => {
        throw new Error('sync bug');
      },
      onUpdate: async () => {
        throw new Error('async bug');
      },
      onDelete: () => {
        throw 'not even an Error';
      },
    } as ResourceEventHandler<ConfigMap>);
    const rec: string[] = [];
    inf.addEventHandler(recorder(rec));
    void inf.start(signal());
    await inf.waitForSync();
    await client.create(ConfigMaps, cm('a'));
    await client.patch(
      ConfigMaps,
      { namespace: 'ns', name: 'a' },
      { type: 'merge', body: { data: { x: '1' } } },
    );
    await client.delete(ConfigMaps, { namespace: 'ns', name: 'a' });
    await client.create(ConfigMaps, cm('b'));
    await until(() => rec.length === 4, 'every event despite the failing handler');
    assert.deepEqual(rec, ['add a', 'update a', 'delete a', 'add b']);
    await tick();
    assert.deepEqual(
      errors.map((c) => (c.phase === 'handler' ? `${c.event} ${c.key}` : c.phase)),
      ['add ns/a', 'update ns/a', 'delete ns/a', 'add ns/b'],
    );
    assert.deepEqual(inf.store.keys(), ['ns/b']);
    // A late handler's async replay failure is reported too.
    inf.addEventHandler({
      onAdd: async () => {
        throw new Error('async replay bug');
      },
    } as ResourceEventHandler<ConfigMap>);
    await tick();
    assert.deepEqual(errors.at(-1), { phase: 'replay', key: 'ns/b' });
  });
});

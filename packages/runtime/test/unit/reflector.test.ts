import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import {
  MalformedObjectError,
  Reflector,
  type ReflectorErrorContext,
  type ResourceEventHandler,
} from '../../src/cache/reflector.ts';
import type { DeepReadonly } from '../../src/cache/store.ts';
import type { WatcherEvent } from '../../src/cache/watcher.ts';
import { GoneError } from '../../src/client/errors.ts';
import { ScriptedClient } from '../../src/testing/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

const cm = (name: string, rv: string, uid = `uid-${name}`): ConfigMap => ({
  metadata: {
    namespace: 'ns',
    name,
    uid,
    resourceVersion: rv,
    managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
  },
  data: { rv },
});

type Rec = string[];
function recorder(rec: Rec): ResourceEventHandler<ConfigMap> {
  const id = (o: DeepReadonly<ConfigMap>) => `${o.metadata.name}@${o.metadata.resourceVersion}`;
  return {
    onAdd: (o, initial) => rec.push(`add ${id(o)}${initial ? ' (initial)' : ''}`),
    onUpdate: (a, b) => rec.push(`update ${id(a)} -> ${id(b)}`),
    onDelete: (o) => rec.push(`delete ${id(o)}`),
  };
}

const tick = () => new Promise((r) => setImmediate(r));
async function until(cond: () => boolean, what: string, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await tick();
  }
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('Reflector.apply (pure event handling)', () => {
  it('fills the store on the first list, emits initial adds, then becomes synced', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    const rec: Rec = [];
    r.addListener(recorder(rec));
    r.apply({ type: 'init' });
    r.apply({ type: 'initApply', object: cm('a', '1') });
    assert.equal(r.store.size, 0, 'the list is buffered until initDone');
    assert.equal(r.hasSynced(), false);
    r.apply({ type: 'initApply', object: cm('b', '2') });
    r.apply({ type: 'initDone', resourceVersion: '10' });
    assert.equal(r.hasSynced(), true);
    assert.equal(r.lastSyncResourceVersion, '10');
    assert.deepEqual(rec, ['add a@1 (initial)', 'add b@2 (initial)']);
    assert.equal(r.store.size, 2);
  });

  it('strips managedFields by default and freezes what it stores', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    r.apply({ type: 'init' });
    r.apply({ type: 'initApply', object: cm('a', '1') });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    const a = r.store.get('ns/a')!;
    assert.equal(a.metadata.managedFields, undefined);
    assert.ok(Object.isFrozen(a));
    // Deeply (the default transform's objects are frozen by deepFreezeJson).
    assert.ok(Object.isFrozen(a.metadata) && Object.isFrozen(a.data));
    assert.ok(a.metadata.labels === undefined || Object.isFrozen(a.metadata.labels));
  });

  it('applies a user transform (and reports a throwing one, keeping the object)', () => {
    const errors: ReflectorErrorContext[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, {
      transform: (o) => {
        if (o.metadata.name === 'bad') throw new Error('nope');
        o.data = { slim: 'yes' };
        return o;
      },
      onError: (_e, ctx) => errors.push(ctx),
    });
    r.apply({ type: 'init' });
    r.apply({ type: 'initApply', object: cm('a', '1') });
    r.apply({ type: 'initApply', object: cm('bad', '1') });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    assert.deepEqual(r.store.get('ns/a')!.data, { slim: 'yes' });
    assert.equal(
      r.store.get('ns/a')!.metadata.managedFields?.length,
      1,
      'a custom transform replaces the default',
    );
    assert.ok(r.store.get('ns/bad'));
    assert.deepEqual(errors, [{ phase: 'transform', key: 'ns/bad' }]);
  });

  it('emits add / update / delete for watch events, and nothing for an unchanged resourceVersion', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    const rec: Rec = [];
    r.addListener(recorder(rec));
    r.apply({ type: 'init' });
    r.apply({ type: 'initApply', object: cm('a', '1') });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    rec.length = 0;
    r.apply({ type: 'apply', object: cm('b', '2') });
    r.apply({ type: 'apply', object: cm('a', '3') });
    r.apply({ type: 'apply', object: cm('a', '3') }); // duplicate delivery
    r.apply({ type: 'delete', object: cm('b', '4') });
    r.apply({ type: 'delete', object: cm('never-seen', '5') });
    r.apply({ type: 'apply', object: cm('a', '6', 'recreated-uid') });
    assert.deepEqual(rec, ['add b@2', 'update a@1 -> a@3', 'delete b@4', 'delete a@3', 'add a@6']);
    assert.equal(r.lastSyncResourceVersion, '6');
    assert.deepEqual(r.store.keys(), ['ns/a']);
  });

  it('on relist emits only real changes: no reconcile storm', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    const rec: Rec = [];
    r.addListener(recorder(rec));
    const list = (rv: string, ...objs: ConfigMap[]) => {
      r.apply({ type: 'init' });
      for (const o of objs) r.apply({ type: 'initApply', object: o });
      r.apply({ type: 'initDone', resourceVersion: rv });
    };
    list('10', cm('same', '1'), cm('changed', '2'), cm('removed', '3'), cm('recreated', '4'));
    const same = r.store.get('ns/same');
    rec.length = 0;
    list('20', cm('same', '1'), cm('changed', '12'), cm('new', '13'), cm('recreated', '14', 'other-uid'));
    assert.deepEqual(rec, [
      'delete recreated@4',
      'delete removed@3',
      'add new@13',
      'add recreated@14',
      'update changed@2 -> changed@12',
    ]);
    assert.equal(r.store.get('ns/same'), same, 'unchanged objects are not even replaced');
    rec.length = 0;
    list('21', cm('same', '1'), cm('changed', '12'), cm('new', '13'), cm('recreated', '14', 'other-uid'));
    assert.deepEqual(rec, [], 'an identical relist emits nothing');
    assert.equal(r.lastSyncResourceVersion, '21');
  });

  it('isolates listeners: one throwing does not stop the others', () => {
    const errors: ReflectorErrorContext[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, { onError: (_e, ctx) => errors.push(ctx) });
    const rec: Rec = [];
    r.addListener({
      onAdd: () => {
        throw new Error('handler bug');
      },
    });
    const remove = r.addListener(recorder(rec));
    r.apply({ type: 'init' });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    r.apply({ type: 'apply', object: cm('a', '2') });
    assert.deepEqual(rec, ['add a@2']);
    assert.deepEqual(errors, [{ phase: 'handler', event: 'add', key: 'ns/a' }]);
    remove();
    r.apply({ type: 'apply', object: cm('b', '3') });
    assert.deepEqual(rec, ['add a@2']);
  });

  it('skips and reports malformed objects: never stored, never emitted, the next event still applies', () => {
    const errors: { err: unknown; ctx: ReflectorErrorContext }[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, {
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    const rec: Rec = [];
    r.addListener(recorder(rec));
    const bad = (o: unknown) => o as ConfigMap;
    r.apply({ type: 'init' });
    r.apply({ type: 'initApply', object: cm('a', '1') });
    r.apply({ type: 'initApply', object: bad({ kind: 'ConfigMap' }) });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    for (const object of [
      { kind: 'ConfigMap' }, // no metadata: used to throw in #advance
      { metadata: { namespace: 'ns' } }, // no name: used to be stored under "ns/undefined"
      { metadata: { name: 'x', namespace: 7 } },
      { metadata: { name: 'x', resourceVersion: 3 } },
      null,
      'garbage',
    ]) {
      r.apply({ type: 'apply', object: bad(object) });
      r.apply({ type: 'delete', object: bad(object) });
    }
    r.apply({ type: 'apply', object: cm('b', '2') });
    assert.deepEqual(r.store.keys().sort(), ['ns/a', 'ns/b']);
    assert.deepEqual(rec, ['add a@1 (initial)', 'add b@2']);
    assert.equal(r.lastSyncResourceVersion, '2');
    assert.equal(errors.length, 13);
    for (const { err, ctx } of errors) {
      assert.ok(err instanceof MalformedObjectError, String(err));
      assert.equal(ctx.phase, 'event');
    }
    assert.match(
      String(errors[0]!.err),
      /core\/v1\/configmaps: skipping a malformed object: it has no metadata/,
    );
    assert.deepEqual(errors[0]!.ctx, { phase: 'event', event: 'initApply', key: '' });
    assert.match(String(errors[3]!.err), /no metadata\.name/);
  });

  it('skips an object whose transform breaks it or changes its key', () => {
    const errors: ReflectorErrorContext[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, {
      onError: (_e, ctx) => errors.push(ctx),
      transform: (o) => {
        if (o.metadata.name === 'rename') o.metadata.name = 'renamed';
        if (o.metadata.name === 'strip') return { data: {} } as unknown as ConfigMap;
        return o;
      },
    });
    r.apply({ type: 'init' });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    r.apply({ type: 'apply', object: cm('rename', '2') });
    r.apply({ type: 'apply', object: cm('strip', '3') });
    r.apply({ type: 'apply', object: cm('fine', '4') });
    assert.deepEqual(r.store.keys(), ['ns/fine']);
    assert.deepEqual(errors, [
      { phase: 'transform', key: 'ns/rename' },
      { phase: 'transform', key: 'ns/strip' },
    ]);
  });

  it('consume() reports an event it cannot apply and goes on with the next one', async () => {
    const errors: { err: unknown; ctx: ReflectorErrorContext }[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, {
      onError: (err, ctx) => errors.push({ err, ctx }),
    });
    async function* events(): AsyncGenerator<WatcherEvent<ConfigMap>> {
      yield { type: 'init' };
      yield { type: 'initDone', resourceVersion: '1' };
      yield null as unknown as WatcherEvent<ConfigMap>;
      yield { type: 'apply', object: { spec: 1 } as unknown as ConfigMap };
      yield { type: 'apply', object: cm('a', '2') };
    }
    await r.consume(events());
    assert.deepEqual(r.store.keys(), ['ns/a']);
    assert.deepEqual(
      errors.map((e) => e.ctx),
      [
        { phase: 'event', event: 'unknown', key: '' },
        { phase: 'event', event: 'apply', key: '' },
      ],
    );
  });

  it('an async listener that rejects is reported, not left as an unhandled rejection', async () => {
    const errors: ReflectorErrorContext[] = [];
    const r = new Reflector(new ScriptedClient(), ConfigMaps, { onError: (_e, ctx) => errors.push(ctx) });
    const rec: Rec = [];
    r.addListener({
      onAdd: async () => {
        throw new Error('async handler bug');
      },
    } as ResourceEventHandler<ConfigMap>);
    r.addListener(recorder(rec));
    r.apply({ type: 'init' });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    r.apply({ type: 'apply', object: cm('a', '2') });
    await tick();
    assert.deepEqual(rec, ['add a@2']);
    assert.deepEqual(errors, [{ phase: 'handler', event: 'add', key: 'ns/a' }]);
  });

  it('waitForSync resolves true on sync and false on abort', async () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    const ac = new AbortController();
    const aborted = r.waitForSync(ac.signal);
    ac.abort();
    assert.equal(await aborted, false);
    const synced = r.waitForSync();
    r.apply({ type: 'init' });
    r.apply({ type: 'initDone', resourceVersion: '1' });
    assert.equal(await synced, true);
    assert.equal(await r.waitForSync(), true);
  });
});

describe('Reflector.run (with a scripted API)', () => {
  // These script LIST answers: LIST pages (watchList's initial events: cache-watcher.test.ts).
  it('clean close: re-watch from the last resourceVersion, no relist, no events', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const r = new Reflector(client, ConfigMaps, { clock: new FakeClock(), watchList: false });
    const rec: Rec = [];
    r.addListener(recorder(rec));
    client.queueList(ConfigMaps, { items: [cm('a', '1')], resourceVersion: '10' });
    const running = r.run(ac.signal);
    const w1 = await client.nextWatch();
    assert.equal(r.hasSynced(), true);
    w1.push({ type: 'MODIFIED', object: cm('a', '11') });
    w1.bookmark('20');
    w1.close();
    const w2 = await client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '20');
    assert.equal(r.lastSyncResourceVersion, '20', 'bookmarks advance lastSyncResourceVersion');
    assert.equal(client.listCalls.length, 1);
    assert.deepEqual(rec, ['add a@1 (initial)', 'update a@1 -> a@11']);
    ac.abort();
    await running;
  });

  it('410: relists, and the relist only emits what changed while the watch was gone', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const r = new Reflector(client, ConfigMaps, { clock: new FakeClock(), watchList: false });
    const rec: Rec = [];
    r.addListener(recorder(rec));
    client.queueList(ConfigMaps, {
      items: [cm('a', '1'), cm('b', '2'), cm('c', '3')],
      resourceVersion: '10',
    });
    const running = r.run(ac.signal);
    const w1 = await client.nextWatch();
    rec.length = 0;
    client.queueList(ConfigMaps, {
      items: [cm('a', '1'), cm('b', '25'), cm('d', '26')],
      resourceVersion: '30',
    });
    w1.fail(new GoneError({ code: 410, reason: 'Expired' }));
    const w2 = await client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '30');
    assert.deepEqual(rec, ['delete c@3', 'add d@26', 'update b@2 -> b@25']);
    assert.deepEqual(r.store.keys().sort(), ['ns/a', 'ns/b', 'ns/d']);
    ac.abort();
    await running;
  });

  it('a malformed watch event does not stop run(): it is skipped and the watch goes on', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const errors: ReflectorErrorContext[] = [];
    const r = new Reflector(client, ConfigMaps, {
      clock: new FakeClock(),
      watchList: false,
      onError: (_e, ctx) => errors.push(ctx),
    });
    const rec: Rec = [];
    r.addListener(recorder(rec));
    client.queueList(ConfigMaps, {
      items: [cm('a', '1'), { kind: 'ConfigMap' } as KubeObject],
      resourceVersion: '10',
    });
    let settled = false;
    const running = r.run(ac.signal).finally(() => {
      settled = true;
    });
    const w = await client.nextWatch();
    w.push({ type: 'ADDED', object: { kind: 'ConfigMap' } as ConfigMap });
    w.push({ type: 'MODIFIED', object: { metadata: { namespace: 'ns' } } as ConfigMap });
    w.push({ type: 'ADDED', object: null as unknown as ConfigMap }); // used to break the watch itself
    w.push({ type: 'ADDED', object: cm('b', '12') });
    await until(() => rec.length === 2, 'the good event after the bad ones');
    assert.deepEqual(rec, ['add a@1 (initial)', 'add b@12']);
    assert.deepEqual(r.store.keys().sort(), ['ns/a', 'ns/b']);
    assert.equal(settled, false, 'run() is still running');
    assert.equal(client.watches.length, 1, 'no re-watch, no relist');
    assert.equal(client.listCalls.length, 1);
    assert.deepEqual(
      errors.map((c) => c.phase),
      ['event', 'event', 'event', 'event'],
    );
    ac.abort();
    await running;
  });

  it('stops cleanly on abort and refuses a second concurrent run', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    const r = new Reflector(client, ConfigMaps, { watchList: false });
    client.queueList(ConfigMaps, { items: [], resourceVersion: '1' });
    const running = r.run(ac.signal);
    await until(() => client.watches.length === 1, 'watch');
    await assert.rejects(r.run(ac.signal), /already running/);
    ac.abort();
    await running;
    assert.equal(client.watches[0]!.signal?.aborted, true);
  });
});

import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import {
  Reflector,
  type ReflectorErrorContext,
  type ResourceEventHandler,
} from '../../src/cache/reflector.ts';
import { ScriptedClient } from '../../src/cache/scripted-client.ts';
import type { DeepReadonly } from '../../src/cache/store.ts';
import { GoneError } from '../../src/client/errors.ts';
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
  it('clean close: re-watch from the last resourceVersion, no relist, no events', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const r = new Reflector(client, ConfigMaps, { clock: new FakeClock() });
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
    const r = new Reflector(client, ConfigMaps, { clock: new FakeClock() });
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

  it('stops cleanly on abort and refuses a second concurrent run', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    const r = new Reflector(client, ConfigMaps);
    client.queueList(ConfigMaps, { items: [], resourceVersion: '1' });
    const running = r.run(ac.signal);
    await until(() => client.watches.length === 1, 'watch');
    await assert.rejects(r.run(ac.signal), /already running/);
    ac.abort();
    await running;
    assert.equal(client.watches[0]!.signal?.aborted, true);
  });
});

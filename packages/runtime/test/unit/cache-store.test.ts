import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigMap } from '../../src/api/builtin.ts';
import { CONTROLLER_UID_INDEX, deepFreeze, NAMESPACE_INDEX, Store } from '../../src/cache/store.ts';

const cm = (ns: string, name: string, rv: string, extra: Partial<ConfigMap> = {}): ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { namespace: ns, name, uid: `uid-${ns}-${name}`, resourceVersion: rv, labels: { app: name } },
  data: { k: rv },
  ...extra,
});

const owned = (ns: string, name: string, ownerUID: string, controller = true): ConfigMap =>
  cm(ns, name, '1', {
    metadata: {
      namespace: ns,
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Other', name: 'other', uid: 'not-the-controller' },
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'o', uid: ownerUID, controller },
      ],
    },
  });

describe('Store', () => {
  it('gets by key string or ObjectKey, lists, and lists by namespace', () => {
    const s = new Store<ConfigMap>();
    s.set(cm('a', 'x', '1'));
    s.set(cm('a', 'y', '1'));
    s.set(cm('b', 'x', '1'));
    assert.equal(s.size, 3);
    assert.equal(s.get('a/x')?.metadata.name, 'x');
    assert.equal(s.get({ namespace: 'b', name: 'x' })?.metadata.namespace, 'b');
    assert.equal(s.get('c/x'), undefined);
    assert.deepEqual(
      s
        .listByNamespace('a')
        .map((o) => o.metadata.name)
        .sort(),
      ['x', 'y'],
    );
    assert.deepEqual(s.keys().sort(), ['a/x', 'a/y', 'b/x']);
    const snapshot = s.list();
    s.delete('a/x');
    assert.equal(snapshot.length, 3, 'list() returns a snapshot');
    assert.equal(s.list().length, 2);
    assert.deepEqual(
      s.listByNamespace('a').map((o) => o.metadata.name),
      ['y'],
    );
  });

  it('stores objects deep-frozen: mutating a returned object throws and does not change the store', () => {
    const s = new Store<ConfigMap>();
    s.set(cm('a', 'x', '1'));
    const got = s.get('a/x')!;
    assert.ok(Object.isFrozen(got));
    assert.ok(Object.isFrozen(got.metadata));
    assert.ok(Object.isFrozen(got.metadata.labels));
    assert.ok(Object.isFrozen(got.data));
    // The types forbid it; a caller casting that away still cannot corrupt the cache.
    const mutable = got as unknown as ConfigMap;
    assert.throws(() => {
      mutable.data!.k = 'changed';
    }, TypeError);
    assert.throws(() => {
      mutable.metadata.labels!.app = 'changed';
    }, TypeError);
    assert.throws(() => {
      mutable.metadata.name = 'other';
    }, TypeError);
    assert.equal(s.get('a/x')!.data!.k, '1');
    assert.equal(s.get('a/x')!.metadata.labels!.app, 'x');
    // The documented way: copy first.
    const copy = structuredClone(got) as ConfigMap;
    copy.data!.k = 'changed';
    assert.equal(s.get('a/x')!.data!.k, '1');
  });

  it('freezes arrays deeply too', () => {
    const s = new Store<ConfigMap>();
    s.set(owned('a', 'x', 'u1'));
    const refs = s.get('a/x')!.metadata.ownerReferences!;
    assert.ok(Object.isFrozen(refs));
    assert.ok(Object.isFrozen(refs[0]));
    assert.throws(() => (refs as unknown as unknown[]).push({}), TypeError);
    const frozen = deepFreeze({ a: [{ b: 1 }] });
    assert.ok(Object.isFrozen(frozen.a[0]));
  });

  it('indexes by namespace and by controller owner UID', () => {
    const s = new Store<ConfigMap>();
    s.set(owned('a', 'x', 'owner-1'));
    s.set(owned('a', 'y', 'owner-1'));
    s.set(owned('b', 'z', 'owner-2'));
    s.set(owned('b', 'w', 'owner-1', false));
    assert.deepEqual(s.indexNames().sort(), [CONTROLLER_UID_INDEX, NAMESPACE_INDEX].sort());
    assert.deepEqual(
      s
        .byIndex('controllerUID', 'owner-1')
        .map((o) => o.metadata.name)
        .sort(),
      ['x', 'y'],
    );
    assert.deepEqual(
      s.byIndex('controllerUID', 'owner-2').map((o) => o.metadata.name),
      ['z'],
    );
    assert.deepEqual(s.byIndex('controllerUID', 'not-the-controller'), []);
    assert.deepEqual(
      s
        .byIndex(NAMESPACE_INDEX, 'b')
        .map((o) => o.metadata.name)
        .sort(),
      ['w', 'z'],
    );
    // Re-owning moves the object between index values.
    s.set({
      ...owned('a', 'x', 'owner-2'),
      metadata: { ...owned('a', 'x', 'owner-2').metadata, resourceVersion: '2' },
    });
    assert.deepEqual(
      s.byIndex('controllerUID', 'owner-1').map((o) => o.metadata.name),
      ['y'],
    );
    assert.deepEqual(
      s
        .byIndex('controllerUID', 'owner-2')
        .map((o) => o.metadata.name)
        .sort(),
      ['x', 'z'],
    );
    s.delete({ namespace: 'a', name: 'y' });
    assert.deepEqual(s.byIndex('controllerUID', 'owner-1'), []);
    assert.throws(() => s.byIndex('nope', 'x'), /no indexer/);
  });

  it('supports custom indexers, added before or after objects, with multiple values', () => {
    const s = new Store<ConfigMap>({ indexers: { byKey: (o) => Object.keys(o.data ?? {}) } });
    s.set(cm('a', 'x', '1', { data: { one: '1', two: '2' } }));
    s.set(cm('a', 'y', '1', { data: { two: '2' } }));
    assert.deepEqual(
      s
        .byIndex('byKey', 'two')
        .map((o) => o.metadata.name)
        .sort(),
      ['x', 'y'],
    );
    assert.deepEqual(
      s.byIndex('byKey', 'one').map((o) => o.metadata.name),
      ['x'],
    );
    s.addIndexer('byApp', (o) => [o.metadata.labels?.app ?? '']);
    assert.deepEqual(
      s.byIndex('byApp', 'y').map((o) => o.metadata.name),
      ['y'],
    );
    assert.throws(() => s.addIndexer('byApp', () => []), /already exists/);
    s.set(cm('a', 'z', '1'));
    assert.deepEqual(
      s.byIndex('byApp', 'z').map((o) => o.metadata.name),
      ['z'],
    );
  });

  it('keeps an object whose index function throws findable by key', () => {
    const errors: string[] = [];
    const s = new Store<ConfigMap>({
      indexers: {
        bad: () => {
          throw new Error('boom');
        },
      },
      onIndexError: (_e, name, key) => errors.push(`${name}:${key}`),
    });
    s.set(cm('a', 'x', '1'));
    assert.equal(s.get('a/x')?.metadata.name, 'x');
    assert.deepEqual(errors, ['bad:a/x']);
  });

  it('set() reports added / updated / unchanged / replaced', () => {
    const s = new Store<ConfigMap>();
    assert.equal(s.set(cm('a', 'x', '1')).type, 'added');
    const first = s.get('a/x');
    const same = s.set(cm('a', 'x', '1'));
    assert.equal(same.type, 'unchanged');
    assert.equal(s.get('a/x'), first, 'unchanged keeps the stored instance');
    const upd = s.set(cm('a', 'x', '2'));
    assert.equal(upd.type, 'updated');
    assert.ok(upd.type === 'updated' && upd.old.metadata.resourceVersion === '1');
    const recreated = cm('a', 'x', '3');
    recreated.metadata.uid = 'another';
    assert.equal(s.set(recreated).type, 'replaced');
  });

  it('replace() computes adds, real updates and disappearances', () => {
    const s = new Store<ConfigMap>();
    s.replace(
      [cm('a', 'keep', '1'), cm('a', 'change', '1'), cm('a', 'gone', '1'), cm('a', 'recreate', '1')],
      '5',
    );
    assert.equal(s.resourceVersion, '5');
    const kept = s.get('a/keep');
    const recreated = cm('a', 'recreate', '9');
    recreated.metadata.uid = 'new-uid';
    const diff = s.replace(
      [cm('a', 'keep', '1'), cm('a', 'change', '7'), cm('a', 'new', '8'), recreated],
      '10',
    );
    assert.deepEqual(
      diff.added.map((o) => o.metadata.name),
      ['new', 'recreate'],
    );
    assert.deepEqual(
      diff.updated.map((u) => [u.old.metadata.resourceVersion, u.new.metadata.resourceVersion]),
      [['1', '7']],
    );
    assert.deepEqual(diff.deleted.map((o) => o.metadata.name).sort(), ['gone', 'recreate']);
    assert.equal(s.get('a/keep'), kept, 'unchanged objects keep their instance');
    assert.equal(s.get('a/recreate')?.metadata.uid, 'new-uid');
    assert.equal(s.get('a/gone'), undefined);
    assert.equal(s.resourceVersion, '10');
    assert.deepEqual(s.byIndex(NAMESPACE_INDEX, 'a').length, 4);
    const empty = s.replace([], '11');
    assert.equal(empty.deleted.length, 4);
    assert.equal(s.size, 0);
    assert.deepEqual(s.listByNamespace('a'), []);
  });

  it('handles cluster-scoped keys', () => {
    const s = new Store();
    s.set({ metadata: { name: 'node-1', resourceVersion: '1' } });
    assert.ok(s.get('node-1'));
    assert.ok(s.get({ name: 'node-1' }));
    assert.deepEqual(s.listByNamespace('').length, 1);
  });
});

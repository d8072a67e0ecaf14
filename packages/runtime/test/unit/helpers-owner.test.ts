import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Namespaces, StatefulSets } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import {
  AlreadyOwnedError,
  getControllerOf,
  hasOwnerReference,
  InvalidOwnerError,
  isControlledBy,
  removeOwnerReference,
  setControllerReference,
  setOwnerReference,
} from '../../src/helpers/owner.ts';

const Databases = defineResource<KubeObject>({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});
const Clusters = defineResource<KubeObject>({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'DatabaseCluster',
  plural: 'databaseclusters',
  namespaced: false,
});

const db = (name = 'db', uid = 'uid-db', namespace = 'ns'): KubeObject => ({
  metadata: { name, namespace, uid },
});
const child = (namespace = 'ns'): KubeObject => ({ metadata: { name: 'child', namespace } });
const clusterChild = (): KubeObject => ({ metadata: { name: 'child' } });

describe('setControllerReference', () => {
  it('adds a controller reference that blocks owner deletion', () => {
    const obj = child();
    const returned = setControllerReference(db(), obj, Databases);
    assert.equal(returned, obj);
    assert.deepEqual(obj.metadata.ownerReferences, [
      {
        apiVersion: 'opkit.dev/v1alpha1',
        kind: 'Database',
        name: 'db',
        uid: 'uid-db',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(getControllerOf(obj)?.name, 'db');
    assert.equal(isControlledBy(obj, db()), true);
  });

  it('is idempotent and refreshes the uid of a recreated owner', () => {
    const obj = child();
    setControllerReference(db(), obj, Databases);
    setControllerReference(db(), obj, Databases);
    assert.equal(obj.metadata.ownerReferences?.length, 1);
    setControllerReference(db('db', 'uid-new'), obj, Databases);
    assert.equal(obj.metadata.ownerReferences?.length, 1);
    assert.equal(obj.metadata.ownerReferences?.[0]?.uid, 'uid-new');
  });

  it('treats another version of the same group/kind/name as the same owner', () => {
    const obj = child();
    obj.metadata.ownerReferences = [
      { apiVersion: 'opkit.dev/v1beta1', kind: 'Database', name: 'db', uid: 'uid-db', controller: true },
    ];
    setControllerReference(db(), obj, Databases);
    assert.equal(obj.metadata.ownerReferences.length, 1);
    assert.equal(obj.metadata.ownerReferences[0]?.apiVersion, 'opkit.dev/v1alpha1');
  });

  it('keeps other, non-controller references', () => {
    const obj = child();
    setOwnerReference(db('other', 'uid-other'), obj, Databases);
    setControllerReference(db(), obj, Databases);
    assert.deepEqual(
      obj.metadata.ownerReferences?.map((r) => [r.name, r.controller ?? false]),
      [
        ['other', false],
        ['db', true],
      ],
    );
  });

  it('throws AlreadyOwnedError when another controller owns the object, changing nothing', () => {
    const obj = child();
    setControllerReference(db('first', 'uid-1'), obj, Databases);
    const before = structuredClone(obj);
    assert.throws(
      () => setControllerReference(db('second', 'uid-2'), obj, Databases),
      (err: unknown) => {
        assert.ok(err instanceof AlreadyOwnedError);
        assert.equal(err.existing.name, 'first');
        assert.deepEqual(err.object, { namespace: 'ns', name: 'child' });
        assert.match(err.message, /already owned/);
        return true;
      },
    );
    assert.deepEqual(obj, before);
    // A different kind with the same name is another owner too.
    assert.throws(() => setControllerReference(db('first', 'uid-1'), obj, StatefulSets), AlreadyOwnedError);
  });

  it('refuses cross-namespace owners', () => {
    assert.throws(
      () => setControllerReference(db('db', 'u', 'a'), child('b'), Databases),
      (err: unknown) => err instanceof InvalidOwnerError && err.reason === 'CrossNamespace',
    );
  });

  it('refuses a namespaced owner for a cluster-scoped object', () => {
    assert.throws(
      () => setControllerReference(db(), clusterChild(), Databases),
      (err: unknown) => err instanceof InvalidOwnerError && err.reason === 'ClusterScopedObject',
    );
  });

  it('lets a cluster-scoped owner own namespaced and cluster-scoped objects', () => {
    const owner: KubeObject = { metadata: { name: 'c', uid: 'uid-c' } };
    const namespaced = setControllerReference(owner, child('ns'), Clusters);
    const clusterScoped = setControllerReference(owner, clusterChild(), Clusters);
    assert.equal(isControlledBy(namespaced, owner), true);
    assert.equal(isControlledBy(clusterScoped, owner), true);
    const ns: KubeObject = { metadata: { name: 'team', uid: 'uid-ns' } };
    assert.equal(getControllerOf(setControllerReference(ns, child('x'), Namespaces))?.kind, 'Namespace');
  });

  it('requires the owner to have a name, a uid, and a namespace if namespaced', () => {
    const reason = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err instanceof InvalidOwnerError ? err.reason : 'other';
      }
      return 'none';
    };
    assert.equal(
      reason(() => setControllerReference({ metadata: { uid: 'u' } }, child(), Clusters)),
      'MissingName',
    );
    assert.equal(
      reason(() => setControllerReference({ metadata: { name: 'x' } }, child(), Clusters)),
      'MissingUID',
    );
    assert.equal(
      reason(() => setControllerReference({ metadata: { name: 'x', uid: 'u' } }, child(), Databases)),
      'MissingNamespace',
    );
    assert.equal(
      reason(() => setOwnerReference({ metadata: { name: 'x' } }, child(), Clusters)),
      'MissingUID',
    );
  });

  it('honours blockOwnerDeletion: false', () => {
    const obj = setControllerReference(db(), child(), Databases, { blockOwnerDeletion: false });
    assert.equal(obj.metadata.ownerReferences?.[0]?.blockOwnerDeletion, false);
  });
});

describe('setOwnerReference', () => {
  it('adds a plain reference, several owners allowed', () => {
    const obj = child();
    setOwnerReference(db('a', 'uid-a'), obj, Databases);
    setOwnerReference(db('b', 'uid-b'), obj, Databases);
    setOwnerReference(db('a', 'uid-a'), obj, Databases);
    assert.deepEqual(obj.metadata.ownerReferences, [
      { apiVersion: 'opkit.dev/v1alpha1', kind: 'Database', name: 'a', uid: 'uid-a' },
      { apiVersion: 'opkit.dev/v1alpha1', kind: 'Database', name: 'b', uid: 'uid-b' },
    ]);
    assert.equal(getControllerOf(obj), undefined);
    assert.equal(isControlledBy(obj, db('a', 'uid-a')), false);
    assert.equal(hasOwnerReference(obj, db('a', 'uid-a')), true);
  });

  it('does not demote an existing controller reference to the same owner', () => {
    const obj = setControllerReference(db(), child(), Databases);
    setOwnerReference(db(), obj, Databases);
    assert.equal(isControlledBy(obj, db()), true);
    assert.equal(obj.metadata.ownerReferences?.[0]?.blockOwnerDeletion, true);
  });

  it('applies the same namespace rules', () => {
    assert.throws(() => setOwnerReference(db('db', 'u', 'a'), child('b'), Databases), InvalidOwnerError);
  });
});

describe('getControllerOf / isControlledBy / removeOwnerReference', () => {
  it('compare by uid', () => {
    const obj = setControllerReference(db(), child(), Databases);
    assert.equal(isControlledBy(obj, db('db', 'another-uid')), false);
    assert.equal(isControlledBy(obj, { metadata: { name: 'db' } }), false);
    assert.equal(isControlledBy(child(), db()), false);
    assert.equal(getControllerOf(child()), undefined);
    assert.equal(hasOwnerReference(obj, { metadata: {} }), false);
  });

  it('removeOwnerReference drops the reference and the empty list', () => {
    const obj = setControllerReference(db(), child(), Databases);
    setOwnerReference(db('b', 'uid-b'), obj, Databases);
    removeOwnerReference(db(), obj, Databases);
    assert.deepEqual(
      obj.metadata.ownerReferences?.map((r) => r.name),
      ['b'],
    );
    removeOwnerReference(db('b', 'uid-b'), obj, Databases);
    assert.equal(obj.metadata.ownerReferences, undefined);
    assert.equal(removeOwnerReference(db(), obj, Databases), obj);
  });
});

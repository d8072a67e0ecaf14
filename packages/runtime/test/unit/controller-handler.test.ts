import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Deployments, StatefulSets } from '../../src/api/builtin.ts';
import type { KubeObject, OwnerReference } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import {
  type EventHandler,
  enqueueForObject,
  enqueueForOwner,
  enqueueMapped,
  groupOf,
  type Request,
} from '../../src/controller/index.ts';

const Databases = defineResource<KubeObject>({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});
const Clusters = defineResource<KubeObject>({
  group: 'opkit.dev',
  version: 'v1',
  kind: 'Cluster',
  plural: 'clusters',
  namespaced: false,
});

function child(refs: OwnerReference[], namespace = 'ns'): KubeObject {
  return { metadata: { name: 'child', namespace, ownerReferences: refs } };
}

const ref = (over: Partial<OwnerReference>): OwnerReference => ({
  apiVersion: 'opkit.dev/v1alpha1',
  kind: 'Database',
  name: 'db1',
  uid: 'u1',
  controller: true,
  ...over,
});

function collect(h: EventHandler, event: 'create' | 'delete' | 'generic', obj: KubeObject) {
  const out: Request[] = [];
  h[event](obj, { add: (r) => out.push(r) });
  return out;
}

describe('event handlers', () => {
  it('groupOf parses apiVersions', () => {
    assert.equal(groupOf('v1'), '');
    assert.equal(groupOf('apps/v1'), 'apps');
    assert.equal(groupOf('opkit.dev/v1alpha1'), 'opkit.dev');
  });

  it('enqueueForObject maps an event to the object key', () => {
    const h = enqueueForObject();
    assert.deepEqual(collect(h, 'create', { metadata: { name: 'a', namespace: 'ns' } }), [
      { namespace: 'ns', name: 'a' },
    ]);
    assert.deepEqual(collect(h, 'delete', { metadata: { name: 'node1' } }), [{ name: 'node1' }]);
    const out: Request[] = [];
    h.update(
      { metadata: { name: 'a', namespace: 'ns' } },
      { metadata: { name: 'a', namespace: 'ns' } },
      {
        add: (r) => out.push(r),
      },
    );
    assert.deepEqual(out, [{ namespace: 'ns', name: 'a' }]);
  });

  it('enqueueForOwner follows the controller reference of the owner kind', () => {
    const h = enqueueForOwner(Databases);
    assert.deepEqual(collect(h, 'create', child([ref({})])), [{ namespace: 'ns', name: 'db1' }]);
    // Another version of the same group+kind still matches.
    assert.deepEqual(collect(h, 'create', child([ref({ apiVersion: 'opkit.dev/v1' })])), [
      { namespace: 'ns', name: 'db1' },
    ]);
  });

  it('enqueueForOwner ignores non-controller refs, other kinds and other groups', () => {
    const h = enqueueForOwner(Databases, { onlyController: true });
    assert.deepEqual(collect(h, 'create', child([ref({ controller: false })])), []);
    assert.deepEqual(collect(h, 'create', child([ref({ controller: undefined })])), []);
    assert.deepEqual(collect(h, 'create', child([ref({ kind: 'Cluster' })])), []);
    assert.deepEqual(collect(h, 'create', child([ref({ apiVersion: 'other.dev/v1alpha1' })])), []);
    assert.deepEqual(collect(h, 'create', child([])), []);
    assert.deepEqual(collect(h, 'create', { metadata: { name: 'x', namespace: 'ns' } }), []);
    // Mixed: only the matching controller ref counts.
    assert.deepEqual(
      collect(
        h,
        'delete',
        child([ref({ name: 'plain', controller: false }), ref({ kind: 'Other' }), ref({ name: 'ctl' })]),
      ),
      [{ namespace: 'ns', name: 'ctl' }],
    );
  });

  it('enqueueForOwner without onlyController follows every owner of the kind', () => {
    const h = enqueueForOwner(Databases, { onlyController: false });
    assert.deepEqual(
      collect(h, 'create', child([ref({ name: 'a', controller: false }), ref({ name: 'b' })])),
      [
        { namespace: 'ns', name: 'a' },
        { namespace: 'ns', name: 'b' },
      ],
    );
  });

  it('enqueueForOwner: core and apps groups, cluster-scoped owners', () => {
    const apps = enqueueForOwner(StatefulSets);
    assert.deepEqual(
      collect(apps, 'create', child([ref({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 's' })])),
      [{ namespace: 'ns', name: 's' }],
    );
    assert.deepEqual(
      collect(
        enqueueForOwner(Deployments),
        'create',
        child([ref({ apiVersion: 'apps/v1', kind: 'StatefulSet' })]),
      ),
      [],
    );
    const cluster = enqueueForOwner(Clusters);
    assert.deepEqual(
      collect(cluster, 'create', child([ref({ apiVersion: 'opkit.dev/v1', kind: 'Cluster', name: 'c' })])),
      [{ name: 'c' }],
    );
  });

  it('enqueueForOwner on update enqueues the old and the new owner', () => {
    const h = enqueueForOwner(Databases);
    const out: Request[] = [];
    h.update(child([ref({ name: 'old' })]), child([ref({ name: 'new' })]), { add: (r) => out.push(r) });
    assert.deepEqual(out, [
      { namespace: 'ns', name: 'old' },
      { namespace: 'ns', name: 'new' },
    ]);
  });

  it('enqueueMapped calls the map function', () => {
    const h = enqueueMapped((o) => [{ namespace: 'x', name: `for-${o.metadata.name}` }, { name: 'global' }]);
    assert.deepEqual(collect(h, 'generic', { metadata: { name: 's' } }), [
      { namespace: 'x', name: 'for-s' },
      { name: 'global' },
    ]);
  });
});

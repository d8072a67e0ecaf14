import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigMap, Pod } from '../../src/api/builtin.ts';
import { ConfigMaps, Pods, Secrets, StatefulSets } from '../../src/api/builtin.ts';
import type { KubeObject, OwnerReference, WatchEvent } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import {
  AlreadyExistsError,
  BadRequestError,
  ConflictError,
  GoneError,
  InvalidError,
  NotFoundError,
  ServerError,
} from '../../src/client/errors.ts';
import type { Client } from '../../src/client/types.ts';
import { conflictError, FakeClient, internalError } from '../../src/testing/index.ts';

interface Widget extends KubeObject {
  spec?: { size?: number; containers?: Array<{ name: string; image?: string; args?: string[] }> };
  status?: { ready?: boolean; phase?: string };
}
const Widgets = defineResource<Widget>({
  group: 'opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});

const cm = (
  name: string,
  data: Record<string, string> = {},
  extra: Partial<ConfigMap['metadata']> = {},
): ConfigMap => ({
  metadata: { name, namespace: 'default', ...extra },
  data,
});
const widget = (name: string, size = 1, extra: Partial<Widget['metadata']> = {}): Widget => ({
  metadata: { name, namespace: 'default', ...extra },
  spec: { size },
});
const ownerRef = (owner: KubeObject, kind = 'Widget'): OwnerReference => ({
  apiVersion: 'opkit.dev/v1',
  kind,
  name: owner.metadata.name ?? '',
  uid: owner.metadata.uid ?? '',
  controller: true,
});

/** Collects `count` events from a watch iterable. */
async function take<T extends KubeObject>(
  stream: AsyncIterable<WatchEvent<T>>,
  count: number,
): Promise<WatchEvent<T>[]> {
  const events: WatchEvent<T>[] = [];
  if (count === 0) return events;
  for await (const event of stream) {
    events.push(event);
    if (events.length === count) break;
  }
  return events;
}

describe('FakeClient: create/get and stored state', () => {
  it('implements Client and sets server-owned metadata on create', async () => {
    const client: Client = new FakeClient({ now: () => new Date('2025-01-02T03:04:05.678Z') });
    const created = await client.create(ConfigMaps, cm('a', { k: 'v' }));
    assert.equal(created.apiVersion, 'v1');
    assert.equal(created.kind, 'ConfigMap');
    assert.match(created.metadata.uid ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(created.metadata.creationTimestamp, '2025-01-02T03:04:05Z');
    assert.equal(created.metadata.generation, 1);
    assert.equal(created.metadata.resourceVersion, '1');
    assert.deepEqual(await client.get(ConfigMaps, { namespace: 'default', name: 'a' }), created);
    assert.equal(client.fieldManager, 'opkit');
  });

  it('supports generateName and rejects existing names with AlreadyExistsError', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, { metadata: { generateName: 'job-', namespace: 'default' } });
    assert.match(a.metadata.name ?? '', /^job-[a-z0-9]{5}$/);
    await fake.create(ConfigMaps, cm('x'));
    await assert.rejects(fake.create(ConfigMaps, cm('x')), (err: unknown) => {
      assert.ok(err instanceof AlreadyExistsError);
      assert.equal(err.code, 409);
      assert.equal(err.reason, 'AlreadyExists');
      assert.equal(err.status.details?.name, 'x');
      assert.equal(err.message, 'configmaps "x" already exists');
      return true;
    });
    // Same name in another namespace, or of another kind, is fine.
    await fake.create(ConfigMaps, { metadata: { name: 'x', namespace: 'other' } });
    await fake.create(Secrets, { metadata: { name: 'x', namespace: 'default' } });
    await assert.rejects(fake.create(ConfigMaps, { metadata: { namespace: 'default' } }), InvalidError);
    await assert.rejects(fake.create(ConfigMaps, { metadata: { name: 'y' } }), BadRequestError);
  });

  it('deep-copies objects in and out', async () => {
    const fake = new FakeClient();
    const input = cm('a', { k: 'v' });
    const created = await fake.create(ConfigMaps, input);
    input.data = { k: 'mutated input' };
    created.data = { k: 'mutated output' };
    const got = await fake.get(ConfigMaps, { namespace: 'default', name: 'a' });
    assert.deepEqual(got.data, { k: 'v' });
    got.metadata.labels = { changed: 'yes' };
    assert.equal(fake.getStored(ConfigMaps, 'default/a')?.metadata.labels, undefined);
    const listed = await fake.list(ConfigMaps);
    listed.items[0]!.data = {};
    assert.deepEqual(fake.objects(ConfigMaps)[0]?.data, { k: 'v' });
    assert.equal(input.metadata.uid, undefined, 'the caller object is not modified');
  });

  it('get/update/delete of a missing object throw NotFoundError with a Status', async () => {
    const fake = new FakeClient();
    const check = (err: unknown): boolean => {
      assert.ok(err instanceof NotFoundError);
      assert.equal(err.code, 404);
      assert.equal(err.reason, 'NotFound');
      assert.equal(err.status.details?.kind, 'configmaps');
      return true;
    };
    await assert.rejects(fake.get(ConfigMaps, { namespace: 'default', name: 'nope' }), check);
    await assert.rejects(fake.update(ConfigMaps, cm('nope')), check);
    await assert.rejects(fake.delete(ConfigMaps, { namespace: 'default', name: 'nope' }), check);
    await assert.rejects(
      fake.patch(ConfigMaps, { namespace: 'default', name: 'nope' }, { type: 'merge', body: {} }),
      check,
    );
    await assert.rejects(fake.get(StatefulSets, { namespace: 'default', name: 'nope' }), {
      message: 'statefulsets.apps "nope" not found',
    });
  });

  it('seeds objects, keeping their status, and exposes objects()/getStored()', async () => {
    const fake = new FakeClient({
      objects: [
        { resource: ConfigMaps, object: { metadata: { name: 'b', namespace: 'ns' }, data: { x: '1' } } },
        { resource: ConfigMaps, object: cm('a') },
        { resource: Widgets, object: { metadata: { name: 'w', namespace: 'ns' }, status: { ready: true } } },
      ],
    });
    assert.deepEqual(
      fake.objects(ConfigMaps).map((o) => `${o.metadata.namespace}/${o.metadata.name}`),
      ['default/a', 'ns/b'],
    );
    assert.equal(fake.getStored(ConfigMaps, { namespace: 'ns', name: 'b' })?.data?.x, '1');
    assert.deepEqual(fake.getStored(Widgets, 'ns/w')?.status, { ready: true });
    assert.equal(fake.getStored(ConfigMaps, 'ns/zzz'), undefined);
    assert.equal(fake.resourceVersion, '3');
    assert.equal(fake.hasStatusSubresource(Widgets), true, 'inferred from a seed with a status');
  });
});

describe('FakeClient: resourceVersion and optimistic concurrency', () => {
  it('bumps one global resourceVersion on every write', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a'));
    const s = await fake.create(Secrets, { metadata: { name: 's', namespace: 'default' } });
    a.data = { k: '1' };
    const a2 = await fake.update(ConfigMaps, a);
    assert.deepEqual(
      [a.metadata.resourceVersion, s.metadata.resourceVersion, a2.metadata.resourceVersion],
      ['1', '2', '3'],
    );
    assert.equal((await fake.list(ConfigMaps)).metadata.resourceVersion, '3');
    await fake.delete(Secrets, { namespace: 'default', name: 's' });
    assert.equal(fake.resourceVersion, '4');
  });

  it('rejects an update with a stale resourceVersion with ConflictError', async () => {
    const fake = new FakeClient();
    const first = await fake.create(ConfigMaps, cm('a'));
    await fake.update(ConfigMaps, { ...first, data: { k: 'winner' } });
    await assert.rejects(fake.update(ConfigMaps, { ...first, data: { k: 'loser' } }), (err: unknown) => {
      assert.ok(err instanceof ConflictError);
      assert.equal(err.code, 409);
      assert.equal(err.reason, 'Conflict');
      assert.match(
        err.message,
        /Operation cannot be fulfilled on configmaps "a": the object has been modified/,
      );
      return true;
    });
    assert.equal(fake.getStored(ConfigMaps, 'default/a')?.data?.k, 'winner');
  });

  it('treats an update without resourceVersion as unconditional', async () => {
    const fake = new FakeClient();
    await fake.create(ConfigMaps, cm('a'));
    await fake.update(ConfigMaps, cm('a', { k: 'x' }));
    const updated = await fake.update(ConfigMaps, cm('a', { k: 'y' }));
    assert.equal(updated.data?.k, 'y');
    assert.equal(updated.metadata.resourceVersion, '3');
  });

  it('rejects an update whose uid does not match', async () => {
    const fake = new FakeClient();
    await fake.create(ConfigMaps, cm('a'));
    await assert.rejects(fake.update(ConfigMaps, cm('a', {}, { uid: 'someone-else' })), ConflictError);
  });

  it('does not store no-op writes (same resourceVersion, no event)', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a', { k: 'v' }, { labels: {} }));
    const same = await fake.update(ConfigMaps, a);
    assert.equal(same.metadata.resourceVersion, a.metadata.resourceVersion);
    assert.equal(fake.resourceVersion, '1');
  });

  it('keeps server-owned metadata on update', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a'));
    const updated = await fake.update(ConfigMaps, {
      ...a,
      metadata: { ...a.metadata, creationTimestamp: '1999-01-01T00:00:00Z', generation: 42, uid: undefined },
    });
    assert.equal(updated.metadata.uid, a.metadata.uid);
    assert.equal(updated.metadata.creationTimestamp, a.metadata.creationTimestamp);
    assert.equal(updated.metadata.generation, 1);
  });
});

describe('FakeClient: generation', () => {
  it('bumps generation only when something other than metadata/status changes', async () => {
    const fake = new FakeClient().withStatusSubresource(Widgets);
    const w = await fake.create(Widgets, widget('w', 1));
    assert.equal(w.metadata.generation, 1);

    const labelled = await fake.update(Widgets, { ...w, metadata: { ...w.metadata, labels: { a: 'b' } } });
    assert.equal(labelled.metadata.generation, 1, 'metadata change');
    assert.notEqual(labelled.metadata.resourceVersion, w.metadata.resourceVersion);

    const withStatus = await fake.updateStatus(Widgets, { ...labelled, status: { ready: true } });
    assert.equal(withStatus.metadata.generation, 1, 'status change');

    const resized = await fake.update(Widgets, { ...withStatus, spec: { size: 2 } });
    assert.equal(resized.metadata.generation, 2, 'spec change');

    const patched = await fake.patch(
      Widgets,
      { namespace: 'default', name: 'w' },
      { type: 'merge', body: { spec: { size: 3 } } },
    );
    assert.equal(patched.metadata.generation, 3);
    const annotated = await fake.patch(
      Widgets,
      { namespace: 'default', name: 'w' },
      { type: 'merge', body: { metadata: { annotations: { x: 'y' } } } },
    );
    assert.equal(annotated.metadata.generation, 3);
  });

  it('bumps generation on data changes of kinds without spec', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a', { k: '1' }));
    const b = await fake.update(ConfigMaps, { ...a, data: { k: '2' } });
    assert.equal(b.metadata.generation, 2);
  });
});

describe('FakeClient: status subresource', () => {
  it('update ignores status and updateStatus ignores everything else', async () => {
    const fake = new FakeClient({ statusSubresource: [Widgets] });
    const w = await fake.create(Widgets, { ...widget('w', 1), status: { phase: 'dropped on create' } });
    assert.equal(w.status, undefined, 'create drops status');

    const u = await fake.update(Widgets, { ...w, spec: { size: 2 }, status: { phase: 'ignored' } });
    assert.equal(u.status, undefined);
    assert.equal(u.spec?.size, 2);

    const s = await fake.updateStatus(Widgets, {
      ...u,
      metadata: { ...u.metadata, labels: { ignored: 'yes' } },
      spec: { size: 99 },
      status: { phase: 'Ready' },
    });
    assert.deepEqual(s.status, { phase: 'Ready' });
    assert.equal(s.spec?.size, 2);
    assert.equal(s.metadata.labels, undefined);

    // Stale status writes conflict too.
    await assert.rejects(fake.updateStatus(Widgets, { ...u, status: { phase: 'stale' } }), ConflictError);

    const p = await fake.patchStatus(
      Widgets,
      { namespace: 'default', name: 'w' },
      { type: 'merge', body: { spec: { size: 7 }, status: { ready: true } } },
    );
    assert.deepEqual(p.status, { phase: 'Ready', ready: true });
    assert.equal(p.spec?.size, 2);

    const main = await fake.patch(
      Widgets,
      { namespace: 'default', name: 'w' },
      { type: 'merge', body: { status: null } },
    );
    assert.deepEqual(
      main.status,
      { phase: 'Ready', ready: true },
      'patching the main resource ignores status',
    );
  });

  it('built-ins such as Pods and StatefulSets have a status subresource', async () => {
    const fake = new FakeClient();
    assert.equal(fake.hasStatusSubresource(Pods), true);
    assert.equal(fake.hasStatusSubresource(StatefulSets), true);
    const pod = await fake.create(Pods, {
      metadata: { name: 'p', namespace: 'default' },
      spec: { containers: [] },
    });
    const running = await fake.updateStatus(Pods, { ...pod, status: { phase: 'Running' } });
    assert.equal(running.status?.phase, 'Running');
    const updated = await fake.update<Pod>(Pods, { ...running, status: { phase: 'Failed' } });
    assert.equal(updated.status?.phase, 'Running');
  });

  it('kinds without a status subresource store status through update; status verbs 404', async () => {
    const fake = new FakeClient();
    assert.equal(fake.hasStatusSubresource(Widgets), false);
    const w = await fake.create(Widgets, { ...widget('w'), status: { ready: true } });
    assert.deepEqual(w.status, { ready: true });
    const u = await fake.update(Widgets, { ...w, status: { ready: false } });
    assert.deepEqual(u.status, { ready: false });
    assert.equal(u.metadata.generation, 2, 'status is part of the object without a subresource');
    await assert.rejects(fake.updateStatus(Widgets, u), NotFoundError);
    await assert.rejects(
      fake.patchStatus(Widgets, { namespace: 'default', name: 'w' }, { type: 'merge', body: {} }),
      NotFoundError,
    );
  });
});

describe('FakeClient: deletion, finalizers and garbage collection', () => {
  it('deletes objects without finalizers at once', async () => {
    const fake = new FakeClient();
    await fake.create(ConfigMaps, cm('a'));
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'a' });
    assert.equal(fake.getStored(ConfigMaps, 'default/a'), undefined);
  });

  it('sets deletionTimestamp on objects with finalizers and removes them with the last finalizer', async () => {
    const fake = new FakeClient({ now: () => new Date('2025-06-01T00:00:00Z') });
    const key = { namespace: 'default', name: 'w' };
    const w = await fake.create(Widgets, widget('w', 1, { finalizers: ['opkit.dev/a', 'opkit.dev/b'] }));
    await fake.delete(Widgets, key);
    const deleting = await fake.get(Widgets, key);
    assert.equal(deleting.metadata.deletionTimestamp, '2025-06-01T00:00:00Z');
    assert.equal(deleting.metadata.deletionGracePeriodSeconds, 0);
    assert.equal(deleting.metadata.generation, 2, 'marking for deletion bumps generation');
    assert.notEqual(deleting.metadata.resourceVersion, w.metadata.resourceVersion);

    // Deleting again changes nothing.
    await fake.delete(Widgets, key);
    assert.equal(fake.getStored(Widgets, key)?.metadata.resourceVersion, deleting.metadata.resourceVersion);

    // No new finalizers on an object being deleted.
    await assert.rejects(
      fake.update(Widgets, {
        ...deleting,
        metadata: { ...deleting.metadata, finalizers: ['opkit.dev/a', 'opkit.dev/b', 'new'] },
      }),
      (err: unknown) => {
        assert.ok(err instanceof InvalidError);
        assert.equal(err.code, 422);
        assert.equal(err.causes[0]?.field, 'metadata.finalizers');
        assert.equal(err.causes[0]?.reason, 'FieldValueForbidden');
        return true;
      },
    );
    // Update cannot clear the deletionTimestamp either.
    const one = await fake.update(Widgets, {
      ...deleting,
      metadata: { ...deleting.metadata, finalizers: ['opkit.dev/b'], deletionTimestamp: undefined },
    });
    assert.equal(one.metadata.deletionTimestamp, '2025-06-01T00:00:00Z');

    const last = await fake.patch(Widgets, key, {
      type: 'json',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    assert.equal(last.metadata.finalizers, undefined);
    assert.equal(fake.getStored(Widgets, key), undefined);
    await assert.rejects(fake.get(Widgets, key), NotFoundError);
  });

  it('checks delete preconditions', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a'));
    const key = { namespace: 'default', name: 'a' };
    await assert.rejects(fake.delete(ConfigMaps, key, { preconditions: { uid: 'other' } }), ConflictError);
    await assert.rejects(
      fake.delete(ConfigMaps, key, { preconditions: { resourceVersion: '999' } }),
      ConflictError,
    );
    assert.ok(fake.getStored(ConfigMaps, key));
    await fake.delete(ConfigMaps, key, {
      preconditions: { uid: a.metadata.uid, resourceVersion: a.metadata.resourceVersion },
    });
    assert.equal(fake.getStored(ConfigMaps, key), undefined);
  });

  it('dry-run writes change nothing', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a'));
    await fake.create(ConfigMaps, cm('b'), { dryRun: true });
    const updated = await fake.update(ConfigMaps, { ...a, data: { k: 'v' } }, { dryRun: true });
    assert.equal(updated.data?.k, 'v');
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'a' }, { dryRun: true });
    assert.deepEqual(fake.objects(ConfigMaps), [a]);
    assert.equal(fake.resourceVersion, '1');
  });

  it('garbage-collects dependents recursively', async () => {
    const fake = new FakeClient();
    const owner = await fake.create(Widgets, widget('owner'));
    const child = await fake.create(Widgets, widget('child', 1, { ownerReferences: [ownerRef(owner)] }));
    await fake.create(ConfigMaps, cm('grandchild', {}, { ownerReferences: [ownerRef(child)] }));
    await fake.create(ConfigMaps, cm('unrelated'));
    await fake.delete(Widgets, { namespace: 'default', name: 'owner' });
    assert.deepEqual(fake.objects(Widgets), []);
    assert.deepEqual(
      fake.objects(ConfigMaps).map((o) => o.metadata.name),
      ['unrelated'],
    );
  });

  it('keeps dependents that have another live owner, without the dangling reference', async () => {
    const fake = new FakeClient();
    const a = await fake.create(Widgets, widget('a'));
    const b = await fake.create(Widgets, widget('b'));
    await fake.create(
      ConfigMaps,
      cm('shared', {}, { ownerReferences: [ownerRef(a), { ...ownerRef(b), controller: false }] }),
    );
    await fake.delete(Widgets, { namespace: 'default', name: 'a' });
    const shared = fake.getStored(ConfigMaps, 'default/shared');
    assert.deepEqual(
      shared?.metadata.ownerReferences?.map((r) => r.name),
      ['b'],
    );
  });

  it('orphans dependents with propagationPolicy Orphan, also after finalizers', async () => {
    const fake = new FakeClient();
    const owner = await fake.create(Widgets, widget('owner', 1, { finalizers: ['opkit.dev/cleanup'] }));
    await fake.create(ConfigMaps, cm('dep', {}, { ownerReferences: [ownerRef(owner)] }));
    await fake.delete(Widgets, { namespace: 'default', name: 'owner' }, { propagationPolicy: 'Orphan' });
    assert.ok(
      fake.getStored(ConfigMaps, 'default/dep')?.metadata.ownerReferences,
      'nothing happens before removal',
    );
    const deleting = await fake.get(Widgets, { namespace: 'default', name: 'owner' });
    await fake.update(Widgets, { ...deleting, metadata: { ...deleting.metadata, finalizers: [] } });
    assert.equal(fake.getStored(Widgets, 'default/owner'), undefined);
    const dep = fake.getStored(ConfigMaps, 'default/dep');
    assert.ok(dep, 'the dependent survives');
    assert.equal(dep.metadata.ownerReferences, undefined);
  });

  it('marks dependents with finalizers for deletion instead of removing them', async () => {
    const fake = new FakeClient();
    const owner = await fake.create(Widgets, widget('owner'));
    await fake.create(
      ConfigMaps,
      cm('dep', {}, { ownerReferences: [ownerRef(owner)], finalizers: ['keep'] }),
    );
    await fake.delete(Widgets, { namespace: 'default', name: 'owner' }, { propagationPolicy: 'Background' });
    const dep = fake.getStored(ConfigMaps, 'default/dep');
    assert.ok(dep?.metadata.deletionTimestamp);
    await fake.update(ConfigMaps, { ...dep, metadata: { ...dep.metadata, finalizers: [] } });
    assert.equal(fake.getStored(ConfigMaps, 'default/dep'), undefined);
  });
});

describe('FakeClient: list', () => {
  const seeded = () =>
    new FakeClient({
      objects: [
        { resource: ConfigMaps, object: cm('c', {}, { labels: { app: 'db', tier: 'backend', n: '3' } }) },
        { resource: ConfigMaps, object: cm('a', {}, { labels: { app: 'web', tier: 'frontend', n: '1' } }) },
        {
          resource: ConfigMaps,
          object: { metadata: { name: 'b', namespace: 'other', labels: { app: 'db' } } },
        },
        { resource: ConfigMaps, object: cm('d') },
      ],
    });
  const names = async (fake: FakeClient, opts: Parameters<FakeClient['list']>[1]) =>
    (await fake.list(ConfigMaps, opts)).items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`);

  it('lists sorted by namespace/name, optionally in one namespace', async () => {
    const fake = seeded();
    const list = await fake.list(ConfigMaps);
    assert.equal(list.kind, 'ConfigMapList');
    assert.equal(list.apiVersion, 'v1');
    assert.equal(list.metadata.resourceVersion, '4');
    assert.deepEqual(await names(fake, {}), ['default/a', 'default/c', 'default/d', 'other/b']);
    assert.deepEqual(await names(fake, { namespace: 'other' }), ['other/b']);
  });

  it('filters with label selectors', async () => {
    const fake = seeded();
    assert.deepEqual(await names(fake, { labelSelector: 'app=db' }), ['default/c', 'other/b']);
    assert.deepEqual(await names(fake, { labelSelector: 'app==db,tier=backend' }), ['default/c']);
    assert.deepEqual(await names(fake, { labelSelector: 'app!=db' }), ['default/a', 'default/d']);
    assert.deepEqual(await names(fake, { labelSelector: 'app in (web, db),tier notin (backend)' }), [
      'default/a',
      'other/b',
    ]);
    assert.deepEqual(await names(fake, { labelSelector: 'tier' }), ['default/a', 'default/c']);
    assert.deepEqual(await names(fake, { labelSelector: '!tier' }), ['default/d', 'other/b']);
    assert.deepEqual(await names(fake, { labelSelector: 'n>1' }), ['default/c']);
    assert.deepEqual(await names(fake, { labelSelector: '' }), [
      'default/a',
      'default/c',
      'default/d',
      'other/b',
    ]);
    await assert.rejects(fake.list(ConfigMaps, { labelSelector: 'app in (web' }), BadRequestError);
    await assert.rejects(fake.list(ConfigMaps, { labelSelector: 'app=a b' }), BadRequestError);
  });

  it('filters with field selectors', async () => {
    const fake = seeded();
    assert.deepEqual(await names(fake, { fieldSelector: 'metadata.name=c' }), ['default/c']);
    assert.deepEqual(await names(fake, { fieldSelector: 'metadata.namespace!=default' }), ['other/b']);
    assert.deepEqual(await names(fake, { fieldSelector: 'metadata.namespace==default,metadata.name!=a' }), [
      'default/c',
      'default/d',
    ]);
  });

  it('paginates with limit/continue on a consistent snapshot', async () => {
    const fake = seeded();
    // Without `continue`, the client follows the pages itself: everything comes back.
    const all = await fake.list(ConfigMaps, { limit: 1 });
    assert.equal(all.items.length, 4);
    assert.equal(all.metadata.continue, undefined);

    const first = await fake.list(ConfigMaps, { limit: 2, continue: '' });
    assert.deepEqual(
      first.items.map((o) => o.metadata.name),
      ['a', 'c'],
    );
    assert.equal(first.metadata.remainingItemCount, 2);
    assert.ok(first.metadata.continue);
    const onePage = await fake.list(ConfigMaps, { limit: 2, onePage: true });
    assert.deepEqual(onePage.items, first.items, 'onePage: the first page, as the real client returns it');
    assert.equal(onePage.metadata.continue, first.metadata.continue);
    // Writes after the first page do not show up in later pages.
    await fake.create(ConfigMaps, cm('e'));
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'd' });
    const second = await fake.list(ConfigMaps, { limit: 2, continue: first.metadata.continue });
    assert.deepEqual(
      second.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`),
      ['default/d', 'other/b'],
    );
    assert.equal(second.metadata.resourceVersion, first.metadata.resourceVersion);
    assert.equal(second.metadata.continue, undefined);

    fake.compact();
    await assert.rejects(fake.list(ConfigMaps, { limit: 2, continue: first.metadata.continue }), GoneError);
    await assert.rejects(fake.list(ConfigMaps, { limit: 2, continue: 'garbage' }), BadRequestError);
  });

  it('lists at an exact resourceVersion', async () => {
    const fake = seeded();
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'a' });
    const old = await fake.list(ConfigMaps, { resourceVersion: '2', resourceVersionMatch: 'Exact' });
    assert.deepEqual(
      old.items.map((o) => o.metadata.name),
      ['a', 'c'],
    );
    assert.equal(old.metadata.resourceVersion, '2');
  });
});

describe('FakeClient: patch', () => {
  const key = { namespace: 'default', name: 'w' };

  it('applies JSON merge patches (null deletes)', async () => {
    const fake = new FakeClient();
    await fake.create(ConfigMaps, cm('w', { a: '1', b: '2' }, { labels: { x: 'y' } }));
    const patched = await fake.patch(ConfigMaps, key, {
      type: 'merge',
      body: { data: { a: null, c: '3' }, metadata: { labels: { x: null, z: 'w' } } },
    });
    assert.deepEqual(patched.data, { b: '2', c: '3' });
    assert.deepEqual(patched.metadata.labels, { z: 'w' });
    await assert.rejects(fake.patch(ConfigMaps, key, { type: 'merge', body: [1] }), BadRequestError);
  });

  it('uses a resourceVersion in a patch as a precondition', async () => {
    const fake = new FakeClient();
    const w = await fake.create(ConfigMaps, cm('w'));
    await fake.patch(ConfigMaps, key, { type: 'merge', body: { data: { a: '1' } } });
    await assert.rejects(
      fake.patch(ConfigMaps, key, {
        type: 'merge',
        body: { metadata: { resourceVersion: w.metadata.resourceVersion }, data: { a: '2' } },
      }),
      ConflictError,
    );
  });

  it('applies JSON patches (RFC 6902)', async () => {
    const fake = new FakeClient();
    await fake.create(Widgets, { ...widget('w'), spec: { size: 1, containers: [{ name: 'a' }] } });
    const patched = await fake.patch(Widgets, key, {
      type: 'json',
      body: [
        { op: 'test', path: '/spec/size', value: 1 },
        { op: 'replace', path: '/spec/size', value: 2 },
        { op: 'add', path: '/spec/containers/-', value: { name: 'b' } },
        { op: 'add', path: '/spec/containers/0', value: { name: 'first' } },
        { op: 'copy', from: '/spec/containers/1', path: '/spec/containers/-' },
        { op: 'move', from: '/spec/containers/0', path: '/spec/containers/3' },
        { op: 'remove', path: '/spec/containers/0' },
        { op: 'add', path: '/metadata/annotations', value: { 'a~b/c': 'x' } },
        { op: 'replace', path: '/metadata/annotations/a~0b~1c', value: 'y' },
      ],
    });
    assert.equal(patched.spec?.size, 2);
    assert.deepEqual(
      patched.spec?.containers?.map((c) => c.name),
      ['b', 'a', 'first'],
    );
    assert.deepEqual(patched.metadata.annotations, { 'a~b/c': 'y' });

    const before = fake.getStored(Widgets, key);
    await assert.rejects(
      fake.patch(Widgets, key, {
        type: 'json',
        body: [
          { op: 'replace', path: '/spec/size', value: 5 },
          { op: 'test', path: '/spec/size', value: 4 },
        ],
      }),
      InvalidError,
    );
    await assert.rejects(
      fake.patch(Widgets, key, { type: 'json', body: [{ op: 'remove', path: '/spec/nope' }] }),
      InvalidError,
    );
    await assert.rejects(
      fake.patch(Widgets, key, { type: 'json', body: [{ op: 'add', path: 'bad' }] }),
      BadRequestError,
    );
    assert.deepEqual(fake.getStored(Widgets, key), before, 'failed patches change nothing');

    // A test on the resourceVersion is the usual optimistic lock.
    await assert.rejects(
      fake.patch(Widgets, key, {
        type: 'json',
        body: [{ op: 'test', path: '/metadata/resourceVersion', value: '1' }],
      }),
      InvalidError,
    );
  });

  it('applies strategic merge patches, merging lists of named objects by name', async () => {
    const fake = new FakeClient();
    await fake.create(Widgets, {
      ...widget('w'),
      spec: {
        size: 1,
        containers: [
          { name: 'a', image: 'a:1', args: ['x'] },
          { name: 'b', image: 'b:1' },
        ],
      },
    });
    const patched = await fake.patch(Widgets, key, {
      type: 'strategic',
      body: {
        spec: {
          containers: [
            { name: 'b', image: 'b:2' },
            { name: 'c', image: 'c:1' },
          ],
        },
      },
    });
    assert.deepEqual(patched.spec?.containers, [
      { name: 'a', image: 'a:1', args: ['x'] },
      { name: 'b', image: 'b:2' },
      { name: 'c', image: 'c:1' },
    ]);
    const removed = await fake.patch(Widgets, key, {
      type: 'strategic',
      body: {
        spec: {
          containers: [
            { name: 'a', $patch: 'delete' },
            { name: 'b', args: ['y'] },
          ],
        },
      },
    });
    assert.deepEqual(removed.spec?.containers, [
      { name: 'b', image: 'b:2', args: ['y'] },
      { name: 'c', image: 'c:1' },
    ]);
  });

  it('server-side apply: creates when missing, applies onto the object otherwise (see fake-client-apply.test.ts)', async () => {
    const fake = new FakeClient();
    // Patch's apply body is typed KubeObject, so kind fields go through a typed variable.
    const first: Widget = {
      apiVersion: 'opkit.dev/v1',
      kind: 'Widget',
      metadata: { name: 'w', labels: { a: '1' } },
      spec: { size: 1 },
    };
    const created = await fake.patch(Widgets, key, { type: 'apply', body: first });
    assert.equal(created.metadata.namespace, 'default');
    assert.equal(created.metadata.generation, 1);
    assert.ok(created.metadata.uid);
    const second: Widget = {
      apiVersion: 'opkit.dev/v1',
      kind: 'Widget',
      metadata: { name: 'w' },
      spec: { size: 2 },
    };
    const applied = await fake.patch(Widgets, key, { type: 'apply', body: second, force: true });
    assert.equal(applied.spec?.size, 2);
    assert.equal(applied.metadata.labels, undefined, 'its manager stopped applying the label: removed');
    assert.equal(applied.metadata.uid, created.metadata.uid);
    assert.equal(applied.metadata.generation, 2);
    await assert.rejects(
      fake.patch(Widgets, key, { type: 'apply', body: { metadata: { name: 'other' } } }),
      BadRequestError,
    );
    await assert.rejects(
      fake.patch(Widgets, { namespace: 'default', name: 'missing' }, { type: 'merge', body: {} }),
      NotFoundError,
    );
  });
});

describe('FakeClient: watch', () => {
  it('delivers events after a resourceVersion, in order, with deep copies', async () => {
    const fake = new FakeClient();
    const a = await fake.create(ConfigMaps, cm('a'));
    const b = await fake.create(ConfigMaps, cm('b'));
    await fake.update(ConfigMaps, { ...b, data: { k: 'v' } });
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'a' });
    await fake.create(Secrets, { metadata: { name: 's', namespace: 'default' } });

    const events = await take(fake.watch(ConfigMaps, { resourceVersion: a.metadata.resourceVersion }), 3);
    assert.deepEqual(
      events.map((e) => [e.type, e.object.metadata.name, e.object.metadata.resourceVersion]),
      [
        ['ADDED', 'b', '2'],
        ['MODIFIED', 'b', '3'],
        ['DELETED', 'a', '4'],
      ],
    );
    events[1]!.object.data = { k: 'mutated' };
    assert.deepEqual(fake.getStored(ConfigMaps, 'default/b')?.data, { k: 'v' });
  });

  it('starts from now without a resourceVersion and follows live writes', async () => {
    const fake = new FakeClient({ objects: [{ resource: ConfigMaps, object: cm('old') }] });
    const stream = fake.watch(ConfigMaps);
    await fake.create(ConfigMaps, cm('new'));
    const pending = take(stream, 2);
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'new' });
    const events = await pending;
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.object.metadata.name}`),
      ['ADDED new', 'DELETED new'],
    );
  });

  it('sends initial events and a bookmark when asked', async () => {
    const fake = new FakeClient({
      objects: [
        { resource: ConfigMaps, object: cm('b') },
        { resource: ConfigMaps, object: cm('a') },
      ],
    });
    const events = await take(
      fake.watch(ConfigMaps, { sendInitialEvents: true, allowWatchBookmarks: true }),
      3,
    );
    assert.deepEqual(
      events.map((e) => e.type),
      ['ADDED', 'ADDED', 'BOOKMARK'],
    );
    assert.deepEqual(
      events.slice(0, 2).map((e) => e.object.metadata.name),
      ['a', 'b'],
    );
    assert.equal(events[2]?.object.metadata.annotations?.['k8s.io/initial-events-end'], 'true');
  });

  it('respects namespace and label selectors, including objects entering and leaving them', async () => {
    const fake = new FakeClient();
    const stream = fake.watch(ConfigMaps, { namespace: 'default', labelSelector: 'app=db' });
    await fake.create(ConfigMaps, {
      metadata: { name: 'elsewhere', namespace: 'other', labels: { app: 'db' } },
    });
    const x = await fake.create(ConfigMaps, cm('x'));
    const labelled = await fake.update(ConfigMaps, {
      ...x,
      metadata: { ...x.metadata, labels: { app: 'db' } },
    });
    const changed = await fake.update(ConfigMaps, { ...labelled, data: { k: '1' } });
    await fake.update(ConfigMaps, { ...changed, metadata: { ...changed.metadata, labels: { app: 'web' } } });
    const events = await take(stream, 3);
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.object.metadata.name} ${e.object.metadata.resourceVersion}`),
      ['ADDED x 3', 'MODIFIED x 4', 'DELETED x 5'],
    );
    assert.deepEqual(events[2]?.object.metadata.labels, { app: 'db' }, 'the last state that matched');
  });

  it('stops on abort', async () => {
    const fake = new FakeClient();
    const controller = new AbortController();
    const seen: string[] = [];
    const consumer = (async () => {
      for await (const event of fake.watch(ConfigMaps, { signal: controller.signal })) {
        seen.push(`${event.type} ${event.object.metadata.name}`);
        if (seen.length === 1) controller.abort();
      }
    })();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(fake.activeWatches(), 1);
    await fake.create(ConfigMaps, cm('a'));
    await fake.create(ConfigMaps, cm('b'));
    await consumer;
    assert.deepEqual(seen, ['ADDED a']);
    assert.equal(fake.activeWatches(), 0);

    // An already aborted signal: the stream ends at once.
    assert.deepEqual(await take(fake.watch(ConfigMaps, { signal: controller.signal }), 1), []);
  });

  it('ends on timeoutSeconds, on closeWatches, and with GoneError for compacted versions', async () => {
    const fake = new FakeClient();
    assert.deepEqual(await take(fake.watch(ConfigMaps, { timeoutSeconds: 0.01 }), 1), []);

    const stream = fake.watch(ConfigMaps);
    const pending = take(stream, 5);
    await new Promise((resolve) => setImmediate(resolve));
    await fake.create(ConfigMaps, cm('a'));
    fake.closeWatches(internalError('stream reset'));
    await assert.rejects(pending, ServerError);

    await fake.create(ConfigMaps, cm('b'));
    fake.compact();
    await assert.rejects(take(fake.watch(ConfigMaps, { resourceVersion: '1' }), 1), GoneError);
  });
});

describe('FakeClient: actions and error injection', () => {
  it('records every call, so tests can assert that no write happened', async () => {
    const fake = new FakeClient({ objects: [{ resource: ConfigMaps, object: cm('a') }] });
    await fake.get(ConfigMaps, { namespace: 'default', name: 'a' });
    await fake.list(ConfigMaps, { namespace: 'default' });
    fake.watch(Pods);
    assert.deepEqual(fake.writes(), []);
    assert.deepEqual(fake.actions(), [
      { verb: 'get', resource: ConfigMaps, namespace: 'default', name: 'a' },
      { verb: 'list', resource: ConfigMaps, namespace: 'default' },
      { verb: 'watch', resource: Pods },
    ]);

    await fake.patch(
      ConfigMaps,
      { namespace: 'default', name: 'a' },
      { type: 'merge', body: { data: { k: 'v' } } },
    );
    await fake.create(ConfigMaps, { metadata: { generateName: 'g-', namespace: 'default' } });
    assert.deepEqual(fake.writes(), [
      { verb: 'patch', resource: ConfigMaps, namespace: 'default', name: 'a', patchType: 'merge' },
      { verb: 'create', resource: ConfigMaps, namespace: 'default' },
    ]);
    assert.equal(fake.actions({ verb: ['get', 'list'] }).length, 2);
    assert.equal(fake.actions({ resource: Pods }).length, 1);
    fake.clearActions();
    assert.deepEqual(fake.actions(), []);
  });

  it('failNext fails the next matching request once, without changing state', async () => {
    const fake = new FakeClient({ objects: [{ resource: ConfigMaps, object: cm('a') }] });
    const injected = conflictError(ConfigMaps, 'a');
    fake.failNext('update', Secrets, internalError()).failNext('update', injected);
    const a = await fake.get(ConfigMaps, { namespace: 'default', name: 'a' });
    await assert.rejects(fake.update(ConfigMaps, { ...a, data: { k: 'v' } }), (err) => err === injected);
    assert.deepEqual(fake.getStored(ConfigMaps, 'default/a')?.data, {});
    assert.equal(fake.writes().length, 1, 'the failed request is recorded');
    const updated = await fake.update(ConfigMaps, { ...a, data: { k: 'v' } });
    assert.equal(updated.data?.k, 'v');

    fake.failNext('watch', internalError('watch failed'));
    await assert.rejects(take(fake.watch(ConfigMaps), 1), ServerError);
  });

  it('onRequest hooks can fail requests and simulate concurrent writers', async () => {
    const fake = new FakeClient({ objects: [{ resource: ConfigMaps, object: cm('a') }] });
    const a = await fake.get(ConfigMaps, { namespace: 'default', name: 'a' });
    const remove = fake.onRequest(async (req) => {
      if (req.verb === 'update') {
        // Another writer gets in first; its calls are not recorded or intercepted.
        await fake.update(ConfigMaps, { ...a, data: { k: 'theirs' } });
      }
      if (req.verb === 'delete') throw new Error('denied');
    });
    await assert.rejects(fake.update(ConfigMaps, { ...a, data: { k: 'ours' } }), ConflictError);
    await assert.rejects(fake.delete(ConfigMaps, { namespace: 'default', name: 'a' }), /denied/);
    assert.deepEqual(
      fake.actions().map((x) => x.verb),
      ['get', 'update', 'delete'],
    );
    remove();
    await fake.delete(ConfigMaps, { namespace: 'default', name: 'a' });
    assert.equal(fake.getStored(ConfigMaps, 'default/a'), undefined);
  });

  it('rejects requests whose signal is already aborted', async () => {
    const fake = new FakeClient();
    const signal = AbortSignal.abort();
    await assert.rejects(fake.get(ConfigMaps, { namespace: 'default', name: 'a' }, { signal }), {
      name: 'AbortError',
    });
    assert.deepEqual(fake.actions(), []);
  });

  it('setStored and deleteStored change state like another actor would, notifying watchers', async () => {
    const fake = new FakeClient();
    const stream = fake.watch(Pods);
    const stored = fake.setStored(Pods, {
      metadata: { name: 'p', namespace: 'default' },
      status: { phase: 'Running' },
    });
    assert.equal(stored.status?.phase, 'Running');
    assert.equal(stored.metadata.generation, 1);
    assert.equal(fake.deleteStored(Pods, 'default/p'), true);
    const events = await take(stream, 2);
    assert.deepEqual(
      events.map((e) => e.type),
      ['ADDED', 'DELETED'],
    );
    assert.deepEqual(
      fake.actions().map((x) => x.verb),
      ['watch'],
    );
  });
});

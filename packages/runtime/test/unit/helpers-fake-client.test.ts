/** The reconcile helpers against the runtime's FakeClient (API server semantics, recorded actions). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigMap, Deployment, Event } from '../../src/api/builtin.ts';
import { ConfigMaps, Deployments, Events } from '../../src/api/builtin.ts';
import type { Condition, KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import {
  addFinalizer,
  apply,
  createOrUpdate,
  EventRecorder,
  isConditionTrue,
  patchStatus,
  runFinalizer,
  setCondition,
  setControllerReference,
} from '../../src/helpers/index.ts';
import { FakeClient } from '../../src/testing/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

type Database = KubeObject & {
  spec?: { version?: string };
  status?: { phase?: string; observedGeneration?: number; conditions?: Condition[] };
};
const Databases = defineResource<Database>({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});
const FINALIZER = 'opkit.dev/cleanup';
const dbKey = { namespace: 'ns', name: 'db' };
const now = () => new Date('2024-05-01T10:00:00Z');

function newClient(): FakeClient {
  return new FakeClient({ statusSubresource: [Databases] });
}

const configMap = (owner: Database, data: Record<string, string>): ConfigMap =>
  setControllerReference(owner, { metadata: { name: 'db-config', namespace: 'ns' }, data }, Databases);

describe('helpers with FakeClient', () => {
  it('finalizer flow: add, delete, cleanup once, object and its children gone', async () => {
    const client = newClient();
    const created = await client.create(Databases, { metadata: { ...dbKey }, spec: { version: '16' } });
    await createOrUpdate(client, ConfigMaps, configMap(created, { a: '1' }));

    const first = await runFinalizer(client, Databases, created, FINALIZER, async () => {
      throw new Error('not deleting yet');
    });
    assert.equal(first.added, true);
    assert.deepEqual(client.getStored(Databases, dbKey)?.metadata.finalizers, [FINALIZER]);

    await client.delete(Databases, dbKey);
    const deleting = (await client.get(Databases, dbKey)) as Database;
    assert.ok(deleting.metadata.deletionTimestamp);

    let cleanups = 0;
    const outcome = await runFinalizer(client, Databases, deleting, FINALIZER, async () => {
      cleanups++;
    });
    assert.equal(cleanups, 1);
    assert.equal(outcome.deleted, true);
    assert.equal(outcome.finalized, true);
    assert.equal(client.getStored(Databases, dbKey), undefined);
    assert.equal(
      client.getStored(ConfigMaps, { namespace: 'ns', name: 'db-config' }),
      undefined,
      'garbage collected',
    );
  });

  it('a concurrent finalizer is kept: the resourceVersion test fails and the helper retries', async () => {
    const client = newClient();
    const stale = await client.create(Databases, { metadata: { ...dbKey } });
    let raced = false;
    client.onRequest(async (request) => {
      if (request.verb !== 'patch' || raced) return;
      raced = true;
      const current = client.getStored(Databases, dbKey)!;
      current.metadata.finalizers = ['other.io/protect'];
      client.setStored(Databases, current);
    });
    client.clearActions();
    const written = await addFinalizer(client, Databases, stale, FINALIZER);
    assert.deepEqual(written.metadata.finalizers, ['other.io/protect', FINALIZER]);
    assert.deepEqual(
      client.actions().map((a) => a.verb),
      ['patch', 'get', 'patch'],
    );
  });

  it('createOrUpdate makes no write when nothing changed', async () => {
    const client = newClient();
    const owner = await client.create(Databases, { metadata: { ...dbKey } });
    const desired: Deployment = {
      metadata: { name: 'db', namespace: 'ns', labels: { app: 'db' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'db' } },
        template: {
          metadata: { labels: { app: 'db' } },
          spec: { containers: [{ name: 'pg', image: 'postgres:16' }] },
        },
      },
    };
    setControllerReference(owner, desired, Databases);
    assert.equal((await createOrUpdate(client, Deployments, structuredClone(desired))).operation, 'created');

    // Another actor adds defaults and status.
    const live = client.getStored(Deployments, dbKey)!;
    live.spec!.revisionHistoryLimit = 10;
    live.spec!.template.spec!.containers[0]!.imagePullPolicy = 'IfNotPresent';
    live.metadata.annotations = { 'deployment.kubernetes.io/revision': '1' };
    live.status = { replicas: 1 };
    client.setStored(Deployments, live);

    client.clearActions();
    const again = await createOrUpdate(client, Deployments, structuredClone(desired));
    assert.equal(again.operation, 'unchanged');
    assert.deepEqual(client.writes(), []);

    const bumped = structuredClone(desired);
    bumped.spec!.template.spec!.containers[0]!.image = 'postgres:17';
    const updated = await createOrUpdate(client, Deployments, bumped);
    assert.equal(updated.operation, 'updated');
    assert.deepEqual(
      client.writes().map((a) => a.verb),
      ['update'],
    );
    assert.equal(updated.object.spec?.revisionHistoryLimit, 10);
    assert.deepEqual(updated.object.metadata.annotations, { 'deployment.kubernetes.io/revision': '1' });
    assert.equal(updated.object.metadata.generation, 2);
  });

  it('createOrUpdate retries a conflict from a stale cache read', async () => {
    const client = newClient();
    const owner = await client.create(Databases, { metadata: { ...dbKey } });
    const cached = await client.create(ConfigMaps, configMap(owner, { a: '1' }));
    const current = client.getStored(ConfigMaps, cached.metadata as { name: string })!;
    client.setStored(ConfigMaps, { ...current, data: { a: '1', b: 'someone' } });
    client.clearActions();
    const result = await createOrUpdate(client, ConfigMaps, configMap(owner, { a: '2' }), {
      reader: { get: () => cached },
    });
    assert.equal(result.operation, 'updated');
    assert.deepEqual(result.object.data, { a: '2', b: 'someone' });
    assert.deepEqual(
      client.actions().map((a) => a.verb),
      ['update', 'get', 'update'],
    );
  });

  it('patchStatus writes through the status subresource only when the status changed', async () => {
    const client = newClient();
    const db = await client.create(Databases, { metadata: { ...dbKey }, spec: { version: '16' } });
    client.clearActions();
    const ready = (status: NonNullable<Database['status']>) => ({
      ...status,
      phase: 'Ready',
      conditions: setCondition(
        status.conditions,
        { type: 'Ready', status: 'True', reason: 'Up', message: '' },
        now,
      ),
    });
    const first = await patchStatus(client, Databases, db, ready, { observedGeneration: true });
    assert.equal(first.changed, true);
    assert.equal(isConditionTrue(first.object.status?.conditions, 'Ready'), true);
    assert.equal(first.object.status?.observedGeneration, 1);
    assert.deepEqual(
      client.writes().map((a) => [a.verb, a.patchType]),
      [['patchStatus', 'merge']],
    );
    const second = await patchStatus(client, Databases, first.object, ready, { observedGeneration: true });
    assert.equal(second.changed, false);
    assert.equal(client.writes().length, 1);
  });

  it('apply creates, skips when matching, and updates', async () => {
    const client = newClient();
    const desired: ConfigMap = { metadata: { name: 'cfg', namespace: 'ns' }, data: { a: '1' } };
    assert.equal(
      (await apply(client, ConfigMaps, desired, { fieldManager: 'db', force: true })).operation,
      'created',
    );
    client.clearActions();
    assert.equal((await apply(client, ConfigMaps, desired, { fieldManager: 'db' })).operation, 'unchanged');
    assert.deepEqual(client.writes(), []);
    const changed = await apply(client, ConfigMaps, { ...desired, data: { a: '2' } }, { fieldManager: 'db' });
    assert.equal(changed.operation, 'updated');
    assert.deepEqual(changed.object.data, { a: '2' });
    assert.deepEqual(
      client.writes().map((a) => [a.verb, a.patchType]),
      [['patch', 'apply']],
    );
  });

  it('EventRecorder aggregates into one Event with a series', async () => {
    const client = newClient();
    const clock = new FakeClock(Date.parse('2024-05-01T10:00:00Z'));
    const errors: unknown[] = [];
    const recorder = new EventRecorder({
      client,
      clock,
      reportingController: 'opkit.dev/database',
      reportingInstance: 'op-0',
      onError: (err) => errors.push(err),
    });
    const db = await client.create(Databases, { metadata: { ...dbKey } });
    for (let i = 0; i < 5; i++) {
      recorder.event(db, 'Warning', 'ProvisionFailed', 'Provision', 'volume not ready');
      clock.advance(10_000);
    }
    await recorder.flush();
    await recorder.close();
    assert.deepEqual(errors, []);
    const events = client.objects(Events, 'ns') as Event[];
    assert.equal(events.length, 1);
    assert.equal(events[0]?.series?.count, 5);
    assert.equal(events[0]?.regarding?.uid, db.metadata.uid);
    assert.equal(events[0]?.reason, 'ProvisionFailed');
  });
});

/**
 * Deletion and the deletion policy against a real cluster (real garbage collector, real pvc-protection):
 * the credentials Secret goes with the data (kept with the PVCs under Retain and reused by a Database of
 * the same name, deleted with them under Delete, never regenerated for existing data), objects the
 * operator must not take over, one replica (no PDB, no read-only Service), and a StorageClass that does
 * not allow expansion.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type Condition,
  ConfigMaps,
  PersistentVolumeClaims,
  PodDisruptionBudgets,
  type Secret,
  Secrets,
  Services,
  StatefulSets,
  StorageClasses,
} from '@opkit/runtime';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  createNamespace,
  eventsFor,
  eventually,
  getDb,
  sample,
  sleep,
  startCluster,
  startOperator,
  waitForPhase,
} from './helpers.ts';

const NS = 'deletion';
const cond = (db: Database, type: string) =>
  (db.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);

describe('Database operator: deletion, policies, one replica, storage classes', { timeout: 600_000 }, () => {
  let cluster: Cluster;
  let operator: { stop(): Promise<void> } | undefined;
  const client = () => cluster.client;
  const claims = async (name: string) =>
    (
      await client().list(PersistentVolumeClaims, {
        namespace: NS,
        labelSelector: `app.kubernetes.io/instance=${name}`,
      })
    ).items
      .map((c) => c.metadata.name)
      .sort();
  const secretOf = async (name: string): Promise<Secret | undefined> =>
    (await client().list(Secrets, { namespace: NS })).items.find(
      (s) => s.metadata.name === `${name}-credentials`,
    );
  const gone = async (name: string) =>
    eventually(
      `${name} to be deleted`,
      async () =>
        !(await client().list(Databases.resource, { namespace: NS })).items.some(
          (d) => d.metadata.name === name,
        ),
      30_000,
    );

  before(async () => {
    cluster = await startCluster();
    await createNamespace(client(), NS);
    operator = startOperator(cluster);
  });

  after(async () => {
    await operator?.stop();
    await cluster?.stop();
  });

  test('deletionPolicy Delete: the finalizer deletes the PVCs, then the Database goes', async () => {
    await client().create(Databases.resource, sample(NS, 'drop', { replicas: 2, deletionPolicy: 'Delete' }));
    const db = await waitForPhase(client(), NS, 'drop', 'Running');
    assert.deepEqual(db.metadata.finalizers, ['myapp.example.com/finalizer']);
    assert.deepEqual(await claims('drop'), ['data-drop-0', 'data-drop-1']);
    // Under Delete the Secret goes with the data: the Database controls it.
    const secret = await secretOf('drop');
    assert.equal(secret?.metadata.ownerReferences?.[0]?.uid, db.metadata.uid);
    assert.equal(secret?.metadata.ownerReferences?.[0]?.controller, true);
    await client().delete(Databases.resource, { namespace: NS, name: 'drop' });
    await gone('drop');
    await eventually('the PVCs deleted', async () => (await claims('drop')).length === 0, 60_000);
    await eventually('the Secret deleted with them', async () => !(await secretOf('drop')), 60_000);
  });

  test('switching deletionPolicy from Delete to Retain removes the finalizer', async () => {
    await client().create(
      Databases.resource,
      sample(NS, 'switch', { replicas: 1, deletionPolicy: 'Delete' }),
    );
    await eventually(
      'the finalizer',
      async () => (await getDb(client(), NS, 'switch')).metadata.finalizers?.length === 1,
    );
    await client().patch(
      Databases.resource,
      { namespace: NS, name: 'switch' },
      { type: 'merge', body: { spec: { deletionPolicy: 'Retain' } } },
    );
    await eventually(
      'no finalizer',
      async () => (await getDb(client(), NS, 'switch')).metadata.finalizers === undefined,
    );
    await waitForPhase(client(), NS, 'switch', 'Running');
    // Retain again: the Secret is released from the Database, so it stays with the data.
    await eventually(
      'the Secret without an ownerReference',
      async () => (await secretOf('switch'))?.metadata.ownerReferences === undefined,
    );
    await client().delete(Databases.resource, { namespace: NS, name: 'switch' });
    await gone('switch');
    await sleep(500);
    assert.deepEqual(await claims('switch'), ['data-switch-0']);
    assert.ok(await secretOf('switch'), 'the Secret stays with the PVC');
  });

  test('deletion completes when the children were deleted first (and the operator was down meanwhile)', async () => {
    await client().create(Databases.resource, sample(NS, 'bare', { replicas: 2, deletionPolicy: 'Delete' }));
    await waitForPhase(client(), NS, 'bare', 'Running');
    await operator?.stop();
    operator = undefined;
    const key = (name: string) => ({ namespace: NS, name });
    await client().delete(StatefulSets, key('bare'), { propagationPolicy: 'Background' });
    for (const name of ['bare', 'bare-ro', 'bare-headless']) await client().delete(Services, key(name));
    await client().delete(Secrets, key('bare-credentials'));
    await client().delete(ConfigMaps, key('bare-config'));
    await client().delete(PodDisruptionBudgets, key('bare'));
    for (const name of await claims('bare')) await client().delete(PersistentVolumeClaims, key(name ?? ''));
    await client().delete(Databases.resource, key('bare'));
    assert.ok((await getDb(client(), NS, 'bare')).metadata.deletionTimestamp, 'held by the finalizer');
    operator = startOperator(cluster);
    await gone('bare');
  });

  test('one replica: no PodDisruptionBudget and no read-only Service; they come and go with replicas', async () => {
    await client().create(Databases.resource, sample(NS, 'single', { replicas: 1 }));
    const db = await waitForPhase(client(), NS, 'single', 'Running');
    assert.equal(db.status?.readyReplicas, 1);
    assert.equal(db.status?.endpoints?.readOnly, undefined);
    const services = async () =>
      (
        await client().list(Services, { namespace: NS, labelSelector: 'app.kubernetes.io/instance=single' })
      ).items
        .map((s) => s.metadata.name)
        .sort();
    const pdbs = async () =>
      (
        await client().list(PodDisruptionBudgets, {
          namespace: NS,
          labelSelector: 'app.kubernetes.io/instance=single',
        })
      ).items.length;
    assert.deepEqual(await services(), ['single', 'single-headless']);
    assert.equal(await pdbs(), 0);

    await client().patch(
      Databases.resource,
      { namespace: NS, name: 'single' },
      { type: 'merge', body: { spec: { replicas: 2 } } },
    );
    await waitForPhase(client(), NS, 'single', 'Running');
    await eventually(
      'the read-only Service and the PDB',
      async () => (await services()).length === 3 && (await pdbs()) === 1,
    );

    await client().patch(
      Databases.resource,
      { namespace: NS, name: 'single' },
      { type: 'merge', body: { spec: { replicas: 1 } } },
    );
    await eventually(
      'the read-only Service and the PDB deleted',
      async () => (await services()).length === 2 && (await pdbs()) === 0,
    );
    const one = await waitForPhase(client(), NS, 'single', 'Running');
    assert.equal(one.status?.endpoints?.readOnly, undefined);
  });

  test('a StorageClass without volume expansion: Degraded with the reason and a Warning, nothing recreated', async () => {
    await client().create(StorageClasses, {
      metadata: { name: 'fixed' },
      provisioner: 'opkit.dev/local-volume',
      reclaimPolicy: 'Delete',
      volumeBindingMode: 'Immediate',
      allowVolumeExpansion: false,
    });
    await client().create(
      Databases.resource,
      sample(NS, 'fixed', { replicas: 1, storage: '1Gi', storageClassName: 'fixed' }),
    );
    await waitForPhase(client(), NS, 'fixed', 'Running');
    await eventually('the PVC bound', async () => {
      const pvc = await client().get(PersistentVolumeClaims, { namespace: NS, name: 'data-fixed-0' });
      return pvc.status?.phase === 'Bound';
    });
    const sts = await client().get(StatefulSets, { namespace: NS, name: 'fixed' });
    await client().patch(
      Databases.resource,
      { namespace: NS, name: 'fixed' },
      { type: 'merge', body: { spec: { storage: '2Gi' } } },
    );
    const db = await eventually('the Degraded condition', async () => {
      const d = await getDb(client(), NS, 'fixed');
      return cond(d, 'Degraded')?.reason === 'StorageExpansionFailed' ? d : undefined;
    });
    assert.equal(cond(db, 'Degraded')?.status, 'True');
    assert.match(cond(db, 'Degraded')?.message ?? '', /data-fixed-0/);
    assert.equal(db.status?.phase, 'Running', 'the database itself still runs');
    const events = await eventsFor(client(), NS, 'fixed');
    assert.ok(
      events.some((e) => e.type === 'Warning' && e.reason === 'StorageExpansionFailed'),
      events.map((e) => e.reason).join(', '),
    );
    const pvc = await client().get(PersistentVolumeClaims, { namespace: NS, name: 'data-fixed-0' });
    assert.equal(pvc.spec?.resources?.requests?.storage, '1Gi');
    const after = await client().get(StatefulSets, { namespace: NS, name: 'fixed' });
    assert.equal(after.metadata.uid, sts.metadata.uid, 'the StatefulSet was not recreated');
  });

  test('objects under a child name that the operator does not own are never taken over: Failed, Warning naming them', async () => {
    // A Service of the user's named like the read-write Service: no labels (so not in the operator's
    // cache), no owner.
    const theirs = await client().create(Services, {
      metadata: { name: 'taken', namespace: NS, labels: { app: 'legacy' } },
      spec: { ports: [{ port: 3306 }], selector: { app: 'legacy' } },
    });
    await client().create(Databases.resource, sample(NS, 'taken', { replicas: 1 }));
    const db = await waitForPhase(client(), NS, 'taken', 'Failed');
    assert.equal(cond(db, 'Degraded')?.reason, 'ServiceNotOwned');
    assert.match(cond(db, 'Degraded')?.message ?? '', new RegExp(`Service ${NS}/taken already exists`));
    const warning = await eventually('the Warning event', async () =>
      (await eventsFor(client(), NS, 'taken')).find(
        (e) => e.type === 'Warning' && e.reason === 'ServiceNotOwned',
      ),
    );
    assert.equal(warning.related?.kind, 'Service');
    assert.equal(warning.related?.name, 'taken');
    await sleep(1000);
    const after = await client().get(Services, { namespace: NS, name: 'taken' });
    assert.equal(after.metadata.resourceVersion, theirs.metadata.resourceVersion, 'never written');
    assert.equal(after.metadata.ownerReferences, undefined);
    await client().delete(Databases.resource, { namespace: NS, name: 'taken' });
    await gone('taken');
  });

  test('deletionPolicy Retain (the default): the Database goes, its PVCs and Secret stay; the same name reuses them (last: the garbage collector needs ~30 s to discover the CRD)', async () => {
    await client().create(Databases.resource, sample(NS, 'keep', { replicas: 2 }));
    const db = await waitForPhase(client(), NS, 'keep', 'Running');
    assert.equal(db.spec.deletionPolicy, 'Retain');
    assert.deepEqual(db.metadata.finalizers ?? [], []);
    const secret = await secretOf('keep');
    assert.ok(secret);
    assert.equal(secret.metadata.ownerReferences, undefined, 'nothing deleted with the Database owns it');
    await client().delete(Databases.resource, { namespace: NS, name: 'keep' });
    await gone('keep');
    await eventually('the StatefulSet garbage-collected', async () => {
      const list = await client().list(StatefulSets, { namespace: NS });
      return !list.items.some((s) => s.metadata.name === 'keep');
    });
    await eventually('the ConfigMap garbage-collected', async () => {
      const list = await client().list(ConfigMaps, { namespace: NS });
      return !list.items.some((s) => s.metadata.name === 'keep-config');
    });
    await sleep(1000);
    assert.deepEqual(await claims('keep'), ['data-keep-0', 'data-keep-1']);
    const kept = await secretOf('keep');
    assert.ok(kept, 'the Secret stays with the PVCs');
    assert.equal(kept.metadata.uid, secret.metadata.uid);
    assert.deepEqual(kept.data, secret.data);

    // The same name again: the retained data and the passwords it was initialized with.
    await client().create(Databases.resource, sample(NS, 'keep', { replicas: 2 }));
    const again = await waitForPhase(client(), NS, 'keep', 'Running');
    assert.notEqual(again.metadata.uid, db.metadata.uid);
    assert.equal(again.status?.secretName, 'keep-credentials');
    const reused = await secretOf('keep');
    assert.equal(reused?.metadata.uid, secret.metadata.uid, 'the same Secret');
    assert.equal(reused?.metadata.resourceVersion, secret.metadata.resourceVersion, 'not even rewritten');
    assert.deepEqual(reused?.data, secret.data);
    assert.deepEqual(await claims('keep'), ['data-keep-0', 'data-keep-1']);
  });

  test('the Secret deleted by hand while its data exists: no new passwords, Failed saying to restore it', async () => {
    const secret = await secretOf('keep');
    assert.ok(secret);
    await client().delete(Secrets, { namespace: NS, name: 'keep-credentials' });
    const failed = await eventually('Failed, CredentialsMissing', async () => {
      const d = await getDb(client(), NS, 'keep');
      return d.status?.phase === 'Failed' && cond(d, 'Degraded')?.reason === 'CredentialsMissing'
        ? d
        : undefined;
    });
    assert.match(cond(failed, 'Degraded')?.message ?? '', /Secret deletion\/keep-credentials is missing/);
    assert.match(cond(failed, 'Degraded')?.message ?? '', /Restore/);
    const events = await eventsFor(client(), NS, 'keep');
    assert.ok(
      events.some((e) => e.type === 'Warning' && e.reason === 'CredentialsMissing'),
      events.map((e) => e.reason).join(', '),
    );
    await sleep(1000);
    assert.equal(await secretOf('keep'), undefined, 'no Secret with new passwords');

    // Restored from the backup (labels included): Running again, with the old passwords.
    await client().create(Secrets, {
      metadata: { name: 'keep-credentials', namespace: NS, labels: secret.metadata.labels ?? {} },
      type: secret.type ?? 'Opaque',
      data: secret.data ?? {},
    });
    await waitForPhase(client(), NS, 'keep', 'Running');
    assert.deepEqual((await secretOf('keep'))?.data, secret.data);
  });
});

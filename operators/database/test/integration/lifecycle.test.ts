/**
 * The Database operator against a real cluster (kwok nodes make pods Running and Ready): the issue's
 * sample from creation to Running, API validation, no writes in steady state, drift repair, scaling,
 * version change and volume expansion. One cluster, one operator, tests in order.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import {
  type Condition,
  ConfigMaps,
  InvalidError,
  PersistentVolumeClaims,
  type Pod,
  PodDisruptionBudgets,
  Pods,
  Secrets,
  Services,
  StatefulSets,
} from '@opkit/runtime';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  CountingClient,
  createNamespace,
  eventsFor,
  eventually,
  getDb,
  recordDatabases,
  sample,
  setSchedulable,
  sleep,
  startCluster,
  startOperator,
  waitForPhase,
} from './helpers.ts';

const NS = 'prod';
const NAME = 'production-db';
const SELECTOR = `app.kubernetes.io/instance=${NAME}`;

const isReady = (p: Pod) =>
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
const cond = (db: Database, type: string) =>
  (db.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);

describe('Database operator: lifecycle', { timeout: 600_000 }, () => {
  let cluster: Cluster;
  let counting: CountingClient;
  let operator: { stop(): Promise<void> };
  const client = () => cluster.client;
  const pods = async () =>
    (await client().list(Pods, { namespace: NS, labelSelector: SELECTOR })).items.sort((a, b) =>
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
    );

  before(async () => {
    cluster = await startCluster();
    await createNamespace(client(), NS);
    const { createClient, loadConfig } = await import('@opkit/runtime');
    counting = new CountingClient(
      createClient(loadConfig({ kubeconfig: cluster.kubeconfig }), { fieldManager: 'database-operator' }),
    );
    operator = startOperator(cluster, { client: counting });
  });

  after(async () => {
    await operator?.stop();
    await cluster?.stop();
  });

  test('invalid Databases are rejected by the API server, naming the field', async () => {
    const reject = async (db: Database, field: RegExp, message?: RegExp) => {
      await assert.rejects(client().create(Databases.resource, db), (err: unknown) => {
        assert.ok(err instanceof InvalidError, `expected 422 Invalid, got ${String(err)}`);
        const text = `${err.message} ${JSON.stringify(err.causes)}`;
        assert.match(text, field);
        if (message) assert.match(text, message);
        return true;
      });
    };
    await reject(sample(NS, 'bad-engine', { engine: 'oracle' as 'mysql' }), /spec\.engine/, /oracle/);
    await reject(
      sample(NS, 'bad-replicas-0', { replicas: 0 }),
      /spec\.replicas/,
      /greater than or equal to 1/,
    );
    await reject(sample(NS, 'bad-replicas-6', { replicas: 6 }), /spec\.replicas/, /less than or equal to 5/);
    await reject(sample(NS, 'bad-storage', { storage: 'ten gigs' }), /spec\.storage/);
    await reject(
      sample(NS, 'bad-version', { version: '5.7' }),
      /spec\.version/,
      /supported mysql versions are 8\.0, 8\.4/,
    );

    // Transition rules: engine immutable, storage never shrinks, version moves (all by the API server).
    const db = await client().create(Databases.resource, sample(NS, 'rules', { replicas: 1 }));
    const change = async (
      spec: Partial<Database['spec']>,
      field: RegExp,
      message: RegExp,
      name = 'rules',
    ) => {
      await assert.rejects(
        client().patch(Databases.resource, { namespace: NS, name }, { type: 'merge', body: { spec } }),
        (err: unknown) => {
          assert.ok(err instanceof InvalidError, `expected 422 Invalid, got ${String(err)}`);
          assert.match(`${err.message} ${JSON.stringify(err.causes)}`, field);
          assert.match(err.message, message);
          return true;
        },
      );
    };
    await change({ engine: 'postgres', version: '16' }, /spec\.engine/, /engine is immutable/);
    await change({ storage: '5Gi' }, /spec\.storage/, /storage may not shrink/);
    // Versions: an unsupported one is refused on update too; mysql 8.0 -> 8.4 is accepted; 8.4 -> 8.0
    // (a downgrade) is refused.
    await change(
      { version: '9.0' },
      /spec\.version/,
      /unsupported mysql version 9\.0: supported mysql versions are 8\.0, 8\.4/,
    );
    const upgraded = await client().patch(
      Databases.resource,
      { namespace: NS, name: 'rules' },
      { type: 'merge', body: { spec: { version: '8.4' } } },
    );
    assert.equal(upgraded.spec.version, '8.4', 'mysql 8.0 -> 8.4 accepted');
    await change(
      { version: '8.0' },
      /spec\.version/,
      /version 8\.4 -> 8\.0 is a mysql downgrade: downgrades are not supported: restore a backup into a new Database instead/,
    );
    // postgres: a major version never changes in place; down, that is a downgrade.
    await client().create(
      Databases.resource,
      sample(NS, 'rules-pg', { engine: 'postgres', version: '16', replicas: 1 }),
    );
    await change(
      { version: '17' },
      /spec\.version/,
      /postgres major version changes are not done in place \(that needs pg_upgrade or a dump and restore\): create a new Database with the new version and migrate the data/,
      'rules-pg',
    );
    await change({ version: '15' }, /spec\.version/, /16 -> 15 is a postgres downgrade/, 'rules-pg');
    assert.equal((await getDb(client(), NS, 'rules-pg')).spec.version, '16');
    await client().delete(Databases.resource, { namespace: NS, name: db.metadata.name ?? '' });
    await client().delete(Databases.resource, { namespace: NS, name: 'rules-pg' });
    await eventually('the rules Databases to be gone', async () =>
      (await client().list(Databases.resource, { namespace: NS })).items.every(
        (d) => d.metadata.name !== 'rules' && d.metadata.name !== 'rules-pg',
      ),
    );
  });

  test('the sample becomes a StatefulSet of 3 with Services and a Secret, Running only once pods are Ready', async () => {
    const recorder = recordDatabases(client(), NS);
    // No schedulable node: pods stay Pending, never Ready.
    await setSchedulable(client(), false);
    await client().create(Databases.resource, sample(NS));

    const sts = await eventually('the StatefulSet', () =>
      client().get(StatefulSets, { namespace: NS, name: NAME }),
    );
    assert.equal(sts.spec?.replicas, 3);
    assert.equal(sts.metadata.ownerReferences?.[0]?.kind, 'Database');
    assert.equal(sts.metadata.ownerReferences?.[0]?.controller, true);
    for (const name of [NAME, `${NAME}-ro`, `${NAME}-headless`]) {
      await eventually(`Service ${name}`, () => client().get(Services, { namespace: NS, name }));
    }
    const secret = await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
    for (const key of ['admin-password', 'app-password', 'replication-password']) {
      const value = Buffer.from(secret.data?.[key] ?? '', 'base64').toString();
      assert.ok(value.length >= 24, `${key} is at least 24 characters`);
    }
    await client().get(ConfigMaps, { namespace: NS, name: `${NAME}-config` });
    await client().get(PodDisruptionBudgets, { namespace: NS, name: NAME });

    // Pods exist but none is Ready: the status must say so, for a while.
    await eventually('a pending pod', async () => (await pods()).length > 0);
    const provisioning = await eventually('status Provisioning', async () => {
      const db = await getDb(client(), NS, NAME);
      return db.status?.phase === 'Provisioning' ? db : undefined;
    });
    assert.equal(provisioning.status?.readyReplicas, 0);
    assert.equal(provisioning.status?.secretName, `${NAME}-credentials`);
    assert.equal(cond(provisioning, 'Ready')?.status, 'False');
    await sleep(3000);
    const still = await getDb(client(), NS, NAME);
    assert.equal(still.status?.phase, 'Provisioning');
    assert.equal(still.status?.currentPrimary, undefined);
    assert.ok((await pods()).every((p) => !isReady(p)));

    // Let the pods schedule: kwok makes them Running and Ready.
    await setSchedulable(client(), true);
    const running = await waitForPhase(client(), NS, NAME, 'Running');
    recorder.stop();
    assert.equal(running.status?.readyReplicas, 3);
    assert.equal(running.status?.replicas, 3);
    assert.equal(running.status?.currentPrimary, `${NAME}-0`);
    assert.equal(running.status?.secretName, `${NAME}-credentials`);
    assert.deepEqual(running.status?.endpoints, {
      readWrite: `${NAME}.${NS}.svc.cluster.local`,
      readOnly: `${NAME}-ro.${NS}.svc.cluster.local`,
      port: 3306,
    });
    assert.equal(
      running.status?.selector,
      `app.kubernetes.io/instance=${NAME},app.kubernetes.io/managed-by=opkit-database-operator,app.kubernetes.io/name=mysql`,
    );
    assert.equal(cond(running, 'Ready')?.status, 'True');
    assert.equal(cond(running, 'Progressing')?.status, 'False');
    assert.equal(cond(running, 'Degraded')?.status, 'False');
    const live = await pods();
    assert.equal(live.length, 3);
    assert.ok(live.every(isReady));

    // Never Running before all three pods were Ready.
    const phases = recorder.seen.map((d) => d.status?.phase).filter((p, i, a) => p && p !== a[i - 1]);
    assert.deepEqual(phases.slice(0, 1), ['Provisioning']);
    for (const seen of recorder.seen) {
      if (seen.status?.phase === 'Running') assert.equal(seen.status.readyReplicas, 3);
    }

    // Role labels: ordinal 0 is the primary; the Services select by role.
    await eventually('role labels', async () => {
      const roles = (await pods()).map((p) => p.metadata.labels?.['myapp.example.com/role']);
      return JSON.stringify(roles) === JSON.stringify(['primary', 'replica', 'replica']);
    });
    const rw = await client().get(Services, { namespace: NS, name: NAME });
    assert.equal(rw.spec?.selector?.['myapp.example.com/role'], 'primary');
    const ro = await client().get(Services, { namespace: NS, name: `${NAME}-ro` });
    assert.equal(ro.spec?.selector?.['myapp.example.com/role'], 'replica');

    // kubectl shows the printer columns.
    const table = execFileSync('kubectl', ['--kubeconfig', cluster.kubeconfig, 'get', 'db', '-n', NS], {
      encoding: 'utf8',
    });
    assert.match(table, /NAME\s+ENGINE\s+VERSION\s+REPLICAS\s+READY\s+PHASE\s+PRIMARY\s+TIMELINE\s+AGE/);
    assert.match(table, /production-db\s+mysql\s+8\.0\s+3\s+3\s+Running/);

    const reasons = (await eventsFor(client(), NS, NAME)).map((e) => e.reason);
    assert.ok(reasons.includes('Created'), `events: ${reasons.join(', ')}`);
    // No secret value in any event.
    for (const e of await eventsFor(client(), NS, NAME)) {
      for (const value of Object.values(secret.data ?? {})) {
        assert.ok(!(e.note ?? '').includes(Buffer.from(value, 'base64').toString()));
      }
    }
  });

  test('steady state: a Running Database costs no write at all', async () => {
    await sleep(1500); // let the last events of the rollout settle
    const since = Date.now();
    // Wake the reconcile up a few times without changing anything: a pod label nobody cares about.
    for (let i = 0; i < 3; i++) {
      await client().patch(
        Pods,
        { namespace: NS, name: `${NAME}-1` },
        {
          type: 'merge',
          body: { metadata: { labels: { 'example.com/poke': String(i) } } },
        },
      );
      await sleep(700);
    }
    await sleep(3000);
    const writes = counting.writesSince(since);
    assert.deepEqual(writes, [], `writes in steady state: ${JSON.stringify(writes)}`);
  });

  test('drift is repaired: a deleted Service and a StatefulSet scaled by hand are put back', async () => {
    const before = await client().get(Services, { namespace: NS, name: NAME });
    await client().delete(Services, { namespace: NS, name: NAME });
    await client().patch(
      StatefulSets,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { replicas: 5 } } },
    );
    const svc = await eventually('the read-write Service back', async () => {
      const s = await client().get(Services, { namespace: NS, name: NAME });
      return s.metadata.uid !== before.metadata.uid ? s : undefined;
    });
    assert.equal(svc.spec?.selector?.['myapp.example.com/role'], 'primary');
    await eventually('the StatefulSet back at 3 replicas', async () => {
      const sts = await client().get(StatefulSets, { namespace: NS, name: NAME });
      return sts.spec?.replicas === 3;
    });
    await waitForPhase(client(), NS, NAME, 'Running');
    await eventually('3 pods', async () => (await pods()).length === 3);
  });

  test('a lost pod makes a Running Database Degraded, with the reason, until it is back', async () => {
    await setSchedulable(client(), false);
    try {
      await client().delete(Pods, { namespace: NS, name: `${NAME}-2` });
      const degraded = await eventually('Degraded with 2 ready replicas', async () => {
        const db = await getDb(client(), NS, NAME);
        return db.status?.phase === 'Degraded' && db.status.readyReplicas === 2 ? db : undefined;
      });
      assert.equal(cond(degraded, 'Degraded')?.status, 'True');
      assert.equal(cond(degraded, 'Degraded')?.reason, 'ReplicasNotReady');
      assert.equal(cond(degraded, 'Ready')?.status, 'False');
      await sleep(1000);
      assert.equal((await getDb(client(), NS, NAME)).status?.phase, 'Degraded');
    } finally {
      await setSchedulable(client(), true);
    }
    const back = await waitForPhase(client(), NS, NAME, 'Running');
    assert.equal(back.status?.readyReplicas, 3);
    assert.equal(cond(back, 'Degraded')?.status, 'False');
  });

  test('scale 3 -> 5 -> 2: the StatefulSet follows, PVCs of removed pods remain', async () => {
    await client().patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { replicas: 5 } } },
    );
    const updating = await eventually('Updating', async () => {
      const db = await getDb(client(), NS, NAME);
      return db.status?.phase === 'Updating' ||
        (db.status?.readyReplicas === 5 && db.status.phase === 'Running')
        ? db
        : undefined;
    });
    assert.ok(updating);
    const five = await waitForPhase(client(), NS, NAME, 'Running');
    assert.equal(five.status?.readyReplicas, 5);
    assert.equal((await pods()).filter(isReady).length, 5);

    await client().patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { replicas: 2 } } },
    );
    const two = await eventually('2 replicas Running', async () => {
      const db = await getDb(client(), NS, NAME);
      return db.status?.phase === 'Running' &&
        db.status.readyReplicas === 2 &&
        db.status.observedGeneration === db.metadata.generation
        ? db
        : undefined;
    });
    assert.equal(two.status?.replicas, 2);
    await eventually('2 pods', async () => (await pods()).length === 2);
    const claims = (
      await client().list(PersistentVolumeClaims, { namespace: NS, labelSelector: SELECTOR })
    ).items
      .map((c) => c.metadata.name)
      .sort();
    assert.deepEqual(
      claims,
      [0, 1, 2, 3, 4].map((i) => `data-${NAME}-${i}`),
    );
    const reasons = (await eventsFor(client(), NS, NAME)).map((e) => e.reason);
    assert.ok(reasons.includes('Scaled'), `events: ${reasons.join(', ')}`);
  });

  test('a version change rolls the pods and the status follows', async () => {
    const before = new Map((await pods()).map((p) => [p.metadata.name, p.metadata.uid]));
    await client().patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { version: '8.4' } } },
    );
    await eventually(
      'Updating',
      async () => (await getDb(client(), NS, NAME)).status?.phase === 'Updating',
      30_000,
      50,
    );
    const running = await waitForPhase(client(), NS, NAME, 'Running');
    assert.equal(running.status?.readyReplicas, 2);
    const after = await pods();
    assert.equal(after.length, 2);
    for (const p of after) {
      assert.notEqual(p.metadata.uid, before.get(p.metadata.name), `${p.metadata.name} was recreated`);
      assert.match(p.spec?.containers[0]?.image ?? '', /mysql:8\.4/);
    }
    const sts = await client().get(StatefulSets, { namespace: NS, name: NAME });
    assert.equal(sts.status?.currentRevision, sts.status?.updateRevision);
    const reasons = (await eventsFor(client(), NS, NAME)).map((e) => e.reason);
    assert.ok(reasons.includes('VersionChanged'), `events: ${reasons.join(', ')}`);
    // The role labels came back on the new pods.
    await eventually('role labels on the new pods', async () =>
      (await pods()).every(
        (p) =>
          p.metadata.labels?.['myapp.example.com/role'] ===
          (p.metadata.name?.endsWith('-0') ? 'primary' : 'replica'),
      ),
    );
  });

  test('growing storage expands every PVC and recreates the StatefulSet without touching the pods', async () => {
    const stsBefore = await client().get(StatefulSets, { namespace: NS, name: NAME });
    const podsBefore = new Map((await pods()).map((p) => [p.metadata.name, p.metadata.uid]));
    await client().patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { storage: '20Gi' } } },
    );
    await eventually('every claim at 20Gi', async () => {
      const claims = (await client().list(PersistentVolumeClaims, { namespace: NS, labelSelector: SELECTOR }))
        .items;
      return (
        claims.length === 5 &&
        claims.every(
          (c) => c.spec?.resources?.requests?.storage === '20Gi' && c.status?.capacity?.storage === '20Gi',
        )
      );
    });
    const sts = await eventually('a new StatefulSet with the 20Gi template', async () => {
      const s = await client().get(StatefulSets, { namespace: NS, name: NAME });
      return s.metadata.uid !== stsBefore.metadata.uid && !s.metadata.deletionTimestamp ? s : undefined;
    });
    assert.equal(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage, '20Gi');
    const running = await waitForPhase(client(), NS, NAME, 'Running');
    assert.equal(running.status?.readyReplicas, 2);
    const after = await pods();
    assert.deepEqual(
      new Map(after.map((p) => [p.metadata.name, p.metadata.uid])),
      podsBefore,
      'the pods were kept',
    );
    const reasons = (await eventsFor(client(), NS, NAME)).map((e) => e.reason);
    assert.ok(reasons.includes('StorageExpanding'), `events: ${reasons.join(', ')}`);
  });
});

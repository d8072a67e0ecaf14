/**
 * The operator's record of a PostgreSQL cluster (designated primary, system identifier), from the
 * instances' reports in their pods' termination messages: observePostgres (pure) and the reconcile with
 * the FakeClient (what it records in the status and hands to the pods through the ConfigMap).
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { type Condition, ConfigMaps, type Pod, Pods, StatefulSets } from '@opkit/runtime';
import { FakeClient } from '@opkit/runtime/testing';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import {
  imageTag,
  observePostgres,
  parseInstanceReport,
  podReport,
  postgresClusterData,
  postgresImageProblem,
} from '../../src/controllers/database/engines/index.ts';
import { type ReconcilerDeps, reconcileDatabase, roleChanges } from '../../src/controllers/database/index.ts';
import { FakeRecorder, managedOnlyReader } from './fixtures.ts';

const NS = 'shop';
const NAME = 'orders';
const ID = '7312345678901234567';

/** A pod whose bootstrap init container terminated with this report (what the kubelet shows). */
function pod(
  name: string,
  report: Record<string, string> | undefined,
  opts: { refusedStart?: boolean; withoutTls?: boolean } = {},
): Pod {
  const message = report
    ? Object.entries(report)
        .map(([k, v]) => `${k}=${v}\n`)
        .join('')
    : undefined;
  const terminated = (code: number) => ({
    exitCode: code,
    finishedAt: new Date('2025-01-01T00:00:00Z'),
    ...(message ? { message } : {}),
  });
  const failed =
    report?.result && !['initialized', 'cloned', 'existing', 'rewound', 'recloned'].includes(report.result);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      labels: {
        'app.kubernetes.io/instance': NAME,
        'app.kubernetes.io/managed-by': 'opkit-database-operator',
        'app.kubernetes.io/name': 'postgres',
      },
    },
    // A pod of today's template mounts the server certificate; one from before TLS does not.
    spec: {
      containers: [],
      ...(opts.withoutTls ? {} : { volumes: [{ name: 'tls', secret: { secretName: `${NAME}-server` } }] }),
    },
    status: {
      phase: failed ? 'Pending' : 'Running',
      conditions: [{ type: 'Ready', status: failed ? 'False' : 'True' }],
      initContainerStatuses: [
        {
          name: 'bootstrap',
          image: 'postgres:16',
          imageID: '',
          ready: !failed,
          restartCount: failed ? 3 : 0,
          ...(failed && !opts.refusedStart
            ? { state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: terminated(1) } }
            : { state: { terminated: terminated(0) } }),
        },
      ],
    },
  } as Pod;
}

describe('instance reports', () => {
  it('parses the termination message; ignores what it does not know', () => {
    assert.deepEqual(parseInstanceReport(`result=cloned\nsystem-identifier=${ID}\ntimeline=2\nextra=1\n`), {
      result: 'cloned',
      systemIdentifier: ID,
      timeline: 2,
      message: undefined,
    });
    assert.equal(parseInstanceReport('result=rm -rf\nsystem-identifier=x').result, undefined);
    assert.equal(parseInstanceReport('result=existing\nsystem-identifier=x').systemIdentifier, undefined);
  });

  it("reads the init container's report, also from the last termination of a crash loop", () => {
    assert.equal(
      podReport(pod('orders-0', { result: 'initialized', 'system-identifier': ID }))?.result,
      'initialized',
    );
    const refused = podReport(pod('orders-0', { result: 'empty-primary', message: 'empty' }));
    assert.equal(refused?.result, 'empty-primary');
    assert.equal(refused?.message, 'empty');
    assert.equal(podReport(pod('orders-0', undefined)), undefined);
  });
});

describe('observePostgres', () => {
  const db = { metadata: { name: NAME } };

  it("records the system identifier from the designated primary's report, not from another pod's", () => {
    const fresh = observePostgres(db, undefined, []);
    assert.deepEqual(fresh.record, { primary: 'orders-0' });
    const replicaOnly = observePostgres(db, undefined, [
      pod('orders-1', { result: 'cloned', 'system-identifier': ID }),
    ]);
    assert.equal(replicaOnly.record.systemIdentifier, undefined);
    const init = observePostgres(db, undefined, [
      pod('orders-0', { result: 'initialized', 'system-identifier': ID }),
    ]);
    assert.deepEqual(init.record, { primary: 'orders-0', systemIdentifier: ID });
    assert.equal(init.failure, undefined);
  });

  it('keeps what it recorded: another identifier reported later does not replace it', () => {
    const o = observePostgres(db, { targetPrimary: 'orders-2', systemIdentifier: ID }, [
      pod('orders-2', { result: 'existing', 'system-identifier': '999' }),
    ]);
    assert.deepEqual(o.record, { primary: 'orders-2', systemIdentifier: ID });
  });

  it('names the primary when its live pod runs without TLS (a pod from before TLS), only the primary', () => {
    const prev = { targetPrimary: 'orders-0', systemIdentifier: ID };
    const old = pod('orders-0', { result: 'existing', 'system-identifier': ID }, { withoutTls: true });
    const updated = pod('orders-1', { result: 'existing', 'system-identifier': ID });
    assert.equal(observePostgres(db, prev, [old, updated]).record.primaryWithoutTls, 'orders-0');
    // The primary serves TLS, an old replica does not: nothing is relaxed.
    const oldReplica = pod('orders-1', { result: 'existing', 'system-identifier': ID }, { withoutTls: true });
    const tlsPrimary = pod('orders-0', { result: 'existing', 'system-identifier': ID });
    assert.equal(observePostgres(db, prev, [tlsPrimary, oldReplica]).record.primaryWithoutTls, undefined);
    // Not seen, or on its way out: strict (verify-full).
    assert.equal(observePostgres(db, prev, [updated]).record.primaryWithoutTls, undefined);
    const deleting = { ...old, metadata: { ...old.metadata, deletionTimestamp: '2025-01-01T00:00:00Z' } };
    assert.equal(observePostgres(db, prev, [deleting]).record.primaryWithoutTls, undefined);
    // After a switchover to an updated replica, the old pod is no longer the primary: strict again.
    const moved = observePostgres(db, { ...prev, targetPrimary: 'orders-1' }, [old, updated]);
    assert.equal(moved.record.primaryWithoutTls, undefined);
  });

  it('the pods are told the primary without TLS only while it is designated, never during a failover', () => {
    const d = Databases.applyDefaults({
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: { name: NAME, namespace: NS },
      spec: { engine: 'postgres', version: '16', storage: '1Gi', replicas: 2 },
    } as Database);
    const key = 'cluster-primary-without-tls';
    assert.equal(postgresClusterData(d)[key], '');
    assert.equal(
      postgresClusterData(d, { primary: 'orders-0', primaryWithoutTls: 'orders-0' })[key],
      'orders-0',
    );
    const fenced = { primary: 'orders-0', primaryWithoutTls: 'orders-0', fenced: true };
    assert.equal(postgresClusterData(d, fenced)[key], '');
  });

  it('the primary lost its volume while replicas hold the data: Failed PrimaryDataLost naming them', () => {
    const o = observePostgres(db, { systemIdentifier: ID }, [
      pod('orders-0', { result: 'empty-primary', message: 'the data directory of orders-0 ... is empty' }),
      pod('orders-1', { result: 'cloned', 'system-identifier': ID }),
      pod('orders-2', { result: 'existing', 'system-identifier': ID }),
    ]);
    assert.equal(o.failure?.reason, 'PrimaryDataLost');
    assert.match(o.failure?.message ?? '', /orders-0, the primary, has an empty data directory/);
    assert.match(o.failure?.message ?? '', /orders-1, orders-2 hold this Database's data/);
    assert.deepEqual(
      o.problems.map((p) => `${p.pod}:${p.reason}`),
      ['orders-0:empty-primary'],
    );
  });

  it('every volume lost: Failed DataLost, never re-initialized', () => {
    const o = observePostgres(db, { systemIdentifier: ID }, [pod('orders-0', { result: 'empty-primary' })]);
    assert.equal(o.failure?.reason, 'DataLost');
    assert.match(o.failure?.message ?? '', /every volume was lost/);
    assert.match(o.failure?.message ?? '', /does not initialize a new, empty database/);
  });

  it("an instance on another cluster's data is a problem, not a failure of the Database", () => {
    const o = observePostgres(db, { systemIdentifier: ID }, [
      pod('orders-0', { result: 'existing', 'system-identifier': ID }),
      pod('orders-1', {
        result: 'foreign-data',
        'system-identifier': '42',
        message: 'holds system identifier 42',
      }),
    ]);
    assert.equal(o.failure, undefined);
    assert.deepEqual(o.problems, [
      { pod: 'orders-1', reason: 'foreign-data', message: 'holds system identifier 42' },
    ]);
  });

  it('roles follow the designated primary, whatever its ordinal', () => {
    const pods = [pod('orders-0', undefined), pod('orders-1', undefined)];
    assert.deepEqual(
      roleChanges(NAME, pods, 'orders-1').map((c) => `${c.pod}=${c.to}`),
      ['orders-0=replica', 'orders-1=primary'],
    );
  });
});

describe('spec.image against spec.version', () => {
  it('reads the tag of any image reference', () => {
    assert.equal(imageTag('postgres:16'), '16');
    assert.equal(imageTag('registry:5000/db/postgres:15.4-alpine@sha256:abc'), '15.4-alpine');
    assert.equal(imageTag('registry:5000/db/postgres'), undefined);
  });

  it('refuses a tag naming another major, naming spec.image; lets through what the tag cannot tell', () => {
    assert.match(
      postgresImageProblem('mirror.local/postgres:16.2', '15') ?? '',
      /^spec\.image mirror\.local\/postgres:16\.2 is PostgreSQL 16 by its tag, but spec\.version is 15/,
    );
    for (const ok of [
      'postgres:15',
      'postgres:15.8-bookworm',
      'opkit.local/postgres:15',
      'postgres:latest',
      'pg',
    ])
      assert.equal(postgresImageProblem(ok, '15'), undefined, ok);
    assert.equal(postgresImageProblem(undefined, '15'), undefined);
  });
});

describe('reconcile: the cluster record in the status and the ConfigMap', () => {
  let client: FakeClient;
  let deps: ReconcilerDeps;
  const key = { namespace: NS, name: NAME };
  const reconcile = () => reconcileDatabase(deps, key, { signal: new AbortController().signal });
  const stored = () => client.getStored(Databases.resource, key) as Database;
  const cm = () => client.getStored(ConfigMaps, { namespace: NS, name: `${NAME}-config` });

  beforeEach(async () => {
    client = new FakeClient({ statusSubresource: [Databases.resource] });
    deps = { client, reader: managedOnlyReader(client), recorder: new FakeRecorder() };
    await client.create(
      Databases.resource,
      Databases.applyDefaults({
        apiVersion: 'myapp.example.com/v1',
        kind: 'Database',
        metadata: { name: NAME, namespace: NS },
        spec: { engine: 'postgres', version: '16', storage: '1Gi', replicas: 2 },
      } as Database) as Database,
    );
  });

  it('a new Database: the pods are told to initialize (no identifier), then the reported one is recorded', async () => {
    await reconcile();
    assert.equal(cm()?.data?.['cluster-primary'], 'orders-0');
    assert.equal(cm()?.data?.['cluster-system-identifier'], '');
    assert.equal(stored().status?.targetPrimary, 'orders-0');
    assert.equal(stored().status?.systemIdentifier, undefined);

    client.setStored(Pods, pod('orders-0', { result: 'initialized', 'system-identifier': ID }));
    await reconcile();
    assert.equal(stored().status?.systemIdentifier, ID);
    assert.equal(cm()?.data?.['cluster-system-identifier'], ID);
    assert.ok(client.getStored(StatefulSets, key));
  });

  it('a primary pod without TLS: the ConfigMap names it for its replicas, with an Event; empty once it serves TLS', async () => {
    client.setStored(
      Pods,
      pod('orders-0', { result: 'initialized', 'system-identifier': ID }, { withoutTls: true }),
    );
    await reconcile();
    assert.equal(cm()?.data?.['cluster-primary-without-tls'], 'orders-0');
    const events = (deps.recorder as FakeRecorder).events.filter((e) => e.reason === 'PrimaryWithoutTLS');
    assert.equal(events.length, 1);
    assert.match(events[0]?.note ?? '', /orders-0, the primary, runs without TLS/);
    await reconcile();
    assert.equal(
      (deps.recorder as FakeRecorder).events.filter((e) => e.reason === 'PrimaryWithoutTLS').length,
      1,
      'said once, not at every reconcile',
    );
    client.setStored(Pods, pod('orders-0', { result: 'existing', 'system-identifier': ID }));
    await reconcile();
    assert.equal(cm()?.data?.['cluster-primary-without-tls'], '');
  });

  it('every volume lost after the cluster was initialized: Failed with DataLost, identity kept', async () => {
    client.setStored(Pods, pod('orders-0', { result: 'initialized', 'system-identifier': ID }));
    await reconcile();
    assert.equal(stored().status?.systemIdentifier, ID);
    // The PVC and pod were deleted; the new pod's bootstrap refuses to initdb.
    client.setStored(Pods, pod('orders-0', { result: 'empty-primary', message: 'is empty: refusing' }));
    await assert.rejects(reconcile(), /every volume was lost/);
    const st = stored().status;
    assert.equal(st?.phase, 'Failed');
    assert.equal(st?.systemIdentifier, ID);
    assert.equal(cm()?.data?.['cluster-system-identifier'], ID, 'the pods still refuse to initialize');
    const ready = (st?.conditions as Condition[] | undefined)?.find((c) => c.type === 'Ready');
    assert.equal(ready?.reason, 'DataLost');
  });

  it('spec.image of another major: Failed ImageVersionMismatch naming it, nothing rolled out', async () => {
    const db = stored();
    await client.update(Databases.resource, { ...db, spec: { ...db.spec, image: 'postgres:17' } });
    await assert.rejects(
      reconcile(),
      /spec\.image postgres:17 is PostgreSQL 17 by its tag, but spec\.version is 16/,
    );
    const st = stored().status;
    assert.equal(st?.phase, 'Failed');
    const ready = (st?.conditions as Condition[] | undefined)?.find((c) => c.type === 'Ready');
    assert.equal(ready?.reason, 'ImageVersionMismatch');
    assert.match(ready?.message ?? '', /spec\.image postgres:17/);
    assert.equal(client.getStored(StatefulSets, key), undefined);
    assert.equal(st?.observedGeneration, undefined, 'the spec was not applied');
  });

  it('an instance refusing to start is named in the status with its own message', async () => {
    await reconcile();
    client.setStored(Pods, pod('orders-0', { result: 'initialized', 'system-identifier': ID }));
    client.setStored(
      Pods,
      pod('orders-1', {
        result: 'image-version',
        message: 'the image runs PostgreSQL 17, but spec.version is 16',
      }),
    );
    await reconcile();
    const ready = (stored().status?.conditions as Condition[] | undefined)?.find((c) => c.type === 'Ready');
    assert.equal(ready?.reason, 'InstanceRefused');
    assert.match(
      ready?.message ?? '',
      /orders-1 refused to start \(image-version\): the image runs PostgreSQL 17/,
    );
  });

  it('mysql keeps ordinal 0 as the primary and records no cluster fields', async () => {
    await client.create(
      Databases.resource,
      Databases.applyDefaults({
        apiVersion: 'myapp.example.com/v1',
        kind: 'Database',
        metadata: { name: 'shop-db', namespace: NS },
        spec: { engine: 'mysql', version: '8.4', storage: '1Gi', replicas: 2 },
      } as Database) as Database,
    );
    await reconcileDatabase(
      deps,
      { namespace: NS, name: 'shop-db' },
      { signal: new AbortController().signal },
    );
    const st = (client.getStored(Databases.resource, { namespace: NS, name: 'shop-db' }) as Database).status;
    assert.equal(st?.targetPrimary, undefined);
    assert.equal(st?.systemIdentifier, undefined);
    const data = client.getStored(ConfigMaps, { namespace: NS, name: 'shop-db-config' })?.data ?? {};
    assert.equal(data['cluster-primary'], undefined);
  });
});

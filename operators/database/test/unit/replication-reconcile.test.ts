/**
 * The replication poll through the reconcile (FakeClient, FakePodExecutor refusing what the API server
 * refuses, a clock): status.instances gets streaming, lag and timeline from the primary; the reconciles
 * between polls exec nothing; a quiet cluster, and small lag under writes, write no status; a replica over
 * the lag bound is named in the conditions; the reconcile asks to be woken for the next poll.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import type { Pod } from '@opkit/runtime';
import { Pods } from '@opkit/runtime';
import { FakeClient, FakePodExecutor } from '@opkit/runtime/testing';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { type ReconcilerDeps, reconcileDatabase } from '../../src/controllers/database/index.ts';
import { ReplicationPoller } from '../../src/controllers/database/replication-poll.ts';
import { FakeRecorder, managedOnlyReader } from './fixtures.ts';

const NS = 'shop';
const NAME = 'orders';
const ID = '7312345678901234567';
const MiB = 1024 * 1024;

function pod(name: string, role: string, ready = true): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels: {
        'app.kubernetes.io/instance': NAME,
        'app.kubernetes.io/managed-by': 'opkit-database-operator',
        'app.kubernetes.io/name': 'postgres',
        'myapp.example.com/role': role,
      },
    },
    spec: { containers: [{ name: 'postgres', image: 'postgres:16' }], nodeName: 'n1' },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      containerStatuses: [
        {
          name: 'postgres',
          image: 'postgres:16',
          imageID: '',
          ready,
          started: true,
          restartCount: 0,
          state: { running: {} },
        },
      ],
    },
  } as Pod;
}

describe('the replication poll in the reconcile', () => {
  let client: FakeClient;
  let exec: FakePodExecutor;
  let deps: ReconcilerDeps;
  let now: number;
  let poller: ReplicationPoller;
  /** What the primary answers: lag bytes and ms of orders-1 and orders-2. */
  let lag: [number, number, number, number];
  const key = { namespace: NS, name: NAME };
  const reconcileOnce = () => reconcileDatabase(deps, key, { signal: new AbortController().signal });
  /** A reconcile; when it started a poll, the reconcile the answer wakes (the controller's enqueue). */
  const reconcile = async () => {
    const polled = polls();
    const result = await reconcileOnce();
    if (polls() === polled) return result;
    await poller.settled();
    return reconcileOnce();
  };
  const stored = () => client.getStored(Databases.resource, key) as Database;
  const polls = () => exec.calls.filter((c) => /pg_stat_replication/.test(c.command[2] ?? '')).length;

  beforeEach(async () => {
    client = new FakeClient({ statusSubresource: [Databases.resource] });
    exec = new FakePodExecutor({ client, defaultNamespace: NS });
    lag = [0, 0, 0, 0];
    exec.on({ pod: 'orders-0', command: /pg_stat_replication/ }, () => ({
      stdout: [
        'self|f|1',
        `sender|orders-1|streaming|${lag[0]}|${lag[1]}`,
        `sender|orders-2|streaming|${lag[2]}|${lag[3]}`,
        'slot|opkit_orders_1|reserved',
        'slot|opkit_orders_2|reserved',
        '',
      ].join('\n'),
    }));
    now = Date.parse('2026-12-04T12:00:00Z');
    poller = new ReplicationPoller({ exec, intervalMs: 30_000, clock: () => now });
    deps = {
      client,
      reader: managedOnlyReader(client),
      recorder: new FakeRecorder(),
      exec,
      clock: () => now,
      replication: poller,
    };
    await client.create(
      Databases.resource,
      Databases.applyDefaults({
        apiVersion: 'myapp.example.com/v1',
        kind: 'Database',
        metadata: { name: NAME, namespace: NS },
        spec: { engine: 'postgres', version: '16', storage: '1Gi', replicas: 3 },
      } as Database) as Database,
    );
    await client.patchStatus(Databases.resource, key, {
      type: 'merge',
      body: {
        status: { phase: 'Running', readyReplicas: 3, targetPrimary: 'orders-0', systemIdentifier: ID },
      },
    });
    client.setStored(Pods, pod('orders-0', 'primary'));
    client.setStored(Pods, pod('orders-1', 'replica'));
    client.setStored(Pods, pod('orders-2', 'replica'));
  });

  test('streaming, lag 0 and the timeline in status.instances; no exec and no write between polls', async () => {
    const first = await reconcile();
    assert.equal(polls(), 1);
    assert.deepEqual(first, { requeueAfter: 30_000 }, 'woken for the next poll');
    const instances = stored().status?.instances ?? [];
    assert.deepEqual(
      instances.map((i) => [i.name, i.role, i.streaming, i.lagBytes, i.lagSeconds, i.timeline]),
      [
        ['orders-0', 'primary', undefined, undefined, undefined, 1],
        ['orders-1', 'replica', true, 0, 0, 1],
        ['orders-2', 'replica', true, 0, 0, 1],
      ],
    );
    await reconcile(); // settles what the first reconcile's writes changed
    const rv = stored().metadata.resourceVersion;

    now += 10_000;
    assert.deepEqual(await reconcile(), { requeueAfter: 20_000 });
    assert.equal(polls(), 1, 'the reconciles between polls exec nothing');

    // The next poll, under writes: a few hundred KiB and ms behind, in the same (0) bucket.
    lag = [300 * 1024, 40, 700 * 1024, 900];
    now += 20_000;
    await reconcile();
    assert.equal(polls(), 2);
    assert.equal(
      stored().metadata.resourceVersion,
      rv,
      'no status write: nothing changed that the status says',
    );
  });

  test('a replica over the lag bound is named, with its lag, in the conditions', async () => {
    await reconcile();
    lag = [0, 0, 80 * MiB, 12_000];
    client.setStored(Pods, pod('orders-2', 'replica', false));
    now += 30_000;
    await reconcile();
    const st = stored().status;
    const i2 = st?.instances?.find((i) => i.name === 'orders-2');
    assert.equal(i2?.reason, 'LagOverBound');
    assert.equal(i2?.lagBytes, 64 * MiB);
    assert.equal(i2?.lagSeconds, 8);
    const ready = st?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.match(
      ready?.message ?? '',
      /orders-2 not ready \(LagOverBound: orders-2: replay lag 80 MiB over the bound 64 MiB\)/,
    );
  });

  test('the Database gone: nothing more is asked', async () => {
    await reconcile();
    await client.delete(Databases.resource, key);
    now += 60_000;
    assert.equal(await reconcile(), undefined);
    assert.equal(polls(), 1);
  });
});

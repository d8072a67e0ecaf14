import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Condition, Pod, StatefulSet } from '@opkit/runtime';
import type { Database, DatabaseStatus } from '../../src/api/v1/database.ts';
import { computeStatus, describeStatus, type Observed } from '../../src/controllers/database/status.ts';

const T0 = new Date('2025-01-01T00:00:00Z');
const T1 = new Date('2025-01-01T00:05:00Z');
const at = (d: Date) => () => d;

function database(replicas = 3, generation = 1, extra: Partial<Database['metadata']> = {}): Database {
  return {
    apiVersion: 'myapp.example.com/v1',
    kind: 'Database',
    metadata: { name: 'db', namespace: 'ns', uid: 'u1', generation, ...extra },
    spec: { engine: 'mysql', version: '8.0', storage: '10Gi', replicas },
  } as Database;
}

function sts(o: {
  replicas?: number;
  ready?: number;
  current?: number;
  updated?: number;
  generation?: number;
  observed?: number;
  currentRevision?: string;
  updateRevision?: string;
  deleting?: boolean;
}): StatefulSet {
  const replicas = o.replicas ?? 3;
  return {
    metadata: {
      name: 'db',
      namespace: 'ns',
      generation: o.generation ?? 1,
      ...(o.deleting ? { deletionTimestamp: '2025-01-01T00:00:00Z' } : {}),
    },
    spec: { replicas, selector: {}, serviceName: 'db-headless', template: {} },
    status: {
      replicas: o.current ?? replicas,
      readyReplicas: o.ready ?? replicas,
      updatedReplicas: o.updated ?? o.current ?? replicas,
      observedGeneration: o.observed ?? o.generation ?? 1,
      currentRevision: o.currentRevision ?? 'db-1',
      updateRevision: o.updateRevision ?? o.currentRevision ?? 'db-1',
    },
  } as StatefulSet;
}

function pod(ordinal: number, ready: boolean): Pod {
  return {
    metadata: { name: `db-${ordinal}`, namespace: 'ns' },
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  } as Pod;
}

function observed(
  statefulSet: StatefulSet | undefined,
  pods: Pod[] = [],
  extra: Partial<Observed> = {},
): Observed {
  return { statefulSet, pods, statefulSetName: 'db', ...extra };
}

const cond = (s: DatabaseStatus, type: string) =>
  (s.conditions as Condition[] | undefined)?.find((c) => c.type === type);

describe('computeStatus', () => {
  it('Pending when nothing exists yet', () => {
    const s = computeStatus(database(), undefined, observed(undefined), at(T0));
    assert.equal(s.phase, 'Pending');
    assert.equal(s.readyReplicas, 0);
    assert.equal(cond(s, 'Ready')?.status, 'False');
    assert.equal(cond(s, 'Progressing')?.status, 'True');
    assert.equal(s.currentPrimary, undefined);
  });

  it('Provisioning while a new Database has fewer ready replicas than asked', () => {
    const s = computeStatus(
      database(),
      undefined,
      observed(sts({ ready: 1, current: 2 }), [pod(0, true), pod(1, false)]),
      at(T0),
    );
    assert.equal(s.phase, 'Provisioning');
    assert.equal(s.readyReplicas, 1);
    assert.equal(s.currentPrimary, 'db-0');
    assert.match(cond(s, 'Ready')?.message ?? '', /1\/3 replicas ready/);
  });

  it('not Running while pods are not ready, even if the StatefulSet has all its pods', () => {
    const s = computeStatus(
      database(),
      undefined,
      observed(sts({ ready: 0 }), [pod(0, false), pod(1, false), pod(2, false)]),
    );
    assert.equal(s.phase, 'Provisioning');
    assert.equal(s.currentPrimary, undefined);
  });

  it('Running only when all replicas are ready, the revision rolled out and the generation observed', () => {
    const pods = [pod(0, true), pod(1, true), pod(2, true)];
    const s = computeStatus(
      database(),
      undefined,
      observed(sts({}), pods, { secretName: 'db-credentials' }),
      at(T0),
    );
    assert.equal(s.phase, 'Running');
    assert.equal(s.readyReplicas, 3);
    assert.equal(s.replicas, 3);
    assert.equal(s.currentPrimary, 'db-0');
    assert.equal(s.secretName, 'db-credentials');
    assert.equal(s.observedGeneration, 1);
    assert.equal(cond(s, 'Ready')?.status, 'True');
    assert.equal(cond(s, 'Progressing')?.status, 'False');
    assert.equal(cond(s, 'Degraded')?.status, 'False');

    const notObserved = computeStatus(
      database(),
      undefined,
      observed(sts({ generation: 2, observed: 1 }), pods),
    );
    assert.equal(notObserved.phase, 'Provisioning');
    const notRolled = computeStatus(database(), undefined, observed(sts({ updateRevision: 'db-2' }), pods));
    assert.equal(notRolled.phase, 'Provisioning');
  });

  it('Updating after running: a rolling update, or scaling', () => {
    const running = computeStatus(database(), undefined, observed(sts({})), at(T0));
    const rolling = computeStatus(
      database(3, 2),
      running,
      observed(sts({ updateRevision: 'db-2', updated: 1, ready: 2 })),
      at(T1),
    );
    assert.equal(rolling.phase, 'Updating');
    assert.equal(cond(rolling, 'Progressing')?.reason, 'RollingUpdate');
    assert.equal(rolling.observedGeneration, 2);
    const scaling = computeStatus(
      database(5, 2),
      running,
      observed(sts({ replicas: 5, current: 3 })),
      at(T1),
    );
    assert.equal(scaling.phase, 'Updating');
    assert.equal(cond(scaling, 'Progressing')?.reason, 'Scaling');
    const down = computeStatus(database(2, 3), running, observed(sts({ replicas: 3 })), at(T1));
    assert.equal(down.phase, 'Updating');
  });

  it('Degraded when a Database that ran loses a ready replica', () => {
    const running = computeStatus(database(), undefined, observed(sts({})), at(T0));
    const s = computeStatus(
      database(),
      running,
      observed(sts({ ready: 2 }), [pod(0, true), pod(1, false), pod(2, true)]),
      at(T1),
    );
    assert.equal(s.phase, 'Degraded');
    assert.equal(cond(s, 'Degraded')?.status, 'True');
    assert.equal(cond(s, 'Degraded')?.reason, 'ReplicasNotReady');
    assert.equal(cond(s, 'Ready')?.status, 'False');
  });

  it('postgres: not Running while an instance is not ready, even when the StatefulSet still counts it', () => {
    const up = [
      { name: 'orders-0', role: 'primary' as const, ready: true },
      { name: 'orders-1', role: 'replica' as const, ready: true },
    ];
    const running = computeStatus(
      database(2),
      undefined,
      { ...observed(sts({ replicas: 2 })), instances: up },
      at(T0),
    );
    assert.equal(running.phase, 'Running');
    // The pod is being deleted: the StatefulSet's readyReplicas still says 2.
    const down = [
      up[0]!,
      { ...up[1]!, ready: false, reason: 'Terminating', message: 'orders-1 is being deleted' },
    ];
    const s = computeStatus(
      database(2),
      running,
      { ...observed(sts({ replicas: 2 })), instances: down },
      at(T1),
    );
    assert.equal(s.phase, 'Degraded');
    assert.equal(s.readyReplicas, 1);
    assert.match(
      cond(s, 'Ready')?.message ?? '',
      /orders-1 not ready \(Terminating: orders-1 is being deleted\)/,
    );
    assert.deepEqual(s.instances, down);
  });

  it('Degraded (not Updating) when a pod of a Database that reached its spec disappears', () => {
    const running = computeStatus(database(3, 4), undefined, observed(sts({})), at(T0));
    const lost = computeStatus(database(3, 4), running, observed(sts({ current: 2, ready: 2 })), at(T1));
    assert.equal(lost.phase, 'Degraded');
    assert.match(cond(lost, 'Degraded')?.message ?? '', /2\/3 pods exist/);
    // The same shortfall right after a spec change is scaling.
    const scaling = computeStatus(database(3, 5), running, observed(sts({ current: 2, ready: 2 })), at(T1));
    assert.equal(scaling.phase, 'Updating');
  });

  it('Failed with the message of a terminal error; Deleting with a deletionTimestamp', () => {
    const failed = computeStatus(
      database(),
      undefined,
      observed(sts({}), [], {
        failure: { reason: 'InvalidStatefulSet', message: 'StatefulSet db: spec.template: Invalid value' },
      }),
    );
    assert.equal(failed.phase, 'Failed');
    assert.equal(cond(failed, 'Degraded')?.reason, 'InvalidStatefulSet');
    assert.match(cond(failed, 'Ready')?.message ?? '', /Invalid value/);
    const deleting = computeStatus(
      database(3, 1, { deletionTimestamp: '2025-01-01T00:00:00Z' }),
      failed,
      observed(undefined),
    );
    assert.equal(deleting.phase, 'Deleting');
  });

  it('storage expansion pending is Progressing; refused expansion is Degraded', () => {
    const base = observed(sts({}), [pod(0, true)]);
    const pending = computeStatus(database(), undefined, {
      ...base,
      storage: { expanded: [], pending: ['data-db-0'], failed: [] },
    });
    assert.equal(pending.phase, 'Running');
    assert.equal(cond(pending, 'Progressing')?.reason, 'StorageExpanding');
    const failed = computeStatus(database(), undefined, {
      ...base,
      storage: {
        expanded: [],
        pending: [],
        failed: [{ claim: 'data-db-0', message: 'storageclass does not allow' }],
      },
    });
    assert.equal(cond(failed, 'Degraded')?.reason, 'StorageExpansionFailed');
    assert.match(cond(failed, 'Degraded')?.message ?? '', /data-db-0: storageclass does not allow/);
  });

  it('is a fixed point: the same observations give a deep-equal status (no write), times kept', () => {
    const o = observed(sts({}), [pod(0, true), pod(1, true), pod(2, true)], { secretName: 'db-credentials' });
    const first = computeStatus(database(), undefined, o, at(T0));
    const again = computeStatus(database(), first, o, at(T1));
    assert.deepEqual(again, first);
    // A transition changes lastTransitionTime only for the conditions whose status changed.
    const degraded = computeStatus(database(), first, observed(sts({ ready: 2 })), at(T1));
    assert.equal(cond(degraded, 'Ready')?.lastTransitionTime, '2025-01-01T00:05:00Z');
    assert.equal(cond(degraded, 'Progressing')?.lastTransitionTime, '2025-01-01T00:00:00Z');
  });

  it('drops currentPrimary and the read-only endpoint when they no longer apply', () => {
    const first = computeStatus(
      database(),
      undefined,
      observed(sts({}), [pod(0, true)], {
        endpoints: {
          readWrite: 'db.ns.svc.cluster.local',
          readOnly: 'db-ro.ns.svc.cluster.local',
          port: 3306,
        },
      }),
    );
    assert.equal(first.currentPrimary, 'db-0');
    const next = computeStatus(
      database(1, 2),
      first,
      observed(sts({ replicas: 1 }), [pod(0, false)], {
        endpoints: { readWrite: 'db.ns.svc.cluster.local', port: 3306 },
      }),
    );
    assert.equal(next.currentPrimary, undefined);
    assert.equal(next.endpoints?.readOnly, undefined);
  });

  it('describeStatus summarises a status on one line', () => {
    const s = computeStatus(database(), undefined, observed(sts({ ready: 1 })), at(T0));
    assert.equal(
      describeStatus(s, 3),
      'Provisioning ready 1/3 Ready=False(Provisioning) Progressing=True(Provisioning) Degraded=False',
    );
  });
});

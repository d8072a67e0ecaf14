/**
 * The primary lease (failover/lease.ts, pure; desired/lease.ts): when the operator counts a primary as
 * lost by its Lease, when it may take a former primary it cannot reach for fenced, what it writes on the
 * Lease, and the objects (ServiceAccount, least-privilege Role, RoleBinding, Lease) a Database gets.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Lease } from '@opkit/runtime';
import {
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  primaryLease,
  usesPrimaryLease,
} from '../../src/controllers/database/desired/index.ts';
import {
  LEASE_FENCED_ANNOTATION,
  LEASE_OFF_ANNOTATION,
} from '../../src/controllers/database/engines/index.ts';
import { decideFailover, FAILOVER_REASONS } from '../../src/controllers/database/failover/decide.ts';
import {
  afterOwnWrite,
  fencedByLease,
  leaseWithHolder,
  observeLease,
  PRIMARY_LEASE_MARGIN_SECONDS,
  primaryLeaseState,
} from '../../src/controllers/database/failover/lease.ts';
import { database } from './fixtures.ts';

const T = 15_000;
const LIMIT = T + PRIMARY_LEASE_MARGIN_SECONDS * 1000;

function lease(
  rv: string,
  holder: string | undefined,
  renewed: boolean,
  annotations?: Record<string, string>,
): Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: 'orders-primary',
      namespace: 'shop',
      resourceVersion: rv,
      ...(annotations ? { annotations } : {}),
    },
    spec: {
      ...(holder !== undefined ? { holderIdentity: holder } : {}),
      leaseDurationSeconds: 15,
      ...(renewed ? { renewTime: '2026-12-05T00:00:00.000000Z' as unknown as Date } : {}),
    },
  } as Lease;
}

describe('the primary lease: observations by the operator’s own clock', () => {
  test('a new resourceVersion resets the time, the same one keeps it; no Lease, no observation', () => {
    const a = observeLease(undefined, lease('10', 'orders-0', true), 1_000);
    assert.deepEqual(a, { resourceVersion: '10', since: 1_000 });
    assert.equal(observeLease(a, lease('10', 'orders-0', true), 9_000), a);
    assert.deepEqual(observeLease(a, lease('11', 'orders-0', true), 9_000), {
      resourceVersion: '11',
      since: 9_000,
    });
    assert.equal(observeLease(a, undefined, 9_000), undefined);
  });

  test('the operator’s own write does not count as a renewal (the time of the last change it saw stays)', () => {
    const a = { resourceVersion: '10', since: 1_000 };
    assert.deepEqual(afterOwnWrite(a, lease('12', '', true), 5_000), { resourceVersion: '12', since: 1_000 });
    // With no earlier observation (an operator restart), its write is the first look: the full wait.
    assert.deepEqual(afterOwnWrite(undefined, lease('12', '', true), 5_000), {
      resourceVersion: '12',
      since: 5_000,
    });
  });
});

describe('primaryLeaseState: is the designated primary still renewing?', () => {
  const obs = { resourceVersion: '10', since: 0 };
  test('held until LEASE + MARGIN without a change, expired from then on', () => {
    const l = lease('10', 'orders-0', true);
    assert.deepEqual(
      primaryLeaseState({ lease: l, observation: obs, now: LIMIT - 1, leaseMs: T, primary: 'orders-0' }),
      {
        kind: 'held',
        recheckMs: 1,
      },
    );
    assert.deepEqual(
      primaryLeaseState({ lease: l, observation: obs, now: LIMIT, leaseMs: T, primary: 'orders-0' }),
      {
        kind: 'expired',
        silentMs: LIMIT,
      },
    );
  });
  test('never renewed (kwok, no sidecar, no curl), another holder, no holder, no Lease: unknown', () => {
    for (const l of [
      lease('10', 'orders-0', false),
      lease('10', 'orders-1', true),
      lease('10', undefined, true),
      undefined,
    ]) {
      assert.deepEqual(
        primaryLeaseState({ lease: l, observation: obs, now: 10 * LIMIT, leaseMs: T, primary: 'orders-0' }),
        { kind: 'unknown' },
      );
    }
  });
  test('after an operator restart (no observation before this look) it waits the full LEASE + MARGIN', () => {
    const l = lease('10', 'orders-0', true);
    const first = observeLease(undefined, l, 500_000);
    assert.equal(
      primaryLeaseState({ lease: l, observation: first, now: 500_000, leaseMs: T, primary: 'orders-0' }).kind,
      'held',
    );
  });
});

describe('fencedByLease: may a former primary that exec cannot reach be taken for fenced?', () => {
  const obs = { resourceVersion: '12', since: 0 };
  test('its sidecar acknowledged the fence on the cleared Lease: at once', () => {
    const l = lease('13', undefined, true, { [LEASE_FENCED_ANNOTATION]: 'orders-0' });
    assert.equal(
      fencedByLease({ lease: l, observation: obs, now: 1, leaseMs: T, from: 'orders-0' }).kind,
      'fenced',
    );
    // Another pod's acknowledgement, or one while the Lease still names a holder, does not count.
    const other = lease('13', undefined, true, { [LEASE_FENCED_ANNOTATION]: 'orders-2' });
    assert.equal(
      fencedByLease({ lease: other, observation: obs, now: 1, leaseMs: T, from: 'orders-0' }).kind,
      'wait',
    );
    const held = lease('13', 'orders-0', true, { [LEASE_FENCED_ANNOTATION]: 'orders-0' });
    assert.equal(
      fencedByLease({ lease: held, observation: obs, now: 1, leaseMs: T, from: 'orders-0' }).kind,
      'wait',
    );
  });
  test('no acknowledgement: waits LEASE + MARGIN since the last change it saw, then fenced', () => {
    const l = lease('12', undefined, true);
    const w = fencedByLease({ lease: l, observation: obs, now: LIMIT - 2_000, leaseMs: T, from: 'orders-0' });
    assert.equal(w.kind, 'wait');
    assert.equal(w.kind === 'wait' && w.afterMs, 2_000);
    assert.equal(
      fencedByLease({ lease: l, observation: obs, now: LIMIT, leaseMs: T, from: 'orders-0' }).kind,
      'fenced',
    );
  });
  test('a Lease its sidecar never renewed says nothing (the node NotReady rule decides, as before)', () => {
    assert.equal(
      fencedByLease({
        lease: lease('12', undefined, false),
        observation: obs,
        now: 10 * LIMIT,
        leaseMs: T,
        from: 'orders-0',
      }).kind,
      'unknown',
    );
    assert.equal(
      fencedByLease({
        lease: undefined,
        observation: undefined,
        now: 10 * LIMIT,
        leaseMs: T,
        from: 'orders-0',
      }).kind,
      'unknown',
    );
  });
});

describe('leaseWithHolder: what the operator writes', () => {
  test('clearing the holder keeps renewTime (the sidecar ran); naming a new one drops it and the acknowledgement', () => {
    const l = lease('10', 'orders-0', true);
    const cleared = leaseWithHolder(l, '', 15);
    assert.equal(cleared?.spec?.holderIdentity, undefined);
    assert.ok(cleared?.spec?.renewTime);
    assert.equal(
      cleared?.metadata.resourceVersion,
      '10',
      'written with the version read (a conflict if renewed since)',
    );
    const acked = lease('11', undefined, true, { [LEASE_FENCED_ANNOTATION]: 'orders-0' });
    const named = leaseWithHolder(acked, 'orders-1', 15);
    assert.equal(named?.spec?.holderIdentity, 'orders-1');
    assert.equal(named?.spec?.renewTime, undefined);
    assert.equal(named?.metadata.annotations?.[LEASE_FENCED_ANNOTATION], undefined);
    assert.equal(named?.spec?.leaseTransitions, 1);
  });
  test('nothing to write when it already names the holder with the same duration', () => {
    assert.equal(leaseWithHolder(lease('10', 'orders-0', true), 'orders-0', 15), undefined);
    assert.equal(
      leaseWithHolder(lease('10', 'orders-0', true), 'orders-0', 30)?.spec?.leaseDurationSeconds,
      30,
    );
  });
  test('one instance (nothing to fail over to): the off annotation, so a primary cut off from the API server keeps running', () => {
    const off = leaseWithHolder(lease('10', 'orders-0', true), 'orders-0', 15, false);
    assert.equal(off?.metadata.annotations?.[LEASE_OFF_ANNOTATION], 'true');
    assert.equal(leaseWithHolder(off as Lease, 'orders-0', 15, false), undefined);
    assert.equal(
      leaseWithHolder(off as Lease, 'orders-0', 15, true)?.metadata.annotations?.[LEASE_OFF_ANNOTATION],
      undefined,
    );
  });
});

describe('decideFailover with an expired Lease', () => {
  test('a Ready primary whose Lease expired is lost at once (PrimaryLeaseExpired), before its node is NotReady', () => {
    const ready = (name: string) =>
      ({
        metadata: { name, namespace: 'shop' },
        spec: { containers: [], nodeName: 'n1' },
        status: {
          conditions: [{ type: 'Ready', status: 'True' }],
          containerStatuses: [{ name: 'postgres', state: { running: {} } }],
        },
      }) as never;
    const input = {
      statefulSet: 'orders',
      primary: 'orders-0',
      replicas: 3,
      pods: [ready('orders-0'), ready('orders-1'), ready('orders-2')],
      nodes: new Map(),
      now: 0,
      delayMs: 10_000,
    };
    assert.equal(decideFailover(input).kind, 'none');
    const d = decideFailover({ ...input, leaseExpired: true });
    assert.equal(d.kind, 'start');
    assert.equal(d.kind === 'start' && d.reason, FAILOVER_REASONS.leaseExpired);
  });
});

describe('the objects of the primary lease', () => {
  const db = database('postgres', { replicas: 3 });
  test('postgres uses it, mysql does not', () => {
    assert.equal(usesPrimaryLease(db), true);
    assert.equal(usesPrimaryLease(database('mysql')), false);
  });
  test('a ServiceAccount without an automounted token, a Role for the one Lease (get, patch), its binding', () => {
    const sa = instanceServiceAccount(db) as {
      automountServiceAccountToken?: boolean;
      metadata: { name?: string };
    };
    assert.equal(sa.metadata.name, 'orders-instance');
    assert.equal(sa.automountServiceAccountToken, false);
    assert.deepEqual(instanceRole(db).rules, [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['orders-primary'],
        verbs: ['get', 'patch'],
      },
    ]);
    const rb = instanceRoleBinding(db);
    assert.deepEqual(rb.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'orders-instance',
    });
    assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: 'orders-instance', namespace: 'shop' }]);
  });
  test('the Lease starts naming the first primary, never renewed, for spec.primaryLeaseSeconds', () => {
    const l = primaryLease(db);
    assert.equal(l.metadata.name, 'orders-primary');
    assert.equal(l.spec?.holderIdentity, 'orders-0');
    assert.equal(l.spec?.renewTime, undefined);
    assert.equal(l.spec?.leaseDurationSeconds, 15);
    assert.equal(
      primaryLease(database('postgres', { replicas: 3, primaryLeaseSeconds: 30 })).spec?.leaseDurationSeconds,
      30,
    );
  });
});

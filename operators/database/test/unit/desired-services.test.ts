/**
 * Services, the PodDisruptionBudget, endpoints, labels and the bundle: the read-only Service and the PDB
 * exist only with replicas > 1; every object carries labels and no owner references.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '@opkit/runtime';
import { LABEL_ROLE } from '../../src/api/v1/database.ts';
import {
  childNames,
  desiredChildren,
  desiredRole,
  endpoints,
  headlessService,
  podDisruptionBudget,
  primaryDisruptionBudget,
  readOnlyService,
  readWriteService,
  selectorLabels,
} from '../../src/controllers/database/desired/index.ts';
import { database } from './fixtures.ts';

for (const engine of ['postgres', 'mysql'] as const) {
  const port = engine === 'postgres' ? 5432 : 3306;
  describe(`${engine} services`, () => {
    test('headless: clusterIP None, publishes not-ready pods, selects all pods', () => {
      const s = headlessService(database(engine));
      assert.equal(s.metadata.name, 'orders-headless');
      assert.equal(s.spec?.clusterIP, 'None');
      assert.equal(s.spec?.publishNotReadyAddresses, true);
      assert.deepEqual(s.spec?.selector, selectorLabels(database(engine)));
      assert.deepEqual(s.spec?.ports, [{ name: engine, port, targetPort: engine, protocol: 'TCP' }]);
    });

    test('read-write: <name>, selects the primary role, serviceType from spec', () => {
      const s = readWriteService(database(engine));
      assert.equal(s.metadata.name, 'orders');
      assert.equal(s.spec?.type, 'ClusterIP');
      assert.equal(s.spec?.selector?.[LABEL_ROLE], 'primary');
      assert.equal(s.spec?.clusterIP, undefined);
      assert.deepEqual(s.spec?.ports, [{ name: engine, port, targetPort: engine, protocol: 'TCP' }]);
      assert.equal(
        readWriteService(database(engine, { serviceType: 'LoadBalancer' })).spec?.type,
        'LoadBalancer',
      );
    });

    test('read-only: <name>-ro selecting replicas, only when replicas > 1', () => {
      assert.equal(readOnlyService(database(engine)), undefined);
      assert.equal(readOnlyService(database(engine, { replicas: 1 })), undefined);
      const s = readOnlyService(database(engine, { replicas: 2, serviceType: 'NodePort' }));
      assert.equal(s?.metadata.name, 'orders-ro');
      assert.equal(s?.spec?.selector?.[LABEL_ROLE], 'replica');
      assert.equal(s?.spec?.type, 'NodePort');
    });

    test('PDB only when replicas > 1: a Ready replica may be evicted, the primary never; unhealthy pods always', () => {
      assert.equal(podDisruptionBudget(database(engine)), undefined);
      const pdb = podDisruptionBudget(database(engine, { replicas: 3 }));
      assert.equal(pdb?.apiVersion, 'policy/v1');
      assert.equal(pdb?.metadata.name, 'orders');
      assert.equal(pdb?.spec?.unhealthyPodEvictionPolicy, 'AlwaysAllow');
      if (engine === 'mysql') {
        // Over all pods, so the disruption controller's expected count (the StatefulSet's scale) is the
        // pods matched: one down at a time. A minAvailable left from before is removed (null).
        assert.equal(pdb?.spec?.maxUnavailable, 1);
        assert.equal(pdb?.spec?.minAvailable, null);
        assert.deepEqual(pdb?.spec?.selector?.matchLabels, selectorLabels(database(engine)));
        assert.equal(primaryDisruptionBudget(database(engine, { replicas: 3 })), undefined);
        return;
      }
      // postgres: the replicas' budget. Over a subset of the StatefulSet's pods, maxUnavailable would
      // count the scale (3) as expected and allow no eviction of a Ready replica at all: minAvailable,
      // all replicas but one, and a maxUnavailable left from before removed (null).
      assert.deepEqual(pdb?.spec?.selector?.matchLabels, {
        ...selectorLabels(database(engine)),
        [LABEL_ROLE]: 'replica',
      });
      assert.equal(pdb?.spec?.minAvailable, 1);
      assert.equal(pdb?.spec?.maxUnavailable, null);
      assert.equal(podDisruptionBudget(database(engine, { replicas: 2 }))?.spec?.minAvailable, 0);
      assert.equal(podDisruptionBudget(database(engine, { replicas: 5 }))?.spec?.minAvailable, 3);
      // The primary's: it moves by switchover, never by eviction.
      assert.equal(primaryDisruptionBudget(database(engine)), undefined);
      const primary = primaryDisruptionBudget(database(engine, { replicas: 3 }));
      assert.equal(primary?.metadata.name, 'orders-primary');
      assert.equal(primary?.spec?.minAvailable, 1);
      assert.equal(primary?.spec?.maxUnavailable, null);
      assert.equal(primary?.spec?.unhealthyPodEvictionPolicy, 'AlwaysAllow');
      assert.deepEqual(primary?.spec?.selector?.matchLabels, {
        ...selectorLabels(database(engine)),
        [LABEL_ROLE]: 'primary',
      });
    });

    test('endpoints: DNS names of the Services and the port', () => {
      assert.deepEqual(endpoints(database(engine)), { readWrite: 'orders.shop.svc.cluster.local', port });
      assert.deepEqual(endpoints(database(engine, { replicas: 3 }), 'corp.internal'), {
        readWrite: 'orders.shop.svc.corp.internal',
        readOnly: 'orders-ro.shop.svc.corp.internal',
        port,
      });
    });
  });
}

describe('the bundle', () => {
  test('every object has labels, a namespace, its name, and no owner references', () => {
    for (const engine of ['postgres', 'mysql'] as const) {
      for (const replicas of [1, 3]) {
        const c = desiredChildren(database(engine, { replicas }));
        const objects: KubeObject[] = [
          c.secret,
          c.configMap,
          c.headlessService,
          c.readWriteService,
          c.readOnlyService,
          c.statefulSet,
          c.podDisruptionBudget,
        ].filter((o): o is NonNullable<typeof o> => o !== undefined);
        assert.equal(objects.length, replicas > 1 ? 7 : 5);
        for (const o of objects) {
          assert.equal(o.metadata.namespace, 'shop', `${o.kind}`);
          assert.equal(o.metadata.ownerReferences, undefined, `${o.kind} ${o.metadata.name}`);
          assert.equal(o.metadata.labels?.['app.kubernetes.io/instance'], 'orders', `${o.kind}`);
          assert.equal(o.metadata.labels?.['app.kubernetes.io/managed-by'], 'opkit-database-operator');
          assert.equal(o.metadata.labels?.['app.kubernetes.io/name'], engine);
          assert.ok(o.metadata.labels?.['app.kubernetes.io/component'], `${o.kind}`);
          assert.ok(o.apiVersion && o.kind);
        }
        assert.equal(c.readOnlyService === undefined, replicas === 1);
        assert.equal(c.podDisruptionBudget === undefined, replicas === 1);
      }
    }
  });

  test('with the existing Secret, the bundle carries no Secret when nothing is missing', () => {
    const db = database('mysql');
    const first = desiredChildren(db);
    assert.ok(first.secret);
    const again = desiredChildren(db, { existingSecret: first.secret });
    assert.equal(again.secret, undefined);
  });

  test('the builders are pure: the input is not modified and the same input gives the same output', () => {
    const db = database('postgres', { replicas: 3, parameters: { work_mem: '8MB' } });
    const snapshot = structuredClone(db);
    const a = desiredChildren(db);
    const b = desiredChildren(db);
    assert.deepEqual(db, snapshot);
    const { secret: _a, ...restA } = a;
    const { secret: _b, ...restB } = b;
    assert.deepEqual(restA, restB);
  });

  test('names of the children', () => {
    assert.deepEqual(childNames(database('postgres')), {
      statefulSet: 'orders',
      headless: 'orders-headless',
      readWrite: 'orders',
      readOnly: 'orders-ro',
      secret: 'orders-credentials',
      caSecret: 'orders-ca',
      serverSecret: 'orders-server',
      appSecret: 'orders-app',
      configMap: 'orders-config',
      podDisruptionBudget: 'orders',
      lease: 'orders-primary',
      instanceAccount: 'orders-instance',
    });
  });

  test('desiredRole: the current primary, else <name>-0', () => {
    const db = database('postgres', { replicas: 3 });
    assert.equal(desiredRole(db, 'orders-0'), 'primary');
    assert.equal(desiredRole(db, 'orders-1'), 'replica');
    assert.equal(desiredRole(db, 'orders-1', 'orders-1'), 'primary');
    assert.equal(desiredRole(db, 'orders-0', 'orders-1'), 'replica');
  });
});

/**
 * The failover procedure through the reconcile (FakeClient, FakePodExecutor refusing what the API
 * server refuses): each phase recorded in the status before it acts, the ConfigMap and role labels while
 * fenced, what is run in which pod, resuming from each phase, switchovers, the synchronous quorum.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { ConfigMaps, type Lease, Leases, type Node, Nodes, type Pod, Pods } from '@opkit/runtime';
import { FakeClient, FakePodExecutor } from '@opkit/runtime/testing';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { LEASE_FENCED_ANNOTATION } from '../../src/controllers/database/engines/index.ts';
import {
  databaseReconciler,
  type ReconcilerDeps,
  reconcileDatabase,
} from '../../src/controllers/database/index.ts';
import { FakeRecorder, managedOnlyReader } from './fixtures.ts';

const NS = 'shop';
const NAME = 'orders';
const ID = '7312345678901234567';
const NOW = Date.parse('2026-12-04T12:00:00Z');

function pod(name: string, opts: { ready?: boolean; role?: string; running?: boolean } = {}): Pod {
  const ready = opts.ready ?? true;
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
        ...(opts.role ? { 'myapp.example.com/role': opts.role } : {}),
      },
    },
    spec: { containers: [{ name: 'postgres', image: 'postgres:16' }], nodeName: 'n1' },
    status: {
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: new Date(NOW - 600_000) },
      ],
      containerStatuses: [
        {
          name: 'postgres',
          image: 'postgres:16',
          imageID: '',
          ready,
          restartCount: 0,
          state: opts.running === false ? { waiting: { reason: 'ContainerCreating' } } : { running: {} },
        },
      ],
    },
  } as Pod;
}

/** The instances' answers: a state line per pod, changed by promote and restart as real ones would be. */
class Instances {
  readonly exec: FakePodExecutor;
  readonly states = new Map<string, string>();
  constructor(client: FakeClient) {
    this.exec = new FakePodExecutor({ client, defaultNamespace: NS });
    this.exec
      .on({ command: /pg_is_in_recovery\(\),/ }, (call) => {
        const s = this.states.get(call.name);
        return s ? { stdout: `${s}\n` } : { exitCode: 2, stderr: 'psql: could not connect' };
      })
      .on({ command: /pg_ctl promote/ }, (call) => {
        const s = this.states.get(call.name) ?? '';
        const lsn = s.split('|')[1] ?? '0/0';
        this.states.set(call.name, `f|||2|${ID}|${lsn}|`);
        return { stdout: 'promoted\n' };
      })
      .on({ command: /echo fenced/ }, { stdout: 'fenced\n' })
      .on({ command: /echo stopped/ }, { stdout: 'stopped\n' })
      .on({ command: (c) => (c[2] ?? '').trim().endsWith('designate "$1" "$2"') }, { stdout: '' });
  }
  /** Commands run, as `pod: what` (the script's last word). */
  ran(): string[] {
    return this.exec.calls.map((c) => {
      const script = c.command[2] ?? '';
      const what = /pg_ctl promote/.test(script)
        ? 'promote'
        : /echo fenced/.test(script)
          ? 'fence'
          : /echo stopped/.test(script)
            ? 'restart'
            : /pg_is_in_recovery\(\),/.test(script)
              ? 'state'
              : 'designate';
      return `${c.name}: ${what}`;
    });
  }
}

describe('the failover procedure', () => {
  let client: FakeClient;
  let recorder: FakeRecorder;
  let inst: Instances;
  let deps: ReconcilerDeps;
  const key = { namespace: NS, name: NAME };
  const reconcile = () => reconcileDatabase(deps, key, { signal: new AbortController().signal });
  const stored = () => client.getStored(Databases.resource, key) as Database;
  const cm = () => client.getStored(ConfigMaps, { namespace: NS, name: `${NAME}-config` })?.data ?? {};
  const roles = () =>
    Object.fromEntries(
      ['orders-0', 'orders-1', 'orders-2'].map((n) => [
        n,
        client.getStored(Pods, { namespace: NS, name: n })?.metadata.labels?.['myapp.example.com/role'] ??
          '-',
      ]),
    );

  async function setup(spec: Partial<Database['spec']> = {}, status: Record<string, unknown> = {}) {
    client = new FakeClient({ statusSubresource: [Databases.resource] });
    recorder = new FakeRecorder();
    inst = new Instances(client);
    deps = {
      client,
      reader: managedOnlyReader(client),
      recorder,
      exec: inst.exec,
      clock: () => NOW,
    };
    await client.create(
      Databases.resource,
      Databases.applyDefaults({
        apiVersion: 'myapp.example.com/v1',
        kind: 'Database',
        metadata: { name: NAME, namespace: NS },
        spec: { engine: 'postgres', version: '16', storage: '1Gi', replicas: 3, ...spec },
      } as Database) as Database,
    );
    await client.patchStatus(Databases.resource, key, {
      type: 'merge',
      // A Database that ran (a new one never fails over).
      body: {
        status: {
          phase: 'Running',
          readyReplicas: 3,
          targetPrimary: 'orders-0',
          systemIdentifier: ID,
          ...status,
        },
      },
    });
    inst.states.set('orders-0', `f|||1|${ID}|0/3000200|`);
    inst.states.set('orders-1', `t|0/3000000|0/3000000|1|${ID}||orders-0.orders-headless`);
    inst.states.set('orders-2', `t|0/3000100|0/3000100|1|${ID}||orders-0.orders-headless`);
  }

  describe('the primary pod deleted', () => {
    beforeEach(async () => {
      await setup();
      client.setStored(Pods, pod('orders-1', { role: 'replica', ready: false }));
      client.setStored(Pods, pod('orders-2', { role: 'replica', ready: false }));
    });

    test('fenced first, then the most advanced replica promoted, then the others follow it', async () => {
      await reconcile();
      let st = stored().status;
      assert.equal(st?.failover?.phase, 'Fencing');
      assert.equal(st?.failover?.reason, 'PrimaryPodMissing');
      assert.equal(st?.failover?.from, 'orders-0');
      assert.equal(st?.primaryEpoch, 1);
      assert.equal(cm()['cluster-primary'], 'none', 'the pods are told nobody is the primary');
      assert.equal(cm()['cluster-primary-epoch'], '1');
      assert.equal(st?.currentPrimary, undefined);
      assert.deepEqual(inst.ran(), [], 'nothing is run before the ConfigMap and labels say fenced');
      assert.equal(recorder.events.find((e) => e.reason === 'FailoverStarted')?.type, 'Normal');

      // orders-2 becomes Ready once promoted (the kubelet's probe): the fake pod is Ready from here on.
      client.setStored(Pods, pod('orders-2', { role: 'replica', ready: true }));
      await reconcile();
      st = stored().status;
      assert.equal(st?.targetPrimary, 'orders-2', 'the most advanced replica');
      assert.equal(st?.failover?.phase, 'Rejoining');
      assert.equal(st?.timeline, 2);
      assert.equal(st?.primaryEpoch, 2);
      assert.deepEqual(inst.ran().slice(0, 2).sort(), ['orders-1: state', 'orders-2: state']);
      assert.deepEqual(inst.ran().slice(2), ['orders-2: promote', 'orders-2: state', 'orders-1: designate']);
      assert.equal(cm()['cluster-primary'], 'orders-2');
      assert.equal(cm()['cluster-primary-epoch'], '2');
      assert.deepEqual(roles(), { 'orders-0': '-', 'orders-1': 'replica', 'orders-2': 'primary' });

      inst.exec.calls.length = 0;
      await reconcile();
      st = stored().status;
      assert.deepEqual(inst.ran(), ['orders-1: state', 'orders-1: restart'], 'orders-1 restarts to follow');
      assert.equal(st?.failover, undefined, 'done');
      assert.equal(st?.lastFailover?.to, 'orders-2');
      assert.equal(st?.lastFailover?.reason, 'PrimaryPodMissing');
      assert.equal(st?.lastFailover?.timeline, 2);
      assert.equal(st?.currentPrimary, 'orders-2');
      const reasons = recorder.events.map((e) => e.reason);
      assert.ok(reasons.includes('Promoted') && reasons.includes('FailoverCompleted'), reasons.join());

      // Afterwards: nothing more is run, nothing written.
      inst.exec.calls.length = 0;
      await reconcile();
      assert.deepEqual(inst.ran(), []);
    });

    test('resumed from Promoting (an operator restarted after recording the choice): promotes that one', async () => {
      await client.patchStatus(Databases.resource, key, {
        type: 'merge',
        body: {
          status: {
            targetPrimary: 'orders-1',
            primaryEpoch: 1,
            failover: {
              reason: 'PrimaryPodMissing',
              from: 'orders-0',
              to: 'orders-1',
              phase: 'Promoting',
              startedAt: new Date(NOW).toISOString(),
            },
          },
        },
      });
      await reconcile();
      assert.deepEqual(inst.ran().slice(0, 1), ['orders-1: promote']);
      assert.equal(stored().status?.failover?.phase, 'Rejoining');
      assert.equal(stored().status?.targetPrimary, 'orders-1');
    });

    test('resumed from Fencing with the ConfigMap already fenced: no second start, the procedure goes on', async () => {
      await reconcile();
      const epoch = stored().status?.primaryEpoch;
      await reconcile();
      assert.equal(
        stored().status?.primaryEpoch,
        (epoch ?? 0) + 1,
        'promoted once (epoch +1), not restarted',
      );
      assert.equal(recorder.events.filter((e) => e.reason === 'FailoverStarted').length, 1);
    });

    test('a cache that has not seen the Fencing write yet does not undo the fencing', async () => {
      const reconciler = databaseReconciler(deps);
      const stale = structuredClone(stored());
      const inner = deps.reader;
      // The Database as the cache still shows it: from before the failover started.
      deps = {
        ...deps,
        reader: {
          get: async (res, k) =>
            res.plural === 'databases' && stale.metadata.resourceVersion
              ? (structuredClone(stale) as never)
              : inner.get(res, k),
          list: (res, opts) => inner.list(res, opts),
        },
      };
      const ctx = { signal: new AbortController().signal } as Parameters<typeof reconciler>[1];
      await reconciler(key, ctx);
      assert.equal(stored().status?.failover?.phase, 'Fencing');
      assert.equal(cm()['cluster-primary'], 'none');
      // Meanwhile the former primary looks healthy again: with the stale record nothing would be wrong.
      client.setStored(Pods, pod('orders-0'));
      await reconciler(key, ctx);
      assert.equal(
        cm()['cluster-primary'] === 'none' || stored().status?.failover?.phase !== 'Fencing',
        true,
      );
      assert.notEqual(cm()['cluster-primary'], 'orders-0', 'never handed the former primary again');
      assert.equal(recorder.events.filter((e) => e.reason === 'FailoverStarted').length, 1);
    });

    test('synchronous mode: no promotion while too few replicas answer', async () => {
      await setup({ synchronousReplicas: 1 });
      client.setStored(Pods, pod('orders-1', { role: 'replica', ready: false }));
      client.setStored(Pods, pod('orders-2', { role: 'replica', ready: false }));
      inst.states.delete('orders-2');
      await reconcile();
      await reconcile();
      const st = stored().status;
      assert.equal(st?.failover?.phase, 'Fencing');
      assert.match(st?.failover?.message ?? '', /1 replica\(s\) answered, 2 needed/);
      assert.equal(st?.targetPrimary, 'orders-0');
      assert.equal(st?.replicationMode, 'Synchronous (ANY 1)');
      assert.ok(!inst.ran().some((r) => r.endsWith('promote')));
    });
  });

  test("the primary's node NotReady (its kubelet dead): completes without reaching the former primary", async () => {
    // Found on two real nodes: the former primary's pod still shows its server running (nothing updates
    // the status of a dead node's pods) and exec to it fails; Rejoining waited for it forever, and with
    // status.failover never cleared no later failover could start.
    await setup({ failoverDelay: 10 });
    const onDead = {
      ...pod('orders-0', { role: 'primary' }),
      spec: { ...pod('orders-0').spec, nodeName: 'dead' },
    };
    client.setStored(Pods, onDead as Pod);
    client.setStored(Pods, pod('orders-1', { role: 'replica' }));
    client.setStored(Pods, pod('orders-2', { role: 'replica' }));
    client.setStored(Nodes, {
      metadata: { name: 'dead' },
      status: {
        conditions: [{ type: 'Ready', status: 'Unknown', lastTransitionTime: new Date(NOW - 60_000) }],
      },
    } as Node);
    inst.exec.on({ pod: 'orders-0' }, () => {
      throw new Error('error dialing backend: dial tcp 10.250.1.10:10250: connect: connection refused');
    });
    for (let i = 0; i < 4 && stored().status?.failover?.phase !== 'Rejoining'; i++) {
      await reconcile();
      if (stored().status?.failover?.phase === 'Rejoining') {
        client.setStored(Pods, pod('orders-2', { role: 'primary', ready: true }));
      }
    }
    assert.equal(stored().status?.failover?.phase, 'Rejoining');
    assert.equal(stored().status?.failover?.reason, 'PrimaryNodeNotReady');
    // A node that does not answer is the Lease's or NotReady's to fence: no second exec to its sidecar.
    assert.ok(!inst.exec.calls.some((c) => c.container === 'credentials'), inst.ran().join());
    await reconcile();
    const st = stored().status;
    assert.equal(st?.failover, undefined, `done, not waiting for orders-0: ${JSON.stringify(st?.failover)}`);
    assert.equal(st?.lastFailover?.to, 'orders-2');
    const done = recorder.events.find((e) => e.reason === 'FailoverCompleted');
    assert.match(done?.note ?? '', /restarted orders-1 to follow it$/, 'orders-0 left to follow when back');
  });

  test("the primary's kubelet silent (its node Lease not renewed), its sidecar renewing: PrimaryNodeUnresponsive, fenced by its Lease, no exec to it", async () => {
    await setup({ failoverDelay: 10 });
    const onDead = (p: Pod) => ({ ...p, spec: { ...p.spec, nodeName: 'dead' } }) as Pod;
    client.setStored(Pods, onDead(pod('orders-0', { role: 'primary' })));
    client.setStored(Pods, onDead(pod('orders-1', { role: 'replica' })));
    client.setStored(Pods, pod('orders-2', { role: 'replica' }));
    // The node is still Ready (the node controller has not noticed yet); its kubelet is silent 25 s.
    deps.heartbeats = {
      silent: (nodes) => new Map([...nodes].filter((n) => n === 'dead').map((n) => [n ?? '', 25_000])),
    };
    inst.exec.on({ pod: 'orders-0' }, () => {
      throw new Error('error dialing backend: dial tcp 10.250.1.10:10250: connect: connection refused');
    });
    inst.exec.on({ pod: 'orders-1' }, () => {
      throw new Error('error dialing backend: dial tcp 10.250.1.10:10250: connect: connection refused');
    });
    const leaseKey = { namespace: NS, name: `${NAME}-primary` };
    const lease = () => client.getStored(Leases, leaseKey) as Lease;
    // The Lease is created naming orders-0, never renewed: a silent node is no reason (kwok, no sidecar).
    await reconcile();
    assert.equal(lease().spec?.holderIdentity, 'orders-0');
    assert.equal(stored().status?.failover, undefined, 'no sidecar renewing: the NotReady rule decides');
    // Its sidecar renews it (the network works): the primary is lost.
    client.setStored(Leases, {
      ...lease(),
      spec: { ...lease().spec, renewTime: new Date(NOW) as unknown as Date },
    } as Lease);
    await reconcile();
    assert.equal(stored().status?.failover?.phase, 'Fencing');
    assert.equal(stored().status?.failover?.reason, 'PrimaryNodeUnresponsive');
    assert.equal(lease().spec?.holderIdentity, undefined, 'the holder cleared: the sidecar fences');
    const started = recorder.events.find((e) => e.reason === 'FailoverStarted');
    assert.match(started?.note ?? '', /stopped renewing the node's Lease/);
    // Not acknowledged yet: waiting for the sidecar.
    await reconcile();
    assert.equal(stored().status?.failover?.phase, 'Fencing');
    assert.match(stored().status?.failover?.message ?? '', /kubelet of its node dead is silent/);
    // The sidecar stopped the server and says so on the Lease.
    client.setStored(Leases, {
      ...lease(),
      metadata: {
        ...lease().metadata,
        annotations: { ...lease().metadata.annotations, [LEASE_FENCED_ANNOTATION]: 'orders-0' },
      },
    } as Lease);
    await reconcile();
    const st = stored().status;
    assert.ok(
      st?.failover?.phase === 'Rejoining' || st?.failover === undefined,
      JSON.stringify(st?.failover),
    );
    assert.equal(st?.targetPrimary, 'orders-2', 'orders-1, on the silent node, is not promoted');
    assert.deepEqual(
      inst.exec.calls.filter((c) => c.name === 'orders-0' || c.name === 'orders-1').map((c) => c.name),
      [],
      'exec never tried on the silent node',
    );
    // Rejoining waits for nothing on the silent node: done once orders-2 is Ready.
    for (let i = 0; i < 3 && stored().status?.failover; i++) await reconcile();
    assert.equal(stored().status?.failover, undefined, JSON.stringify(stored().status?.failover));
    assert.deepEqual(
      [stored().status?.lastFailover?.reason, stored().status?.lastFailover?.to],
      ['PrimaryNodeUnresponsive', 'orders-2'],
    );
    assert.match(
      recorder.events.find((e) => e.reason === 'FailoverCompleted')?.note ?? '',
      /\(was orders-0; PrimaryNodeUnresponsive\)/,
    );
  });

  describe('a switchover', () => {
    beforeEach(async () => {
      await setup();
      client.setStored(Pods, pod('orders-0', { role: 'primary' }));
      client.setStored(Pods, pod('orders-1', { role: 'replica' }));
      client.setStored(Pods, pod('orders-2', { role: 'replica' }));
    });

    test('asked for by annotation: consumed, the primary fenced with a fast shutdown, the target promoted', async () => {
      const db = stored();
      await client.update(Databases.resource, {
        ...db,
        metadata: { ...db.metadata, annotations: { 'myapp.example.com/switchover-to': 'orders-1' } },
      });
      await reconcile();
      assert.equal(stored().metadata.annotations?.['myapp.example.com/switchover-to'], undefined);
      assert.equal(stored().status?.failover?.switchover, true);
      assert.equal(roles()['orders-0'], '-', 'out of the read-write Service, and not in the read-only one');
      // orders-1 and orders-2 are both at 0/3000100 after the fast shutdown sent them the rest.
      inst.states.set('orders-1', `t|0/3000100|0/3000100|1|${ID}||`);
      await reconcile();
      assert.deepEqual(inst.ran()[0], 'orders-0: fence');
      assert.ok(inst.ran().includes('orders-1: promote'), inst.ran().join());
      assert.equal(stored().status?.targetPrimary, 'orders-1');
      await reconcile();
      assert.equal(stored().status?.lastFailover?.switchover, true);
      assert.ok(recorder.events.some((e) => e.reason === 'SwitchoverCompleted'));
    });

    test('to itself or to no such instance: refused with a Warning, the annotation removed', async () => {
      const db = stored();
      await client.update(Databases.resource, {
        ...db,
        metadata: { ...db.metadata, annotations: { 'myapp.example.com/switchover-to': 'orders-9' } },
      });
      await reconcile();
      assert.equal(stored().status?.failover, undefined);
      assert.equal(stored().metadata.annotations?.['myapp.example.com/switchover-to'], undefined);
      assert.match(
        recorder.events.find((e) => e.reason === 'SwitchoverRefused')?.note ?? '',
        /no such instance/,
      );
    });
  });

  test('a primary that is not Ready but answers as the primary through exec (a slow probe): no failover', async () => {
    await setup();
    client.setStored(Pods, pod('orders-0', { role: 'primary', ready: false }));
    client.setStored(Pods, pod('orders-1', { role: 'replica' }));
    client.setStored(Pods, pod('orders-2', { role: 'replica' }));
    await reconcile();
    assert.equal(stored().status?.failover, undefined);
    assert.deepEqual(inst.ran(), ['orders-0: state']);
    // It stops answering: now it is failed over.
    inst.states.delete('orders-0');
    await reconcile();
    assert.equal(stored().status?.failover?.reason, 'PrimaryNotReady');
  });

  describe("the primary's server container down (crashed, in back-off), its sidecar running", () => {
    // Found on two real nodes: the status said the server was not running, so the fence counted as done
    // and a replica was promoted; the kubelet restarted the server at that moment, with the designation
    // that named it, and two instances were out of recovery until its sidecar saw the Lease.
    const crashed = (): Pod => {
      const p = pod('orders-0', { role: 'primary', ready: false });
      return {
        ...p,
        spec: { ...p.spec, containers: [...(p.spec?.containers ?? []), { name: 'credentials' }] },
        status: {
          ...p.status,
          containerStatuses: [
            {
              name: 'postgres',
              image: 'postgres:16',
              imageID: '',
              ready: false,
              restartCount: 3,
              state: { waiting: { reason: 'CrashLoopBackOff' } },
            },
            {
              name: 'credentials',
              image: 'postgres:16',
              imageID: '',
              ready: true,
              restartCount: 0,
              state: { running: {} },
            },
          ],
        },
      } as Pod;
    };
    beforeEach(async () => {
      await setup({ failoverDelay: 10 });
      inst.states.delete('orders-0');
      client.setStored(Pods, crashed());
      client.setStored(Pods, pod('orders-1', { role: 'replica' }));
      client.setStored(Pods, pod('orders-2', { role: 'replica' }));
    });
    const sidecarFences = () =>
      inst.exec.calls.filter(
        (c) =>
          c.name === 'orders-0' && c.container === 'credentials' && /echo fenced/.test(c.command[2] ?? ''),
      );

    test('fenced through its sidecar (designation none) before a replica is promoted', async () => {
      for (let i = 0; i < 4 && stored().status?.failover?.phase !== 'Rejoining'; i++) await reconcile();
      assert.equal(stored().status?.failover?.phase, 'Rejoining');
      const fences = sidecarFences();
      assert.equal(fences.length, 1, inst.ran().join());
      assert.equal(fences[0]?.container, 'credentials');
      assert.ok(
        inst.exec.calls.indexOf(fences[0] as never) < inst.ran().indexOf('orders-2: promote'),
        inst.ran().join(),
      );
    });

    test('its sidecar fails the fence: no replica is promoted', async () => {
      inst.exec.on({ pod: 'orders-0', container: 'credentials' }, { exitCode: 1, stderr: 'mv: read-only' });
      for (let i = 0; i < 4; i++) await reconcile();
      assert.equal(stored().status?.failover?.phase, 'Fencing');
      assert.ok(!inst.ran().some((r) => r.endsWith('promote')), inst.ran().join());
      assert.ok(sidecarFences().length >= 1);
    });
  });

  test('a new Database (it never ran): no failover while its primary is not ready yet', async () => {
    await setup({}, { phase: 'Provisioning', readyReplicas: 0 });
    client.setStored(Pods, pod('orders-0', { role: 'primary', ready: false }));
    client.setStored(Pods, pod('orders-1', { role: 'replica' }));
    await reconcile();
    assert.equal(stored().status?.failover, undefined);
    assert.deepEqual(inst.ran(), []);
  });

  test('a Ready primary: nothing is run and no failover is recorded', async () => {
    await setup();
    client.setStored(Pods, pod('orders-0', { role: 'primary' }));
    client.setStored(Pods, pod('orders-1', { role: 'replica' }));
    await reconcile();
    await reconcile();
    assert.equal(stored().status?.failover, undefined);
    assert.deepEqual(inst.ran(), []);
    assert.equal(stored().status?.replicationMode, 'Asynchronous');
  });
});

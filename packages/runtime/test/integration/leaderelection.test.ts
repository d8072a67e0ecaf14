/**
 * Leader election between managers against a real kube-apiserver (etcd + kube-apiserver from
 * @opkit/controlplane), with short timings: leaseDuration 4 s, renewDeadline 3 s, retryPeriod 0.5 s.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { ConfigMaps, Namespaces } from '../../src/api/builtin.ts';
import { createClient, loadConfig, type RestClient } from '../../src/client/index.ts';
import { controllerFor } from '../../src/controller/index.ts';
import { type LeaseObject, LeaseResource } from '../../src/leaderelection/index.ts';
import { silentLogger } from '../../src/log/index.ts';
import { createManager, type Manager } from '../../src/manager/index.ts';

const LEASE_MS = 4_000;
const RENEW_MS = 3_000;
const RETRY_MS = 500;
/** Request latency and timer lateness on top of the protocol's bound (a few requests on loopback). */
const SLACK_MS = 300;

let cp: ControlPlane;
let client: RestClient;

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'le-test' });
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

interface Replica {
  name: string;
  mgr: Manager;
  ctl: AbortController;
  run?: Promise<void>;
  /** Keys this replica's controller reconciled, in order. */
  reconciled: string[];
  /** Times (Date.now) this replica's leader-only runnable started. */
  ledAt: number[];
  /** Date.now() when start() settled. */
  stoppedAt?: number;
}

async function replica(name: string, ns: string, lease: string, releaseOnCancel: boolean): Promise<Replica> {
  const mgr = await createManager({
    kubeconfig: cp.kubeconfigPath,
    fieldManager: `le-${name}`,
    namespace: ns,
    logger: silentLogger(),
    healthProbeBindAddress: '127.0.0.1:0',
    metricsBindAddress: '127.0.0.1:0',
    gracefulShutdownTimeoutMs: 10_000,
    leaderElection: {
      enabled: true,
      id: lease,
      namespace: ns,
      leaseDurationMs: LEASE_MS,
      renewDeadlineMs: RENEW_MS,
      retryPeriodMs: RETRY_MS,
      releaseOnCancel,
    },
  });
  const r: Replica = { name, mgr, ctl: new AbortController(), reconciled: [], ledAt: [] };
  controllerFor(mgr, ConfigMaps)
    .named('configmaps')
    .complete(async (req) => {
      r.reconciled.push(`${req.namespace}/${req.name}`);
    });
  mgr.add({
    name: 'leader-only',
    needLeaderElection: true,
    async start(signal) {
      r.ledAt.push(Date.now());
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    },
  });
  return r;
}

function run(r: Replica): void {
  r.run = r.mgr.start(r.ctl.signal).finally(() => {
    r.stoppedAt = Date.now();
  });
}

async function stop(r: Replica): Promise<number> {
  r.ctl.abort();
  await r.run;
  assert.ok(r.stoppedAt !== undefined);
  return r.stoppedAt;
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function getLease(ns: string, name: string): Promise<LeaseObject> {
  return client.get(LeaseResource, { namespace: ns, name });
}

async function scrape(r: Replica, path: string): Promise<{ status: number; body: string }> {
  const address = path === '/metrics' ? r.mgr.metricsAddress : r.mgr.healthProbeAddress;
  const res = await fetch(`http://${address}${path}`);
  return { status: res.status, body: await res.text() };
}

describe('leader election between managers', () => {
  test('only the leader reconciles; after a graceful shutdown another takes over within retryPeriod', {
    timeout: 60_000,
  }, async (t) => {
    const ns = 'le-handover';
    const lease = 'handover-operator';
    await client.create(Namespaces, { metadata: { name: ns } });
    const a = await replica('a', ns, lease, true);
    const b = await replica('b', ns, lease, true);
    try {
      run(a);
      await a.mgr.elected;
      run(b);
      for (const name of ['one', 'two', 'three']) {
        await client.create(ConfigMaps, { metadata: { namespace: ns, name }, data: { k: name } });
      }
      await until(() => a.reconciled.length >= 3, 10_000, 'the leader to reconcile');
      await until(() => b.mgr.currentLeader() === a.mgr.identity, 5_000, 'b to observe the leader');
      // b's cache is warm (ready) but its controller does not run.
      await until(async () => (await scrape(b, '/readyz')).status === 200, 5_000, 'b to be ready');
      await new Promise((r) => setTimeout(r, 2 * RETRY_MS));
      assert.deepEqual(b.reconciled, []);
      assert.deepEqual(b.ledAt, []);
      assert.equal(a.ledAt.length, 1);
      assert.deepEqual([...new Set(a.reconciled)].sort(), [`${ns}/one`, `${ns}/three`, `${ns}/two`]);
      assert.equal(a.mgr.isLeader(), true);
      assert.equal(b.mgr.isLeader(), false);
      assert.match(
        (await scrape(a, '/metrics')).body,
        new RegExp(`leader_election_master_status\\{name="${lease}"\\} 1`),
      );
      assert.match(
        (await scrape(b, '/metrics')).body,
        new RegExp(`leader_election_master_status\\{name="${lease}"\\} 0`),
      );
      assert.match((await scrape(a, '/metrics')).body, /rest_client_requests_total\{code="200",method="PUT"/);
      const held = await getLease(ns, lease);
      assert.equal(held.spec?.holderIdentity, a.mgr.identity);
      assert.equal(held.spec?.leaseDurationSeconds, LEASE_MS / 1000);

      // Graceful shutdown with releaseOnCancel: b takes over at its next retry, not after leaseDuration.
      const stoppedAt = await stop(a);
      const released = await getLease(ns, lease);
      assert.ok(
        released.spec?.holderIdentity === '' || released.spec?.holderIdentity === b.mgr.identity,
        `released, got holder "${released.spec?.holderIdentity}"`,
      );
      await b.mgr.elected;
      const handover = (b.ledAt[0] ?? Number.NaN) - stoppedAt;
      t.diagnostic(`handover after graceful shutdown: ${handover} ms`);
      assert.ok(handover <= RETRY_MS + SLACK_MS, `handover took ${handover} ms`);
      assert.ok(handover < LEASE_MS / 2, `handover took ${handover} ms`);
      const taken = await getLease(ns, lease);
      assert.equal(taken.spec?.holderIdentity, b.mgr.identity);
      assert.equal(taken.spec?.leaseTransitions, 1);
      // The new leader's controller starts from its warm cache and reconciles everything.
      await until(() => b.reconciled.length >= 3, 10_000, 'the new leader to reconcile');
      assert.deepEqual([...new Set(b.reconciled)].sort(), [`${ns}/one`, `${ns}/three`, `${ns}/two`]);
    } finally {
      a.ctl.abort();
      b.ctl.abort();
      await Promise.allSettled([a.run, b.run]);
    }
  });

  test('when the leader dies without releasing, another takes over within leaseDuration + retryPeriod', {
    timeout: 60_000,
  }, async (t) => {
    const ns = 'le-kill';
    const lease = 'kill-operator';
    await client.create(Namespaces, { metadata: { name: ns } });
    const a = await replica('a', ns, lease, false);
    const b = await replica('b', ns, lease, false);
    try {
      run(a);
      await a.mgr.elected;
      run(b);
      await until(() => b.mgr.currentLeader() === a.mgr.identity, 5_000, 'b to observe the leader');
      await new Promise((r) => setTimeout(r, 3 * RETRY_MS));
      assert.deepEqual(b.ledAt, []);

      // "Kill" a: it stops renewing and leaves the lease as it is.
      const diedAt = await stop(a);
      const abandoned = await getLease(ns, lease);
      assert.equal(abandoned.spec?.holderIdentity, a.mgr.identity, 'not released');
      const lastRenew = Date.parse(abandoned.spec?.renewTime ?? '');

      await b.mgr.elected;
      const tookOver = b.ledAt[0] ?? Number.NaN;
      t.diagnostic(
        `took over ${tookOver - diedAt} ms after the leader died, ${tookOver - lastRenew} ms after its last renewal`,
      );
      // Not before the lease expired (b measures expiry from when it saw the last renewal, which is
      // after it was written) ...
      assert.ok(
        tookOver - lastRenew >= LEASE_MS - 50,
        `took over ${tookOver - lastRenew} ms after the last renewal`,
      );
      // ... and at most leaseDuration + retryPeriod after the leader died.
      assert.ok(
        tookOver - diedAt <= LEASE_MS + RETRY_MS + SLACK_MS,
        `took over ${tookOver - diedAt} ms after the leader died`,
      );
      const taken = await getLease(ns, lease);
      assert.equal(taken.spec?.holderIdentity, b.mgr.identity);
      assert.equal(taken.spec?.leaseTransitions, 1);
      assert.notEqual(taken.spec?.acquireTime, abandoned.spec?.acquireTime);
    } finally {
      a.ctl.abort();
      b.ctl.abort();
      await Promise.allSettled([a.run, b.run]);
    }
  });
});

/**
 * The manager against the FakeClient: probes, metrics, runnable lifecycle, leader election wiring,
 * graceful shutdown and lost leadership.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { ConfigMaps, Leases, Secrets } from '../../src/api/builtin.ts';
import { ForbiddenError } from '../../src/client/errors.ts';
import type { ControllerContext } from '../../src/controller/controller.ts';
import { controllerFor } from '../../src/controller/index.ts';
import { type LeaseObject, LeaseResource } from '../../src/leaderelection/index.ts';
import { silentLogger } from '../../src/log/index.ts';
import {
  CacheSyncTimeoutError,
  GracefulShutdownTimeoutError,
  LeaderElectionLostError,
  Manager,
  type ManagerInit,
  parseBindAddress,
} from '../../src/manager/index.ts';
import type { Runnable } from '../../src/manager/runnable.ts';
import { FakeClient, internalError } from '../../src/testing/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

const NS = 'ops';
const LEASE = 'test-operator';

function manager(fake: FakeClient, extra: Partial<ManagerInit> = {}): Manager {
  return new Manager({
    client: fake,
    logger: silentLogger(),
    healthProbeBindAddress: '127.0.0.1:0',
    metricsBindAddress: '127.0.0.1:0',
    ...extra,
  });
}

async function get(address: string | undefined, path: string): Promise<{ status: number; body: string }> {
  assert.ok(address, 'the server is listening');
  const res = await fetch(`http://${address}${path}`);
  return { status: res.status, body: await res.text() };
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A runnable that records its lifecycle and takes `stopDelayMs` to stop after its signal aborts. */
function recorder(
  name: string,
  needLeaderElection: boolean,
  log: string[],
  stopDelayMs = 0,
): Runnable & { signal?: AbortSignal } {
  const r: Runnable & { signal?: AbortSignal } = {
    name,
    needLeaderElection,
    async start(signal) {
      r.signal = signal;
      log.push(`${name} started`);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await new Promise((res) => setTimeout(res, stopDelayMs));
      log.push(`${name} stopped`);
    },
  };
  return r;
}

function lease(fake: FakeClient): LeaseObject | undefined {
  return fake.getStored(LeaseResource, { namespace: NS, name: LEASE });
}

describe('parseBindAddress', () => {
  test('parses controller-runtime style addresses', () => {
    assert.deepEqual(parseBindAddress('127.0.0.1:8081'), { host: '127.0.0.1', port: 8081 });
    assert.deepEqual(parseBindAddress(':0'), { host: undefined, port: 0 });
    assert.deepEqual(parseBindAddress('[::1]:9090'), { host: '::1', port: 9090 });
    assert.equal(parseBindAddress('0'), undefined);
    assert.equal(parseBindAddress(''), undefined);
    assert.equal(parseBindAddress(undefined), undefined);
    assert.throws(() => parseBindAddress('8080'), TypeError);
    assert.throws(() => parseBindAddress('host:http'), TypeError);
  });
});

describe('Manager', () => {
  test('/readyz is 503 until the caches synced, then 200; /healthz is 200 throughout', async () => {
    const fake = new FakeClient();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    fake.onRequest(async (req) => {
      // The informer's initial state: a watch streaming it (watchList, the default) or a LIST.
      if ((req.verb === 'list' || req.verb === 'watch') && req.resource === ConfigMaps) await gate;
    });
    const mgr = manager(fake);
    mgr.cache.getInformer(ConfigMaps);
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await until(() => mgr.healthProbeAddress !== undefined);

    assert.deepEqual(await get(mgr.healthProbeAddress, '/healthz'), { status: 200, body: 'ok' });
    const notReady = await get(mgr.healthProbeAddress, '/readyz');
    assert.equal(notReady.status, 503);
    assert.match(notReady.body, /\[-\]cache-sync failed/);
    const verbose = await get(mgr.healthProbeAddress, '/readyz?verbose');
    assert.match(verbose.body, /caches have not synced yet/);
    assert.equal((await get(mgr.healthProbeAddress, '/readyz?exclude=cache-sync')).status, 200);

    release();
    await until(async () => (await get(mgr.healthProbeAddress, '/readyz')).status === 200);
    assert.equal((await get(mgr.healthProbeAddress, '/readyz/cache-sync')).body, 'ok');
    assert.equal((await get(mgr.healthProbeAddress, '/readyz/nope')).status, 404);
    assert.equal((await get(mgr.healthProbeAddress, '/metrics')).status, 404, 'metrics has its own address');
    ctl.abort();
    await run;
    await assert.rejects(fetch(`http://${mgr.healthProbeAddress}/healthz`), 'servers are closed');
  });

  test('custom healthz and readyz checks', async () => {
    const mgr = manager(new FakeClient());
    let healthy = true;
    mgr.addHealthzCheck('db', () => {
      if (!healthy) throw new Error('db unreachable');
    });
    mgr.addReadyzCheck('warm', async () => healthy);
    assert.throws(() => mgr.addHealthzCheck('db', () => {}), /already exists/);
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await mgr.elected;
    assert.equal((await get(mgr.healthProbeAddress, '/healthz')).status, 200);
    assert.equal((await get(mgr.healthProbeAddress, '/readyz')).status, 200);
    healthy = false;
    const h = await get(mgr.healthProbeAddress, '/healthz?verbose');
    assert.equal(h.status, 503);
    assert.match(h.body, /\[\+\]ping ok/);
    assert.match(h.body, /\[-\]db failed: db unreachable/);
    assert.equal((await get(mgr.healthProbeAddress, '/healthz/ping')).status, 200);
    assert.equal((await get(mgr.healthProbeAddress, '/readyz')).status, 503);
    ctl.abort();
    await run;
  });

  test('/metrics serves the registry, including leader_election_master_status', async () => {
    const fake = new FakeClient();
    const mgr = manager(fake, { leaderElection: { id: LEASE, namespace: NS } });
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await until(() => mgr.metricsAddress !== undefined);
    await mgr.elected;
    const res = await fetch(`http://${mgr.metricsAddress}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
    const text = await res.text();
    assert.match(text, new RegExp(`leader_election_master_status\\{name="${LEASE}"\\} 1`));
    assert.match(text, /# TYPE rest_client_requests_total counter/);
    ctl.abort();
    await run;
    assert.match(
      await mgr.metrics.text(),
      new RegExp(`leader_election_master_status\\{name="${LEASE}"\\} 0`),
    );
  });

  test('one address can serve both probes and metrics', async () => {
    const probe = manager(new FakeClient(), {
      healthProbeBindAddress: '127.0.0.1:0',
      metricsBindAddress: '',
    });
    const ctl = new AbortController();
    const run = probe.start(ctl.signal);
    await probe.elected;
    assert.equal(probe.metricsAddress, undefined);
    ctl.abort();
    await run;
  });

  test('satisfies the controller builder context: controllerFor(mgr, Resource) reconciles when leading', async () => {
    const fake = new FakeClient({
      objects: [{ resource: ConfigMaps, object: { metadata: { namespace: NS, name: 'cm1' }, data: {} } }],
    });
    const mgr = manager(fake, { leaderElection: { id: LEASE, namespace: NS } });
    const ctx: ControllerContext = mgr;
    assert.equal(ctx.client, fake);
    const seen: string[] = [];
    controllerFor(mgr, ConfigMaps)
      .named('cm-test')
      .complete(async (req) => {
        seen.push(`${req.namespace}/${req.name}`);
      });
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await until(() => seen.length > 0);
    assert.deepEqual(seen, [`${NS}/cm1`]);
    assert.equal(mgr.isLeader(), true);
    assert.equal(mgr.currentLeader(), mgr.identity);
    ctl.abort();
    await run;
  });

  test('non-leader runnables start on every replica, leader runnables only when leading', async () => {
    const fake = new FakeClient();
    const log: string[] = [];
    // Another replica holds a valid lease.
    fake.setStored(LeaseResource, {
      metadata: { namespace: NS, name: LEASE },
      spec: { holderIdentity: 'other', leaseDurationSeconds: 15, leaseTransitions: 0 },
    });
    const mgr = manager(fake, {
      leaderElection: {
        id: LEASE,
        namespace: NS,
        leaseDurationMs: 15_000,
        retryPeriodMs: 50,
        renewDeadlineMs: 100,
      },
    });
    mgr.add(recorder('warm', false, log));
    mgr.add(recorder('ctrl', true, log));
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await until(() => log.includes('warm started'));
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(log, ['warm started']);
    assert.equal(mgr.isLeader(), false);
    await until(() => mgr.currentLeader() === 'other');
    // Added after start: a non-leader runnable starts at once.
    mgr.add(recorder('late', false, log));
    await until(() => log.includes('late started'));
    ctl.abort();
    await run;
    assert.deepEqual(log.sort(), ['late started', 'late stopped', 'warm started', 'warm stopped']);
    assert.equal(lease(fake)?.spec?.holderIdentity, 'other', 'a non-leader does not touch the lease');
    assert.throws(() => mgr.add(recorder('too-late', false, log)), /shutting down/);
  });

  test('graceful shutdown: leader runnables stop first, then the others, then the lease is released', async () => {
    const fake = new FakeClient();
    const log: string[] = [];
    fake.onRequest((req) => {
      if (req.resource === Leases && req.verb === 'update') {
        const spec = (req.object as LeaseObject).spec;
        if (spec?.holderIdentity === '') log.push('lease released');
      }
    });
    const mgr = manager(fake, { leaderElection: { id: LEASE, namespace: NS } });
    mgr.add(recorder('ctrl', true, log, 50));
    mgr.add(recorder('other', false, log, 10));
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await mgr.elected;
    await until(() => log.length === 2);
    ctl.abort();
    await run;
    assert.deepEqual(log.slice(2), ['ctrl stopped', 'other stopped', 'lease released']);
    const l = lease(fake);
    assert.equal(l?.spec?.holderIdentity, '');
    assert.equal(l?.spec?.leaseDurationSeconds, 1);
    assert.equal(mgr.isLeader(), false);
  });

  test('releaseOnCancel false leaves the lease to expire', async () => {
    const fake = new FakeClient();
    const mgr = manager(fake, { leaderElection: { id: LEASE, namespace: NS, releaseOnCancel: false } });
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await mgr.elected;
    ctl.abort();
    await run;
    assert.equal(lease(fake)?.spec?.holderIdentity, mgr.identity);
  });

  test('graceful shutdown that times out rejects and does not release the lease', async () => {
    const fake = new FakeClient();
    const mgr = manager(fake, {
      leaderElection: { id: LEASE, namespace: NS },
      gracefulShutdownTimeoutMs: 100,
    });
    const stuck: Runnable = { name: 'stuck', needLeaderElection: true, start: () => new Promise(() => {}) };
    mgr.add(stuck);
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    await mgr.elected;
    ctl.abort();
    await assert.rejects(run, GracefulShutdownTimeoutError);
    assert.equal(lease(fake)?.spec?.holderIdentity, mgr.identity);
  });

  test('a failing runnable stops the manager and start rejects with its error', async () => {
    const log: string[] = [];
    const mgr = manager(new FakeClient());
    const ctrl = recorder('ctrl', true, log);
    mgr.add(ctrl);
    mgr.add({
      name: 'broken',
      needLeaderElection: false,
      async start() {
        await new Promise((r) => setTimeout(r, 20));
        throw new Error('boom');
      },
    });
    await assert.rejects(mgr.start(new AbortController().signal), /boom/);
    assert.equal(ctrl.signal?.aborted, true);
    assert.deepEqual(log, ['ctrl started', 'ctrl stopped']);
  });

  test('losing leadership aborts the leader runnables and rejects with LeaderElectionLostError', async () => {
    const fake = new FakeClient();
    const clock = new FakeClock(Date.now());
    const log: string[] = [];
    const mgr = manager(fake, { clock, leaderElection: { id: LEASE, namespace: NS } });
    const ctrl = recorder('ctrl', true, log);
    mgr.add(ctrl);
    const outcome = mgr.start(new AbortController().signal).then(
      () => assert.fail('start resolved'),
      (e: unknown) => e,
    );
    await mgr.elected;
    await until(() => log.includes('ctrl started'));
    fake.onRequest((req) => {
      if (req.resource === Leases) throw internalError('etcd is down');
    });
    // Leadership ends renewDeadline (10 s) after the acquisition, the last successful write.
    await clock.advanceAsync(10_000 - 1);
    assert.equal(mgr.isLeader(), true, 'still leading until renewDeadline has passed');
    assert.equal(ctrl.signal?.aborted, false);
    clock.advance(1);
    // The leader runnables are stopped by the deadline timer itself, before anything else runs.
    assert.equal(ctrl.signal?.aborted, true);
    assert.equal(mgr.isLeader(), false);
    const err = await outcome;
    assert.ok(err instanceof LeaderElectionLostError);
    assert.equal(err.lease, `${NS}/${LEASE}`);
    assert.equal(ctrl.signal?.aborted, true);
    assert.match(
      await mgr.metrics.text(),
      new RegExp(`leader_election_master_status\\{name="${LEASE}"\\} 0`),
    );
  });

  test('caches that never sync: start() rejects with CacheSyncTimeoutError naming them; /readyz 503 meanwhile', async () => {
    const fake = new FakeClient();
    // Listing and watching secrets is forbidden (RBAC), every time: that informer can never sync.
    fake.onRequest((req) => {
      if ((req.verb === 'list' || req.verb === 'watch') && req.resource === Secrets) {
        throw new ForbiddenError({
          kind: 'Status',
          code: 403,
          reason: 'Forbidden',
          message: 'secrets is forbidden',
        });
      }
    });
    const mgr = manager(fake, { cacheSyncTimeoutMs: 400, cache: { backoff: { initialMs: 5, maxMs: 20 } } });
    mgr.cache.getInformer(ConfigMaps);
    mgr.cache.getInformer(Secrets, { namespace: NS, labelSelector: 'app=db' });
    const log: string[] = [];
    const ctrl = recorder('ctrl', true, log);
    mgr.add(ctrl);
    const started = Date.now();
    const safety = new AbortController(); // without a sync timeout start() would never return
    const safetyTimer = setTimeout(() => safety.abort(), 3_000);
    const outcome = mgr.start(safety.signal).then(
      () => assert.fail('start resolved'),
      (e: unknown) => e,
    );
    await until(() => mgr.healthProbeAddress !== undefined);
    const readyz = await get(mgr.healthProbeAddress, '/readyz?verbose');
    assert.equal(readyz.status, 503);
    assert.match(readyz.body, /caches have not synced yet/);
    const err = await outcome;
    clearTimeout(safetyTimer);
    assert.ok(err instanceof CacheSyncTimeoutError, String(err));
    assert.ok(Date.now() - started >= 390, 'waited for the timeout');
    assert.equal(err.timeoutMs, 400);
    assert.deepEqual(err.informers, ['core/v1/secrets (namespace "ops", labelSelector "app=db")']);
    assert.match(
      err.message,
      /timed out after 400 ms waiting for caches to sync; not synced: core\/v1\/secrets/,
    );
    assert.deepEqual(log, [], 'controllers never started');
    assert.equal(fake.activeWatches(), 0, 'the cache was stopped');
    assert.ok(fake.actions({ verb: 'watch', resource: Secrets }).length > 1, 'it kept retrying');
    await assert.rejects(fetch(`http://${mgr.healthProbeAddress}/readyz`), 'servers are closed');
  });

  test('the cache sync timeout defaults to 120 s (on the manager clock)', async () => {
    const fake = new FakeClient();
    fake.onRequest((req) => {
      if ((req.verb === 'list' || req.verb === 'watch') && req.resource === Secrets)
        throw internalError('no such resource');
    });
    const clock = new FakeClock(Date.now());
    const mgr = manager(fake, { clock, cache: { backoff: { initialMs: 5, maxMs: 20 } } });
    mgr.cache.getInformer(Secrets);
    const state: { settled?: unknown } = {};
    const outcome = (): unknown => state.settled;
    const safety = new AbortController(); // without a sync timeout start() would never return
    const run = mgr.start(safety.signal).then(
      () => {
        state.settled = 'resolved';
      },
      (e: unknown) => {
        state.settled = e;
      },
    );
    await until(() => fake.actions({ verb: 'watch' }).length >= 2);
    await clock.advanceAsync(119_999);
    assert.equal(outcome(), undefined, 'still waiting');
    await clock.advanceAsync(1);
    const safetyTimer = setTimeout(() => safety.abort(), 3_000);
    await run;
    clearTimeout(safetyTimer);
    const err = outcome();
    assert.ok(err instanceof CacheSyncTimeoutError, String(err));
    assert.deepEqual(err.informers, ['core/v1/secrets']);
    assert.throws(() => manager(fake, { cacheSyncTimeoutMs: -1 }), RangeError);
  });

  test('a failing leader elector stops the manager like lost leadership (no unhandled rejection)', async () => {
    // The elector's own log call throws: its run() rejects.
    const logger = pino(
      {
        level: 'info',
        hooks: {
          logMethod(args, method) {
            if (args.includes('attempting to acquire leader lease')) throw new Error('log sink broke');
            method.apply(this, args);
          },
        },
      },
      { write: () => {} },
    );
    const log: string[] = [];
    const mgr = manager(new FakeClient(), { logger, leaderElection: { id: LEASE, namespace: NS } });
    mgr.add(recorder('warm', false, log));
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 3_000); // the unfixed manager never stops
    try {
      const err = await mgr.start(ctl.signal).then(
        () => assert.fail('start resolved'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof LeaderElectionLostError, String(err));
      assert.match(String((err.cause as Error | undefined)?.message), /log sink broke/);
      assert.equal(ctl.signal.aborted, false, 'stopped by the failure, not by the test');
      assert.equal(log[0], 'warm started');
      await until(() => log.includes('warm stopped'));
    } finally {
      clearTimeout(timer);
    }
  });

  test('handleSignals: SIGTERM begins a graceful shutdown; the handlers are removed afterwards', async () => {
    const fake = new FakeClient();
    const before = process.listeners('SIGTERM');
    const beforeInt = process.listeners('SIGINT');
    const mgr = manager(fake, { leaderElection: { id: LEASE, namespace: NS } });
    const log: string[] = [];
    mgr.add(recorder('ctrl', true, log));
    const run = mgr.start({ handleSignals: true });
    await mgr.elected;
    const added = process.listeners('SIGTERM').filter((l) => !before.includes(l));
    assert.equal(added.length, 1);
    assert.equal(process.listeners('SIGINT').length, beforeInt.length + 1);
    // Call the manager's handler directly (emitting SIGTERM would reach the test runner's too).
    (added[0] as (sig: NodeJS.Signals) => void)('SIGTERM');
    await run;
    assert.deepEqual(log, ['ctrl started', 'ctrl stopped']);
    assert.equal(lease(fake)?.spec?.holderIdentity, '');
    assert.deepEqual(process.listeners('SIGTERM'), before);
    assert.deepEqual(process.listeners('SIGINT'), beforeInt);
  });

  test('event recorders are shared per name and report this replica', () => {
    const mgr = manager(new FakeClient(), { leaderElection: { id: LEASE, identity: 'pod-1_abc' } });
    assert.equal(mgr.getEventRecorder('a'), mgr.getEventRecorder('a'));
    assert.notEqual(mgr.getEventRecorder('a'), mgr.getEventRecorder('b'));
    assert.equal(mgr.identity, 'pod-1_abc');
    assert.equal(mgr.leaderElectionId, LEASE);
  });

  test('start can only be called once; a listen error rejects start', async () => {
    const first = manager(new FakeClient());
    const ctl = new AbortController();
    const run = first.start(ctl.signal);
    await first.elected;
    await assert.rejects(first.start(ctl.signal), /already started/);
    const taken = first.healthProbeAddress;
    const second = manager(new FakeClient(), { healthProbeBindAddress: taken });
    await assert.rejects(second.start(new AbortController().signal), /EADDRINUSE/);
    ctl.abort();
    await run;
  });
});

/**
 * Leader election against the FakeClient, driven by a FakeClock.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Leases } from '../../src/api/builtin.ts';
import {
  clockSkewMarginMs,
  LeaderElectionConfigError,
  LeaderElector,
  LeaseLock,
  LeaseResource,
  leaseSpecFromRecord,
  recordFromLease,
  toMicroTime,
  validateLeaderElectionTimings,
} from '../../src/leaderelection/index.ts';
import { conflictError } from '../../src/testing/index.ts';
import { advanceUntil, candidate, env, LEASE, lease, NS, T0 } from './leaderelection-env.ts';

describe('LeaseLock records', () => {
  test('round-trips a record through the Lease spec with MicroTime timestamps', () => {
    const record = {
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: T0 + 123,
      renewTime: T0 + 4567,
      leaseTransitions: 3,
    };
    const spec = leaseSpecFromRecord(record);
    assert.equal(spec.renewTime, '2025-01-01T00:00:04.567000Z');
    assert.deepEqual(recordFromLease({ metadata: {}, spec }), record);
    assert.equal(toMicroTime(T0), '2025-01-01T00:00:00.000000Z');
    assert.deepEqual(recordFromLease({ metadata: {} }), {
      holderIdentity: '',
      leaseDurationSeconds: 0,
      leaseTransitions: 0,
    });
  });

  test('rejects timings where renewDeadline + retryPeriod + a clock-skew margin reaches leaseDuration', () => {
    // The timings: two replicas led at once for about a second with them.
    assert.throws(
      () => validateLeaderElectionTimings(15_000, 14_000, 2_000),
      (err: unknown) =>
        err instanceof LeaderElectionConfigError &&
        err.fields.join() === 'renewDeadlineMs,retryPeriodMs,leaseDurationMs' &&
        /renewDeadlineMs \(14000\) \+ retryPeriodMs \(2000\) \+ a clock-skew margin of 750 ms/.test(
          err.message,
        ) &&
        /lower renewDeadlineMs or retryPeriodMs, or raise leaseDurationMs/.test(err.message),
    );
    assert.throws(() => validateLeaderElectionTimings(15_000, 12_300, 2_000), LeaderElectionConfigError);
    assert.equal(clockSkewMarginMs(15_000), 750);
    validateLeaderElectionTimings(15_000, 12_000, 2_000);
    validateLeaderElectionTimings(15_000, 10_000, 2_000); // the defaults
    assert.throws(
      () => validateLeaderElectionTimings(15_000, Number.NaN, -1),
      (err: unknown) =>
        err instanceof LeaderElectionConfigError && err.fields.join() === 'renewDeadlineMs,retryPeriodMs',
    );
  });

  test('rejects timings client-go would reject', () => {
    assert.throws(() => validateLeaderElectionTimings(10_000, 10_000, 2_000), /leaseDuration/);
    assert.throws(() => validateLeaderElectionTimings(15_000, 2_000, 2_000), /renewDeadline/);
    assert.throws(() => validateLeaderElectionTimings(0, 0, 0), /positive/);
    validateLeaderElectionTimings(4_000, 3_000, 500);
    const e = env();
    assert.throws(
      () =>
        new LeaderElector({
          lock: new LeaseLock({ client: e.fake, namespace: NS, name: LEASE, identity: 'a' }),
          leaseDurationMs: 5_000,
          renewDeadlineMs: 6_000,
        }),
      RangeError,
    );
  });
});

describe('LeaderElector', () => {
  test('acquires an absent lease by creating it, with client-go defaults', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    assert.equal(a.elector.isLeader(), true);
    assert.deepEqual(a.started, [T0]);
    assert.deepEqual(a.newLeaders, ['a']);
    assert.deepEqual(a.status, [false, true]);
    assert.ok(a.leadingSignal && !a.leadingSignal.aborted);
    const l = lease(e);
    assert.equal(l.spec?.holderIdentity, 'a');
    assert.equal(l.spec?.leaseDurationSeconds, 15);
    assert.equal(l.spec?.leaseTransitions, 0);
    assert.equal(l.spec?.acquireTime, toMicroTime(T0));
    assert.equal(l.spec?.renewTime, toMicroTime(T0));
    assert.deepEqual(
      e.fake.writes({ resource: Leases }).map((w) => w.verb),
      ['create'],
    );
    a.ctl.abort();
    assert.equal(await a.run, 'cancelled');
  });

  test('renews every retryPeriod, keeping acquireTime and leaseTransitions', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    e.fake.clearActions();
    await e.clock.advanceAsync(2_000);
    assert.equal(lease(e).spec?.renewTime, toMicroTime(T0 + 2_000));
    await e.clock.advanceAsync(18_000);
    const l = lease(e);
    assert.equal(l.spec?.renewTime, toMicroTime(T0 + 20_000));
    assert.equal(l.spec?.acquireTime, toMicroTime(T0));
    assert.equal(l.spec?.leaseTransitions, 0);
    // Fast path: the leader updates from the Lease it wrote last, without reading it first.
    const verbs = e.fake.actions({ resource: Leases }).map((a) => a.verb);
    assert.deepEqual(verbs, Array(10).fill('update'));
    assert.equal(a.elector.isLeader(), true);
    a.ctl.abort();
    await a.run;
  });

  test('a second candidate cannot acquire while the leader renews', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b');
    await e.clock.advanceAsync(60_000);
    assert.equal(a.elector.isLeader(), true);
    assert.equal(b.elector.isLeader(), false);
    assert.deepEqual(b.started, []);
    assert.deepEqual(b.newLeaders, ['a']);
    assert.equal(b.elector.getLeader(), 'a');
    assert.equal(lease(e).spec?.holderIdentity, 'a');
    assert.equal(lease(e).spec?.leaseTransitions, 0);
    // b only ever read the lease
    assert.ok(b.status.every((s) => !s));
    a.ctl.abort();
    b.ctl.abort();
    await Promise.all([a.run, b.run]);
  });

  test('takes over after the lease expires (by the observing clock), incrementing leaseTransitions', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b');
    await e.clock.advanceAsync(10_000);
    // "Kill" a: it stops renewing and does not release (releaseOnCancel defaults to false).
    a.ctl.abort();
    assert.equal(await a.run, 'cancelled');
    const lastRenew = Date.parse(lease(e).spec?.renewTime ?? '');
    assert.equal(lease(e).spec?.holderIdentity, 'a');

    const tookOver = await advanceUntil(e, () => b.elector.isLeader(), 30_000, 100);
    // Not before the lease expired; at most leaseDuration + retryPeriod after the last renewal.
    assert.ok(tookOver >= lastRenew + 15_000, `took over at +${tookOver - lastRenew} ms`);
    assert.ok(tookOver <= lastRenew + 15_000 + 2_000, `took over at +${tookOver - lastRenew} ms`);
    const l = lease(e);
    assert.equal(l.spec?.holderIdentity, 'b');
    assert.equal(l.spec?.leaseTransitions, 1);
    assert.equal(l.spec?.acquireTime, toMicroTime(b.started[0] ?? 0));
    assert.deepEqual(b.newLeaders, ['a', 'b']);
    assert.deepEqual(a.stopped.length, 1);
    b.ctl.abort();
    await b.run;
  });

  test('judges expiry by its own clock, not by the renewTime written in the lease', async () => {
    const e = env();
    // A lease renewed "long ago" by a clock far behind ours: still valid until we have watched it for
    // leaseDuration without change.
    e.fake.setStored(LeaseResource, {
      metadata: { namespace: NS, name: LEASE },
      spec: {
        holderIdentity: 'skewed',
        leaseDurationSeconds: 15,
        acquireTime: toMicroTime(T0 - 3_600_000),
        renewTime: toMicroTime(T0 - 3_600_000),
        leaseTransitions: 4,
      },
    });
    const b = candidate(e, 'b');
    await e.clock.advanceAsync(14_000);
    assert.equal(b.elector.isLeader(), false);
    await e.clock.advanceAsync(1_000);
    assert.equal(b.elector.isLeader(), true);
    assert.equal(lease(e).spec?.leaseTransitions, 5);
    b.ctl.abort();
    await b.run;
  });

  test('release on cancel hands the lease over at once', async () => {
    const e = env();
    const a = candidate(e, 'a', { releaseOnCancel: true });
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b');
    await e.clock.advanceAsync(5_000);
    assert.equal(b.elector.isLeader(), false);

    const cancelledAt = e.clock.now();
    a.ctl.abort();
    assert.equal(await a.run, 'cancelled');
    const released = lease(e);
    assert.equal(released.spec?.holderIdentity, '');
    assert.equal(released.spec?.leaseDurationSeconds, 1);
    assert.equal(released.spec?.renewTime, toMicroTime(cancelledAt));
    assert.deepEqual(a.stopped, [cancelledAt]);
    assert.equal(a.leadingSignal?.aborted, true);
    assert.equal(a.status.at(-1), false);

    const tookOver = await advanceUntil(e, () => b.elector.isLeader(), 15_000, 100);
    assert.ok(tookOver - cancelledAt <= 2_000, `took over after ${tookOver - cancelledAt} ms`);
    assert.equal(lease(e).spec?.holderIdentity, 'b');
    assert.equal(lease(e).spec?.leaseTransitions, 1);
    assert.equal(lease(e).spec?.leaseDurationSeconds, 15);
    b.ctl.abort();
    await b.run;
  });

  test('does not release a lease someone else holds by now', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    const stolen = { ...lease(e), spec: { ...lease(e).spec, holderIdentity: 'thief' } };
    e.fake.setStored(LeaseResource, stolen);
    assert.equal(await a.elector.release(), true);
    assert.equal(lease(e).spec?.holderIdentity, 'thief');
    a.ctl.abort();
    await a.run;
  });

  test('leads until renewDeadline after its last successful renewal began, not a retryPeriod longer', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    await e.clock.advanceAsync(4_000); // renewed at +2 s and +4 s
    const lastRenew = e.clock.now();
    a.setFailing(true);

    // Retries at +6, +8, +10, +12 s fail; leadership ends renewDeadline (10 s) after the +4 s renewal.
    await e.clock.advanceAsync(10_000 - 1);
    assert.equal(a.elector.isLeader(), true);
    assert.deepEqual(a.stopped, []);
    await e.clock.advanceAsync(1);
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.leadingSignal?.aborted, true);
    assert.equal(await a.run, 'lost');
    assert.deepEqual(a.stopped, [lastRenew + 10_000]);
    assert.equal(a.status.at(-1), false);
  });

  test('the deadline counts from when a renewal was sent, not from when its answer came', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    // The renewal sent at +2 s is answered (successfully) only at +5 s; later ones fail.
    a.setDelay(3_000);
    await e.clock.advanceAsync(2_000);
    a.setDelay(0);
    a.setFailing(true);
    await e.clock.advanceAsync(3_000);
    assert.equal(lease(e).spec?.renewTime, toMicroTime(T0 + 2_000));
    assert.equal(a.elector.isLeader(), true);
    const stoppedAt = await advanceUntil(e, () => a.stopped.length > 0, 20_000, 100);
    assert.equal(stoppedAt, T0 + 2_000 + 10_000);
    assert.deepEqual(a.stopped, [T0 + 2_000 + 10_000]);
    assert.equal(await a.run, 'lost');
  });

  test('keeps leadership through failures shorter than renewDeadline', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    a.setFailing(true);
    await e.clock.advanceAsync(6_000); // +2, +4, +6 s fail; +8 s succeeds, before the +10 s deadline
    a.setFailing(false);
    await e.clock.advanceAsync(10_000);
    assert.equal(a.elector.isLeader(), true);
    assert.deepEqual(a.stopped, []);
    assert.equal(lease(e).spec?.renewTime, toMicroTime(e.clock.now()));
    a.ctl.abort();
    assert.equal(await a.run, 'cancelled');
  });

  test('a conflict on the fast path falls back to reading the lease and retrying', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    e.fake.failNext('update', Leases, conflictError(Leases, LEASE));
    e.fake.clearActions();
    await e.clock.advanceAsync(2_000);
    assert.deepEqual(
      e.fake.actions({ resource: Leases }).map((x) => x.verb),
      ['update', 'get', 'update'],
    );
    assert.equal(lease(e).spec?.renewTime, toMicroTime(T0 + 2_000));
    assert.equal(a.elector.isLeader(), true);
    a.ctl.abort();
    await a.run;
  });

  test('a leader that finds the lease held by another steps down at once', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    // Someone else wrote the lease behind a's back (new resourceVersion): a's update conflicts, a
    // re-reads, sees a valid foreign lease and stops leading right then, not at renewDeadline.
    e.fake.setStored(LeaseResource, { ...lease(e), spec: { ...lease(e).spec, holderIdentity: 'c' } });
    await e.clock.advanceAsync(2_000);
    assert.equal(a.elector.isLeader(), false, 'no longer the observed holder');
    assert.equal(a.leadingSignal?.aborted, true);
    assert.equal(await a.run, 'lost');
    assert.deepEqual(a.stopped, [T0 + 2_000]);
    assert.equal(lease(e).spec?.holderIdentity, 'c');
  });

  test('two candidates starting together: exactly one wins the create', async () => {
    const e = env();
    const a = candidate(e, 'a');
    const b = candidate(e, 'b');
    await e.clock.advanceAsync(0);
    await e.clock.advanceAsync(30_000);
    const leaders = [a, b].filter((c) => c.elector.isLeader()).map((c) => c.id);
    assert.equal(leaders.length, 1);
    assert.equal(lease(e).spec?.holderIdentity, leaders[0]);
    assert.deepEqual(b.newLeaders, [leaders[0]]);
    a.ctl.abort();
    b.ctl.abort();
    await Promise.all([a.run, b.run]);
  });

  test('a run cancelled before acquiring returns without callbacks', async () => {
    const e = env();
    const a = candidate(e, 'a');
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b', { releaseOnCancel: true });
    await e.clock.advanceAsync(3_000);
    b.ctl.abort();
    assert.equal(await b.run, 'cancelled');
    assert.deepEqual(b.started, []);
    assert.deepEqual(b.stopped, []);
    assert.equal(lease(e).spec?.holderIdentity, 'a');
    a.ctl.abort();
    await a.run;
  });
});

/**
 * Leader election against the FakeClient, driven by a FakeClock.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Leases } from '../../src/api/builtin.ts';
import type { Client } from '../../src/client/types.ts';
import {
  clockSkewMarginMs,
  LeaderElectionConfigError,
  LeaderElector,
  type LeaderElectorOptions,
  LeaseLock,
  type LeaseObject,
  LeaseResource,
  leaseSpecFromRecord,
  recordFromLease,
  toMicroTime,
  validateLeaderElectionTimings,
} from '../../src/leaderelection/index.ts';
import { conflictError, FakeClient, internalError } from '../../src/testing/index.ts';
import { type Clock, FakeClock, sleep, type TimerHandle } from '../../src/util/clock.ts';

const T0 = Date.parse('2025-01-01T00:00:00Z');
const NS = 'kube-system';
const LEASE = 'my-operator';

interface Env {
  clock: FakeClock;
  fake: FakeClient;
}

function env(): Env {
  const clock = new FakeClock(T0);
  const fake = new FakeClient({ now: () => new Date(clock.now()) });
  return { clock, fake };
}

/**
 * A client whose requests fail while `failing` is set (a network partition for one candidate), and
 * are answered `delay` ms (on `clock`) after they were sent.
 */
function partitionable(
  inner: Client,
  clock: FakeClock,
): { client: Client; setFailing(on: boolean): void; setDelay(ms: number): void } {
  let failing = false;
  let delay = 0;
  const guard = async (): Promise<void> => {
    if (failing) throw internalError('connection refused (simulated partition)');
    if (delay > 0) await sleep(delay, undefined, clock);
  };
  const client: Client = {
    fieldManager: inner.fieldManager,
    get: (res, key, opts) => guard().then(() => inner.get(res, key, opts)),
    list: (res, opts) => guard().then(() => inner.list(res, opts)),
    create: (res, obj, opts) => guard().then(() => inner.create(res, obj, opts)),
    update: (res, obj, opts) => guard().then(() => inner.update(res, obj, opts)),
    patch: (res, key, patch, opts) => guard().then(() => inner.patch(res, key, patch, opts)),
    delete: (res, key, opts) => guard().then(() => inner.delete(res, key, opts)),
    updateStatus: (res, obj, opts) => guard().then(() => inner.updateStatus(res, obj, opts)),
    patchStatus: (res, key, patch, opts) => guard().then(() => inner.patchStatus(res, key, patch, opts)),
    watch: (res, opts) => inner.watch(res, opts),
  };
  return {
    client,
    setFailing: (on) => {
      failing = on;
    },
    setDelay: (ms) => {
      delay = ms;
    },
  };
}

interface Candidate {
  id: string;
  elector: LeaderElector;
  ctl: AbortController;
  run: Promise<'cancelled' | 'lost'>;
  started: number[];
  stopped: number[];
  newLeaders: string[];
  status: boolean[];
  leadingSignal: AbortSignal | undefined;
  setFailing(on: boolean): void;
  setDelay(ms: number): void;
}

function candidate(e: Env, id: string, opts: Partial<LeaderElectorOptions> = {}): Candidate {
  const { client, setFailing, setDelay } = partitionable(e.fake, e.clock);
  const c: Partial<Candidate> & {
    started: number[];
    stopped: number[];
    newLeaders: string[];
    status: boolean[];
  } = { id, started: [], stopped: [], newLeaders: [], status: [], setFailing, setDelay };
  c.elector = new LeaderElector({
    lock: new LeaseLock({ client, namespace: NS, name: LEASE, identity: id }),
    clock: e.clock,
    onStartedLeading: (signal) => {
      c.started.push(e.clock.now());
      c.leadingSignal = signal;
    },
    onStoppedLeading: () => void c.stopped.push(e.clock.now()),
    onNewLeader: (leader) => void c.newLeaders.push(leader),
    onLeaderStatus: (_name, leading) => void c.status.push(leading),
    ...opts,
  });
  c.ctl = new AbortController();
  c.run = c.elector.run(c.ctl.signal);
  return c as Candidate;
}

function lease(e: Env): LeaseObject {
  const found = e.fake.getStored(LeaseResource, { namespace: NS, name: LEASE });
  assert.ok(found, 'the lease exists');
  return found;
}

/** Advances in small steps until `cond` holds; returns the clock time then. */
async function advanceUntil(e: Env, cond: () => boolean, maxMs: number, stepMs = 100): Promise<number> {
  for (let waited = 0; waited <= maxMs; waited += stepMs) {
    if (cond()) return e.clock.now();
    await e.clock.advanceAsync(stepMs);
  }
  assert.fail(`condition not met within ${maxMs} ms`);
}

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

/**
 * A clock whose timers can be held back, as if this process's event loop were blocked: time goes on
 * (its `now()` is the shared clock's), but nothing of the candidate runs until `resume()`, which then
 * runs the overdue timers, late, in order.
 */
class StallableClock implements Clock {
  readonly #inner: FakeClock;
  #stalled = false;
  #overdue: { fn: () => void; cancelled: boolean }[] = [];
  readonly #entries = new WeakMap<TimerHandle, { fn: () => void; cancelled: boolean }>();

  constructor(inner: FakeClock) {
    this.#inner = inner;
  }

  now(): number {
    return this.#inner.now();
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const entry = { fn, cancelled: false };
    const handle = this.#inner.setTimeout(() => {
      if (this.#stalled) this.#overdue.push(entry);
      else if (!entry.cancelled) fn();
    }, ms);
    this.#entries.set(handle, entry);
    return handle;
  }

  clearTimeout(handle: TimerHandle): void {
    const entry = this.#entries.get(handle);
    if (entry) entry.cancelled = true;
    this.#inner.clearTimeout(handle);
  }

  stall(): void {
    this.#stalled = true;
  }

  resume(): void {
    this.#stalled = false;
    const overdue = this.#overdue;
    this.#overdue = [];
    for (const entry of overdue) if (!entry.cancelled) entry.fn();
  }
}

describe('never two leaders', () => {
  // The tightest timings validation accepts around the 15 s / 14 s / 2 s.
  const tight = { leaseDurationMs: 15_000, renewDeadlineMs: 12_000, retryPeriodMs: 2_000 };

  test('a partitioned leader stops leading before a follower can take over', async () => {
    const e = env();
    const a = candidate(e, 'a', tight);
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b', tight);
    await e.clock.advanceAsync(4_000);
    a.setFailing(true);
    const both: number[] = [];
    await advanceUntil(
      e,
      () => {
        if (a.elector.isLeader() && b.elector.isLeader()) both.push(e.clock.now());
        return b.started.length > 0;
      },
      30_000,
      50,
    );
    assert.deepEqual(both, [], 'both led at these times');
    assert.equal(await a.run, 'lost');
    assert.ok(a.stopped[0]! <= b.started[0]!, `a stopped at ${a.stopped[0]}, b started at ${b.started[0]}`);
    b.ctl.abort();
    await b.run;
  });

  test('a leader whose event loop stalls longer than the lease is not leading when it wakes up', async () => {
    const e = env();
    const stallable = new StallableClock(e.clock);
    const a = candidate(e, 'a', { ...tight, clock: stallable, wallClock: () => e.clock.now() });
    await e.clock.advanceAsync(0);
    const b = candidate(e, 'b', tight);
    await e.clock.advanceAsync(4_000 + 50); // a renewed at +4 s; nothing of a is in flight
    stallable.stall();
    const both: number[] = [];
    const sample = (): void => {
      if (a.elector.isLeader() && b.elector.isLeader()) both.push(e.clock.now());
    };
    // The stall lasts 20 s (> leaseDuration): b takes over meanwhile.
    for (let i = 0; i < 400; i++) {
      await e.clock.advanceAsync(50);
      sample();
    }
    assert.ok(b.started.length === 1, 'b took over during the stall');
    assert.equal(a.leadingSignal?.aborted, false, 'a ran nothing while stalled');
    assert.equal(a.elector.isLeader(), false, 'a knows its deadline passed before any of its timers ran');
    stallable.resume();
    assert.equal(a.leadingSignal?.aborted, true, 'the overdue timers end the term at once');
    sample();
    assert.equal(await a.run, 'lost');
    await e.clock.advanceAsync(10_000);
    sample();
    assert.deepEqual(both, [], 'both led at these times');
    assert.equal(lease(e).spec?.holderIdentity, 'b');
    assert.equal(b.elector.isLeader(), true);
    b.ctl.abort();
    await b.run;
  });

  test('expiry and deadlines use the elector clock; the wall clock only stamps the Lease', async () => {
    const e = env();
    let wall = Date.parse('2030-06-01T00:00:00Z');
    const a = candidate(e, 'a', { wallClock: () => wall });
    await e.clock.advanceAsync(0);
    assert.equal(lease(e).spec?.acquireTime, toMicroTime(wall));
    // The system time jumps back a day: nothing changes but the stamps.
    wall -= 86_400_000;
    await e.clock.advanceAsync(2_000);
    assert.equal(lease(e).spec?.renewTime, toMicroTime(wall));
    assert.equal(a.elector.isLeader(), true);
    a.setFailing(true);
    await e.clock.advanceAsync(10_000 - 1);
    assert.equal(a.elector.isLeader(), true);
    await e.clock.advanceAsync(1);
    assert.equal(await a.run, 'lost');
  });
});

/**
 * Never two leaders: a partitioned leader, a leader whose event loop stalls longer than the lease, and
 * the monotonic clock, with the tightest timings validation accepts (FakeClient, FakeClock).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toMicroTime } from '../../src/leaderelection/index.ts';
import type { Clock, FakeClock, TimerHandle } from '../../src/util/clock.ts';
import { advanceUntil, candidate, env, lease } from './leaderelection-env.ts';

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

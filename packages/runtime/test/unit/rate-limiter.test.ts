import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
} from '../../src/queue/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

describe('ItemExponentialFailureRateLimiter', () => {
  it('backs off 5, 10, 20, 40 ms ... capped at 1000 s, per item', () => {
    const rl = new ItemExponentialFailureRateLimiter();
    const delays = Array.from({ length: 25 }, () => rl.when('a'));
    const expected = Array.from({ length: 25 }, (_, i) => Math.min(5 * 2 ** i, 1_000_000));
    assert.deepEqual(delays, expected);
    assert.deepEqual(delays.slice(0, 6), [5, 10, 20, 40, 80, 160]);
    assert.equal(delays[17], 655_360);
    assert.equal(delays[18], 1_000_000); // 5 * 2^18 = 1310.72 s > cap
    assert.equal(rl.numRequeues('a'), 25);
    // Another item has its own count.
    assert.equal(rl.when('b'), 5);
    assert.equal(rl.numRequeues('b'), 1);
  });

  it('stays at the cap for huge failure counts (no overflow)', () => {
    const rl = new ItemExponentialFailureRateLimiter(5, 1_000_000);
    let last = 0;
    for (let i = 0; i < 2000; i++) last = rl.when('x');
    assert.equal(last, 1_000_000);
  });

  it('forget resets the backoff', () => {
    const rl = new ItemExponentialFailureRateLimiter(5, 1_000_000);
    rl.when('a');
    rl.when('a');
    assert.equal(rl.when('a'), 20);
    rl.forget('a');
    assert.equal(rl.numRequeues('a'), 0);
    assert.equal(rl.when('a'), 5);
    assert.equal(rl.when('a'), 10);
  });

  it('honours custom base and cap', () => {
    const rl = new ItemExponentialFailureRateLimiter(1, 3);
    assert.deepEqual([rl.when('a'), rl.when('a'), rl.when('a'), rl.when('a')], [1, 2, 3, 3]);
  });
});

describe('BucketRateLimiter', () => {
  it('lets the first 100 through immediately, then spaces them 100 ms apart', () => {
    const clock = new FakeClock(1_000);
    const rl = new BucketRateLimiter({ qps: 10, burst: 100, clock });
    for (let i = 0; i < 100; i++) assert.equal(rl.when(`k${i}`), 0, `call ${i}`);
    assert.deepEqual([rl.when('x'), rl.when('y'), rl.when('z')], [100, 200, 300]);
    assert.equal(rl.numRequeues('x'), 0);
  });

  it('refills at qps, never beyond burst', () => {
    const clock = new FakeClock();
    const rl = new BucketRateLimiter({ qps: 10, burst: 100, clock });
    for (let i = 0; i < 103; i++) rl.when('k'); // 3 tokens in debt
    clock.advance(400); // +4 tokens -> 1 available
    assert.equal(rl.when('k'), 0);
    assert.equal(rl.when('k'), 100);
    // A caller that waits out each reservation gets one every 100 ms.
    clock.advance(100);
    assert.equal(rl.when('k'), 100);
    clock.advance(100);
    assert.equal(rl.when('k'), 100);
    // A long idle period refills only up to the burst.
    clock.advance(3_600_000);
    for (let i = 0; i < 100; i++) assert.equal(rl.when('k'), 0);
    assert.equal(rl.when('k'), 100);
  });

  it('uses the defaults qps 10 / burst 100', () => {
    const rl = new BucketRateLimiter({ clock: new FakeClock() });
    assert.equal(rl.qps, 10);
    assert.equal(rl.burst, 100);
  });

  it('rejects invalid settings', () => {
    assert.throws(() => new BucketRateLimiter({ qps: 0 }), RangeError);
    assert.throws(() => new BucketRateLimiter({ burst: 0 }), RangeError);
  });
});

describe('MaxOfRateLimiter', () => {
  it('returns the largest delay, the largest requeue count, and forgets in all', () => {
    const slow = new ItemExponentialFailureRateLimiter(100, 1_000);
    const fast = new ItemExponentialFailureRateLimiter(1, 1_000);
    const rl = new MaxOfRateLimiter(fast, slow);
    assert.deepEqual([rl.when('a'), rl.when('a'), rl.when('a')], [100, 200, 400]);
    // Both limiters were consulted every time.
    assert.equal(fast.numRequeues('a'), 3);
    assert.equal(slow.numRequeues('a'), 3);
    assert.equal(rl.numRequeues('a'), 3);
    rl.forget('a');
    assert.equal(fast.numRequeues('a'), 0);
    assert.equal(slow.numRequeues('a'), 0);
    assert.equal(rl.when('a'), 100);
  });

  it('needs at least one limiter', () => {
    assert.throws(() => new MaxOfRateLimiter(), RangeError);
  });
});

describe('defaultControllerRateLimiter', () => {
  it('is max(exponential 5 ms..1000 s, bucket 10 qps / burst 100)', () => {
    const clock = new FakeClock();
    const rl = defaultControllerRateLimiter({ clock });
    // Per-item backoff dominates while the bucket has tokens.
    assert.deepEqual([rl.when('a'), rl.when('a'), rl.when('a')], [5, 10, 20]);
    assert.equal(rl.numRequeues('a'), 3);
    // 97 more distinct items drain the bucket (100 tokens in total) ...
    for (let i = 0; i < 97; i++) assert.equal(rl.when(`item-${i}`), 5);
    // ... then the bucket dominates for new items.
    assert.equal(rl.when('fresh-1'), 100);
    assert.equal(rl.when('fresh-2'), 200);
    rl.forget('a');
    assert.equal(rl.numRequeues('a'), 0);
    // The cap is 1000 s.
    clock.advance(1_000_000);
    let last = 0;
    for (let i = 0; i < 40; i++) last = rl.when('b');
    assert.equal(last, 1_000_000);
  });
});

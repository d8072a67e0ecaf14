import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Backoff } from '../../src/cache/backoff.ts';
import { FakeClock } from '../../src/util/clock.ts';

describe('Backoff', () => {
  it('grows 800 ms, 1.6 s, ... by factor 2 and caps at 30 s (no jitter draw)', () => {
    const clock = new FakeClock();
    const b = new Backoff({ clock, random: () => 0 });
    const seq = Array.from({ length: 9 }, () => b.next());
    assert.deepEqual(seq, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]);
  });

  it('keeps every jittered delay within [base * (1 - jitter), base] and never above the cap', () => {
    const clock = new FakeClock();
    let r = 0;
    const draws = [0.999, 0.5, 0.001, 0.75];
    const b = new Backoff({ clock, random: () => draws[r++ % draws.length]! });
    let base = 800;
    for (let i = 0; i < 20; i++) {
      const d = b.next();
      assert.ok(
        d <= base && d >= base * (1 - b.jitter),
        `delay ${d} outside [${base * (1 - b.jitter)}, ${base}]`,
      );
      assert.ok(d <= 30_000);
      base = Math.min(base * 2, 30_000);
    }
  });

  it('actually jitters with Math.random', () => {
    const b1 = new Backoff({ clock: new FakeClock() });
    const values = new Set(
      Array.from({ length: 10 }, () => {
        b1.reset();
        return b1.next();
      }),
    );
    assert.ok(values.size > 1);
    for (const v of values) assert.ok(v > 640 - 1e-9 && v <= 800);
  });

  it('starts over after a healthy period (2 min default) without failures', () => {
    const clock = new FakeClock();
    const b = new Backoff({ clock, random: () => 0 });
    assert.equal(b.next(), 800);
    assert.equal(b.next(), 1600);
    assert.equal(b.next(), 3200);
    clock.advance(119_999);
    assert.equal(b.next(), 6400, 'not yet healthy long enough');
    clock.advance(120_000);
    assert.equal(b.next(), 800, 'reset after 2 minutes');
    assert.equal(b.next(), 1600);
  });

  it('honours a configured reset period, initial, max and factor', () => {
    const clock = new FakeClock();
    const b = new Backoff({
      clock,
      random: () => 0,
      resetAfterMs: 5000,
      initialMs: 100,
      maxMs: 250,
      factor: 3,
    });
    assert.deepEqual([b.next(), b.next(), b.next()], [100, 250, 250]);
    clock.advance(5000);
    assert.equal(b.next(), 100);
  });

  it('reset() starts over explicitly', () => {
    const b = new Backoff({ clock: new FakeClock(), random: () => 0 });
    b.next();
    b.next();
    b.reset();
    assert.equal(b.next(), 800);
  });

  it('wait() sleeps on the clock and resolves false on abort', async () => {
    const clock = new FakeClock();
    const b = new Backoff({ clock, random: () => 0 });
    let done: boolean | undefined;
    void b.wait().then((v) => {
      done = v;
    });
    await clock.advanceAsync(799);
    assert.equal(done, undefined);
    await clock.advanceAsync(1);
    assert.equal(done, true);
    const ac = new AbortController();
    const p = b.wait(ac.signal);
    ac.abort();
    assert.equal(await p, false);
  });

  it('rejects nonsensical options', () => {
    assert.throws(() => new Backoff({ initialMs: 0 }), RangeError);
    assert.throws(() => new Backoff({ initialMs: 10, maxMs: 5 }), RangeError);
  });
});

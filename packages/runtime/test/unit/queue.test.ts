import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ItemExponentialFailureRateLimiter,
  WorkQueue,
  type WorkQueueMetrics,
} from '../../src/queue/index.ts';
import { FakeClock, sleep } from '../../src/util/clock.ts';

/** Lets every pending promise continuation run. */
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Tracks whether a promise has settled, without awaiting it. */
function track<T>(p: Promise<T>): { settled: boolean; value: T | undefined } {
  const state: { settled: boolean; value: T | undefined } = { settled: false, value: undefined };
  p.then((v) => {
    state.settled = true;
    state.value = v;
  });
  return state;
}

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function newQueue(clock = new FakeClock()) {
  return {
    clock,
    q: new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(5, 1_000_000) }),
  };
}

describe('WorkQueue basics', () => {
  it('hands keys out in FIFO order and de-duplicates waiting keys', async () => {
    const { q } = newQueue();
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/a');
    q.add('ns/c');
    q.add('ns/b');
    assert.equal(q.len(), 3);
    assert.equal(await q.get(), 'ns/a');
    assert.equal(await q.get(), 'ns/b');
    assert.equal(await q.get(), 'ns/c');
    assert.equal(q.len(), 0);
  });

  it('a waiting get() receives the next added key', async () => {
    const { q } = newQueue();
    const got = track(q.get());
    await flush();
    assert.equal(got.settled, false);
    q.add('x');
    await flush();
    assert.deepEqual(got, { settled: true, value: 'x' });
    assert.equal(q.len(), 0);
  });

  it('waiting getters are served in order, one key each', async () => {
    const { q } = newQueue();
    const g1 = track(q.get());
    const g2 = track(q.get());
    q.add('a');
    await flush();
    assert.deepEqual([g1.value, g2.settled], ['a', false]);
    q.add('b');
    await flush();
    assert.equal(g2.value, 'b');
  });

  it('a key re-added while processing is not handed out until done(), then exactly once', async () => {
    const { q } = newQueue();
    q.add('a');
    assert.equal(await q.get(), 'a');
    q.add('a');
    q.add('a');
    assert.equal(q.len(), 0, 'a processing key is not queued');
    const other = track(q.get());
    await flush();
    assert.equal(other.settled, false, 'no second worker gets the key');
    q.done('a');
    await flush();
    assert.deepEqual(other, { settled: true, value: 'a' });
    q.done('a');
    assert.equal(q.len(), 0);
    const none = track(q.get());
    await flush();
    assert.equal(none.settled, false, 'the two re-adds collapsed into one');
    q.shutDown();
  });

  it('done() without the key processing is a no-op', async () => {
    const { q } = newQueue();
    q.add('a');
    q.done('a');
    q.done('zzz');
    assert.equal(q.len(), 1);
    assert.equal(await q.get(), 'a');
  });

  it('get(signal) resolves undefined on abort without taking a key', async () => {
    const { q } = newQueue();
    const ac = new AbortController();
    const aborted = track(q.get(ac.signal));
    const next = track(q.get());
    ac.abort();
    await flush();
    assert.deepEqual(aborted, { settled: true, value: undefined });
    q.add('a');
    await flush();
    assert.equal(next.value, 'a', 'the key goes to the next getter');
    q.add('b');
    assert.equal(await q.get(ac.signal), undefined, 'already-aborted signal');
    assert.equal(q.len(), 1);
  });

  it('8 concurrent workers: no key is ever processed twice at once, and no add is lost', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    const random = rng(42);
    const keys = Array.from({ length: 40 }, (_, i) => `ns/obj-${i}`);
    const active = new Set<string>();
    const counts = new Map<string, number>();
    let maxConcurrent = 0;
    let completed = 0;

    const worker = async (): Promise<void> => {
      for (;;) {
        const key = await q.get();
        if (key === undefined) return;
        assert.ok(!active.has(key), `${key} processed by two workers at once`);
        active.add(key);
        maxConcurrent = Math.max(maxConcurrent, active.size);
        const n = (counts.get(key) ?? 0) + 1;
        counts.set(key, n);
        await sleep(1 + Math.floor(random() * 20), undefined, clock);
        // During the first processing, the key changes again (twice): exactly one more round is due.
        if (n === 1) q.add(key);
        await sleep(Math.floor(random() * 5), undefined, clock);
        if (n === 1) q.add(key);
        active.delete(key);
        q.done(key);
        completed++;
      }
    };
    const workers = Array.from({ length: 8 }, () => worker());
    for (const k of keys) q.add(k);
    for (const k of keys) q.add(k); // de-duplicated while waiting

    for (let t = 0; t < 10_000 && completed < 2 * keys.length; t++) {
      clock.advance(1);
      await flush();
      // Some extra adds of keys that are waiting (no effect) while workers run.
      if (t % 7 === 0) {
        const k = keys[Math.floor(random() * keys.length)]!;
        if (q.len() > 0 && !active.has(k) && (counts.get(k) ?? 0) === 0) q.add(k);
      }
    }
    q.shutDown();
    await Promise.all(workers);
    assert.equal(completed, 2 * keys.length);
    for (const k of keys) assert.equal(counts.get(k), 2, k);
    assert.equal(maxConcurrent, 8, 'all workers were busy at some point');
    assert.equal(q.len(), 0);
  });
});

describe('WorkQueue delays', () => {
  it('addAfter makes keys available in ready-time order', async () => {
    const { clock, q } = newQueue();
    q.addAfter('a', 300);
    q.addAfter('b', 100);
    q.addAfter('c', 200);
    q.addAfter('d', 200);
    clock.advance(99);
    assert.equal(q.len(), 0);
    clock.advance(1);
    assert.equal(q.len(), 1);
    assert.equal(await q.get(), 'b');
    clock.advance(100);
    assert.equal(await q.get(), 'c');
    assert.equal(await q.get(), 'd');
    assert.equal(q.len(), 0);
    clock.advance(100);
    assert.equal(await q.get(), 'a');
    assert.equal(clock.pendingTimers(), 0);
  });

  it('a waiting getter is woken by a delayed add', async () => {
    const { clock, q } = newQueue();
    const got = track(q.get());
    q.addAfter('a', 50);
    clock.advance(49);
    await flush();
    assert.equal(got.settled, false);
    clock.advance(1);
    await flush();
    assert.equal(got.value, 'a');
  });

  it('the earlier addAfter for the same key wins', async () => {
    const { clock, q } = newQueue();
    q.addAfter('late-then-early', 500);
    q.addAfter('late-then-early', 100);
    q.addAfter('early-then-late', 100);
    q.addAfter('early-then-late', 500);
    clock.advance(100);
    assert.equal(q.len(), 2);
    assert.equal(await q.get(), 'late-then-early');
    assert.equal(await q.get(), 'early-then-late');
    q.done('late-then-early');
    q.done('early-then-late');
    clock.advance(1_000);
    assert.equal(q.len(), 0, 'the later times were dropped, not kept as second entries');
  });

  it('addAfter with a non-positive delay adds immediately; a pending delay does not block add', async () => {
    const { clock, q } = newQueue();
    q.addAfter('a', 0);
    q.addAfter('b', -5);
    assert.equal(q.len(), 2);
    q.addAfter('c', 100);
    q.add('c');
    assert.equal(q.len(), 3);
    assert.deepEqual([await q.get(), await q.get(), await q.get()], ['a', 'b', 'c']);
    clock.advance(100);
    assert.equal(q.len(), 0, 'c is processing, so the delayed add marks it dirty');
    q.done('c');
    assert.equal(q.len(), 1);
  });

  it('addRateLimited backs off exponentially; forget resets', async () => {
    const { clock, q } = newQueue();
    const readyAfter = async (key: string): Promise<number> => {
      const start = clock.now();
      q.addRateLimited(key);
      let waited = 0;
      while (q.len() === 0) {
        clock.advance(1);
        waited = clock.now() - start;
        if (waited > 10_000) throw new Error('never became ready');
      }
      assert.equal(await q.get(), key);
      q.done(key);
      return waited;
    };
    assert.deepEqual(
      [await readyAfter('a'), await readyAfter('a'), await readyAfter('a'), await readyAfter('a')],
      [5, 10, 20, 40],
    );
    assert.equal(q.numRequeues('a'), 4);
    q.forget('a');
    assert.equal(q.numRequeues('a'), 0);
    assert.equal(await readyAfter('a'), 5);
  });

  it('uses the default controller rate limiter when none is given', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    for (let i = 0; i < 100; i++) q.addRateLimited(`k${i}`);
    q.addRateLimited('k100');
    clock.advance(5);
    assert.equal(q.len(), 100, 'the first 100 after the 5 ms per-item backoff');
    clock.advance(94);
    assert.equal(q.len(), 100);
    clock.advance(1);
    assert.equal(q.len(), 101, 'the 101st waits for a bucket token (100 ms)');
    assert.equal(q.numRequeues('k0'), 1);
  });
});

describe('WorkQueue shutdown', () => {
  it('shutDown resolves waiting getters, drains what is queued, ignores new adds', async () => {
    const { clock, q } = newQueue();
    const waiting = [track(q.get()), track(q.get())];
    q.shutDown();
    await flush();
    assert.ok(waiting.every((w) => w.settled && w.value === undefined));
    assert.equal(q.shuttingDown(), true);

    const { q: q2, clock: clock2 } = newQueue();
    q2.add('a');
    q2.add('b');
    q2.addAfter('delayed', 10);
    q2.shutDown();
    q2.add('c');
    q2.addAfter('d', 0);
    assert.equal(await q2.get(), 'a');
    assert.equal(await q2.get(), 'b');
    assert.equal(await q2.get(), undefined);
    clock2.advance(100);
    assert.equal(await q2.get(), undefined, 'pending delayed adds were dropped');
    assert.equal(clock2.pendingTimers(), 0);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('a key dirty before shutdown is still handed out after done()', async () => {
    const { q } = newQueue();
    q.add('a');
    await q.get();
    q.add('a');
    q.shutDown();
    q.done('a');
    assert.equal(await q.get(), 'a');
    q.done('a');
    assert.equal(await q.get(), undefined);
  });

  it('shutDownWithDrain waits for in-flight keys to be done', async () => {
    const { q } = newQueue();
    q.add('a');
    q.add('b');
    assert.equal(await q.get(), 'a');
    assert.equal(await q.get(), 'b');
    const drained = track(q.shutDownWithDrain());
    const getter = track(q.get());
    await flush();
    assert.equal(drained.settled, false);
    assert.deepEqual(getter, { settled: true, value: undefined });
    q.add('c');
    q.done('a');
    await flush();
    assert.equal(drained.settled, false);
    q.done('b');
    await flush();
    assert.equal(drained.settled, true);
    assert.equal(q.len(), 0);
  });

  it('shutDownWithDrain resolves at once when idle, and shutDown releases a pending drain', async () => {
    const { q } = newQueue();
    await q.shutDownWithDrain();
    const { q: q2 } = newQueue();
    q2.add('a');
    await q2.get();
    const drained = track(q2.shutDownWithDrain());
    await flush();
    assert.equal(drained.settled, false);
    q2.shutDown();
    await flush();
    assert.equal(drained.settled, true);
  });
});

describe('WorkQueue metrics hooks', () => {
  it('reports adds, depth, queue and work durations, retries, unfinished work', async () => {
    const clock = new FakeClock();
    const events: string[] = [];
    const metrics: WorkQueueMetrics = {
      onAdd: () => events.push('add'),
      onDepth: (d) => events.push(`depth=${d}`),
      onGet: (ms) => events.push(`get=${ms}`),
      onDone: (ms) => events.push(`done=${ms}`),
      onRetry: () => events.push('retry'),
    };
    const q = new WorkQueue({ name: 'db', clock, metrics });
    assert.equal(q.name, 'db');
    q.add('a');
    q.add('a');
    clock.advance(10);
    q.add('b');
    clock.advance(20);
    await q.get(); // a, queued 30 ms
    clock.advance(5);
    await q.get(); // b, queued 25 ms
    clock.advance(100);
    assert.equal(q.unfinishedWorkSeconds(), 0.205);
    assert.equal(q.longestRunningProcessorSeconds(), 0.105);
    q.done('a');
    q.addRateLimited('a');
    clock.advance(5);
    assert.deepEqual(events, [
      'add',
      'depth=1',
      'add',
      'depth=2',
      'depth=1',
      'get=30',
      'depth=0',
      'get=25',
      'done=105',
      'retry',
      'add',
      'depth=1',
    ]);
    assert.equal(q.unfinishedWorkSeconds(), 0.105);
    q.done('b');
    assert.equal(q.unfinishedWorkSeconds(), 0);
    assert.equal(q.longestRunningProcessorSeconds(), 0);
  });
});

describe('FakeClock and sleep', () => {
  it('fires timers in due order, including ones scheduled while advancing', () => {
    const clock = new FakeClock(1_000);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => {
      fired.push(`a@${clock.now()}`);
      clock.setTimeout(() => fired.push(`c@${clock.now()}`), 15);
    }, 10);
    const cancelled = clock.setTimeout(() => fired.push('never'), 5);
    clock.clearTimeout(cancelled);
    clock.advance(30);
    assert.deepEqual(fired, ['a@1010', 'b@1020', 'c@1025']);
    assert.equal(clock.now(), 1_030);
    clock.set(2_000);
    assert.equal(clock.now(), 2_000);
  });

  it('sleep resolves true after the time, false on abort', async () => {
    const clock = new FakeClock();
    const done = track(sleep(100, undefined, clock));
    clock.advance(99);
    await flush();
    assert.equal(done.settled, false);
    clock.advance(1);
    await flush();
    assert.equal(done.value, true);

    const ac = new AbortController();
    const aborted = track(sleep(100, ac.signal, clock));
    ac.abort();
    await flush();
    assert.equal(aborted.value, false);
    assert.equal(clock.pendingTimers(), 0);
    assert.equal(await sleep(10, ac.signal, clock), false);
  });

  it('advanceAsync lets continuations schedule timers within the same advance', async () => {
    const clock = new FakeClock();
    const ticks: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await sleep(10, undefined, clock);
        ticks.push(clock.now());
      }
    })();
    await clock.advanceAsync(30);
    await loop;
    assert.deepEqual(ticks, [10, 20, 30]);
  });
});

it('two adds of the same key in one tick, with a worker already waiting, give one processing', async () => {
  const q = new WorkQueue<string>();
  const got = q.get();
  q.add('a');
  q.add('a');
  assert.equal(await got, 'a');
  q.done('a');
  assert.equal(q.len(), 0);
  q.shutDown();
  assert.equal(await q.get(), undefined);
});

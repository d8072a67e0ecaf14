/** The work queue and its rate limiters (docs/runtime.md, "Work queue and rate limiting"). */
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  WorkQueue,
} from '@opkit/runtime';

// #region queue
// What a controller's workers do with its queue, by hand.
export async function worker(
  queue: WorkQueue<string>,
  process: (key: string) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  for (;;) {
    const key = await queue.get(signal); // undefined once shut down and drained, or aborted
    if (key === undefined) return;
    try {
      await process(key);
      queue.forget(key); // success: reset this key's backoff
    } catch {
      queue.addRateLimited(key); // failure: again after 5 ms, 10 ms, 20 ms, ... (at most 1000 s)
    } finally {
      queue.done(key); // a key added while it was processed is queued again now: never twice at once
    }
  }
}

export function fill(queue: WorkQueue<string>): void {
  queue.add('default/a');
  queue.add('default/a'); // already waiting: not added twice
  queue.add('default/b');
  queue.addAfter('default/c', 50); // later (the earliest pending time wins)
}

export const newQueue = () =>
  new WorkQueue<string>({ name: 'demo', rateLimiter: defaultControllerRateLimiter() });
// #endregion queue

// #region limiters
// controller-runtime's default, spelled out: the slower of per-key exponential backoff and an overall
// token bucket (10 requeues per second, bursts of 100).
export const limiter = new MaxOfRateLimiter<string>(
  new ItemExponentialFailureRateLimiter<string>(5, 1_000_000),
  new BucketRateLimiter<string>({ qps: 10, burst: 100 }),
);
// Pass it to a controller: controllerFor(...).withOptions({ rateLimiter: limiter }).
// #endregion limiters

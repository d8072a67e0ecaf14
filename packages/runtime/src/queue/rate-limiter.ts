/**
 * Rate limiters for the work queue, with the semantics of client-go's workqueue package
 * (k8s.io/client-go/util/workqueue/default_rate_limiters.go). All delays are in milliseconds.
 */
import { type Clock, realClock } from '../util/clock.ts';

export interface RateLimiter<K = string> {
  /** How long (ms) to wait before `item` may be processed again. Records a failure / reserves a slot. */
  when(item: K): number;
  /** Stops tracking `item` (it succeeded): its backoff starts from scratch next time. */
  forget(item: K): void;
  /** How many times `item` has been requeued through this limiter since it was last forgotten. */
  numRequeues(item: K): number;
}

/** Per-item exponential backoff: `baseDelayMs * 2^failures`, capped at `maxDelayMs`. */
export class ItemExponentialFailureRateLimiter<K = string> implements RateLimiter<K> {
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly #failures = new Map<K, number>();

  constructor(baseDelayMs = 5, maxDelayMs = 1_000_000) {
    if (!(baseDelayMs >= 0) || !(maxDelayMs >= 0)) throw new RangeError('delays must be non-negative');
    this.baseDelayMs = baseDelayMs;
    this.maxDelayMs = maxDelayMs;
  }

  when(item: K): number {
    const failures = this.#failures.get(item) ?? 0;
    this.#failures.set(item, failures + 1);
    if (this.baseDelayMs === 0) return 0;
    return Math.min(this.baseDelayMs * 2 ** failures, this.maxDelayMs); // 2^failures may be Infinity
  }

  forget(item: K): void {
    this.#failures.delete(item);
  }

  numRequeues(item: K): number {
    return this.#failures.get(item) ?? 0;
  }
}

export interface BucketRateLimiterOptions {
  /** Tokens added per second (overall, not per item). Default 10. `Infinity` disables limiting. */
  qps?: number;
  /** Bucket size, and the number of tokens it starts with. Default 100. */
  burst?: number;
  clock?: Clock;
}

/**
 * Overall token bucket (golang.org/x/time/rate semantics): the bucket starts full with `burst` tokens
 * and refills at `qps` tokens per second. Every `when()` reserves one token and returns how long until
 * that token exists, so that after a burst calls are spaced `1000 / qps` ms apart. Not per item:
 * `forget` does nothing and `numRequeues` is always 0.
 */
export class BucketRateLimiter<K = string> implements RateLimiter<K> {
  readonly qps: number;
  readonly burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;

  constructor(options: BucketRateLimiterOptions = {}) {
    const { qps = 10, burst = 100, clock = realClock } = options;
    if (!(qps > 0)) throw new RangeError(`qps must be positive, got ${qps}`);
    if (!(burst >= 1) || !Number.isInteger(burst)) throw new RangeError(`burst must be an integer >= 1`);
    this.qps = qps;
    this.burst = burst;
    this.#clock = clock;
    this.#tokens = burst;
    this.#last = clock.now();
  }

  when(_item: K): number {
    if (this.qps === Number.POSITIVE_INFINITY) return 0;
    const now = this.#clock.now();
    if (now > this.#last) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) * this.qps) / 1000);
      this.#last = now;
    }
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens * 1000) / this.qps;
  }

  forget(_item: K): void {}

  numRequeues(_item: K): number {
    return 0;
  }
}

/** Combines limiters: the delay is the longest any of them asks for (all of them are consulted). */
export class MaxOfRateLimiter<K = string> implements RateLimiter<K> {
  readonly #limiters: readonly RateLimiter<K>[];

  constructor(...limiters: RateLimiter<K>[]) {
    if (limiters.length === 0) throw new RangeError('MaxOfRateLimiter needs at least one limiter');
    this.#limiters = limiters;
  }

  when(item: K): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.when(item));
    return max;
  }

  forget(item: K): void {
    for (const l of this.#limiters) l.forget(item);
  }

  numRequeues(item: K): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.numRequeues(item));
    return max;
  }
}

export interface DefaultControllerRateLimiterOptions {
  /** Clock for the token bucket (tests). */
  clock?: Clock;
}

/**
 * controller-runtime's default: max(per-item exponential backoff 5 ms .. 1000 s, overall token bucket
 * 10 qps with a burst of 100).
 */
export function defaultControllerRateLimiter<K = string>(
  options: DefaultControllerRateLimiterOptions = {},
): RateLimiter<K> {
  return new MaxOfRateLimiter<K>(
    new ItemExponentialFailureRateLimiter<K>(5, 1_000_000),
    new BucketRateLimiter<K>({ qps: 10, burst: 100, clock: options.clock ?? realClock }),
  );
}

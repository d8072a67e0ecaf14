/**
 * An optional client-side QPS/burst limiter for API requests, as client-go's token bucket
 * (flowcontrol.NewTokenBucketRateLimiter over golang.org/x/time/rate): the bucket holds up to `burst` tokens,
 * starts full and refills at `qps` per second; each request takes one, waiting for it when the bucket is empty.
 *
 * Off by default: like controller-runtime, opkit relies on the API server's Priority and Fairness to protect
 * it. Watches are not limited (they are long-running; client-go does not throttle them either).
 */
import { abortReason } from '../util/abort.ts';
import { type Clock, realClock, sleep, type TimerHandle } from '../util/clock.ts';

export interface RateLimitOptions {
  /** Sustained requests per second; must be > 0. */
  qps: number;
  /** Requests allowed at once after a quiet period. Default max(1, ceil(qps)). */
  burst?: number;
  /** For tests (FakeClock). Default: a monotonic clock (performance.now()) with Node timers. */
  clock?: Clock;
}

/** Thrown at construction for a qps or burst that is not a positive number. */
export class RateLimitOptionsError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = 'RateLimitOptionsError';
  }
}

/** Elapsed time must not jump with the wall clock (NTP, suspend), so the default clock is monotonic. */
const monotonicClock: Clock = Object.freeze({
  now: (): number => performance.now(),
  setTimeout: (fn: () => void, ms: number): TimerHandle => realClock.setTimeout(fn, ms),
  clearTimeout: (handle: TimerHandle): void => realClock.clearTimeout(handle),
});

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;

  constructor(opts: RateLimitOptions) {
    if (!Number.isFinite(opts.qps) || opts.qps <= 0) {
      throw new RateLimitOptionsError(
        `rate limit qps must be a number > 0, got ${opts.qps} (omit it: no limit)`,
      );
    }
    const burst = opts.burst ?? Math.max(1, Math.ceil(opts.qps));
    if (!Number.isInteger(burst) || burst < 1) {
      throw new RateLimitOptionsError(`rate limit burst must be an integer >= 1, got ${burst}`);
    }
    this.qps = opts.qps;
    this.burst = burst;
    this.#clock = opts.clock ?? monotonicClock;
    this.#tokens = burst;
    this.#last = this.#clock.now();
  }

  /** Takes a token: how many ms the caller must wait before using it (0: at once). */
  reserve(): number {
    this.#refill();
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.qps) * 1000;
  }

  /** Waits for a token; rejects as an aborted request does if `signal` aborts first (the token is given back). */
  async wait(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortReason(signal);
    const delay = this.reserve();
    if (delay === 0) return;
    if (await sleep(delay, signal, this.#clock)) return;
    this.#refill();
    this.#tokens = Math.min(this.burst, this.#tokens + 1);
    throw abortReason(signal!);
  }

  /** Tokens available now (negative: that many requests are waiting). */
  available(): number {
    this.#refill();
    return this.#tokens;
  }

  #refill(): void {
    const now = this.#clock.now();
    if (now > this.#last) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) * this.qps) / 1000);
      this.#last = now;
    }
  }
}

/**
 * Exponential backoff with jitter for watch/list retries, modelled on client-go's reflector backoff
 * manager (800 ms initial, 30 s cap, factor 2, reset after 2 minutes without failures).
 *
 * Delay n (0-based, counted since the last reset) is
 *
 *     base(n)  = min(initialMs * factor^n, maxMs)
 *     delay(n) = base(n) * (1 - jitter * random())          random() in [0, 1)
 *
 * so a delay never exceeds `maxMs` (even at the cap retries stay spread out) and never drops below
 * `base(n) * (1 - jitter)`. With `random = () => 0` the sequence is exactly 800, 1600, 3200, ... 30000.
 *
 * The sequence starts over when `resetAfterMs` have passed since the previous `next()` call: a stream
 * that ran healthily for that long is a fresh start, not the 20th failure in a row.
 */
import { type Clock, realClock, sleep } from '../util/clock.ts';

export interface BackoffOptions {
  /** First delay in ms. Default 800. */
  initialMs?: number;
  /** Upper bound for any delay in ms. Default 30 000. */
  maxMs?: number;
  /** Growth per failure. Default 2. */
  factor?: number;
  /** Fraction in [0, 1] of each delay that is randomized away. Default 0.2. 0 disables jitter. */
  jitter?: number;
  /** After this long (ms) without a `next()` call the sequence starts over. Default 120 000. */
  resetAfterMs?: number;
  clock?: Clock;
  /** Source of randomness in [0, 1). Default Math.random. */
  random?: () => number;
}

export const DEFAULT_BACKOFF: Readonly<Required<Omit<BackoffOptions, 'clock' | 'random'>>> = Object.freeze({
  initialMs: 800,
  maxMs: 30_000,
  factor: 2,
  jitter: 0.2,
  resetAfterMs: 120_000,
});

export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  readonly jitter: number;
  readonly resetAfterMs: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  #attempt = 0;
  #lastAt: number | undefined;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? DEFAULT_BACKOFF.initialMs;
    this.maxMs = opts.maxMs ?? DEFAULT_BACKOFF.maxMs;
    this.factor = opts.factor ?? DEFAULT_BACKOFF.factor;
    this.jitter = Math.min(1, Math.max(0, opts.jitter ?? DEFAULT_BACKOFF.jitter));
    this.resetAfterMs = opts.resetAfterMs ?? DEFAULT_BACKOFF.resetAfterMs;
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random ?? Math.random;
    if (!(this.initialMs > 0) || !(this.maxMs >= this.initialMs) || !(this.factor >= 1)) {
      throw new RangeError('Backoff: need initialMs > 0, maxMs >= initialMs and factor >= 1');
    }
  }

  /** Failures counted since the last reset. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The delay to wait before the next retry; advances the sequence. */
  next(): number {
    const now = this.#clock.now();
    if (this.#lastAt !== undefined && now - this.#lastAt >= this.resetAfterMs) this.#attempt = 0;
    this.#lastAt = now;
    const base = Math.min(this.initialMs * this.factor ** this.#attempt, this.maxMs);
    // Stop growing the exponent once the cap is reached (avoids overflow to Infinity).
    if (base < this.maxMs) this.#attempt++;
    const r = Math.min(Math.max(this.#random(), 0), 1);
    return base * (1 - this.jitter * r);
  }

  /** Starts the sequence over: the next delay is `initialMs` again (minus jitter). */
  reset(): void {
    this.#attempt = 0;
    this.#lastAt = undefined;
  }

  /**
   * Waits for the next delay on the backoff's clock. Resolves `true` after the delay and `false` as
   * soon as `signal` aborts. Never rejects.
   */
  wait(signal?: AbortSignal): Promise<boolean> {
    return sleep(this.next(), signal, this.#clock);
  }
}

/**
 * A small injectable clock, so that everything time-based (work queue delays, rate limiters, leader
 * election, resyncs) can be driven deterministically in tests with {@link FakeClock}.
 *
 * Times are plain numbers of milliseconds. `realClock.now()` is wall-clock time (`Date.now()`), so it
 * can also be used for timestamps written to the API (leases); a FakeClock starts wherever it is told.
 */

declare const timerHandleBrand: unique symbol;

/** Opaque timer handle: only good for passing back to the same clock's `clearTimeout`. */
export interface TimerHandle {
  readonly [timerHandleBrand]: true;
}

export interface Clock {
  /** Current time in milliseconds. */
  now(): number;
  /** Calls `fn` once, `ms` milliseconds from now (negative or NaN delays count as 0). */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancels a timer; harmless if it already fired or was cleared. */
  clearTimeout(handle: TimerHandle): void;
}

/** Node's setTimeout fires immediately (with a warning) beyond this; longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function normalizeDelay(ms: number): number {
  return Number.isNaN(ms) || ms < 0 ? 0 : ms;
}

interface RealTimer {
  current: ReturnType<typeof globalThis.setTimeout> | undefined;
}

/** The process clock: `Date.now()` and Node timers. Timers longer than ~24.8 days are chained. */
export const realClock: Clock = Object.freeze({
  now: (): number => Date.now(),
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: RealTimer = { current: undefined };
    const due = Date.now() + normalizeDelay(ms);
    const arm = (delay: number): void => {
      timer.current = globalThis.setTimeout(() => {
        const left = due - Date.now();
        if (left > 0 && delay === MAX_TIMER_MS) arm(Math.min(left, MAX_TIMER_MS));
        else {
          timer.current = undefined;
          fn();
        }
      }, delay);
    };
    arm(Math.min(normalizeDelay(ms), MAX_TIMER_MS));
    return timer as unknown as TimerHandle;
  },
  clearTimeout(handle: TimerHandle): void {
    const timer = handle as unknown as RealTimer;
    if (timer.current !== undefined) globalThis.clearTimeout(timer.current);
    timer.current = undefined;
  },
});

/**
 * The process's monotonic clock: `performance.now()` (never jumps with NTP or a changed system time)
 * and Node timers (themselves monotonic). For measuring elapsed time, e.g. lease expiry; its `now()`
 * is not a date.
 */
export const monotonicClock: Clock = Object.freeze({
  now: (): number => performance.now(),
  setTimeout: (fn: () => void, ms: number): TimerHandle => realClock.setTimeout(fn, ms),
  clearTimeout: (handle: TimerHandle): void => realClock.clearTimeout(handle),
});

interface FakeTimer {
  due: number;
  seq: number;
  fn: () => void;
}

/**
 * A manually driven clock for tests. Nothing happens until `advance()` / `set()` is called; those fire
 * every timer that has come due, in order of due time (ties in creation order), with `now()` equal to
 * each timer's due time while it runs. Timers created by a firing timer fire in the same call if they
 * fall due within it.
 */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  /** Sorted by (due, seq). */
  #timers: FakeTimer[] = [];

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: FakeTimer = { due: this.#now + normalizeDelay(ms), seq: this.#seq++, fn };
    // Insert after every timer due at or before this one (keeps creation order among equals).
    let i = this.#timers.length;
    while (i > 0 && this.#timers[i - 1]!.due > timer.due) i--;
    this.#timers.splice(i, 0, timer);
    return timer as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle): void {
    const i = this.#timers.indexOf(handle as unknown as FakeTimer);
    if (i >= 0) this.#timers.splice(i, 1);
  }

  /** Moves time forward by `ms`, firing due timers synchronously. */
  advance(ms: number): void {
    this.set(this.#now + normalizeDelay(ms));
  }

  /** Moves time to `ms`, firing due timers synchronously. Moving backwards fires nothing. */
  set(ms: number): void {
    for (;;) {
      const next = this.#timers[0];
      if (next === undefined || next.due > ms) break;
      this.#timers.shift();
      if (next.due > this.#now) this.#now = next.due;
      next.fn();
    }
    this.#now = ms;
  }

  /**
   * Like `advance`, but after each timer fires waits for the macrotask queue to drain (so promise
   * continuations run and may schedule further timers before the clock moves on).
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.#now + normalizeDelay(ms);
    await flushMacrotask();
    for (;;) {
      const next = this.#timers[0];
      if (next === undefined || next.due > target) break;
      this.set(next.due);
      await flushMacrotask();
    }
    this.set(target);
    await flushMacrotask();
  }

  /** Number of timers not yet fired or cleared. */
  pendingTimers(): number {
    return this.#timers.length;
  }

  /** Due time of the earliest pending timer, if any. */
  nextTimerAt(): number | undefined {
    return this.#timers[0]?.due;
  }
}

function flushMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Waits `ms` milliseconds on `clock`. Never rejects: resolves `true` when the full time elapsed and
 * `false` as soon as `signal` aborts (immediately if it already has).
 */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = realClock): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      resolve(false);
    };
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

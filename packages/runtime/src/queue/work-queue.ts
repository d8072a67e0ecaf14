/**
 * The controller work queue: a rate-limited, delaying, de-duplicating queue of keys (usually
 * "namespace/name"), with the semantics of client-go's workqueue (Typed, delayingType,
 * rateLimitingType):
 *
 * - `add(key)` while the key is already waiting does nothing (dirty set).
 * - A key handed out by `get()` is "processing" until `done(key)`. Adding it meanwhile does not make it
 *   available to another worker: it is queued again when `done(key)` is called. So no key is ever
 *   processed by two workers at once, and no add is lost.
 * - `addAfter(key, ms)` adds later (the earliest pending time for a key wins); `addRateLimited(key)`
 *   adds after the rate limiter's delay; `forget(key)` resets the key's backoff.
 * - After `shutDown()` adds are ignored, delayed adds are dropped, `get()` keeps handing out what is
 *   already queued and then resolves `undefined`.
 */
import { type Clock, realClock, type TimerHandle } from '../util/clock.ts';
import { DelayHeap } from './delay-heap.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiter.ts';

/**
 * Hooks a metrics module binds to the `workqueue_*` Prometheus series (one object per named queue).
 * Every hook is optional, called synchronously after the queue's state changed, and must not throw.
 * Durations are in milliseconds. `workqueue_unfinished_work_seconds` and
 * `workqueue_longest_running_processor_seconds` are gauges computed on demand from
 * {@link WorkQueue.unfinishedWorkSeconds} and {@link WorkQueue.longestRunningProcessorSeconds}.
 */
export interface WorkQueueMetrics {
  /** A key was added that was not already waiting: `workqueue_adds_total`. */
  onAdd?(): void;
  /** The number of keys waiting to be handed out changed: `workqueue_depth`. */
  onDepth?(depth: number): void;
  /** A key was handed out, `queuedMs` after it was added: `workqueue_queue_duration_seconds`. */
  onGet?(queuedMs: number): void;
  /** A key was marked done, `workMs` after it was handed out: `workqueue_work_duration_seconds`. */
  onDone?(workMs: number): void;
  /** A delayed add (`addAfter` / `addRateLimited`) was requested: `workqueue_retries_total`. */
  onRetry?(): void;
}

export interface WorkQueueOptions<T extends string = string> {
  /** Queue name, for metrics and logs (controller-runtime uses the controller name). */
  name?: string;
  /** Delay source for `addRateLimited`. Default {@link defaultControllerRateLimiter} on `clock`. */
  rateLimiter?: RateLimiter<T>;
  /** Default `realClock`. */
  clock?: Clock;
  metrics?: WorkQueueMetrics;
}

interface Waiter<T> {
  resolve(item: T | undefined): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** Plain FIFO with amortised O(1) shift. */
class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head++];
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}

export class WorkQueue<T extends string = string> {
  readonly name: string;
  readonly #clock: Clock;
  readonly #rateLimiter: RateLimiter<T>;
  readonly #metrics: WorkQueueMetrics;

  /** Keys ready to be handed out, in order. Each is also in #dirty and not in #processing. */
  readonly #queue = new Fifo<T>();
  /** Keys that need processing (queued, or re-added while processing). */
  readonly #dirty = new Set<T>();
  /** Keys handed out and not yet done, with the time they were handed out. */
  readonly #processing = new Map<T, number>();
  /** First add time of each dirty key, for the queue duration. */
  readonly #addedAt = new Map<T, number>();
  readonly #waiters: Waiter<T>[] = [];

  readonly #delayed = new DelayHeap<T>();
  #timer: TimerHandle | undefined;
  #timerAt = 0;

  #shuttingDown = false;
  #drainWaiters: (() => void)[] = [];
  #dispatchScheduled = false;

  constructor(options: WorkQueueOptions<T> = {}) {
    this.name = options.name ?? '';
    this.#clock = options.clock ?? realClock;
    this.#rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter<T>({ clock: this.#clock });
    this.#metrics = options.metrics ?? {};
  }

  /** Marks `key` as needing processing. No-op if it is already waiting, or after shutdown. */
  add(key: T): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (!this.#addedAt.has(key)) this.#addedAt.set(key, this.#clock.now());
    this.#metrics.onAdd?.();
    this.#metrics.onDepth?.(this.#dirty.size);
    if (this.#processing.has(key)) return; // re-queued by done()
    this.#enqueue(key);
  }

  /**
   * Waits for a key and marks it as processing; the caller must call `done(key)` when finished.
   * Resolves `undefined` once the queue is shut down and nothing is left to hand out, or when `signal`
   * aborts (the wait is cancelled; no key is taken).
   */
  get(signal?: AbortSignal): Promise<T | undefined> {
    if (signal?.aborted) return Promise.resolve(undefined);
    const key = this.#queue.shift();
    if (key !== undefined) return Promise.resolve(this.#take(key));
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const waiter: Waiter<T> = { resolve, signal, onAbort: undefined };
      if (signal !== undefined) {
        waiter.onAbort = () => {
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
          resolve(undefined);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiters.push(waiter);
    });
  }

  /**
   * Marks `key` as finished. If it was added again while processing it is queued again now.
   * No-op for a key that is not being processed.
   */
  done(key: T): void {
    const startedAt = this.#processing.get(key);
    if (startedAt === undefined) return;
    this.#processing.delete(key);
    this.#metrics.onDone?.(this.#clock.now() - startedAt);
    if (this.#dirty.has(key)) this.#enqueue(key); // may hand it straight to a waiting getter
    if (this.#processing.size === 0) this.#releaseDrainWaiters();
  }

  /**
   * Adds `key` once `ms` milliseconds have passed (immediately if `ms <= 0`). If the key is already
   * waiting for a delayed add, the earlier of the two times wins. Ignored after shutdown.
   */
  addAfter(key: T, ms: number): void {
    if (this.#shuttingDown) return;
    this.#metrics.onRetry?.();
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    this.#delayed.upsert(key, this.#clock.now() + ms);
    this.#armTimer();
  }

  /**
   * Adds `key` after the delay the rate limiter gives for it (its backoff grows with each call), or
   * after `minDelayMs` if that is longer (e.g. a server's Retry-After). Returns the delay used (ms).
   */
  addRateLimited(key: T, minDelayMs = 0): number {
    const limited = this.#rateLimiter.when(key);
    const delay = Number.isFinite(minDelayMs) ? Math.max(minDelayMs, limited) : limited;
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets `key`'s rate-limiter backoff: call after a successful reconcile. Does not dequeue it. */
  forget(key: T): void {
    this.#rateLimiter.forget(key);
  }

  /** How many times `key` has been rate-limited since it was last forgotten. */
  numRequeues(key: T): number {
    return this.#rateLimiter.numRequeues(key);
  }

  /** Number of keys ready to be handed out (not counting delayed or processing keys). */
  len(): number {
    return this.#queue.length;
  }

  /**
   * Stops the queue: further adds are ignored, delayed adds are dropped, `get()` hands out what is
   * still queued and then resolves `undefined`. Also releases a pending `shutDownWithDrain()`.
   */
  shutDown(): void {
    this.#beginShutdown();
    this.#releaseDrainWaiters();
  }

  /** Like `shutDown()`, then resolves once every key being processed has been marked done. */
  shutDownWithDrain(): Promise<void> {
    this.#beginShutdown();
    if (this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Sum over keys being processed of how long they have been processing, in seconds. */
  unfinishedWorkSeconds(): number {
    const now = this.#clock.now();
    let total = 0;
    for (const startedAt of this.#processing.values()) total += now - startedAt;
    return total / 1000;
  }

  /** How long the longest-running key in processing has been processing, in seconds (0 if none). */
  longestRunningProcessorSeconds(): number {
    const now = this.#clock.now();
    let longest = 0;
    for (const startedAt of this.#processing.values()) longest = Math.max(longest, now - startedAt);
    return longest / 1000;
  }

  /**
   * Makes a dirty, not-processing key available. Waiting getters are served in a microtask, not
   * synchronously: a second add() of the same key in the same tick (an update event maps to the old and
   * the new object's key) must find it still queued and be a no-op, as in client-go.
   */
  #enqueue(key: T): void {
    this.#queue.push(key);
    if (this.#waiters.length > 0 && !this.#dispatchScheduled) {
      this.#dispatchScheduled = true;
      queueMicrotask(() => this.#dispatch());
    }
  }

  #dispatch(): void {
    this.#dispatchScheduled = false;
    while (this.#waiters.length > 0 && this.#queue.length > 0) {
      const waiter = this.#waiters.shift()!;
      const key = this.#queue.shift()!;
      if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(this.#take(key));
    }
  }

  #take(key: T): T {
    const now = this.#clock.now();
    this.#dirty.delete(key);
    this.#processing.set(key, now);
    const addedAt = this.#addedAt.get(key) ?? now;
    this.#addedAt.delete(key);
    this.#metrics.onDepth?.(this.#dirty.size);
    this.#metrics.onGet?.(now - addedAt);
    return key;
  }

  #beginShutdown(): void {
    this.#shuttingDown = true;
    this.#delayed.clear();
    this.#armTimer();
    // Serve what is queued first; the getters still waiting after that get nothing.
    this.#dispatch();
    for (const waiter of this.#waiters.splice(0)) {
      if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(undefined);
    }
  }

  #releaseDrainWaiters(): void {
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }

  /** Keeps exactly one clock timer, set for the earliest delayed key. */
  #armTimer(): void {
    const next = this.#delayed.peekReadyAt();
    if (this.#timer !== undefined) {
      if (next === this.#timerAt) return;
      this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (next === undefined) return;
    this.#timerAt = next;
    this.#timer = this.#clock.setTimeout(() => this.#onTimer(), next - this.#clock.now());
  }

  #onTimer(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (let key = this.#delayed.popReady(now); key !== undefined; key = this.#delayed.popReady(now)) {
      this.add(key);
    }
    this.#armTimer();
  }
}

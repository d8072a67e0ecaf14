/**
 * The controller, like controller-runtime's pkg/internal/controller: event sources feed keys into ONE
 * work queue; N workers take keys off it and call the reconciler.
 *
 * - Watches (event handlers on shared informers) are registered when the controller is built, so the
 *   queue fills while the caches warm up, also before this replica is leader. Workers only run inside
 *   `start(signal)` (a Runnable with needLeaderElection: true), after every watched informer synced.
 * - The queue holds keys ("namespace/name"), never objects; it de-duplicates and guarantees that one
 *   key is never reconciled by two workers at once.
 * - Each reconcile gets an AbortSignal that aborts after `reconcileTimeoutMs` or at shutdown. Pass it
 *   on to every wait: client calls and cache reads take `{ signal }` (the ReconcileContext itself has
 *   a `signal`, so `cache.get(res, req, ctx)` works too).
 * - A reconcile still running at its timeout is abandoned: counted as an error, retried with backoff,
 *   and its worker moves on to other keys. The key itself stays "processing" until the abandoned
 *   promise settles, so a reconciler that ignores its signal can never run twice at once for one key.
 *   The trade-off: while abandoned reconciles run on, more than `maxConcurrentReconciles` reconciles
 *   (of different keys) can be in flight. One that has not settled by the end of the event-loop turn
 *   after its signal aborted is counted in the gauge opkit_controller_abandoned_reconciles{controller}
 *   (and opkit_controller_abandoned_reconciles_total) and logged as a warning. Reconcilers that honour
 *   their signal are never counted there.
 * - Outcomes: success -> forget (reset backoff); `{requeueAfter}` -> forget + addAfter; `{requeue}` ->
 *   addRateLimited; TerminalError -> forget, no retry; TooManyRequestsError (429, also as a `cause`) ->
 *   addAfter the larger of the rate limiter's delay and the server's Retry-After; any other error ->
 *   addRateLimited.
 * - Nothing a reconciler, predicate or handler throws escapes: it is logged and counted.
 * - Shutdown: stop taking keys (queue.shutDown), abort in-flight reconciles' signals, wait for them up
 *   to `drainTimeoutMs`, return.
 */
import { randomUUID } from 'node:crypto';
import { type KubeObject, keyOf, parseKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { resourceId } from '../api/resource.ts';
import type { Client } from '../client/types.ts';
import { isTransient } from '../log/informer-errors.ts';
import { type Logger, silentLogger } from '../log/logger.ts';
import type { Runnable } from '../manager/runnable.ts';
import { MetricsRegistry } from '../metrics/registry.ts';
import { defaultControllerRateLimiter } from '../queue/rate-limiter.ts';
import { WorkQueue } from '../queue/work-queue.ts';
import { aborted } from '../util/abort.ts';
import { type Clock, realClock, sleep, type TimerHandle } from '../util/clock.ts';
import { causeChain, messageOf } from '../util/errors.ts';
import type { EventHandler, RequestSink } from './handler.ts';
import {
  type ControllerContext,
  type ControllerOptions,
  type ControllerWatchOptions,
  DEFAULT_CACHE_SYNC_TIMEOUT_MS,
  DEFAULT_DRAIN_TIMEOUT_MS,
  DEFAULT_RECONCILE_TIMEOUT_MS,
} from './options.ts';
import { invokeReconciler, type Outcome, tooManyRequests } from './outcome.ts';
import { type EventObject, type Predicate, passesGeneric } from './predicate.ts';
import {
  ControllerShutdownError,
  isTerminalError,
  type ReconcileContext,
  type Reconciler,
  ReconcileTimeoutError,
  type Request,
} from './reconcile.ts';
import {
  type InformerSource,
  isRegistration,
  type SourceRegistration,
  sourceEventHandler,
} from './source.ts';

export type { ControllerContext, ControllerOptions, ControllerWatchOptions } from './options.ts';
export type {
  InformerProvider,
  InformerSource,
  SourceEventHandler,
  SourceRegistration,
  WatchSelector,
} from './source.ts';

interface Watch {
  source: InformerSource<KubeObject>;
  registration: SourceRegistration | undefined;
}

const SYNC_POLL_MS = 100;

export class Controller<T extends KubeObject = KubeObject> implements Runnable {
  readonly name: string;
  readonly needLeaderElection = true;
  /** The controller's work queue (keys "namespace/name"). */
  readonly queue: WorkQueue<string>;
  readonly maxConcurrentReconciles: number;
  readonly reconcileTimeoutMs: number;
  readonly recoverPanic: boolean;
  readonly cacheSyncTimeoutMs: number;
  readonly drainTimeoutMs: number;

  readonly #ctx: ControllerContext;
  readonly #reconciler: Reconciler<T>;
  readonly #log: Logger;
  readonly #metrics: MetricsRegistry;
  readonly #clock: Clock;
  readonly #watches: Watch[] = [];
  readonly #sink: RequestSink;
  readonly #detachQueueMetrics: () => void;
  #started = false;
  #stopped = false;
  #fatal: { err: unknown } | undefined;
  #stopNow: (() => void) | undefined;
  #active = 0;
  #abandoned = 0;
  /** Reconciles are failing because the API server is unreachable or unavailable (logged once). */
  #apiUnavailable = false;

  constructor(
    ctx: ControllerContext,
    name: string,
    reconciler: Reconciler<T>,
    options: ControllerOptions = {},
  ) {
    if (!name) throw new Error('a controller needs a name');
    const max = options.maxConcurrentReconciles ?? 1;
    if (!Number.isInteger(max) || max < 1) {
      throw new RangeError(`maxConcurrentReconciles must be an integer >= 1, got ${max}`);
    }
    const timeout = options.reconcileTimeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
    if (!(timeout >= 0)) throw new RangeError(`reconcileTimeoutMs must be >= 0, got ${timeout}`);
    this.name = name;
    this.maxConcurrentReconciles = max;
    this.reconcileTimeoutMs = timeout;
    this.recoverPanic = options.recoverPanic ?? true;
    this.cacheSyncTimeoutMs = options.cacheSyncTimeoutMs ?? DEFAULT_CACHE_SYNC_TIMEOUT_MS;
    this.drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    this.#ctx = ctx;
    this.#reconciler = reconciler;
    this.#clock = ctx.clock ?? realClock;
    this.#metrics = ctx.metrics ?? new MetricsRegistry();
    this.#log = (options.logger ?? ctx.logger ?? silentLogger()).child({ controller: name });

    this.#metrics.registerController(name, max, options.skipNameValidation ?? false);
    const queueMetrics = this.#metrics.workQueueMetrics(name);
    this.queue = new WorkQueue<string>({
      name,
      clock: this.#clock,
      rateLimiter: options.rateLimiter ?? defaultControllerRateLimiter<string>({ clock: this.#clock }),
      metrics: queueMetrics,
    });
    this.#detachQueueMetrics = queueMetrics.attach(this.queue);
    this.#sink = { add: (req) => this.queue.add(keyOf(req)) };
  }

  /** The client of the controller's context (for reconcilers built around the controller). */
  get client(): Client {
    return this.#ctx.client;
  }

  /** Number of workers currently running a reconcile. */
  get activeWorkers(): number {
    return this.#active;
  }

  /**
   * Reconciles abandoned after their timeout that are still running (their workers moved on, their
   * keys stay locked). Also the gauge opkit_controller_abandoned_reconciles{controller}.
   */
  get abandonedReconciles(): number {
    return this.#abandoned;
  }

  /**
   * Watches `resource` through the cache's shared informer: each event that passes every predicate is
   * turned into requests by `handler`.
   */
  watch<S extends KubeObject>(
    resource: Resource<S>,
    handler: EventHandler<S>,
    opts: ControllerWatchOptions<S> = {},
  ): void {
    const informer = opts.selector
      ? this.#ctx.cache.getInformer(resource, opts.selector)
      : this.#ctx.cache.getInformer(resource);
    this.watchSource(informer, handler, opts.predicates ?? [], resourceId(resource));
  }

  /** Like {@link watch} for any informer-like source. */
  watchSource<S extends KubeObject>(
    source: InformerSource<S>,
    handler: EventHandler<S>,
    predicates: readonly Predicate<S>[] = [],
    description = 'source',
  ): void {
    if (this.#stopped) throw new Error(`controller ${this.name} has stopped; cannot add watches`);
    const registration = source.addEventHandler(
      sourceEventHandler(handler, predicates, this.#sink, (err, event) =>
        this.#log.error({ err, source: description, event }, 'event handler or predicate failed'),
      ),
    );
    this.#watches.push({
      source: source as unknown as InformerSource<KubeObject>,
      registration: isRegistration(registration) ? registration : undefined,
    });
  }

  /** Queues a reconcile of `req` (an external trigger). Ignored once the controller stopped. */
  enqueue(req: Request): void {
    this.#sink.add(req);
  }

  /**
   * Delivers a generic event for `obj` through `handler` after checking `predicates`' generic filters
   * (controller-runtime's channel source).
   */
  generic<S extends KubeObject>(
    obj: EventObject<S>,
    handler: EventHandler<S>,
    predicates: readonly Predicate<S>[] = [],
  ): void {
    try {
      if (passesGeneric(predicates, obj)) handler.generic(obj, this.#sink);
    } catch (err) {
      this.#log.error({ err, event: 'generic' }, 'event handler or predicate failed');
    }
  }

  /**
   * Runs the controller until `signal` aborts: waits for the watched informers to sync, runs the
   * workers, then drains. Rejects if the informers do not sync within `cacheSyncTimeoutMs`, if it was
   * already started, or (with recoverPanic false) after a panic.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error(`controller ${this.name} was started more than once`);
    this.#started = true;
    const internal = new AbortController();
    const stop = internal.signal;
    const onAbort = (): void => internal.abort(signal.reason);
    this.#stopNow = () => internal.abort(new ControllerShutdownError(this.name));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });

    try {
      this.#log.info({ sources: this.#watches.length }, 'Starting Controller');
      const synced = await this.#waitForSync(stop);
      if (!synced) {
        if (stop.aborted) return;
        throw new Error(
          `controller ${this.name}: timed out after ${this.cacheSyncTimeoutMs} ms waiting for caches to sync`,
        );
      }
      this.#log.info({ workerCount: this.maxConcurrentReconciles }, 'Starting workers');
      const workers = Array.from({ length: this.maxConcurrentReconciles }, () => this.#worker(stop));
      await aborted(stop);

      this.#log.info('Shutdown signal received, waiting for all workers to finish');
      this.queue.shutDown();
      const deadline = new AbortController();
      const drained = await Promise.race([
        Promise.all(workers).then(() => true),
        sleep(this.drainTimeoutMs, deadline.signal, this.#clock).then(() => false),
      ]);
      deadline.abort();
      if (drained) this.#log.info('All workers finished');
      else this.#log.warn({ inFlight: this.#active }, 'Drain deadline passed with reconciles still running');
      if (this.#fatal) throw this.#fatal.err;
    } finally {
      this.#stopped = true;
      signal.removeEventListener('abort', onAbort);
      this.queue.shutDown();
      for (const w of this.#watches.splice(0)) w.registration?.remove();
      this.#detachQueueMetrics();
    }
  }

  async #waitForSync(stop: AbortSignal): Promise<boolean> {
    if (this.#watches.length === 0) return !stop.aborted;
    const ac = new AbortController();
    const onStop = (): void => ac.abort();
    stop.addEventListener('abort', onStop, { once: true });
    const timer = this.#clock.setTimeout(() => ac.abort(), this.cacheSyncTimeoutMs);
    try {
      const results = await Promise.all(
        this.#watches.map(({ source }) =>
          source.waitForSync ? source.waitForSync(ac.signal) : this.#pollSynced(source, ac.signal),
        ),
      );
      return results.every(Boolean) && !stop.aborted;
    } catch (err) {
      this.#log.error({ err }, 'waiting for caches to sync failed');
      return false;
    } finally {
      this.#clock.clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    }
  }

  async #pollSynced(source: InformerSource<KubeObject>, signal: AbortSignal): Promise<boolean> {
    while (!source.hasSynced()) {
      if (!(await sleep(SYNC_POLL_MS, signal, this.#clock))) return false;
    }
    return true;
  }

  async #worker(stop: AbortSignal): Promise<void> {
    for (;;) {
      const key = await this.queue.get(stop);
      if (key === undefined) return;
      if (stop.aborted) {
        this.queue.done(key);
        return;
      }
      this.#active++;
      this.#metrics.activeWorkers.set({ controller: this.name }, this.#active);
      try {
        await this.#processKey(key, stop);
      } catch (err) {
        // #processKey handles every reconcile outcome; this is only a safety net.
        this.#log.error({ err, key }, 'internal error processing key');
        this.queue.done(key);
      } finally {
        this.#active--;
        this.#metrics.activeWorkers.set({ controller: this.name }, this.#active);
      }
      // A reconcile that only reads the cache and writes nothing never waits for I/O, and a queued key is
      // handed out at once: without this, a backlog (every object at start-up, a resync) would run in one
      // turn of the event loop, starving health probes, watches and timers until it drained.
      await yieldToEventLoop();
    }
  }

  async #processKey(key: string, stop: AbortSignal): Promise<void> {
    const reconcileID = randomUUID();
    const log = this.#log.child({ key, reconcileID });
    const ac = new AbortController();
    const onStop = (): void => ac.abort(new ControllerShutdownError(this.name));
    if (stop.aborted) onStop();
    else stop.addEventListener('abort', onStop, { once: true });

    let timer: TimerHandle | undefined;
    const timeout = new Promise<Outcome>((resolve) => {
      const ms = this.reconcileTimeoutMs;
      if (ms > 0 && Number.isFinite(ms)) {
        timer = this.#clock.setTimeout(() => {
          timer = undefined;
          const err = new ReconcileTimeoutError(ms);
          ac.abort(err);
          resolve({ kind: 'timeout', err });
        }, ms);
      }
    });

    const ctx: ReconcileContext = { signal: ac.signal, log, reconcileID, controller: this.name };
    const startedAt = this.#clock.now();
    log.debug('Reconciling');
    const running = invokeReconciler(this.#reconciler, parseKey(key), ctx);
    const outcome = await Promise.race([running, timeout]);
    if (timer !== undefined) this.#clock.clearTimeout(timer);
    stop.removeEventListener('abort', onStop);
    const seconds = Math.max(0, this.#clock.now() - startedAt) / 1000;

    if (outcome.kind === 'timeout') {
      this.#recordError(seconds);
      log.error(
        { err: outcome.err, timeoutMs: this.reconcileTimeoutMs },
        'Reconciler timed out; retrying with backoff',
      );
      this.queue.addRateLimited(key);
      // The key stays "processing" until the reconcile really ends: never two at once for one key.
      let settled = false;
      let abandoned = false;
      void running.then((late) => {
        settled = true;
        if (abandoned) {
          this.#setAbandoned(-1);
          log.warn({ outcome: late.kind }, 'Abandoned reconcile finished; its key is free again');
        }
        this.queue.done(key);
      });
      // A reconciler that honours its signal settles right away; one still running after this turn of
      // the event loop ignored it: it runs on beside the workers (beyond maxConcurrentReconciles).
      setImmediate(() => {
        if (settled) return;
        abandoned = true;
        this.#setAbandoned(1);
        this.#metrics.abandonedReconcilesTotal.inc({ controller: this.name });
        log.warn(
          {
            timeoutMs: this.reconcileTimeoutMs,
            abandoned: this.#abandoned,
            maxConcurrentReconciles: this.maxConcurrentReconciles,
          },
          'Reconciler ignored its aborted signal; abandoning it: it keeps running and its key stays locked ' +
            'until it ends, so more than maxConcurrentReconciles reconciles may be running',
        );
      });
      return;
    }

    try {
      this.#handleOutcome(key, outcome, seconds, log, stop);
    } finally {
      this.queue.done(key);
    }
  }

  #handleOutcome(key: string, outcome: Outcome, seconds: number, log: Logger, stop: AbortSignal): void {
    if (outcome.kind === 'ok' && this.#apiUnavailable) {
      this.#apiUnavailable = false;
      log.info('the API server answers again: reconciles succeed');
    }
    if (outcome.kind === 'ok') {
      const result = outcome.result ?? {};
      const after = result.requeueAfter;
      if (typeof after === 'number' && after > 0 && Number.isFinite(after)) {
        this.queue.forget(key);
        this.queue.addAfter(key, after);
        this.#metrics.observeReconcile(this.name, 'requeue_after', seconds);
        log.debug({ requeueAfterMs: after }, 'Reconcile done, requeueing after delay');
      } else if (result.requeue) {
        this.queue.addRateLimited(key);
        this.#metrics.observeReconcile(this.name, 'requeue', seconds);
        log.debug('Reconcile done, requeueing with backoff');
      } else {
        this.queue.forget(key);
        this.#metrics.observeReconcile(this.name, 'success', seconds);
        log.debug('Reconcile successful');
      }
      return;
    }
    if (outcome.kind !== 'error') return;
    const { err, panic } = outcome;
    if (panic) {
      this.#metrics.reconcilePanics.inc({ controller: this.name });
      if (!this.recoverPanic) {
        log.fatal({ err }, 'Panic in reconciler; stopping the controller (recoverPanic is false)');
        this.#fatal ??= { err };
        this.#stopNow?.();
      } else log.error({ err }, 'Observed a panic in reconciler');
    }
    this.#recordError(seconds);
    if (isTerminalError(err)) {
      this.#metrics.terminalReconcileErrors.inc({ controller: this.name });
      this.queue.forget(key);
      log.error({ err }, 'Reconciler returned a terminal error; not retrying');
      return;
    }
    const throttled = tooManyRequests(err);
    if (throttled) {
      // The API server said when to come back: never sooner than Retry-After (the rate limiter's first
      // delays are milliseconds).
      const retryAfterMs = Math.max(0, throttled.retryAfterSeconds * 1000);
      const delayMs = this.queue.addRateLimited(key, retryAfterMs);
      if (stop.aborted) log.debug({ err }, 'Reconciler error during shutdown');
      else
        log.error(
          { err, retries: this.queue.numRequeues(key), retryAfterMs, delayMs },
          'Reconciler error: throttled by the API server, retrying after Retry-After',
        );
      return;
    }
    this.queue.addRateLimited(key);
    if (stop.aborted) log.debug({ err }, 'Reconciler error during shutdown');
    else if (!panic && [...causeChain(err)].some(isTransient)) {
      // The API server restarting or unreachable: every reconcile fails the same way until it is back.
      // One warning, then the retries at debug; an info line when a reconcile succeeds again.
      if (this.#apiUnavailable) log.debug({ err, retries: this.queue.numRequeues(key) }, 'Reconciler error');
      else {
        this.#apiUnavailable = true;
        log.warn(
          { error: messageOf(err) },
          'Reconciler error: the API server is unavailable; retrying with backoff (further errors at debug until a reconcile succeeds)',
        );
      }
    } else log.error({ err, retries: this.queue.numRequeues(key) }, 'Reconciler error');
  }

  #setAbandoned(delta: number): void {
    this.#abandoned += delta;
    this.#metrics.abandonedReconciles.set({ controller: this.name }, this.#abandoned);
  }

  #recordError(seconds: number): void {
    this.#metrics.reconcileErrors.inc({ controller: this.name });
    this.#metrics.observeReconcile(this.name, 'error', seconds);
  }
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

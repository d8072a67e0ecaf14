/** What a controller is built from: its context (the manager) and its options. */
import type { KubeObject } from '../api/object.ts';
import type { Client } from '../client/types.ts';
import type { Logger } from '../log/logger.ts';
import type { Runnable } from '../manager/runnable.ts';
import type { MetricsRegistry } from '../metrics/registry.ts';
import type { RateLimiter } from '../queue/rate-limiter.ts';
import type { Clock } from '../util/clock.ts';
import type { Predicate } from './predicate.ts';
import type { InformerProvider, WatchSelector } from './source.ts';

/**
 * What a controller needs from its manager. The manager passes itself (or an object with these).
 */
export interface ControllerContext {
  readonly cache: InformerProvider;
  readonly client: Client;
  /** Default: a silent logger. */
  readonly logger?: Logger;
  /** The manager's metrics registry. Default: a private registry nobody scrapes. */
  readonly metrics?: MetricsRegistry;
  /** Default realClock. */
  readonly clock?: Clock;
  /** If present, `complete()` registers the controller with it (the manager's `add`). */
  add?(runnable: Runnable): void;
}

export interface ControllerOptions {
  /** Workers, i.e. keys reconciled in parallel. Default 1. */
  maxConcurrentReconciles?: number;
  /** A reconcile's signal aborts and the reconcile is abandoned after this long. Default 60 s; 0: never. */
  reconcileTimeoutMs?: number;
  /** Backoff for errors and `{requeue: true}`. Default: defaultControllerRateLimiter (5 ms .. 1000 s, 10 qps). */
  rateLimiter?: RateLimiter<string>;
  /**
   * Default true: a "panic" (a reconciler that throws synchronously instead of rejecting, or rejects with
   * a ReferenceError or a TypeError without `cause`, i.e. a runtime fault like reading a property of
   * undefined) is counted in controller_runtime_reconcile_panics_total and handled like any error.
   * false: a panic is fatal to the controller: it shuts down and `start()` rejects with it.
   */
  recoverPanic?: boolean;
  /**
   * Selector for the primary resource's informer (default: the cache's options for it). Read the
   * primary with the same selectors (`cache.get(res, req, { labelSelector, signal })`) to read that
   * informer; see WatchSelector.
   */
  cacheOptions?: WatchSelector;
  /** How long `start` waits for the watched informers to sync before failing. Default 120 s. */
  cacheSyncTimeoutMs?: number;
  /** How long shutdown waits for in-flight reconciles. Default 30 s. */
  drainTimeoutMs?: number;
  /** Allow a name already used by a controller of the same metrics registry. Default false. */
  skipNameValidation?: boolean;
  /** Overrides the context's logger. */
  logger?: Logger;
}

export interface ControllerWatchOptions<T extends KubeObject> {
  predicates?: readonly Predicate<T>[];
  /** Which informer to watch (default: the cache's options for the resource); see WatchSelector. */
  selector?: WatchSelector;
}

export const DEFAULT_RECONCILE_TIMEOUT_MS = 60_000;
export const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 120_000;
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

/**
 * The manager, like controller-runtime's pkg/manager: one process-wide home for the API client, the
 * shared informer cache, the metrics registry, event recorders, health probes, leader election and
 * every Runnable (controllers, servers, tasks).
 *
 * Lifecycle of `start()`:
 *   1. serve /healthz, /readyz (health probe address) and /metrics (metrics address);
 *   2. start the cache and wait for every informer created so far to sync (then /readyz turns 200),
 *      at most `cacheSyncTimeoutMs` (default 2 min, like controller-runtime's CacheSyncTimeout): then
 *      the manager shuts down and `start` rejects with a CacheSyncTimeoutError naming the informers
 *      that did not sync (typically: RBAC forbids listing them, or their CRD is not installed);
 *   3. start the runnables with needLeaderElection false, on every replica (so non-leaders keep
 *      their caches warm and can take over quickly);
 *   4. with leader election: campaign for the Lease and start the needLeaderElection runnables
 *      (controllers) once leading; without: start them at once. `elected` resolves then.
 *   5. run until the start signal aborts, SIGTERM/SIGINT arrive (`handleSignals`), a runnable fails,
 *      or leadership is lost.
 * Graceful shutdown (signal, SIGTERM/SIGINT, a failed runnable): stop the leader runnables (controllers
 * stop taking keys and finish in-flight reconciles), then the other runnables, then the cache, then
 * flush event recorders, all within `gracefulShutdownTimeoutMs`; then release the Lease (if
 * `releaseOnCancel` and everything stopped in time) so another replica takes over at its next retry
 * (within its retryPeriod) instead of after leaseDuration; then close
 * the HTTP servers. `start` resolves, or rejects with the runnable's error / a
 * GracefulShutdownTimeoutError.
 * Lost leadership (renewDeadline after the last successful renewal, or another holder seen): the leader
 * runnables are aborted in the same callback that ends the term, then everything else without a
 * graceful wait (another replica may take over soon, as in controller-runtime), and `start` rejects
 * with LeaderElectionLostError; a binary should then exit non-zero (which an unhandled rejection does).
 */
import type { Logger } from 'pino';
import { Cache } from '../cache/cache.ts';
import type { Client } from '../client/types.ts';
import { EventRecorder } from '../helpers/events.ts';
import { defaultIdentity, type LeaderElector } from '../leaderelection/leader-elector.ts';
import { logInformerError } from '../log/informer-errors.ts';
import { createLogger } from '../log/logger.ts';
import { MetricsRegistry } from '../metrics/registry.ts';
import { aborted } from '../util/abort.ts';
import { type Clock, realClock } from '../util/clock.ts';
import { Endpoints } from './endpoints.ts';
import { CacheSyncTimeoutError, GracefulShutdownTimeoutError, LeaderElectionLostError } from './errors.ts';
import { type Checker, HealthChecks } from './health.ts';
import { createManagerElector, type LeaderElectionConfig, resolveLeaderElection } from './leader-election.ts';
import type { ManagerInit, StartOptions } from './options.ts';
import type { Runnable } from './runnable.ts';
import { parseBindAddress } from './server.ts';

export { CacheSyncTimeoutError, GracefulShutdownTimeoutError, LeaderElectionLostError } from './errors.ts';
export type { LeaderElectionOptions, ManagerInit, ManagerOptions, StartOptions } from './options.ts';

interface Entry {
  runnable: Runnable;
  run?: Promise<void>;
}

type Phase = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

export class Manager {
  readonly client: Client;
  readonly cache: Cache;
  readonly metrics: MetricsRegistry;
  readonly logger: Logger;
  readonly clock: Clock;
  /** This replica's identity (the Lease holderIdentity and the events' reportingInstance). */
  readonly identity: string;
  /** Resolves once this replica leads (at once after cache sync without leader election). Never rejects. */
  readonly elected: Promise<void>;

  readonly #log: Logger;
  readonly #leaderElection: LeaderElectionConfig | undefined;
  readonly #elector: LeaderElector | undefined;
  readonly #endpoints: Endpoints;
  readonly #gracefulMs: number;
  readonly #cacheSyncTimeoutMs: number;
  readonly #healthz = new HealthChecks('healthz');
  readonly #readyz = new HealthChecks('readyz');
  readonly #recorders = new Map<string, EventRecorder>();
  readonly #onStopped: (() => void) | undefined;
  readonly #others: Entry[] = [];
  readonly #leaders: Entry[] = [];
  #resolveElected!: () => void;
  #phase: Phase = 'new';
  #cachesSynced = false;
  #othersStarted = false;
  #leading = false;
  /** Aborted to begin shutting down (reason: why). */
  #stop: AbortController | undefined;
  #failure: unknown;
  readonly #leaderCtl = new AbortController();
  readonly #othersCtl = new AbortController();
  readonly #cacheCtl = new AbortController();
  readonly #electorCtl = new AbortController();

  constructor(init: ManagerInit) {
    this.client = init.client;
    this.logger = init.logger ?? createLogger({ name: 'manager' });
    this.#log = this.logger.child({ component: 'manager' });
    this.clock = init.clock ?? realClock;
    this.metrics = init.metrics ?? new MetricsRegistry({ defaultMetrics: true });
    this.cache = new Cache(this.client, {
      ...init.cache,
      ...((init.cache?.namespace ?? init.namespace)
        ? { namespace: init.cache?.namespace ?? init.namespace }
        : {}),
      onError: (err, ctx) => {
        logInformerError(this.#log, err, ctx);
        init.cache?.onError?.(err, ctx);
      },
    });
    this.identity = init.leaderElection?.identity ?? defaultIdentity();
    this.#endpoints = new Endpoints({
      health: parseBindAddress(init.healthProbeBindAddress),
      metrics: parseBindAddress(init.metricsBindAddress),
      healthz: this.#healthz,
      readyz: this.#readyz,
      registry: this.metrics,
      log: this.#log,
    });
    this.#gracefulMs = init.gracefulShutdownTimeoutMs ?? 30_000;
    const syncTimeout = init.cacheSyncTimeoutMs ?? DEFAULT_CACHE_SYNC_TIMEOUT_MS;
    if (!(syncTimeout >= 0)) throw new RangeError(`cacheSyncTimeoutMs must be >= 0, got ${syncTimeout}`);
    this.#cacheSyncTimeoutMs = syncTimeout;
    this.#onStopped = init.onStopped;
    this.elected = new Promise<void>((resolve) => {
      this.#resolveElected = resolve;
    });

    this.#leaderElection = resolveLeaderElection(init, this.client);
    if (this.#leaderElection) {
      this.#elector = createManagerElector(this.#leaderElection, {
        identity: this.identity,
        logger: this.logger,
        log: this.#log,
        metrics: this.metrics,
        onStartedLeading: (leading) => {
          // The leader runnables stop the moment leadership ends (the renew deadline passed, or
          // another holder was seen), not only once the elector's run has returned.
          leading.addEventListener('abort', () => this.#leaderCtl.abort(leading.reason), { once: true });
          this.#startLeading();
        },
      });
      // The series exists (0) from the start, also on replicas that never lead.
      this.metrics.setLeader(this.#leaderElection.id, false);
    }

    this.#healthz.add('ping', () => {});
    this.#readyz.add('cache-sync', () => {
      if (this.#phase === 'stopping' || this.#phase === 'stopped')
        throw new Error('the manager is shutting down');
      if (!this.#cachesSynced) throw new Error('caches have not synced yet');
    });
  }

  /** 'host:port' the health probes are served on, once started (undefined when disabled). */
  get healthProbeAddress(): string | undefined {
    return this.#endpoints.healthAddress;
  }

  /** 'host:port' /metrics is served on, once started (undefined when disabled). */
  get metricsAddress(): string | undefined {
    return this.#endpoints.metricsAddress;
  }

  /** The Lease name, when leader election is enabled. */
  get leaderElectionId(): string | undefined {
    return this.#leaderElection?.id;
  }

  /** True while the leader runnables may run: leading, or running without leader election. */
  isLeader(): boolean {
    return this.#leading && (this.#elector ? this.#elector.isLeader() : true);
  }

  /** The Lease holder last observed ('' when unknown or none; this identity without leader election). */
  currentLeader(): string {
    if (!this.#elector) return this.#leading ? this.identity : '';
    return this.#elector.getLeader();
  }

  /**
   * Adds a runnable. Before start it is queued; after start it is started at once (leader runnables
   * once leading). Throws once shutdown has begun.
   */
  add(runnable: Runnable): void {
    if (this.#phase === 'stopping' || this.#phase === 'stopped') {
      throw new Error(`cannot add runnable "${runnable.name}": the manager is shutting down`);
    }
    const entry: Entry = { runnable };
    if (runnable.needLeaderElection) {
      this.#leaders.push(entry);
      if (this.#leading) this.#run(entry, this.#leaderCtl.signal);
    } else {
      this.#others.push(entry);
      if (this.#othersStarted) this.#run(entry, this.#othersCtl.signal);
    }
  }

  /** Adds a liveness check to /healthz (a check passes unless it throws, rejects or returns false). */
  addHealthzCheck(name: string, check: Checker): void {
    this.#healthz.add(name, check);
  }

  /** Adds a readiness check to /readyz. */
  addReadyzCheck(name: string, check: Checker): void {
    this.#readyz.add(name, check);
  }

  /** The event recorder for a controller (`reportingController`), shared per name, flushed at shutdown. */
  getEventRecorder(name: string): EventRecorder {
    let recorder = this.#recorders.get(name);
    if (!recorder) {
      const log = this.#log.child({ eventRecorder: name });
      recorder = new EventRecorder({
        client: this.client,
        reportingController: name,
        reportingInstance: this.identity,
        onError: (err, event) =>
          log.warn(
            { err, reason: event.reason, namespace: event.metadata.namespace },
            'failed to record event',
          ),
      });
      this.#recorders.set(name, recorder);
    }
    return recorder;
  }

  /**
   * Runs everything until shutdown (see the module comment). Resolves after a clean graceful shutdown;
   * rejects with a runnable's error, LeaderElectionLostError, CacheSyncTimeoutError,
   * GracefulShutdownTimeoutError, or a server's listen error. Can be called once.
   */
  async start(options?: AbortSignal | StartOptions): Promise<void> {
    if (this.#phase !== 'new') throw new Error('the manager was already started');
    this.#phase = 'starting';
    const opts: StartOptions = options instanceof AbortSignal ? { signal: options } : (options ?? {});
    const stop = new AbortController();
    this.#stop = stop;
    const external = opts.signal;
    const onExternalAbort = (): void => stop.abort(external?.reason);
    if (external?.aborted) stop.abort(external.reason);
    else external?.addEventListener('abort', onExternalAbort, { once: true });
    const removeSignalHandlers =
      (opts.handleSignals ?? !external) ? this.#installSignalHandlers(stop) : () => {};

    try {
      await this.#endpoints.start();
      this.#log.info({ identity: this.identity }, 'starting manager');
      const cacheRun = this.cache.start(this.#cacheCtl.signal);
      const elector = this.#elector;
      let electorRun: Promise<'cancelled' | 'lost'> | undefined;
      if (await this.#waitForCacheSync(stop.signal)) {
        this.#cachesSynced = true;
        this.#log.info('caches synced');
      }
      if (!stop.signal.aborted) {
        this.#phase = 'running';
        this.#othersStarted = true;
        for (const entry of this.#others) this.#run(entry, this.#othersCtl.signal);
        if (elector) {
          // Never rejects: a failing elector (which no longer renews the Lease) is handled like lost
          // leadership, since another replica may take over soon.
          electorRun = elector.run(this.#electorCtl.signal).then(
            (outcome) => {
              if (outcome === 'lost') this.#fail(new LeaderElectionLostError(elector.lock.describe()));
              return outcome;
            },
            (err: unknown) => {
              this.#log.error({ err }, 'leader election failed; stopping as if leadership was lost');
              this.#fail(new LeaderElectionLostError(elector.lock.describe(), { cause: err }));
              return 'lost' as const;
            },
          );
        } else {
          this.#startLeading();
        }
      }
      await aborted(stop.signal);
      this.#phase = 'stopping';
      await this.#shutdown(cacheRun, electorRun);
    } catch (err) {
      // Only the servers' listen can throw before shutdown; make sure nothing is left running.
      this.#phase = 'stopping';
      this.#fail(err);
      this.#abortAll();
      await this.#endpoints.close();
    } finally {
      this.#phase = 'stopped';
      external?.removeEventListener('abort', onExternalAbort);
      removeSignalHandlers();
      try {
        this.#onStopped?.();
      } catch (err) {
        this.#log.warn({ err }, 'onStopped failed');
      }
    }
    if (this.#failure !== undefined) throw this.#failure;
  }

  /**
   * Waits for the caches to sync, at most cacheSyncTimeoutMs; on timeout fails the manager with a
   * CacheSyncTimeoutError. True once synced; false if stopped or timed out first.
   */
  async #waitForCacheSync(stop: AbortSignal): Promise<boolean> {
    const ms = this.#cacheSyncTimeoutMs;
    if (ms === 0 || ms === Number.POSITIVE_INFINITY) return this.cache.waitForCacheSync(stop);
    const timeout = new AbortController();
    const timer = this.clock.setTimeout(() => timeout.abort(), ms);
    try {
      const synced = await this.cache.waitForCacheSync(AbortSignal.any([stop, timeout.signal]));
      if (synced || stop.aborted) return synced;
      const err = new CacheSyncTimeoutError(ms, this.cache.unsyncedInformers());
      this.#log.error({ err, informers: err.informers, timeoutMs: ms }, 'caches did not sync in time');
      this.#fail(err);
      return false;
    } finally {
      this.clock.clearTimeout(timer);
    }
  }

  #startLeading(): void {
    if (this.#phase !== 'running' || this.#leading) return;
    this.#leading = true;
    this.#log.info({ runnables: this.#leaders.length }, 'leading: starting leader election runnables');
    for (const entry of this.#leaders) this.#run(entry, this.#leaderCtl.signal);
    this.#resolveElected();
  }

  #run(entry: Entry, signal: AbortSignal): void {
    if (entry.run) return;
    const { runnable } = entry;
    entry.run = (async () => {
      try {
        await runnable.start(signal);
        if (!signal.aborted) this.#log.info({ runnable: runnable.name }, 'runnable finished');
      } catch (err) {
        if (signal.aborted && this.#phase !== 'running') {
          this.#log.warn({ err, runnable: runnable.name }, 'runnable failed while stopping');
          return;
        }
        this.#log.error({ err, runnable: runnable.name }, 'runnable failed');
        this.#fail(err);
      }
    })();
  }

  /** Records the first fatal error and begins shutting down. */
  #fail(err: unknown): void {
    if (this.#failure === undefined) this.#failure = err ?? new Error('manager failed');
    this.#stop?.abort(err);
  }

  async #shutdown(
    cacheRun: Promise<void>,
    electorRun: Promise<'cancelled' | 'lost'> | undefined,
  ): Promise<void> {
    const lost = this.#failure instanceof LeaderElectionLostError;
    this.#leading = false;
    if (lost) {
      // Another replica may already lead: stop at once, no graceful wait, no release.
      this.#log.error('leader election lost: stopping without graceful shutdown');
      this.#abortAll();
      await this.#endpoints.close();
      return;
    }
    this.#log.info({ timeoutMs: this.#gracefulMs }, 'stopping: waiting for runnables to finish');
    const graceful = (async () => {
      this.#leaderCtl.abort();
      await Promise.all(this.#leaders.map((e) => e.run));
      this.#othersCtl.abort();
      await Promise.all(this.#others.map((e) => e.run));
      this.#cacheCtl.abort();
      await cacheRun;
      await Promise.allSettled([...this.#recorders.values()].map((r) => r.close()));
    })();
    const inTime = await withTimeout(graceful, this.#gracefulMs);
    this.#abortAll();
    // Stop renewing; release the Lease only if nothing of ours still runs.
    const elector = this.#elector;
    if (elector && electorRun) {
      await electorRun;
      // release() re-reads the Lease and only writes if this replica still holds it.
      if (this.#leaderElection?.releaseOnCancel) {
        if (inTime) await elector.release();
        else this.#log.warn('not releasing the lease: runnables are still running');
      }
    }
    await this.#endpoints.close();
    if (!inTime && this.#gracefulMs > 0) {
      this.#log.error({ timeoutMs: this.#gracefulMs }, 'runnables did not stop within the grace period');
      if (this.#failure === undefined) this.#failure = new GracefulShutdownTimeoutError(this.#gracefulMs);
    } else {
      this.#log.info('manager stopped');
    }
  }

  #abortAll(): void {
    this.#leaderCtl.abort();
    this.#othersCtl.abort();
    this.#cacheCtl.abort();
    this.#electorCtl.abort();
  }

  #installSignalHandlers(stop: AbortController): () => void {
    let received = 0;
    const handler = (sig: NodeJS.Signals): void => {
      received++;
      if (received === 1) {
        this.#log.info({ signal: sig }, 'received signal, shutting down gracefully');
        stop.abort(new Error(`received ${sig}`));
      } else {
        this.#log.error({ signal: sig }, 'received second signal, exiting');
        process.exit(1);
      }
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
    return () => {
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
    };
  }
}

const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 120_000;

/** true if `p` settled within `ms` (ms < 0: wait forever; 0: only if already settled). */
async function withTimeout(p: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms < 0) {
    await p;
    return true;
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

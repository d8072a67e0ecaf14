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
 * `releaseOnCancel` and everything stopped in time) so another replica takes over at once; then close
 * the HTTP servers. `start` resolves, or rejects with the runnable's error / a
 * GracefulShutdownTimeoutError.
 * Lost leadership: everything is aborted at once without a graceful wait (another replica may already
 * be acting, as in controller-runtime) and `start` rejects with LeaderElectionLostError; a binary
 * should then exit non-zero (which an unhandled rejection does).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Cache, type CacheOptions } from '../cache/cache.ts';
import { loadConfig } from '../client/config.ts';
import type { RateLimitOptions } from '../client/rate-limit.ts';
import { createClient } from '../client/rest-client.ts';
import type { Client } from '../client/types.ts';
import { EventRecorder } from '../helpers/events.ts';
import { defaultIdentity, LeaderElector } from '../leaderelection/leader-elector.ts';
import { LeaseLock } from '../leaderelection/lease-lock.ts';
import { logInformerError } from '../log/informer-errors.ts';
import { createLogger } from '../log/logger.ts';
import { MetricsRegistry } from '../metrics/registry.ts';
import { type Clock, realClock } from '../util/clock.ts';
import { type Checker, HealthChecks } from './health.ts';
import type { Runnable } from './runnable.ts';
import { type BindAddress, closeServer, listen, parseBindAddress, sendText } from './server.ts';

export interface LeaderElectionOptions {
  /** Default true when the leaderElection object is given. */
  enabled?: boolean;
  /** The Lease's name (controller-runtime's LeaderElectionID), e.g. 'database-operator.opkit.dev'. */
  id: string;
  /** The Lease's namespace. Default: the manager's namespace, else the kubeconfig's / in-cluster one. */
  namespace?: string;
  /** Default 15 s. */
  leaseDurationMs?: number;
  /** Default 10 s. */
  renewDeadlineMs?: number;
  /** Default 2 s. */
  retryPeriodMs?: number;
  /**
   * Release the Lease on a graceful shutdown, so that another replica takes over at once instead of
   * after leaseDuration. Only safe when the process exits right after `start` returns. Default true.
   */
  releaseOnCancel?: boolean;
  /** This candidate's identity. Default hostname + '_' + a random UUID. */
  identity?: string;
  /** A client for leader election only (e.g. without client-side throttling). Default the manager's. */
  client?: Client;
}

export interface ManagerOptions {
  /** Path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config). Ignored with `client`. */
  kubeconfig?: string;
  /** Context of the kubeconfig to use. Ignored with `client`. */
  context?: string;
  /** Use this client (a FakeClient in tests) instead of building one from the kubeconfig. */
  client?: Client;
  /** Field manager of the built client's writes. Default 'opkit'. */
  fieldManager?: string;
  /**
   * Client-side throttling of the built client's requests (not watches), as client-go's QPS/Burst. Default
   * none: the API server's Priority and Fairness protects it. Leader election then gets its own, unthrottled
   * client (unless `leaderElection.client` is given), so renewals never wait behind throttled requests.
   * Ignored with `client`.
   */
  rateLimit?: RateLimitOptions;
  /** Restricts the cache to one namespace (unless `cache.namespace` says otherwise); Lease default. */
  namespace?: string;
  leaderElection?: LeaderElectionOptions;
  /** e.g. '127.0.0.1:8081', ':8081', ':0' (free port). Default: disabled. */
  healthProbeBindAddress?: string;
  /** e.g. '127.0.0.1:8080', ':0'. Default: disabled. */
  metricsBindAddress?: string;
  /**
   * How long a graceful shutdown waits for runnables (and the cache, and event flushing) to stop.
   * Default 30 s; 0 does not wait; negative waits forever.
   */
  gracefulShutdownTimeoutMs?: number;
  /** Default: createLogger({ name: 'manager' }). */
  logger?: Logger;
  /** Options of the shared cache. */
  cache?: CacheOptions;
  /**
   * Default: a new registry with the process and Node.js runtime metrics (process_resident_memory_bytes,
   * nodejs_heap_size_used_bytes, ...), as controller-runtime serves the process and Go collectors
   * (rest_client_requests_total is wired to the built client).
   */
  metrics?: MetricsRegistry;
  /** Clock for leader election, controllers and the cache sync timeout. Default: the system clock. */
  clock?: Clock;
  /**
   * How long `start` waits for the caches to sync before it gives up: it shuts down and rejects with a
   * {@link CacheSyncTimeoutError}. /readyz answers 503 meanwhile. Default 120 000 (2 min); 0 or
   * Infinity waits forever.
   */
  cacheSyncTimeoutMs?: number;
}

export interface StartOptions {
  /** Aborting it starts a graceful shutdown. */
  signal?: AbortSignal;
  /**
   * Shut down gracefully on SIGTERM/SIGINT (a second signal exits at once with code 1). Default: true
   * when no `signal` is given (a binary's `await mgr.start()`), false otherwise (tests).
   */
  handleSignals?: boolean;
}

/**
 * Leadership was lost (the Lease could not be renewed within renewDeadline, or leader election itself
 * failed: then `cause` is its error). Exit non-zero.
 */
export class LeaderElectionLostError extends Error {
  readonly lease: string;
  constructor(lease: string, options?: ErrorOptions) {
    super(
      options?.cause === undefined
        ? `leader election lost: lease ${lease} could not be renewed`
        : `leader election lost: leader election for lease ${lease} failed: ${messageOf(options.cause)}`,
      options,
    );
    this.name = 'LeaderElectionLostError';
    this.lease = lease;
  }
}

/**
 * The caches did not sync within `cacheSyncTimeoutMs`. `informers` names the ones that did not (see
 * Cache.unsyncedInformers): usually RBAC forbids listing them or their CRD is not installed; the
 * manager's 'informer error' log lines tell which.
 */
export class CacheSyncTimeoutError extends Error {
  readonly timeoutMs: number;
  readonly informers: readonly string[];
  constructor(timeoutMs: number, informers: readonly string[]) {
    super(
      `timed out after ${timeoutMs} ms waiting for caches to sync; not synced: ${
        informers.length > 0 ? informers.join(', ') : '(none left: they synced just too late)'
      } (is listing them forbidden by RBAC, or a CRD not installed?)`,
    );
    this.name = 'CacheSyncTimeoutError';
    this.timeoutMs = timeoutMs;
    this.informers = [...informers];
  }
}

/** Runnables did not stop within gracefulShutdownTimeoutMs. */
export class GracefulShutdownTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`failed waiting for all runnables to end within grace period of ${timeoutMs} ms`);
    this.name = 'GracefulShutdownTimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

interface Entry {
  runnable: Runnable;
  run?: Promise<void>;
}

type Phase = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** Resolved leader election settings. */
interface LeaderElectionConfig {
  id: string;
  namespace: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  releaseOnCancel: boolean;
  client: Client;
}

export interface ManagerInit
  extends Omit<ManagerOptions, 'kubeconfig' | 'context' | 'fieldManager' | 'rateLimit'> {
  client: Client;
  /** Lease namespace when neither leaderElection.namespace nor namespace is set. Default 'default'. */
  defaultNamespace?: string;
  /** Called once the manager has stopped, e.g. to close a client the manager owns (createManager does). */
  onStopped?: () => void;
}

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
  readonly #healthBind: BindAddress | undefined;
  readonly #metricsBind: BindAddress | undefined;
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
  #servers: Server[] = [];
  #healthAddress: string | undefined;
  #metricsAddress: string | undefined;
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
    this.#healthBind = parseBindAddress(init.healthProbeBindAddress);
    this.#metricsBind = parseBindAddress(init.metricsBindAddress);
    this.#gracefulMs = init.gracefulShutdownTimeoutMs ?? 30_000;
    const syncTimeout = init.cacheSyncTimeoutMs ?? DEFAULT_CACHE_SYNC_TIMEOUT_MS;
    if (!(syncTimeout >= 0)) throw new RangeError(`cacheSyncTimeoutMs must be >= 0, got ${syncTimeout}`);
    this.#cacheSyncTimeoutMs = syncTimeout;
    this.#onStopped = init.onStopped;
    this.elected = new Promise<void>((resolve) => {
      this.#resolveElected = resolve;
    });

    const le = init.leaderElection;
    if (le && le.enabled !== false) {
      if (!le.id) throw new TypeError('leaderElection.id (the Lease name) is required');
      this.#leaderElection = {
        id: le.id,
        namespace: le.namespace || init.namespace || init.defaultNamespace || 'default',
        releaseOnCancel: le.releaseOnCancel ?? true,
        client: le.client ?? this.client,
        ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
        ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
        ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
      };
      this.#elector = this.#createElector(this.#leaderElection);
      // The series exists (0) from the start, also on replicas that never lead.
      this.metrics.setLeader(le.id, false);
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
    return this.#healthAddress;
  }

  /** 'host:port' /metrics is served on, once started (undefined when disabled). */
  get metricsAddress(): string | undefined {
    return this.#metricsAddress;
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
      await this.#startServers();
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
      await this.#closeServers();
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

  #createElector(le: LeaderElectionConfig): LeaderElector {
    return new LeaderElector({
      lock: new LeaseLock({
        client: le.client,
        namespace: le.namespace,
        name: le.id,
        identity: this.identity,
      }),
      name: le.id,
      ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
      ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
      ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
      // The manager releases the Lease itself, after the runnables have stopped.
      releaseOnCancel: false,
      clock: this.clock,
      logger: this.logger,
      onLeaderStatus: (name, leading) => this.metrics.setLeader(name, leading),
      onStartedLeading: () => this.#startLeading(),
      onNewLeader: (identity) => {
        if (identity !== this.identity) this.#log.info({ leader: identity }, 'another replica leads');
      },
    });
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
      await this.#closeServers();
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
    await this.#closeServers();
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

  async #startServers(): Promise<void> {
    const health = this.#healthBind;
    const metrics = this.#metricsBind;
    const onError = (err: unknown): void => this.#log.error({ err }, 'http server error');
    const same =
      health !== undefined &&
      metrics !== undefined &&
      health.port !== 0 &&
      health.port === metrics.port &&
      health.host === metrics.host;
    if (health) {
      const { server, address } = await listen(
        health,
        (req, res) => this.#handle(req, res, { probes: true, metrics: same }),
        onError,
      );
      this.#servers.push(server);
      this.#healthAddress = address;
      if (same) this.#metricsAddress = address;
      this.#log.info({ address }, 'serving health probes');
    }
    if (metrics && !same) {
      const { server, address } = await listen(
        metrics,
        (req, res) => this.#handle(req, res, { probes: false, metrics: true }),
        onError,
      );
      this.#servers.push(server);
      this.#metricsAddress = address;
      this.#log.info({ address }, 'serving metrics');
    }
  }

  async #handle(
    req: IncomingMessage,
    res: ServerResponse,
    serve: { probes: boolean; metrics: boolean },
  ): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const route =
      serve.probes && (path === '/healthz' || path.startsWith('/healthz/'))
        ? 'healthz'
        : serve.probes && (path === '/readyz' || path.startsWith('/readyz/'))
          ? 'readyz'
          : serve.metrics && path === '/metrics'
            ? 'metrics'
            : undefined;
    if (!route) {
      sendText(req, res, 404, 'not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      sendText(req, res, 405, 'method not allowed\n');
      return;
    }
    if (route === 'healthz') await this.#healthz.serve(req, res, url);
    else if (route === 'readyz') await this.#readyz.serve(req, res, url);
    else sendText(req, res, 200, await this.metrics.text(), this.metrics.contentType);
  }

  async #closeServers(): Promise<void> {
    const servers = this.#servers;
    this.#servers = [];
    await Promise.all(servers.map((s) => closeServer(s)));
  }
}

/**
 * Builds a manager: loads the kubeconfig (unless `client` is given), creates the client (counting
 * rest_client_requests_total in the manager's registry), the shared cache and the rest.
 */
export async function createManager(opts: ManagerOptions = {}): Promise<Manager> {
  const metrics = opts.metrics ?? new MetricsRegistry({ defaultMetrics: true });
  let client = opts.client;
  let defaultNamespace: string | undefined;
  let onStopped: (() => void) | undefined;
  let leaderElection: LeaderElectionOptions | undefined;
  if (!client) {
    const config = await loadConfig({
      ...(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}),
      ...(opts.context !== undefined ? { context: opts.context } : {}),
    });
    const clientOptions = {
      ...(opts.fieldManager !== undefined ? { fieldManager: opts.fieldManager } : {}),
      onRequest: metrics.restClientObserver(),
    };
    const built = createClient(config, {
      ...clientOptions,
      ...(opts.rateLimit ? { rateLimit: opts.rateLimit } : {}),
    });
    client = built;
    defaultNamespace = config.namespace;
    onStopped = () => built.close();
    if (opts.rateLimit && opts.leaderElection && !opts.leaderElection.client) {
      leaderElection = { ...opts.leaderElection, client: createClient(config, clientOptions) };
    }
  }
  const init: ManagerInit = {
    ...opts,
    ...(leaderElection ? { leaderElection } : {}),
    client,
    metrics,
    ...(defaultNamespace ? { defaultNamespace } : {}),
    ...(onStopped ? { onStopped } : {}),
  };
  delete (init as ManagerOptions).kubeconfig;
  delete (init as ManagerOptions).context;
  delete (init as ManagerOptions).fieldManager;
  delete (init as ManagerOptions).rateLimit;
  return new Manager(init);
}

const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 120_000;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

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

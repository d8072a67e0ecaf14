/** The manager's options: what createManager and the Manager constructor take. */
import type { Logger } from 'pino';
import type { CacheOptions } from '../cache/cache.ts';
import type { TransportMode } from '../client/h2-sessions.ts';
import type { RateLimitOptions } from '../client/rate-limit.ts';
import type { WireFormat } from '../client/rest-client.ts';
import type { Client } from '../client/types.ts';
import type { MetricsRegistry } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';

export interface LeaderElectionOptions {
  /** Default true when the leaderElection object is given. */
  enabled?: boolean;
  /** The Lease's name (controller-runtime's LeaderElectionID), e.g. 'database-operator.opkit.dev'. */
  id: string;
  /** The Lease's namespace. Default: the manager's namespace, else the kubeconfig's / in-cluster one. */
  namespace?: string;
  /** Default 15 s. */
  leaseDurationMs?: number;
  /**
   * How long after its last successful renewal the leader leads at most. Default 10 s.
   * renewDeadlineMs + retryPeriodMs + 5 % of leaseDurationMs must be below leaseDurationMs.
   */
  renewDeadlineMs?: number;
  /** Default 2 s. */
  retryPeriodMs?: number;
  /**
   * Release the Lease on a graceful shutdown, so that another replica takes over at its next retry
   * (within its retryPeriod) instead of after leaseDuration. Only safe when the process exits right
   * after `start` returns. Default true.
   */
  releaseOnCancel?: boolean;
  /** This candidate's identity. Default hostname + '_' + a random UUID. */
  identity?: string;
  /**
   * A client for leader election only. Default: when the manager builds its client from a kubeconfig,
   * a second client of that config on its own connection pool (LEADER_ELECTION_POOL), so that Lease
   * renewals never queue behind the operator's other requests for a socket; with a given `client`, that
   * client.
   */
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
   * none: the API server's Priority and Fairness protects it. Leader election always gets its own, unthrottled
   * client on its own connection pool (unless `leaderElection.client` is given), so renewals never wait behind
   * throttled requests or watches. Ignored with `client`.
   */
  rateLimit?: RateLimitOptions;
  /**
   * The built clients' protocol: 'http1', 'http2' or 'auto' (HTTP/2 if the server negotiates it). Default:
   * OPKIT_TRANSPORT, else 'http1'. See ClientOptions.transport. Ignored with `client`.
   */
  transport?: TransportMode;
  /**
   * The built clients' wire format for watches of built-in kinds: 'protobuf' or 'json'. Default:
   * OPKIT_WIRE_FORMAT, else 'protobuf'. See ClientOptions.wireFormat. Ignored with `client`.
   */
  wireFormat?: WireFormat;
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

export interface ManagerInit
  extends Omit<
    ManagerOptions,
    'kubeconfig' | 'context' | 'fieldManager' | 'rateLimit' | 'transport' | 'wireFormat'
  > {
  client: Client;
  /** Lease namespace when neither leaderElection.namespace nor namespace is set. Default 'default'. */
  defaultNamespace?: string;
  /** Called once the manager has stopped, e.g. to close a client the manager owns (createManager does). */
  onStopped?: () => void;
}

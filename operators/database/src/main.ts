/**
 * The Database operator's entry point, the same binary out of cluster and in cluster:
 *
 *   node src/main.ts                                   # $KUBECONFIG, else in-cluster, else ~/.kube/config
 *   node src/main.ts --kubeconfig ./kubeconfig --context kind-dev --namespace team-a
 *   node src/main.ts --leader-elect --metrics-bind-address :8080 --health-probe-bind-address :8081
 *
 * Every flag has an environment variable (flags win): KUBECONFIG, WATCH_NAMESPACE, LEADER_ELECT,
 * LEADER_ELECTION_NAMESPACE, METRICS_BIND_ADDRESS, HEALTH_PROBE_BIND_ADDRESS, MAX_CONCURRENT_RECONCILES,
 * SYNC_PERIOD, KUBE_API_QPS, KUBE_API_BURST, LOG_LEVEL. SIGTERM / SIGINT shut down gracefully: in-flight reconciles finish, events are flushed and
 * the leader election Lease is released so another replica takes over within its retry period.
 */
import { parseArgs as parseNodeArgs } from 'node:util';
import {
  type Client,
  createLogger,
  createManager,
  type Logger,
  type LogLevel,
  loadConfig,
  newPodExecutor,
  type PodExecutor,
  parseDuration,
} from '@opkit/runtime';
import { setupDatabaseController } from './controllers/database/index.ts';

export const LEADER_ELECTION_ID = 'database-operator.myapp.example.com';
export const FIELD_MANAGER = 'database-operator';
/** Every cached object is reconciled again this often (controller-runtime's default SyncPeriod). */
export const DEFAULT_SYNC_PERIOD = '10h';

export interface OperatorOptions {
  /** A kubeconfig file; without it $KUBECONFIG, in-cluster, then ~/.kube/config. */
  kubeconfig?: string;
  context?: string;
  /** Watch only this namespace; all namespaces when empty. */
  namespace?: string;
  leaderElect?: boolean;
  leaderElectionId?: string;
  /** The Lease's namespace (default: the service account's namespace in cluster, else the context's). */
  leaderElectionNamespace?: string;
  /** ':8080' style; '0' or '' disables. */
  metricsBindAddress?: string;
  /** ':8081' style; '0' or '' disables. */
  healthProbeBindAddress?: string;
  maxConcurrentReconciles?: number;
  /** How often every cached object is delivered again (a safety net for missed events), ms; 0: never. */
  syncPeriodMs?: number;
  /** How often the primary of a postgres Database is asked about its replicas, ms (default 30 s); 0: never. */
  replicationPollMs?: number;
  /** Client-side throttling of API requests (not watches); off when absent (Priority and Fairness). */
  kubeApi?: { qps: number; burst?: number };
  logLevel?: LogLevel;
  /** Tests and the demo: use this client instead of loading a kubeconfig. */
  client?: Client;
  /** pods/exec for the failover; by default one over the kubeconfig's connection (none with `client`). */
  exec?: PodExecutor;
  logger?: Logger;
  /** Aborting it shuts the operator down gracefully (handled signals otherwise). */
  signal?: AbortSignal;
  /** Called once the manager listens (addresses known) and before it starts reconciling. */
  onStarted?: (info: { metricsAddress?: string; healthProbeAddress?: string }) => void;
}

export const USAGE = `Usage: node src/main.ts [flags]

  --kubeconfig PATH                    kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)
  --context NAME                       kubeconfig context (default: the current context)
  --namespace NS                       watch only this namespace (default: all; env WATCH_NAMESPACE)
  --leader-elect                       enable leader election (env LEADER_ELECT=true)
  --leader-election-id NAME            Lease name (default ${LEADER_ELECTION_ID})
  --leader-election-namespace NS       Lease namespace (default: in-cluster namespace or the context's)
  --metrics-bind-address ADDR          /metrics address (default :8080, "0" disables)
  --health-probe-bind-address ADDR     /healthz and /readyz address (default :8081, "0" disables)
  --max-concurrent-reconciles N        Databases reconciled in parallel (default 2)
  --sync-period DURATION               reconcile every Database again this often, e.g. 10h, 30m (default ${DEFAULT_SYNC_PERIOD}; 0 never)
  --replication-poll-interval DURATION how often the primary of a postgres Database is asked about its
                                       replicas (status.instances lag, the lag metrics), e.g. 30s (default
                                       30s; 0 never)
  --kube-api-qps QPS                   client-side limit of API requests per second, watches excepted
                                       (default 0: none, the API server's Priority and Fairness protects it)
  --kube-api-burst N                   requests at once above --kube-api-qps (default: the qps, rounded up)
  --log-level LEVEL                    trace|debug|info|warn|error|silent (default info; env LOG_LEVEL)
  -h, --help                           this help
`;

const LOG_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

function truthy(value: string | undefined): boolean {
  return value !== undefined && /^(1|true|yes|on)$/i.test(value.trim());
}

/** Reads flags and environment variables into OperatorOptions (flags win). Throws on a bad value. */
export function parseOptions(
  argv: readonly string[],
  env: Record<string, string | undefined> = process.env,
): OperatorOptions & { help: boolean } {
  const { values } = parseNodeArgs({
    args: [...argv],
    options: {
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      namespace: { type: 'string' },
      'leader-elect': { type: 'boolean' },
      'leader-election-id': { type: 'string' },
      'leader-election-namespace': { type: 'string' },
      'metrics-bind-address': { type: 'string' },
      'health-probe-bind-address': { type: 'string' },
      'max-concurrent-reconciles': { type: 'string' },
      'sync-period': { type: 'string' },
      'replication-poll-interval': { type: 'string' },
      'kube-api-qps': { type: 'string' },
      'kube-api-burst': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    allowNegative: true,
    strict: true,
  });
  const workers = Number(values['max-concurrent-reconciles'] ?? env.MAX_CONCURRENT_RECONCILES ?? '2');
  if (!Number.isInteger(workers) || workers < 1) {
    throw new Error(`--max-concurrent-reconciles must be a positive integer, got ${String(workers)}`);
  }
  const syncPeriod = values['sync-period'] ?? env.SYNC_PERIOD ?? DEFAULT_SYNC_PERIOD;
  let syncPeriodMs: number;
  try {
    syncPeriodMs = parseDuration(syncPeriod);
  } catch (err) {
    throw new Error(`--sync-period: ${err instanceof Error ? err.message : String(err)}`);
  }
  const replicationPoll = values['replication-poll-interval'] ?? env.REPLICATION_POLL_INTERVAL;
  let replicationPollMs: number | undefined;
  try {
    if (replicationPoll !== undefined) replicationPollMs = parseDuration(replicationPoll);
  } catch (err) {
    throw new Error(`--replication-poll-interval: ${err instanceof Error ? err.message : String(err)}`);
  }
  const kubeApi = kubeApiLimit(
    values['kube-api-qps'] ?? env.KUBE_API_QPS,
    values['kube-api-burst'] ?? env.KUBE_API_BURST,
  );
  const logLevel = values['log-level'] ?? env.LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new Error(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  const opts: OperatorOptions & { help: boolean } = {
    help: values.help ?? false,
    leaderElect: values['leader-elect'] ?? truthy(env.LEADER_ELECT),
    leaderElectionId: values['leader-election-id'] ?? LEADER_ELECTION_ID,
    metricsBindAddress: values['metrics-bind-address'] ?? env.METRICS_BIND_ADDRESS ?? ':8080',
    healthProbeBindAddress: values['health-probe-bind-address'] ?? env.HEALTH_PROBE_BIND_ADDRESS ?? ':8081',
    maxConcurrentReconciles: workers,
    syncPeriodMs,
    logLevel: logLevel as LogLevel,
  };
  if (kubeApi) opts.kubeApi = kubeApi;
  if (replicationPollMs !== undefined) opts.replicationPollMs = replicationPollMs;
  const kubeconfig = values.kubeconfig;
  if (kubeconfig) opts.kubeconfig = kubeconfig;
  if (values.context) opts.context = values.context;
  const namespace = values.namespace ?? env.WATCH_NAMESPACE;
  if (namespace) opts.namespace = namespace;
  const leNamespace = values['leader-election-namespace'] ?? env.LEADER_ELECTION_NAMESPACE;
  if (leNamespace) opts.leaderElectionNamespace = leNamespace;
  return opts;
}

/** --kube-api-qps / --kube-api-burst: undefined (no limit) when the qps is absent or 0. Throws on a bad value. */
function kubeApiLimit(
  qps: string | undefined,
  burst: string | undefined,
): { qps: number; burst?: number } | undefined {
  const q = Number(qps ?? '0');
  if (!Number.isFinite(q) || q < 0 || qps?.trim() === '') {
    throw new Error(`--kube-api-qps must be a number >= 0 (0: no limit), got ${JSON.stringify(qps)}`);
  }
  if (burst === undefined) return q > 0 ? { qps: q } : undefined;
  const b = Number(burst);
  if (!Number.isInteger(b) || b < 1) {
    throw new Error(`--kube-api-burst must be an integer >= 1, got ${JSON.stringify(burst)}`);
  }
  if (q === 0) throw new Error('--kube-api-burst needs --kube-api-qps (a limit of requests per second)');
  return { qps: q, burst: b };
}

/**
 * Runs the operator until `signal` aborts (or SIGTERM/SIGINT when no signal is given). Resolves after a
 * graceful shutdown; rejects when the manager fails (lost leadership, a listen error, ...).
 */
export async function runOperator(opts: OperatorOptions = {}): Promise<void> {
  const logger = opts.logger ?? createLogger({ name: 'database-operator', level: opts.logLevel ?? 'info' });
  const mgr = await createManager({
    ...(opts.client ? { client: opts.client } : {}),
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
    fieldManager: FIELD_MANAGER,
    logger,
    ...(opts.syncPeriodMs ? { cache: { resyncPeriodMs: opts.syncPeriodMs } } : {}),
    ...(opts.kubeApi ? { rateLimit: opts.kubeApi } : {}),
    metricsBindAddress: opts.metricsBindAddress ?? '0',
    healthProbeBindAddress: opts.healthProbeBindAddress ?? '0',
    ...(opts.leaderElect
      ? {
          leaderElection: {
            id: opts.leaderElectionId ?? LEADER_ELECTION_ID,
            ...(opts.leaderElectionNamespace ? { namespace: opts.leaderElectionNamespace } : {}),
          },
        }
      : {}),
  });
  // The failover acts on the instances through pods/exec, with the same credentials as the client.
  const exec =
    opts.exec ??
    (opts.client
      ? undefined
      : newPodExecutor(
          await loadConfig({
            ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
            ...(opts.context ? { context: opts.context } : {}),
          }),
          { onRequest: mgr.metrics.restClientObserver() },
        ));
  setupDatabaseController(mgr, {
    ...(opts.maxConcurrentReconciles ? { maxConcurrentReconciles: opts.maxConcurrentReconciles } : {}),
    ...(exec ? { exec } : {}),
    ...(opts.replicationPollMs !== undefined ? { replicationPollMs: opts.replicationPollMs } : {}),
  });
  logger.info(
    {
      namespace: opts.namespace || '(all)',
      leaderElection: opts.leaderElect ? (opts.leaderElectionId ?? LEADER_ELECTION_ID) : false,
    },
    'starting the Database operator',
  );
  const started = mgr.start(opts.signal ? { signal: opts.signal } : { handleSignals: true });
  if (opts.onStarted) {
    // The servers listen first thing in start(); report their addresses once known.
    void mgr.elected.then(() =>
      opts.onStarted?.({
        ...(mgr.metricsAddress ? { metricsAddress: mgr.metricsAddress } : {}),
        ...(mgr.healthProbeAddress ? { healthProbeAddress: mgr.healthProbeAddress } : {}),
      }),
    );
  }
  await started;
  logger.info('the Database operator stopped');
}

if (import.meta.main) {
  let opts: ReturnType<typeof parseOptions>;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    process.exit(2);
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  try {
    await runOperator(opts);
    process.exit(0);
  } catch (err) {
    process.stderr.write(`database-operator: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

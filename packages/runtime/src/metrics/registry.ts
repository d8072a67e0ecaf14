/**
 * Prometheus metrics with controller-runtime's standard names (sigs.k8s.io/controller-runtime/pkg/metrics,
 * pkg/internal/controller/metrics, client-go's workqueue and rest client metrics, leader election).
 *
 * Every manager owns one {@link MetricsRegistry}, backed by its own prom-client `Registry` (never the
 * global one), so that several managers can run in one process (tests) without clashing series.
 *
 * Series:
 *   controller_runtime_reconcile_total{controller,result}            counter, result = success | error | requeue | requeue_after
 *   controller_runtime_reconcile_errors_total{controller}            counter
 *   controller_runtime_terminal_reconcile_errors_total{controller}   counter
 *   controller_runtime_reconcile_panics_total{controller}            counter
 *   controller_runtime_reconcile_time_seconds{controller}            histogram
 *   controller_runtime_max_concurrent_reconciles{controller}         gauge
 *   controller_runtime_active_workers{controller}                    gauge
 *   workqueue_depth{name,controller}                                 gauge
 *   workqueue_adds_total{name,controller}                            counter
 *   workqueue_queue_duration_seconds{name,controller}                histogram
 *   workqueue_work_duration_seconds{name,controller}                 histogram
 *   workqueue_unfinished_work_seconds{name,controller}               gauge (computed on scrape)
 *   workqueue_longest_running_processor_seconds{name,controller}     gauge (computed on scrape)
 *   workqueue_retries_total{name,controller}                         counter
 *   rest_client_requests_total{code,method,host}                     counter
 *   leader_election_master_status{name}                              gauge (1 leader, 0 not)
 *
 * opkit's own series (no controller-runtime equivalent):
 *   opkit_controller_abandoned_reconciles{controller}                gauge: reconciles still running after
 *                                                                    their timeout (their workers moved on)
 *   opkit_controller_abandoned_reconciles_total{controller}          counter: reconciles abandoned so far
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { WorkQueueMetrics } from '../queue/work-queue.ts';

/** controller-runtime's reconcile_time_seconds buckets. */
export const RECONCILE_TIME_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

/** client-go's workqueue latency buckets: 10ns .. 1000s, ×10 each (ExponentialBuckets(10e-9, 10, 12)). */
export const WORKQUEUE_DURATION_BUCKETS: readonly number[] = Array.from({ length: 12 }, (_, i) =>
  Number((1e-8 * 10 ** i).toPrecision(1)),
);

/** The `result` label of controller_runtime_reconcile_total. */
export type ReconcileResultLabel = 'success' | 'error' | 'requeue' | 'requeue_after';

const RESULT_LABELS: readonly ReconcileResultLabel[] = ['success', 'error', 'requeue', 'requeue_after'];

/** What a queue exposes for the on-scrape gauges; {@link WorkQueue} satisfies it. */
export interface QueueProgress {
  unfinishedWorkSeconds(): number;
  longestRunningProcessorSeconds(): number;
}

/** The queue hooks for one named queue, plus `attach` for the on-scrape gauges. */
export interface BoundWorkQueueMetrics extends Required<WorkQueueMetrics> {
  /**
   * Makes `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds` report
   * this queue on each scrape. Returns a function that stops reporting it (its series disappear).
   */
  attach(queue: QueueProgress): () => void;
}

/** One request as the HTTP transport reports it (client/http.ts RequestMetric is assignable). */
export interface RestRequestObservation {
  method: string;
  code: string;
  host: string;
}

export interface MetricsRegistryOptions {
  /** Also collect prom-client's default process and Node.js metrics into this registry. Default false. */
  defaultMetrics?: boolean;
  /** Labels added to every series of this registry. */
  defaultLabels?: Record<string, string>;
}

type ControllerLabel = 'controller';
type QueueLabel = 'name' | 'controller';

export class MetricsRegistry {
  /** The underlying prom-client registry (dedicated to this instance). */
  readonly registry: Registry;

  readonly reconcileTotal: Counter<ControllerLabel | 'result'>;
  readonly reconcileErrors: Counter<ControllerLabel>;
  readonly terminalReconcileErrors: Counter<ControllerLabel>;
  readonly reconcilePanics: Counter<ControllerLabel>;
  readonly reconcileTime: Histogram<ControllerLabel>;
  readonly maxConcurrentReconciles: Gauge<ControllerLabel>;
  readonly activeWorkers: Gauge<ControllerLabel>;
  /**
   * Reconciles that ran past their timeout and have not settled yet: their worker took other keys, so
   * up to maxConcurrentReconciles + this many reconciles run at once (their keys stay locked).
   */
  readonly abandonedReconciles: Gauge<ControllerLabel>;
  readonly abandonedReconcilesTotal: Counter<ControllerLabel>;

  readonly workqueueDepth: Gauge<QueueLabel>;
  readonly workqueueAdds: Counter<QueueLabel>;
  readonly workqueueQueueDuration: Histogram<QueueLabel>;
  readonly workqueueWorkDuration: Histogram<QueueLabel>;
  readonly workqueueUnfinishedWork: Gauge<QueueLabel>;
  readonly workqueueLongestRunningProcessor: Gauge<QueueLabel>;
  readonly workqueueRetries: Counter<QueueLabel>;

  readonly restClientRequests: Counter<'code' | 'method' | 'host'>;
  readonly leaderElectionMasterStatus: Gauge<'name'>;

  /** Queues reported by the on-scrape gauges, by name. */
  readonly #queues = new Map<string, QueueProgress>();
  readonly #controllers = new Set<string>();

  constructor(options: MetricsRegistryOptions = {}) {
    const registry = new Registry();
    this.registry = registry;
    if (options.defaultLabels) registry.setDefaultLabels(options.defaultLabels);
    if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
    const registers = [registry];

    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.terminalReconcileErrors = new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.reconcilePanics = new Counter({
      name: 'controller_runtime_reconcile_panics_total',
      help: 'Total number of reconciliation panics per controller',
      labelNames: ['controller'],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: [...RECONCILE_TIME_BUCKETS],
      registers,
    });
    this.maxConcurrentReconciles = new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers,
    });
    this.activeWorkers = new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    });
    this.abandonedReconciles = new Gauge({
      name: 'opkit_controller_abandoned_reconciles',
      help:
        'Reconciles that ran past their timeout and are still running (their worker moved on; their key ' +
        'stays locked until they end) per controller',
      labelNames: ['controller'],
      registers,
    });
    this.abandonedReconcilesTotal = new Counter({
      name: 'opkit_controller_abandoned_reconciles_total',
      help: 'Total number of reconciles abandoned after their timeout per controller',
      labelNames: ['controller'],
      registers,
    });

    const queueLabels: QueueLabel[] = ['name', 'controller'];
    this.workqueueDepth = new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: queueLabels,
      registers,
    });
    this.workqueueAdds = new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: queueLabels,
      registers,
    });
    this.workqueueQueueDuration = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: queueLabels,
      buckets: [...WORKQUEUE_DURATION_BUCKETS],
      registers,
    });
    this.workqueueWorkDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: queueLabels,
      buckets: [...WORKQUEUE_DURATION_BUCKETS],
      registers,
    });
    const queues = this.#queues;
    this.workqueueUnfinishedWork = new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help:
        'How many seconds of work has been done that is in progress and has not been observed by ' +
        'work_duration. Large values indicate stuck threads. One can deduce the number of stuck ' +
        'threads by observing the rate at which this increases.',
      labelNames: queueLabels,
      registers,
      collect() {
        this.reset();
        for (const [name, q] of queues)
          this.set(
            { name, controller: name },
            safe(() => q.unfinishedWorkSeconds()),
          );
      },
    });
    this.workqueueLongestRunningProcessor = new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames: queueLabels,
      registers,
      collect() {
        this.reset();
        for (const [name, q] of queues) {
          this.set(
            { name, controller: name },
            safe(() => q.longestRunningProcessorSeconds()),
          );
        }
      },
    });
    this.workqueueRetries = new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: queueLabels,
      registers,
    });

    this.restClientRequests = new Counter({
      name: 'rest_client_requests_total',
      help: 'Number of HTTP requests, partitioned by status code, method, and host.',
      labelNames: ['code', 'method', 'host'],
      registers,
    });
    this.leaderElectionMasterStatus = new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "name" is the string used to identify the lease.',
      labelNames: ['name'],
      registers,
    });
  }

  /** Prometheus text exposition of every series in this registry (for GET /metrics). */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** The Content-Type header to serve {@link text} with. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Registers a controller name: creates its series at zero (so dashboards see them before the first
   * reconcile) and sets controller_runtime_max_concurrent_reconciles. Throws if the name is already
   * registered here, unless `skipNameValidation` (controller names must be unique per manager since
   * they label the metrics).
   */
  registerController(name: string, maxConcurrentReconciles: number, skipNameValidation = false): void {
    if (this.#controllers.has(name) && !skipNameValidation) {
      throw new Error(
        `controller with name "${name}" already exists: controller names must be unique (they label metrics and logs)`,
      );
    }
    this.#controllers.add(name);
    const labels = { controller: name };
    for (const result of RESULT_LABELS) this.reconcileTotal.inc({ controller: name, result }, 0);
    this.reconcileErrors.inc(labels, 0);
    this.terminalReconcileErrors.inc(labels, 0);
    this.reconcilePanics.inc(labels, 0);
    this.activeWorkers.set(labels, 0);
    this.abandonedReconciles.set(labels, 0);
    this.abandonedReconcilesTotal.inc(labels, 0);
    this.maxConcurrentReconciles.set(labels, maxConcurrentReconciles);
  }

  /** Forgets a controller name so that it may be registered again (its series stay). */
  unregisterController(name: string): void {
    this.#controllers.delete(name);
  }

  /** Records one finished reconcile. */
  observeReconcile(controller: string, result: ReconcileResultLabel, seconds: number): void {
    this.reconcileTotal.inc({ controller, result });
    this.reconcileTime.observe({ controller }, seconds);
  }

  /** Hooks for a WorkQueue named `name` (the controller name): see {@link workQueueMetrics}. */
  workQueueMetrics(name: string): BoundWorkQueueMetrics {
    const labels = { name, controller: name };
    const depth = this.workqueueDepth;
    const adds = this.workqueueAdds;
    const queued = this.workqueueQueueDuration;
    const work = this.workqueueWorkDuration;
    const retries = this.workqueueRetries;
    const queues = this.#queues;
    // Create the series at zero, like client-go does when a queue is made.
    depth.set(labels, 0);
    adds.inc(labels, 0);
    retries.inc(labels, 0);
    return {
      onAdd: () => adds.inc(labels),
      onDepth: (n: number) => depth.set(labels, n),
      onGet: (ms: number) => queued.observe(labels, ms / 1000),
      onDone: (ms: number) => work.observe(labels, ms / 1000),
      onRetry: () => retries.inc(labels),
      attach(queue: QueueProgress): () => void {
        queues.set(name, queue);
        return () => {
          if (queues.get(name) === queue) queues.delete(name);
        };
      },
    };
  }

  /**
   * A callback for the HTTP transport's `onRequest` (TransportOptions): counts
   * rest_client_requests_total{code,method,host}.
   */
  restClientObserver(): (m: RestRequestObservation) => void {
    const counter = this.restClientRequests;
    return (m) => counter.inc({ code: m.code, method: m.method, host: m.host });
  }

  /** Sets leader_election_master_status{name} (1 while holding the lease named `name`). */
  setLeader(name: string, isLeader: boolean): void {
    this.leaderElectionMasterStatus.set({ name }, isLeader ? 1 : 0);
  }
}

/**
 * The WorkQueueMetrics hooks for the queue named `name` (controller-runtime labels both `name` and
 * `controller` with the controller name). Pass the result as the queue's `metrics` option, then
 * `attach(queue)` so the unfinished-work and longest-running gauges are computed on each scrape.
 */
export function workQueueMetrics(registry: MetricsRegistry, name: string): BoundWorkQueueMetrics {
  return registry.workQueueMetrics(name);
}

function safe(fn: () => number): number {
  try {
    const v = fn();
    return Number.isFinite(v) ? v : 0;
  } catch {
    return 0;
  }
}

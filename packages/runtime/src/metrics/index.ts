/** @opkit/runtime metrics: a per-manager Prometheus registry with controller-runtime's series names. */
export {
  type BoundWorkQueueMetrics,
  MetricsRegistry,
  type MetricsRegistryOptions,
  type QueueProgress,
  RECONCILE_TIME_BUCKETS,
  type ReconcileResultLabel,
  type RestRequestObservation,
  WORKQUEUE_DURATION_BUCKETS,
  workQueueMetrics,
} from './registry.ts';

/** @opkit/runtime leader election: client-go's leaderelection on a coordination.k8s.io/v1 Lease. */
export {
  defaultIdentity,
  type LeaderCallbacks,
  LeaderElector,
  type LeaderElectorOptions,
} from './leader-elector.ts';
export {
  type LeaderElectionRecord,
  LeaseLock,
  type LeaseLockOptions,
  type LeaseObject,
  LeaseResource,
  leaseSpecFromRecord,
  type ResourceLock,
  recordFromLease,
  toMicroTime,
} from './lease-lock.ts';
export {
  CLOCK_SKEW_MARGIN_FACTOR,
  clockSkewMarginMs,
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  JITTER_FACTOR,
  LeaderElectionConfigError,
  validateLeaderElectionTimings,
} from './timings.ts';

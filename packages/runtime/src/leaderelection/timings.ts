/**
 * Leader election timings: the defaults (client-go's) and their validation. Besides what client-go
 * checks, renewDeadline + retryPeriod + a clock-skew margin must be below leaseDuration, so that a
 * leader has stopped well before any follower may take over (see leader-elector.ts).
 */

export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
/** client-go's JitterFactor: renewDeadline must exceed retryPeriod times this. */
export const JITTER_FACTOR = 1.2;
/** Share of leaseDuration kept free for clocks that tick at different rates and late timers: 5 %. */
export const CLOCK_SKEW_MARGIN_FACTOR = 0.05;

/** Leader election timings that are invalid or could let two candidates lead at once. */
export class LeaderElectionConfigError extends RangeError {
  /** The option names at fault, e.g. ['renewDeadlineMs', 'retryPeriodMs', 'leaseDurationMs']. */
  readonly fields: readonly string[];
  constructor(message: string, fields: readonly string[]) {
    super(message);
    this.name = 'LeaderElectionConfigError';
    this.fields = [...fields];
  }
}

/** The margin validation keeps between renewDeadline + retryPeriod and leaseDuration. */
export function clockSkewMarginMs(leaseMs: number): number {
  return Math.ceil(leaseMs * CLOCK_SKEW_MARGIN_FACTOR);
}

/**
 * Throws a LeaderElectionConfigError on timings client-go would reject, and on timings where
 * renewDeadline + retryPeriod + the clock-skew margin is not below leaseDuration.
 */
export function validateLeaderElectionTimings(leaseMs: number, renewMs: number, retryMs: number): void {
  const given = { leaseDurationMs: leaseMs, renewDeadlineMs: renewMs, retryPeriodMs: retryMs };
  const bad = Object.entries(given)
    .filter(([, v]) => !(Number.isFinite(v) && v > 0))
    .map(([k]) => k);
  if (bad.length > 0) {
    throw new LeaderElectionConfigError(
      `leader election: ${bad.join(', ')} must be a positive number of milliseconds`,
      bad,
    );
  }
  if (!(renewMs > JITTER_FACTOR * retryMs)) {
    throw new LeaderElectionConfigError(
      `leader election: renewDeadlineMs (${renewMs}) must be greater than retryPeriodMs (${retryMs}) * ${JITTER_FACTOR}: raise renewDeadlineMs or lower retryPeriodMs`,
      ['renewDeadlineMs', 'retryPeriodMs'],
    );
  }
  const margin = clockSkewMarginMs(leaseMs);
  if (!(renewMs + retryMs + margin < leaseMs)) {
    throw new LeaderElectionConfigError(
      `leader election: renewDeadlineMs (${renewMs}) + retryPeriodMs (${retryMs}) + a clock-skew margin of ${margin} ms (5% of leaseDurationMs) must be less than leaseDurationMs (${leaseMs}), or two replicas could lead at once: lower renewDeadlineMs or retryPeriodMs, or raise leaseDurationMs`,
      ['renewDeadlineMs', 'retryPeriodMs', 'leaseDurationMs'],
    );
  }
}

/** The typed errors `Manager.start()` rejects with. */
import { messageOf } from '../util/errors.ts';

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

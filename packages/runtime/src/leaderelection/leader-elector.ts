/**
 * Leader election with client-go's semantics (k8s.io/client-go/tools/leaderelection).
 *
 * - A candidate acquires the lock when nobody holds it (holderIdentity '') or the holder's lease has
 *   expired. Expiry is judged by THIS process's clock: the record counts as renewed when we observe it
 *   change (any field), and it expires `leaseDurationSeconds` after that observation. Timestamps
 *   written by other processes are never compared with our clock, so clock skew between replicas does
 *   not matter (only the rate at which clocks tick).
 * - Every write is optimistic: the Lease is created if missing, otherwise updated with the
 *   resourceVersion we last read; a conflict just means "try again at the next retry".
 * - Candidates try every `retryPeriod`; one that sees a foreign lease also wakes up exactly when that
 *   lease is due to expire, so a takeover happens at most `leaseDuration + retryPeriod` after the
 *   holder's last renewal was written (plus request latency).
 * - The leader renews every `retryPeriod`. A renewal round retries every `retryPeriod` until
 *   `renewDeadline` has passed since the round began; then leadership is lost (onStoppedLeading).
 *   Because renewDeadline < leaseDuration, a leader gives up before anyone else may take over.
 * - On cancellation with `releaseOnCancel`, the leader writes holderIdentity '' and
 *   leaseDurationSeconds 1, so that another candidate takes over at its next try instead of waiting
 *   for the lease to expire.
 * - leaseTransitions is incremented whenever the holder changes.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { type Clock, realClock, sleep, type TimerHandle } from '../util/clock.ts';
import type { LeaderElectionRecord, ResourceLock } from './lease-lock.ts';

export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
/** client-go's JitterFactor: renewDeadline must exceed retryPeriod times this. */
export const JITTER_FACTOR = 1.2;

export interface LeaderCallbacks {
  /**
   * This candidate became the leader. `signal` aborts when leadership ends (lost, released, or the
   * elector cancelled). May be async; its result is not awaited and its errors are only logged.
   */
  onStartedLeading?: (signal: AbortSignal) => void | Promise<void>;
  /**
   * Leadership ended: renewal failed for renewDeadline, or the elector was cancelled (after the lease
   * was released when `releaseOnCancel`). Only called after onStartedLeading.
   */
  onStoppedLeading?: () => void;
  /** A (different) holder was observed, including this candidate itself when it acquires. */
  onNewLeader?: (identity: string) => void;
}

export interface LeaderElectorOptions extends LeaderCallbacks {
  lock: ResourceLock;
  /** How long a lease is valid without renewal; non-leaders wait this long to take over. Default 15 s. */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a renewal before it gives up leadership. Default 10 s. */
  renewDeadlineMs?: number;
  /** Wait between attempts (acquiring and renewing). Default 2 s. */
  retryPeriodMs?: number;
  /** Release the lease when cancelled while leading, so another candidate takes over at once. Default false. */
  releaseOnCancel?: boolean;
  /** Names the lease in metrics (leader_election_master_status{name}). Default: the lock's description. */
  name?: string;
  /** Called with true on becoming leader and false when leadership ends (e.g. MetricsRegistry.setLeader). */
  onLeaderStatus?: (name: string, isLeader: boolean) => void;
  clock?: Clock;
  logger?: Logger;
}

/** hostname + '_' + a random UUID: unique per process, and tells which pod holds the lease. */
export function defaultIdentity(): string {
  return `${hostname()}_${crypto.randomUUID()}`;
}

/** Throws on a configuration client-go would reject. */
export function validateLeaderElectionTimings(leaseMs: number, renewMs: number, retryMs: number): void {
  if (!(leaseMs > 0 && renewMs > 0 && retryMs > 0)) {
    throw new RangeError('leader election: leaseDuration, renewDeadline and retryPeriod must be positive');
  }
  if (!(leaseMs > renewMs)) {
    throw new RangeError('leader election: leaseDuration must be greater than renewDeadline');
  }
  if (!(renewMs > JITTER_FACTOR * retryMs)) {
    throw new RangeError(`leader election: renewDeadline must be greater than retryPeriod*${JITTER_FACTOR}`);
  }
}

function recordKey(r: LeaderElectionRecord): string {
  return JSON.stringify([
    r.holderIdentity,
    r.leaseDurationSeconds,
    r.acquireTime,
    r.renewTime,
    r.leaseTransitions,
  ]);
}

/**
 * Runs one candidate. `run(signal)` campaigns until it leads, then renews until leadership is lost or
 * `signal` aborts; it never rejects. Run it again (with a new signal) to campaign again.
 */
export class LeaderElector {
  readonly lock: ResourceLock;
  readonly name: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly releaseOnCancel: boolean;
  readonly #callbacks: LeaderCallbacks;
  readonly #onLeaderStatus: ((name: string, isLeader: boolean) => void) | undefined;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;

  #observedRecord: LeaderElectionRecord | undefined;
  #observedKey = '';
  /** Our clock's time when #observedRecord was seen to change. */
  #observedTime = 0;
  #reportedLeader = '';
  #leading = false;
  #running = false;

  constructor(opts: LeaderElectorOptions) {
    this.lock = opts.lock;
    this.leaseDurationMs = opts.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.retryPeriodMs = opts.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    validateLeaderElectionTimings(this.leaseDurationMs, this.renewDeadlineMs, this.retryPeriodMs);
    this.releaseOnCancel = opts.releaseOnCancel ?? false;
    this.name = opts.name ?? opts.lock.describe();
    this.#callbacks = {
      ...(opts.onStartedLeading ? { onStartedLeading: opts.onStartedLeading } : {}),
      ...(opts.onStoppedLeading ? { onStoppedLeading: opts.onStoppedLeading } : {}),
      ...(opts.onNewLeader ? { onNewLeader: opts.onNewLeader } : {}),
    };
    this.#onLeaderStatus = opts.onLeaderStatus;
    this.#clock = opts.clock ?? realClock;
    this.#log = opts.logger?.child({ lease: this.lock.describe(), identity: this.lock.identity });
  }

  get identity(): string {
    return this.lock.identity;
  }

  /** True while this candidate leads: between onStartedLeading and onStoppedLeading. */
  isLeader(): boolean {
    return this.#leading && this.#observedRecord?.holderIdentity === this.lock.identity;
  }

  /** The holder last observed ('' if none or released). */
  getLeader(): string {
    return this.#observedRecord?.holderIdentity ?? '';
  }

  /** The record last observed (a copy), and when (by our clock) it was observed to change. */
  observed(): { record: LeaderElectionRecord; observedTime: number } | undefined {
    return this.#observedRecord
      ? { record: { ...this.#observedRecord }, observedTime: this.#observedTime }
      : undefined;
  }

  /**
   * Campaigns, leads, and returns when leadership has ended (or `signal` aborted before it began).
   * Resolves with how it ended: 'cancelled' (signal aborted; released if releaseOnCancel) or 'lost'.
   */
  async run(signal: AbortSignal): Promise<'cancelled' | 'lost'> {
    if (this.#running) throw new Error(`leader elector ${this.name}: already running`);
    this.#running = true;
    this.#reportStatus(false);
    try {
      if (!(await this.#acquire(signal))) return 'cancelled';
      const leading = new AbortController();
      this.#leading = true;
      this.#reportStatus(true);
      this.#log?.info('became leader');
      this.#startLeading(leading.signal);
      const outcome = await this.#renewLoop(signal);
      leading.abort();
      if (outcome === 'lost')
        this.#log?.error({ renewDeadlineMs: this.renewDeadlineMs }, 'leader election lost');
      else if (this.releaseOnCancel) await this.release();
      this.#leading = false;
      this.#reportStatus(false);
      try {
        this.#callbacks.onStoppedLeading?.();
      } catch (err) {
        this.#log?.error({ err }, 'onStoppedLeading failed');
      }
      return outcome;
    } finally {
      this.#leading = false;
      this.#running = false;
    }
  }

  #startLeading(signal: AbortSignal): void {
    const cb = this.#callbacks.onStartedLeading;
    if (!cb) return;
    try {
      Promise.resolve(cb(signal)).catch((err: unknown) =>
        this.#log?.error({ err }, 'onStartedLeading failed'),
      );
    } catch (err) {
      this.#log?.error({ err }, 'onStartedLeading failed');
    }
  }

  /** Tries until acquired (true) or cancelled (false). */
  async #acquire(signal: AbortSignal): Promise<boolean> {
    this.#log?.info('attempting to acquire leader lease');
    for (;;) {
      if (signal.aborted) return false;
      const acquired = await this.#tryAcquireOrRenew(signal);
      this.#maybeReportTransition();
      if (signal.aborted) return false;
      if (acquired) {
        this.#log?.info('successfully acquired lease');
        return true;
      }
      // Wake up at the next retry, or exactly when the observed lease expires if that is sooner.
      let wait = this.retryPeriodMs;
      const record = this.#observedRecord;
      if (record?.holderIdentity && record.holderIdentity !== this.lock.identity) {
        const expiresIn = this.#observedTime + record.leaseDurationSeconds * 1000 - this.#clock.now();
        if (expiresIn >= 0 && expiresIn < wait) wait = expiresIn;
      }
      if (!(await sleep(wait, signal, this.#clock))) return false;
    }
  }

  /** Renews until a round fails for renewDeadline ('lost') or `signal` aborts ('cancelled'). */
  async #renewLoop(signal: AbortSignal): Promise<'cancelled' | 'lost'> {
    for (;;) {
      // The lease was just acquired or renewed: the next round begins a retryPeriod later.
      if (!(await sleep(this.retryPeriodMs, signal, this.#clock))) return 'cancelled';
      const round = new AbortController();
      const timer: TimerHandle = this.#clock.setTimeout(
        () => round.abort(new Error(`renewal did not succeed within ${this.renewDeadlineMs} ms`)),
        this.renewDeadlineMs,
      );
      const onAbort = (): void => round.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      let renewed = false;
      try {
        for (;;) {
          renewed = await this.#tryAcquireOrRenew(round.signal);
          this.#maybeReportTransition();
          if (renewed || round.signal.aborted) break;
          if (!(await sleep(this.retryPeriodMs, round.signal, this.#clock))) break;
        }
      } finally {
        this.#clock.clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
      if (signal.aborted) return 'cancelled';
      if (!renewed) return 'lost';
    }
  }

  /** One attempt (client-go's tryAcquireOrRenew). Never throws. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = this.#clock.now();
    const record: LeaderElectionRecord = {
      holderIdentity: this.lock.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseDurationMs / 1000)),
      renewTime: now,
      acquireTime: now,
      leaseTransitions: 0,
    };

    // Fast path: the leader updates optimistically from the record it wrote last.
    const observed = this.#observedRecord;
    if (observed && this.#holds(observed) && this.#isLeaseValid(now)) {
      const renewal: LeaderElectionRecord = {
        ...record,
        leaseTransitions: observed.leaseTransitions,
        ...(observed.acquireTime !== undefined ? { acquireTime: observed.acquireTime } : {}),
      };
      try {
        await this.lock.update(renewal, signal);
        this.#setObserved(renewal, now);
        return true;
      } catch (err) {
        if (signal.aborted) return false;
        this.#log?.debug({ err }, 'fast-path renewal failed, re-reading the lease');
      }
    }

    // 1. Read (or create) the lock.
    let old: LeaderElectionRecord | undefined;
    try {
      old = await this.lock.get(signal);
    } catch (err) {
      this.#logAttemptError(err, signal, 'error retrieving lease');
      return false;
    }
    if (old === undefined) {
      try {
        await this.lock.create(record, signal);
      } catch (err) {
        this.#logAttemptError(err, signal, 'error initially creating lease');
        return false;
      }
      this.#setObserved(record, this.#clock.now());
      return true;
    }

    // 2. The record exists: note whether it changed, and respect a valid foreign lease.
    if (recordKey(old) !== this.#observedKey) this.#setObserved(old, this.#clock.now());
    if (old.holderIdentity && this.#isLeaseValid(now) && !this.#holds(old)) {
      this.#log?.debug(
        { holder: old.holderIdentity },
        'lease is held by another candidate and has not expired',
      );
      return false;
    }

    // 3. Take it over or renew it.
    if (this.#holds(old)) {
      record.leaseTransitions = old.leaseTransitions;
      if (old.acquireTime !== undefined) record.acquireTime = old.acquireTime;
    } else {
      record.leaseTransitions = old.leaseTransitions + 1;
    }
    try {
      await this.lock.update(record, signal);
    } catch (err) {
      this.#logAttemptError(err, signal, 'failed to update lease');
      return false;
    }
    this.#setObserved(record, this.#clock.now());
    return true;
  }

  /**
   * Gives the lease up if this candidate still holds it (client-go's release()): writes holderIdentity
   * '' and leaseDurationSeconds 1, so that other candidates take over at their next try. Called by
   * `run` on cancellation when `releaseOnCancel`; callers that stop their own work first (the manager)
   * call it themselves after `run` returned. Resolves false if the write failed. Never throws.
   */
  async release(): Promise<boolean> {
    const ctl = new AbortController();
    const timer = this.#clock.setTimeout(
      () => ctl.abort(new Error('lease release timed out')),
      this.renewDeadlineMs,
    );
    try {
      const current = await this.lock.get(ctl.signal);
      if (!current || current.holderIdentity !== this.lock.identity) {
        this.#log?.info('lease no longer held by us, nothing to release');
        return true;
      }
      const now = this.#clock.now();
      const released: LeaderElectionRecord = {
        holderIdentity: '',
        leaseDurationSeconds: 1,
        renewTime: now,
        acquireTime: now,
        leaseTransitions: current.leaseTransitions,
      };
      await this.lock.update(released, ctl.signal);
      this.#setObserved(released, this.#clock.now());
      this.#log?.info('released leader lease');
      return true;
    } catch (err) {
      this.#log?.error({ err }, 'failed to release lease');
      return false;
    } finally {
      this.#clock.clearTimeout(timer);
    }
  }

  #holds(record: LeaderElectionRecord): boolean {
    return record.holderIdentity === this.lock.identity;
  }

  #isLeaseValid(now: number): boolean {
    const record = this.#observedRecord;
    if (!record) return false;
    return this.#observedTime + record.leaseDurationSeconds * 1000 > now;
  }

  #setObserved(record: LeaderElectionRecord, at: number): void {
    this.#observedRecord = { ...record };
    this.#observedKey = recordKey(record);
    this.#observedTime = at;
  }

  #maybeReportTransition(): void {
    const holder = this.#observedRecord?.holderIdentity ?? '';
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    if (!holder) return;
    this.#log?.info({ leader: holder }, 'new leader observed');
    const cb = this.#callbacks.onNewLeader;
    if (!cb) return;
    queueMicrotask(() => {
      try {
        cb(holder);
      } catch (err) {
        this.#log?.error({ err }, 'onNewLeader failed');
      }
    });
  }

  #reportStatus(leading: boolean): void {
    try {
      this.#onLeaderStatus?.(this.name, leading);
    } catch {
      // a metrics hook must not break leader election
    }
  }

  #logAttemptError(err: unknown, signal: AbortSignal, msg: string): void {
    if (signal.aborted) return;
    this.#log?.warn({ err }, msg);
  }
}

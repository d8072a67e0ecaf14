/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's protocol
 * (k8s.io/client-go/tools/leaderelection) and a stricter leader side, so that two candidates can never
 * lead at the same moment (given clocks that tick at about the same rate).
 *
 * All durations are measured on a monotonic clock (`performance.now()` by default): a changed system
 * time neither expires nor extends a lease. Timestamps written into the Lease (acquireTime, renewTime)
 * come from the wall clock and are informational: no candidate compares them with its own clock.
 *
 * - Followers (client-go's semantics): a candidate acquires the lock when nobody holds it
 *   (holderIdentity '') or the holder's lease has expired. The record counts as renewed when this
 *   candidate observes it change (any field), and expires `leaseDurationSeconds` after that
 *   observation (client-go's observedTime, on the follower's local clock, not the lease's renewTime).
 *   Candidates try every `retryPeriod`; one that sees a foreign lease also wakes up exactly when it is
 *   due to expire, so a takeover happens at most `leaseDuration + retryPeriod` after the holder's last
 *   renewal was written (plus request latency). A released Lease (holderIdentity '') is taken over at
 *   the follower's next try, so within `retryPeriod`.
 * - Every write is optimistic: the Lease is created if missing, otherwise updated with the
 *   resourceVersion last read; a conflict just means "try again at the next retry". So a follower's
 *   takeover succeeds only if the Lease did not change since it read it.
 * - The leader (stricter than client-go): it leads until `renewDeadline` after the START of its last
 *   successful acquire or renewal, and not a moment longer. Renewals are attempted every
 *   `retryPeriod` (counted from the start of the last successful one), each bounded by that deadline.
 *   A leader that reads the Lease and finds it held by another candidate steps down at once instead
 *   of retrying until the deadline. `isLeader()` compares the clock with the deadline on every call,
 *   so after a process stall it answers false before any timer has run; the `leading` signal aborts
 *   from a timer at the deadline (late only by as much as the event loop was blocked, during which
 *   this process ran nothing else either).
 *   Why that cannot overlap: a follower first observes a renewal after it was written, which is
 *   after the leader sent it, and waits a full leaseDuration from that observation; the leader stops
 *   renewDeadline after sending it, and validation demands renewDeadline + retryPeriod + a 5 %
 *   clock-rate margin < leaseDuration.
 * - On cancellation with `releaseOnCancel`, the leader writes holderIdentity '' and
 *   leaseDurationSeconds 1, so that another candidate takes over at its next try instead of waiting
 *   for the lease to expire.
 * - leaseTransitions is incremented whenever the holder changes.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { type Clock, monotonicClock, sleep, type TimerHandle } from '../util/clock.ts';
import type { LeaderElectionRecord, ResourceLock } from './lease-lock.ts';
import {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  validateLeaderElectionTimings,
} from './timings.ts';

export interface LeaderCallbacks {
  /**
   * This candidate became the leader. `signal` aborts when leadership ends: renewDeadline after the
   * last successful renewal at the latest, at once when another holder is observed, or when the
   * elector is cancelled. May be async; its result is not awaited and its errors are only logged.
   */
  onStartedLeading?: (signal: AbortSignal) => void | Promise<void>;
  /**
   * Leadership ended: not renewed within renewDeadline, taken over, or the elector was cancelled
   * (after the lease was released when `releaseOnCancel`). Only called after onStartedLeading.
   */
  onStoppedLeading?: () => void;
  /** A (different) holder was observed, including this candidate itself when it acquires. */
  onNewLeader?: (identity: string) => void;
}

export interface LeaderElectorOptions extends LeaderCallbacks {
  lock: ResourceLock;
  /** How long a lease is valid without renewal; non-leaders wait this long to take over. Default 15 s. */
  leaseDurationMs?: number;
  /** How long after its last successful renewal the leader leads at most. Default 10 s. */
  renewDeadlineMs?: number;
  /** Wait between attempts (acquiring and renewing). Default 2 s. */
  retryPeriodMs?: number;
  /** Release the lease when cancelled while leading, so another candidate takes over at its next try. */
  releaseOnCancel?: boolean;
  /** Names the lease in metrics (leader_election_master_status{name}). Default: the lock's description. */
  name?: string;
  /** Called with true on becoming leader and false when leadership ends (e.g. MetricsRegistry.setLeader). */
  onLeaderStatus?: (name: string, isLeader: boolean) => void;
  /** Timers and elapsed time (lease expiry, the renew deadline). Default: the monotonic clock. */
  clock?: Clock;
  /**
   * Epoch milliseconds for the acquireTime / renewTime written into the Lease (informational only).
   * Default: `clock.now()` when a clock is given (a FakeClock in tests), else Date.now().
   */
  wallClock?: () => number;
  logger?: Logger;
}

/** hostname + '_' + a random UUID: unique per process, and tells which pod holds the lease. */
export function defaultIdentity(): string {
  return `${hostname()}_${crypto.randomUUID()}`;
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

/** One attempt's result: written; failed (retry); or the lease is validly held by someone else. */
type Attempt = 'ok' | 'failed' | 'held';

/** One period of leadership. */
interface Term {
  ctl: AbortController;
  outcome?: 'cancelled' | 'lost';
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
  readonly #wallClock: () => number;
  readonly #log: Logger | undefined;

  #observedRecord: LeaderElectionRecord | undefined;
  #observedKey = '';
  /** Our clock's time when #observedRecord was seen to change. */
  #observedTime = 0;
  #reportedLeader = '';
  /** The current term while leading. */
  #term: Term | undefined;
  /** While leading: the clock time at which leadership ends unless renewed before. */
  #leadingUntil = Number.NEGATIVE_INFINITY;
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
    const clock = opts.clock;
    this.#clock = clock ?? monotonicClock;
    this.#wallClock = opts.wallClock ?? (clock ? () => clock.now() : Date.now);
    this.#log = opts.logger?.child({ lease: this.lock.describe(), identity: this.lock.identity });
  }

  get identity(): string {
    return this.lock.identity;
  }

  /**
   * True while this candidate leads. Computed from the clock on every call: false from the moment
   * renewDeadline has passed since the last successful renewal, even before the timer that aborts
   * the `leading` signal has run (e.g. right after the event loop was blocked).
   */
  isLeader(): boolean {
    const term = this.#term;
    return (
      term !== undefined &&
      !term.ctl.signal.aborted &&
      this.#clock.now() < this.#leadingUntil &&
      this.#observedRecord?.holderIdentity === this.lock.identity
    );
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
   * Resolves with how it ended: 'cancelled' (signal aborted; released if releaseOnCancel) or 'lost'
   * (not renewed within renewDeadline, or taken over).
   */
  async run(signal: AbortSignal): Promise<'cancelled' | 'lost'> {
    if (this.#running) throw new Error(`leader elector ${this.name}: already running`);
    this.#running = true;
    this.#reportStatus(false);
    try {
      const acquiredAt = await this.#acquire(signal);
      if (acquiredAt === undefined) return 'cancelled';
      const outcome = await this.#lead(acquiredAt, signal);
      if (outcome === 'cancelled' && this.releaseOnCancel) await this.release();
      try {
        this.#callbacks.onStoppedLeading?.();
      } catch (err) {
        this.#log?.error({ err }, 'onStoppedLeading failed');
      }
      return outcome;
    } finally {
      this.#term = undefined;
      this.#leadingUntil = Number.NEGATIVE_INFINITY;
      this.#running = false;
    }
  }

  /** One term: from acquisition (an attempt that began at `acquiredAt`) until it ends. */
  async #lead(acquiredAt: number, signal: AbortSignal): Promise<'cancelled' | 'lost'> {
    const term: Term = { ctl: new AbortController() };
    this.#term = term;
    let deadline: TimerHandle | undefined;
    const extend = (renewedAt: number): void => {
      this.#leadingUntil = renewedAt + this.renewDeadlineMs;
      if (deadline !== undefined) this.#clock.clearTimeout(deadline);
      deadline = this.#clock.setTimeout(
        () => this.#endTerm(term, 'lost', `not renewed within renewDeadlineMs (${this.renewDeadlineMs})`),
        this.#leadingUntil - this.#clock.now(),
      );
    };
    const onCancel = (): void => this.#endTerm(term, 'cancelled', 'leader election cancelled');
    extend(acquiredAt);
    this.#reportStatus(true);
    this.#log?.info('became leader');
    this.#startLeading(term.ctl.signal);
    signal.addEventListener('abort', onCancel, { once: true });
    if (signal.aborted) onCancel();
    try {
      await this.#renewLoop(acquiredAt, term, extend);
    } finally {
      signal.removeEventListener('abort', onCancel);
      if (deadline !== undefined) this.#clock.clearTimeout(deadline);
      this.#endTerm(term, 'lost', 'renewal loop ended');
    }
    return term.outcome ?? 'lost';
  }

  /** Ends `term` at once (idempotent): aborts `leading`, reports not leading. */
  #endTerm(term: Term, outcome: 'cancelled' | 'lost', why: string): void {
    if (term.outcome !== undefined) return;
    term.outcome = outcome;
    if (this.#term === term) this.#leadingUntil = Number.NEGATIVE_INFINITY;
    term.ctl.abort(new Error(`leadership of lease ${this.lock.describe()} ended: ${why}`));
    this.#reportStatus(false);
    if (outcome === 'lost') {
      this.#log?.error({ renewDeadlineMs: this.renewDeadlineMs, reason: why }, 'leader election lost');
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

  /**
   * Tries until acquired or cancelled (undefined). Resolves with the clock time at which the
   * successful attempt began: the lease counts as renewed from then, not from when the answer came.
   */
  async #acquire(signal: AbortSignal): Promise<number | undefined> {
    this.#log?.info('attempting to acquire leader lease');
    for (;;) {
      if (signal.aborted) return undefined;
      const start = this.#clock.now();
      const result = await this.#boundedAttempt(start, signal);
      if (signal.aborted) return undefined;
      if (result === 'ok') {
        this.#log?.info('successfully acquired lease');
        return start;
      }
      // Wake up at the next retry, or exactly when the observed lease expires if that is sooner.
      let wait = this.retryPeriodMs;
      const record = this.#observedRecord;
      if (record?.holderIdentity && record.holderIdentity !== this.lock.identity) {
        const expiresIn = this.#observedTime + record.leaseDurationSeconds * 1000 - this.#clock.now();
        if (expiresIn >= 0 && expiresIn < wait) wait = expiresIn;
      }
      if (!(await sleep(wait, signal, this.#clock))) return undefined;
    }
  }

  /**
   * Renews until the term ends. Attempts begin a retryPeriod after the start of the last successful
   * one (and a retryPeriod apart while failing); the term's deadline timer ends it meanwhile.
   */
  async #renewLoop(acquiredAt: number, term: Term, extend: (renewedAt: number) => void): Promise<void> {
    const stop = term.ctl.signal;
    let next = acquiredAt + this.retryPeriodMs;
    for (;;) {
      if (!(await sleep(next - this.#clock.now(), stop, this.#clock))) return;
      const start = this.#clock.now();
      // After a stall the deadline timer may not have run yet: the deadline holds regardless.
      if (start >= this.#leadingUntil) {
        this.#endTerm(term, 'lost', `not renewed within renewDeadlineMs (${this.renewDeadlineMs})`);
        return;
      }
      const result = await this.#boundedAttempt(start, stop);
      if (stop.aborted) return;
      if (result === 'held') {
        this.#endTerm(term, 'lost', `the lease is held by ${this.getLeader()}`);
        return;
      }
      if (result === 'ok') {
        if (this.#clock.now() >= this.#leadingUntil) {
          // Answered after the deadline passed (a stall): the term is over, however the write went.
          this.#endTerm(term, 'lost', `not renewed within renewDeadlineMs (${this.renewDeadlineMs})`);
          return;
        }
        extend(start);
      }
      next = start + this.retryPeriodMs;
    }
  }

  /**
   * One attempt, its requests aborted with `signal` or after max(renewDeadline / 2, 1 s) (client-go's
   * NewFromKubeconfig timeout: one hung request must not use up the whole renew deadline).
   */
  async #boundedAttempt(start: number, signal: AbortSignal): Promise<Attempt> {
    const ctl = new AbortController();
    const ms = Math.min(this.renewDeadlineMs, Math.max(this.renewDeadlineMs / 2, 1_000));
    const timer = this.#clock.setTimeout(
      () => ctl.abort(new Error(`lease request timed out after ${ms} ms`)),
      ms,
    );
    const onAbort = (): void => ctl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await this.#tryAcquireOrRenew(start, ctl.signal);
      this.#maybeReportTransition();
      return result;
    } finally {
      this.#clock.clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** One attempt (client-go's tryAcquireOrRenew), begun at `now` by our clock. Never throws. */
  async #tryAcquireOrRenew(now: number, signal: AbortSignal): Promise<Attempt> {
    const wallNow = this.#wallClock();
    const record: LeaderElectionRecord = {
      holderIdentity: this.lock.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseDurationMs / 1000)),
      renewTime: wallNow,
      acquireTime: wallNow,
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
        return 'ok';
      } catch (err) {
        if (signal.aborted) return 'failed';
        this.#log?.debug({ err }, 'fast-path renewal failed, re-reading the lease');
      }
    }

    // 1. Read (or create) the lock.
    let old: LeaderElectionRecord | undefined;
    try {
      old = await this.lock.get(signal);
    } catch (err) {
      this.#logAttemptError(err, signal, 'error retrieving lease');
      return 'failed';
    }
    if (old === undefined) {
      try {
        await this.lock.create(record, signal);
      } catch (err) {
        this.#logAttemptError(err, signal, 'error initially creating lease');
        return 'failed';
      }
      this.#setObserved(record, this.#clock.now());
      return 'ok';
    }

    // 2. The record exists: note whether it changed, and respect a valid foreign lease.
    if (recordKey(old) !== this.#observedKey) this.#setObserved(old, this.#clock.now());
    if (old.holderIdentity && this.#isLeaseValid(now) && !this.#holds(old)) {
      this.#log?.debug(
        { holder: old.holderIdentity },
        'lease is held by another candidate and has not expired',
      );
      return 'held';
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
      return 'failed';
    }
    this.#setObserved(record, this.#clock.now());
    return 'ok';
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
      const now = this.#wallClock();
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

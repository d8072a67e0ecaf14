/**
 * An events.k8s.io/v1 event recorder that aggregates repeats the way client-go's new events library
 * (k8s.io/client-go/tools/events) does.
 *
 * - The first occurrence of an event creates an Event named `<regarding name>.<hex nanoseconds>` in the
 *   regarding object's namespace (`default` for cluster-scoped objects).
 * - Repeats (same regarding uid, type, reason, action and note) within 6 minutes of the last one are
 *   counted into that Event's `series` instead of creating new Events. The count is kept in memory
 *   and written with a merge patch at most every 30 seconds per series (by a timer on the clock, by
 *   `flush()` once the 30 seconds have passed, and by `close()`).
 * - `event()` never blocks and never throws: writes go through a small FIFO queue worked off in the
 *   background, and failures (and a full queue) are reported to `onError`.
 * - A write that fails because the API server is unreachable or unavailable (restarting, 5xx, 429) is
 *   retried with backoff (1 s doubling to 30 s, EVENT_WRITE_ATTEMPTS in all, about 2 minutes) before it
 *   counts as failed; the queue bounds what waits meanwhile (maxQueue). `close()` cuts the waits short.
 */

import type { Event } from '../api/builtin.ts';
import { Events } from '../api/builtin.ts';
import type { KubeObject } from '../api/object.ts';
import { AlreadyExistsError, NotFoundError } from '../client/errors.ts';
import type { Client } from '../client/types.ts';
import { isTransient } from '../log/informer-errors.ts';
import type { Clock, TimerHandle } from '../util/clock.ts';
import { causeChain } from '../util/errors.ts';

export type EventType = 'Normal' | 'Warning';

/** Repeats further apart than this (since the last one) start a new Event. */
export const SERIES_FINISH_MS = 6 * 60 * 1000;
/** A series is patched at most this often. */
export const SERIES_REFRESH_MS = 30 * 1000;
/** The API's limit on `note`, in bytes. */
export const NOTE_MAX_BYTES = 1024;
/** Attempts of one write when the API server is unavailable (delays 1, 2, 4, 8, 16, 30, 30 s between). */
export const EVENT_WRITE_ATTEMPTS = 8;
const RETRY_INITIAL_MS = 1000;
const RETRY_MAX_MS = 30_000;
/** The API's limit on `reason` and `action`, in characters. */
export const REASON_MAX_LENGTH = 128;

export interface EventRecorderOptions {
  client: Client;
  /** The controller's name, e.g. 'opkit.dev/database-controller'. */
  reportingController: string;
  /** This process's identity, e.g. the pod name. */
  reportingInstance: string;
  /** Time and timers (default: the system clock, with timers that do not keep the process alive). */
  clock?: Clock;
  /** Called with each failed write (or dropped event) and the Event it concerned. Must not throw. */
  onError?: (err: unknown, event: Event) => void;
  /** Writes waiting at most; further events are dropped and reported (default 1000). */
  maxQueue?: number;
  /**
   * Writes in flight at most (default 8). Writes about the same Event (its creation, then its series
   * updates) always go one after the other; writes about different Events go in parallel, so that a
   * burst of reconciles does not outrun one-at-a-time writes and fill the queue.
   */
  maxInFlight?: number;
  /** Series remembered at most; the least recently started is forgotten first (default 4096). */
  maxSeries?: number;
}

interface Series {
  /** The Event as created; kept to recreate it if it has disappeared. */
  event: Event;
  count: number;
  lastObserved: number;
  lastWritten: number;
  /** count/lastObserved changed since the last write. */
  dirty: boolean;
}

interface Job {
  event: Event;
  run: () => Promise<void>;
}

/** The system clock with unref'd timers: a pending series refresh does not hold the process open. */
const backgroundClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn: () => void, ms: number): TimerHandle {
    return globalThis.setTimeout(fn, Math.max(0, ms)).unref() as unknown as TimerHandle;
  },
  clearTimeout(handle: TimerHandle): void {
    globalThis.clearTimeout(handle as unknown as ReturnType<typeof globalThis.setTimeout>);
  },
};

export class EventRecorder {
  readonly #client: Client;
  readonly #controller: string;
  readonly #instance: string;
  readonly #clock: Clock;
  readonly #onError: ((err: unknown, event: Event) => void) | undefined;
  readonly #maxQueue: number;
  readonly #maxSeries: number;
  readonly #series = new Map<string, Series>();
  readonly #maxInFlight: number;
  readonly #queue: Job[] = [];
  /** Events (namespace/name) with a write in flight: their next write waits for it. */
  readonly #writing = new Set<string>();
  #pumpScheduled = false;
  /** Settles when no write is queued or in flight; undefined while idle. */
  #draining: Promise<void> | undefined;
  #drained: (() => void) | undefined;
  #timer: TimerHandle | undefined;
  #lastNanos = 0n;
  #lastSweep = 0;
  #closed = false;
  /** Wakes the writes waiting to retry (close() ends the waits). */
  readonly #waking = new Set<() => void>();

  constructor(opts: EventRecorderOptions) {
    this.#client = opts.client;
    this.#controller = opts.reportingController;
    this.#instance = opts.reportingInstance;
    this.#clock = opts.clock ?? backgroundClock;
    this.#onError = opts.onError;
    this.#maxQueue = opts.maxQueue ?? 1000;
    this.#maxSeries = opts.maxSeries ?? 4096;
    this.#maxInFlight = Math.max(1, opts.maxInFlight ?? 8);
  }

  /**
   * Records an event about `regarding` (and optionally a `related` object). Returns at once; the write
   * happens in the background. Ignored after close().
   */
  event(
    regarding: KubeObject,
    type: EventType,
    reason: string,
    action: string,
    note: string,
    related?: KubeObject,
  ): void {
    if (this.#closed) return;
    try {
      this.#record(regarding, type, reason, action, note, related);
    } catch (err) {
      this.#report(err, {
        metadata: { namespace: regarding?.metadata?.namespace },
        type,
        reason,
        action,
        note,
      });
    }
  }

  /** A shorthand for `event(regarding, 'Normal', ...)`. */
  normal(regarding: KubeObject, reason: string, action: string, note: string, related?: KubeObject): void {
    this.event(regarding, 'Normal', reason, action, note, related);
  }

  /** A shorthand for `event(regarding, 'Warning', ...)`. */
  warning(regarding: KubeObject, reason: string, action: string, note: string, related?: KubeObject): void {
    this.event(regarding, 'Warning', reason, action, note, related);
  }

  /**
   * Writes the series whose 30 s refresh is due (by the clock), then waits until every queued write has
   * finished. Counts observed within the last 30 s stay in memory.
   */
  async flush(): Promise<void> {
    this.#refresh(false);
    while (this.#draining) await this.#draining;
  }

  /** Stops the refresh timer, writes every count still held in memory, and waits for the writes. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#refresh(true);
      for (const wake of [...this.#waking]) wake();
    }
    while (this.#draining) await this.#draining;
  }

  #record(
    regarding: KubeObject,
    type: EventType,
    reason: string,
    action: string,
    note: string,
    related: KubeObject | undefined,
  ): void {
    const now = this.#clock.now();
    this.#sweep(now);
    reason = reason.slice(0, REASON_MAX_LENGTH);
    action = action.slice(0, REASON_MAX_LENGTH);
    note = truncateUtf8(note, NOTE_MAX_BYTES);
    const key = JSON.stringify([identity(regarding), type, reason, action, note]);
    const existing = this.#series.get(key);
    if (existing && now - existing.lastObserved <= SERIES_FINISH_MS) {
      existing.count++;
      existing.lastObserved = now;
      existing.dirty = true;
      if (now - existing.lastWritten >= SERIES_REFRESH_MS) this.#writeSeries(existing, now);
      else this.#schedule(now);
      return;
    }
    if (existing) this.#finish(key, existing);

    const namespace = regarding.metadata.namespace || 'default';
    const event: Event = {
      apiVersion: Events.apiVersion,
      kind: Events.kind,
      metadata: {
        name: `${regarding.metadata.name ?? 'unknown'}.${this.#nanos(now).toString(16)}`,
        namespace,
      },
      eventTime: microTime(now),
      reportingController: this.#controller,
      reportingInstance: this.#instance,
      action,
      reason,
      regarding: reference(regarding),
      note,
      type,
    };
    if (related) event.related = reference(related);
    const series: Series = { event, count: 1, lastObserved: now, lastWritten: now, dirty: false };
    const queued = this.#enqueue({
      event,
      run: async () => {
        try {
          // No copy: the recorder never changes an Event it built, and clients do not change their bodies.
          await this.#client.create(Events, event);
        } catch (err) {
          // The name is ours alone: it exists because an earlier attempt landed (its answer was lost).
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
      },
    });
    if (!queued) return;
    this.#series.set(key, series);
    while (this.#series.size > this.#maxSeries) {
      const oldest = this.#series.keys().next().value;
      if (oldest === undefined) break;
      this.#finish(oldest, this.#series.get(oldest)!);
    }
  }

  /** Queues a patch of the series' count and lastObservedTime (recreating the Event if it is gone). */
  #writeSeries(series: Series, now: number): void {
    const seriesBody = { count: series.count, lastObservedTime: microTime(series.lastObserved) };
    const { event } = series;
    const queued = this.#enqueue({
      event,
      run: async () => {
        const key = { namespace: event.metadata.namespace, name: event.metadata.name ?? '' };
        try {
          await this.#client.patch(Events, key, { type: 'merge', body: { series: seriesBody } });
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          await this.#client.create(Events, { ...event, series: seriesBody });
        }
      },
    });
    // When the queue is full the count stays dirty and is tried again a refresh interval later.
    series.lastWritten = now;
    if (queued) series.dirty = false;
    else this.#schedule(now);
  }

  /** Forgets a series, writing its last count first if that was never written. */
  #finish(key: string, series: Series): void {
    this.#series.delete(key);
    if (series.dirty) this.#writeSeries(series, this.#clock.now());
  }

  /** Forgets finished series (at most once per refresh interval, to keep event() cheap). */
  #sweep(now: number): void {
    if (now - this.#lastSweep < SERIES_REFRESH_MS) return;
    this.#lastSweep = now;
    for (const [key, series] of this.#series) {
      if (now - series.lastObserved > SERIES_FINISH_MS) this.#finish(key, series);
    }
  }

  /** Writes due series (all dirty ones when `all`), forgets finished ones, and re-arms the timer. */
  #refresh(all: boolean): void {
    const now = this.#clock.now();
    for (const [key, series] of this.#series) {
      if (now - series.lastObserved > SERIES_FINISH_MS) this.#finish(key, series);
      else if (series.dirty && (all || now - series.lastWritten >= SERIES_REFRESH_MS)) {
        this.#writeSeries(series, now);
      }
    }
    this.#lastSweep = now;
    if (!all) this.#schedule(now);
  }

  /** Arms the timer for the earliest series refresh due, unless one is armed already. */
  #schedule(now: number): void {
    if (this.#closed || this.#timer !== undefined) return;
    let due = Number.POSITIVE_INFINITY;
    for (const series of this.#series.values()) {
      if (series.dirty) due = Math.min(due, series.lastWritten + SERIES_REFRESH_MS);
    }
    if (due === Number.POSITIVE_INFINITY) return;
    this.#timer = this.#clock.setTimeout(
      () => {
        this.#timer = undefined;
        try {
          this.#refresh(false);
        } catch (err) {
          this.#report(err, { metadata: {} });
        }
      },
      Math.max(0, due - now),
    );
  }

  #enqueue(job: Job): boolean {
    if (this.#queue.length >= this.#maxQueue) {
      this.#report(
        new Error(`event queue full (${this.#maxQueue} writes waiting); event dropped`),
        job.event,
      );
      return false;
    }
    this.#queue.push(job);
    this.#draining ??= new Promise<void>((resolve) => {
      this.#drained = resolve;
    });
    if (!this.#pumpScheduled) {
      this.#pumpScheduled = true;
      // Let event() return before the first request starts.
      queueMicrotask(() => {
        this.#pumpScheduled = false;
        this.#pump();
      });
    }
    return true;
  }

  /** Starts queued writes, oldest first, up to maxInFlight, skipping Events that have one in flight. */
  #pump(): void {
    for (let i = 0; i < this.#queue.length && this.#writing.size < this.#maxInFlight; ) {
      const job = this.#queue[i]!;
      const id = `${job.event.metadata.namespace ?? ''}/${job.event.metadata.name ?? ''}`;
      if (this.#writing.has(id)) {
        i++;
        continue;
      }
      this.#queue.splice(i, 1);
      this.#writing.add(id);
      this.#runWithRetries(job)
        .catch((err: unknown) => this.#report(err, job.event))
        .finally(() => {
          this.#writing.delete(id);
          this.#pump();
        });
    }
    if (this.#writing.size === 0 && this.#queue.length === 0 && this.#drained) {
      const drained = this.#drained;
      this.#drained = undefined;
      this.#draining = undefined;
      drained();
    }
  }

  /** Runs a write, again after a backoff while the API server is unavailable (see the module comment). */
  async #runWithRetries(job: Job): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await job.run();
        return;
      } catch (err) {
        const transient = [...causeChain(err)].some(isTransient);
        if (!transient || attempt >= EVENT_WRITE_ATTEMPTS || this.#closed) throw err;
        const delayMs = Math.min(RETRY_MAX_MS, RETRY_INITIAL_MS * 2 ** (attempt - 1));
        await new Promise<void>((resolve) => {
          const wake = (): void => {
            this.#waking.delete(wake);
            this.#clock.clearTimeout(timer);
            resolve();
          };
          const timer = this.#clock.setTimeout(wake, delayMs);
          this.#waking.add(wake);
        });
      }
    }
  }

  #report(err: unknown, event: Event): void {
    try {
      this.#onError?.(err, event);
    } catch {
      // onError must not throw; if it does, there is nowhere left to report to.
    }
  }

  /** Unique, increasing nanosecond timestamps for Event names. */
  #nanos(nowMs: number): bigint {
    let nanos = BigInt(Math.floor(nowMs)) * 1_000_000n;
    if (nanos <= this.#lastNanos) nanos = this.#lastNanos + 1n;
    this.#lastNanos = nanos;
    return nanos;
  }
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end);
}

function identity(obj: KubeObject): string {
  const { uid, namespace, name } = obj.metadata;
  return uid ?? `${obj.apiVersion ?? ''}/${obj.kind ?? ''}/${namespace ?? ''}/${name ?? ''}`;
}

function reference(obj: KubeObject): NonNullable<Event['regarding']> {
  const ref: NonNullable<Event['regarding']> = {};
  if (obj.apiVersion) ref.apiVersion = obj.apiVersion;
  if (obj.kind) ref.kind = obj.kind;
  if (obj.metadata.namespace) ref.namespace = obj.metadata.namespace;
  if (obj.metadata.name) ref.name = obj.metadata.name;
  if (obj.metadata.uid) ref.uid = obj.metadata.uid;
  if (obj.metadata.resourceVersion) ref.resourceVersion = obj.metadata.resourceVersion;
  return ref;
}

/**
 * The watcher: list-then-watch as one never-ending async stream of high-level events, with client-go
 * reflector semantics (kube-rs calls this stage `watcher`).
 *
 *   init, initApply*, initDone        a full list, fetched page by page as the consumer takes it; then
 *   (apply | delete)*                  from a watch started at the list's resourceVersion
 *
 * With `watchList` the initial state is streamed through the watch itself instead (client-go's
 * WatchListClient, `sendInitialEvents=true`): one request, no LIST, each object parsed as it arrives; the
 * bookmark annotated `k8s.io/initial-events-end` ends it (initDone) and the same watch goes on. A server
 * that refuses sendInitialEvents (400 or 422: the WatchList feature off) is listed from then on.
 *
 * - Watches ask for bookmarks; bookmarks advance the resourceVersion and are not emitted.
 * - A watch the server closes cleanly (its timeout) is re-opened at the last resourceVersion, no relist.
 * - 410 Gone (thrown, or as a watch ERROR event) means the resourceVersion is compacted away: the
 *   watcher relists, emitting init / initApply* / initDone again. Consumers diff the new list against
 *   what they had (the reflector does) instead of assuming anything was deleted.
 * - Any other error (connection refused, 5xx, 429, a broken stream) is reported to `onError` and retried
 *   after an exponential backoff: a failed list is listed again, a failed watch is re-opened at the last
 *   resourceVersion (if that is too old by then, the server answers 410 and the watcher relists).
 * - Each watch asks the server to end it after 25-35 s (`timeoutSeconds`), and kube-apiserver does, on
 *   time; bookmarks alone prove nothing on a quiet resource (the cacher sends one only once its
 *   resourceVersion moved past the watch's: measured 120 s apart on a quiet cluster,
 *   bench/harness/faults/watch-gaps.ts). A watch that stays open but delivers nothing at all, not even
 *   its end, for `silenceTimeoutMs` (its timeout, at most 60 s, plus 10 s) is aborted and re-opened on a
 *   new connection: a half-open TCP connection (the far end gone without FIN) would otherwise hang
 *   forever. The transport then closes the pool's idle connections and every connection in use that does
 *   not deliver within 2 s (client/pools.ts): the other watches and requests on dead connections end too
 *   (a DeadConnectionError; watches re-open at once).
 * - The backoff starts over once a watch delivers its first event or bookmark, or stayed open for 2 s
 *   (it was accepted) before it failed.
 * - While the API server cannot be reached at all (a refused or reset connection), a retry waits at most
 *   UNREACHABLE_RETRY_MAX_MS: a refused connect costs the server nothing, and the full backoff (up to
 *   30 s) grown through one outage left an informer blind for 73 s after three API server restarts,
 *   30-60 s after the server was back (bench/results/faults.md, cluster mode).
 *
 * The generator never throws. It returns when `signal` aborts (or when the consumer stops iterating).
 * It is pull-based: while the consumer is busy with an event the stream is not read (and the silence
 * timer is not running), which gives natural backpressure.
 */
import type { KubeObject, ObjectList, WatchEvent } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import {
  BadRequestError,
  errorFromStatus,
  InvalidError,
  isGone,
  isUnreachable,
  StaleConnectionError,
  type Status,
  TooManyRequestsError,
} from '../client/errors.ts';
import type { Client } from '../client/types.ts';
import { type Clock, monotonicClock, sleep, type TimerHandle } from '../util/clock.ts';
import type { DeepFreezeOptions } from '../util/freeze.ts';
import { withTypeMeta } from '../util/type-meta.ts';
import { Backoff, type BackoffOptions } from './backoff.ts';

export type WatcherEvent<T extends KubeObject> =
  /** A (re)list starts. */
  | { type: 'init' }
  /** One object of the list. */
  | { type: 'initApply'; object: T }
  /** The list is complete; the objects of the list are the full state at `resourceVersion`. */
  | { type: 'initDone'; resourceVersion: string }
  /** An object was added or modified. */
  | { type: 'apply'; object: T }
  /** An object was deleted; `object` is its last state. */
  | { type: 'delete'; object: T };

export interface WatcherErrorContext {
  phase: 'list' | 'watch';
  /** resourceVersion the watch was at ('' during a list). */
  resourceVersion: string;
  /** What the watcher does next. */
  action: 'relist' | 'rewatch' | 'backoff';
  /** For `backoff`: how long it waits (ms) before retrying. */
  delayMs?: number;
}

export interface WatcherOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Stops the watcher; it then returns. Required: a watcher otherwise runs forever. */
  signal: AbortSignal;
  /** List page size (`limit`). Default 500. */
  pageSize?: number;
  /**
   * Stream the initial state through the watch (`sendInitialEvents=true`, client-go's WatchListClient)
   * instead of listing it page by page; falls back to listing when the server refuses (400/422).
   * Default {@link DEFAULT_WATCH_LIST}.
   */
  watchList?: boolean;
  /**
   * Server-side timeout for each watch request. Default: random in [25, 35) seconds per request. client-go
   * uses 5-10 min and finds dead connections with HTTP/2 pings; on HTTP/1.1 nothing can be sent on a
   * connection a watch holds, so the end of each watch, which the server sends on time, is what proves
   * the connection alive. Random, so that the watches of many clients do not all end at once. A
   * re-opened watch starts at the last resourceVersion: no relist, nothing re-delivered.
   */
  watchTimeoutSeconds?: number;
  /**
   * Abort and re-open a watch that delivered nothing, not even its end, for this long (ms). Default: the
   * watch's timeout (at most 60 s: longer watches get a bookmark about every minute while the resource
   * changes) plus 10 s. That long without a byte means the connection is dead (half-open: the far end
   * gone without FIN, or a middlebox that keeps the TCP session alive but forwards nothing).
   */
  silenceTimeoutMs?: number;
  /**
   * Ask the client to leave `metadata.managedFields` out of watched objects (WatchOptions.omitManagedFields);
   * the reflector does when its transform is the default, which drops them anyway. Lists are not cut.
   */
  omitManagedFields?: boolean;
  /**
   * Ask the client to deliver watched objects deep-frozen (WatchOptions.deepFreeze); the reflector does
   * when its transform is the default, which leaves them as delivered. Lists are not frozen.
   */
  deepFreeze?: DeepFreezeOptions;
  /** Backoff for retries after errors; a Backoff instance or options for one. */
  backoff?: Backoff | BackoffOptions;
  /** Told about every error the watcher recovers from. Must not throw (if it does, that is ignored). */
  onError?: (err: unknown, ctx: WatcherErrorContext) => void;
  /**
   * Told when a bookmark advances the resourceVersion (bookmarks are not emitted as events). Lists and
   * events carry their resourceVersion themselves.
   */
  onBookmark?: (resourceVersion: string) => void;
  clock?: Clock;
  /** Randomness for the default watch timeout and the backoff jitter. Default Math.random. */
  random?: () => number;
}

/**
 * Reported to `onError` when a watch is aborted because it stayed silent for too long. A
 * StaleConnectionError: the transport then also drops its idle pooled sockets (likely dead too), so the
 * re-opened watch gets a fresh connection.
 */
export class WatchSilenceError extends StaleConnectionError {
  readonly silenceMs: number;
  constructor(silenceMs: number) {
    super(
      `watch delivered nothing, not even its end at its timeout, for ${Math.round(silenceMs / 1000)} s: ` +
        'the connection is presumed dead; re-opening the watch on a new connection',
    );
    this.name = 'WatchSilenceError';
    this.silenceMs = silenceMs;
  }
}

/** Reported to `onError` when a watch closed right away without delivering anything. */
export class ShortWatchError extends Error {
  constructor() {
    super('watch closed immediately without delivering any event');
    this.name = 'ShortWatchError';
  }
}

export const DEFAULT_PAGE_SIZE = 500;
/**
 * Whether watchers stream their initial state by default: on (`sendInitialEvents`, as client-go 1.34's
 * WatchListClient: no LIST at start-up, each object parsed as it arrives), unless `OPKIT_WATCH_LIST=false`
 * (or `0`) is in the environment, as client-go's `KUBE_FEATURE_WatchListClient` switches it. A server
 * without the WatchList feature refuses the watch (400/422) and the watcher lists from then on anyway.
 */
export const DEFAULT_WATCH_LIST = !/^(false|0)$/i.test(process.env.OPKIT_WATCH_LIST ?? '');
/** The annotation of the bookmark that ends the initial events of a `sendInitialEvents` watch. */
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';
/** The default watch timeout is random in [MIN, MIN * 1.4) seconds: 25-35 s. */
const MIN_WATCH_TIMEOUT_SECONDS = 25;
const WATCH_TIMEOUT_SPREAD = 0.4;
/** kube-apiserver's cacher sends a bookmark about every minute (bookmarkFrequency) once its resourceVersion moved. */
const BOOKMARK_INTERVAL_MS = 60_000;
/** Slack on top of the longest healthy silence (the watch's timeout; measured 0.7 s late at load 33). */
const SILENCE_GRACE_MS = 10_000;

/** The silence after which a watch with this server-side timeout is presumed dead (ms). */
export function silenceTimeoutFor(watchTimeoutSeconds: number): number {
  return Math.min(BOOKMARK_INTERVAL_MS, watchTimeoutSeconds * 1000) + SILENCE_GRACE_MS;
}
/**
 * A clean close sooner than this (or than half the watch timeout) with no events is treated as an error,
 * so a server that keeps closing watches at once does not cause a hot loop.
 */
const SHORT_WATCH_MS = 1000;
/** A watch open at least this long before it failed had been accepted: the backoff starts over. */
const ACCEPTED_WATCH_MS = 2000;
/**
 * The longest wait before retrying a list or watch that could not reach the API server at all (no HTTP
 * answer: refused, reset, a dead connection). The backoff's sequence still advances; only its wait is
 * capped, so an informer reconnects within about 5 s after the server is back (4-5 s with the jitter).
 * An answering server (5xx, 429) gets the full backoff, started over at its first step when the server
 * answers after a period it could not be reached: a restarting API server answers 5xx for a moment after it
 * accepts connections again, and that first answer must not inherit the long wait the outage had grown.
 */
export const UNREACHABLE_RETRY_MAX_MS = 5000;

/** refused: the server does not stream initial events (sendInitialEvents): list instead. */
type WatchOutcome = 'closed' | 'gone' | 'error' | 'aborted' | 'refused';

export async function* watcher<T extends KubeObject>(
  client: Client,
  resource: Resource<T>,
  opts: WatcherOptions,
): AsyncGenerator<WatcherEvent<T>, void, undefined> {
  const { signal } = opts;
  // Elapsed time only (silence, backoff, how long a watch stayed open): a wall-clock step must not count.
  const clock = opts.clock ?? monotonicClock;
  const random = opts.random ?? Math.random;
  const backoff =
    opts.backoff instanceof Backoff ? opts.backoff : new Backoff({ clock, random, ...(opts.backoff ?? {}) });
  const selectors = {
    ...(opts.namespace !== undefined && resource.namespaced ? { namespace: opts.namespace } : {}),
    ...(opts.labelSelector ? { labelSelector: opts.labelSelector } : {}),
    ...(opts.fieldSelector ? { fieldSelector: opts.fieldSelector } : {}),
  };

  /** undefined: a list (or, with watchList, a watch streaming the initial state) is needed. */
  let resourceVersion: string | undefined;
  /** Stream the initial state through the watch; false once the server refused it. */
  let watchList = opts.watchList ?? DEFAULT_WATCH_LIST;
  /** The last relist was followed straight by 410 without any event: back off before the next one. */
  let goneWithoutProgress = false;

  const report = (err: unknown, ctx: WatcherErrorContext): void => {
    try {
      opts.onError?.(err, ctx);
    } catch {
      // onError must not be able to break the watcher
    }
  };
  const advance = (rv: unknown): void => {
    if (typeof rv === 'string' && rv) resourceVersion = rv;
  };
  /** The previous failure could not reach the server at all. */
  let wasUnreachable = false;
  /** Reports `err` and waits out the backoff; false if aborted meanwhile. */
  const backOff = async (err: unknown, phase: 'list' | 'watch'): Promise<boolean> => {
    const unreachable = isUnreachable(err);
    if (wasUnreachable && !unreachable) backoff.reset();
    wasUnreachable = unreachable;
    let delayMs = backoff.next();
    if (unreachable) delayMs = Math.min(delayMs, UNREACHABLE_RETRY_MAX_MS);
    if (err instanceof TooManyRequestsError) delayMs = Math.max(delayMs, err.retryAfterSeconds * 1000);
    report(err, { phase, resourceVersion: resourceVersion ?? '', action: 'backoff', delayMs });
    return sleep(delayMs, signal, clock);
  };
  /** Frozen objects (WatchOptions.deepFreeze) get withTypeMeta's copy; list items are filled in place. */
  const typed = (obj: T): T => {
    if (!obj || typeof obj !== 'object') return obj;
    if (Object.isFrozen(obj)) return withTypeMeta(resource, obj);
    obj.apiVersion ??= resource.apiVersion;
    obj.kind ??= resource.kind;
    return obj;
  };

  while (!signal.aborted) {
    // With watchList the watch below streams the initial state (init .. initDone) itself.
    const initial = resourceVersion === undefined && watchList;
    if (resourceVersion === undefined && !initial) {
      // Page by page: each page's objects go to the consumer (which transforms them, dropping
      // managedFields) before the next page is fetched, so a large list never sits in memory whole and
      // untransformed. An expired continue token (410) lists again, whole, as client-go's pager does.
      let listRV = '';
      let token: string | undefined;
      let paginate = true;
      let begun = false;
      try {
        for (;;) {
          let page: ObjectList<T>;
          try {
            page = await client.list(resource, {
              ...selectors,
              ...(paginate ? { limit: opts.pageSize ?? DEFAULT_PAGE_SIZE, onePage: true } : {}),
              ...(token ? { continue: token } : {}),
              signal,
            });
          } catch (err) {
            if (token === undefined || !isGone(err)) throw err;
            token = undefined;
            paginate = false;
            begun = false;
            continue;
          }
          if (!begun) {
            yield { type: 'init' };
            begun = true;
            listRV = page.metadata?.resourceVersion ?? '';
          }
          for (const item of page.items ?? []) {
            if (signal.aborted) return;
            yield { type: 'initApply', object: typed(item) };
          }
          token = paginate ? page.metadata?.continue || undefined : undefined;
          if (!token) break;
        }
      } catch (err) {
        if (signal.aborted) return;
        if (!(await backOff(err, 'list'))) return;
        continue;
      }
      if (signal.aborted) return;
      resourceVersion = '';
      advance(listRV);
      yield { type: 'initDone', resourceVersion: listRV };
    }

    // ---- one watch request ----
    const ctrl = new AbortController();
    const onAbort = (): void => ctrl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timeoutSeconds =
      opts.watchTimeoutSeconds ??
      Math.floor(MIN_WATCH_TIMEOUT_SECONDS * (1 + WATCH_TIMEOUT_SPREAD * random()));
    const silenceMs = opts.silenceTimeoutMs ?? silenceTimeoutFor(timeoutSeconds);
    let silenced: WatchSilenceError | undefined;
    // The silence timer runs only while the watcher waits for the stream (not while the consumer holds an
    // event). One timer per watch, not per event: it is armed when a wait starts and none is pending, and
    // when it fires during a wait that began later than it was armed for, it re-arms for the rest.
    const silence = new SilenceTimer(clock, silenceMs, () => {
      silenced = new WatchSilenceError(silenceMs);
      ctrl.abort(silenced);
    });
    // Stopped (by the caller, or found silent): no timer left behind even if the generator is never resumed.
    ctrl.signal.addEventListener('abort', () => silence.stop(), { once: true });
    // One abort listener per watch (not per event) rejects the wait in progress.
    const waits = new AbortableWaits(ctrl.signal);
    const startedAt = clock.now();
    let received = 0;
    /** initial: `init` was emitted, the initial events are being delivered. */
    let begun = false;
    let iterator: AsyncIterator<WatchEvent<T>> | undefined;
    let outcome: WatchOutcome;
    let failure: unknown;
    try {
      iterator = client
        .watch(resource, {
          ...selectors,
          ...(initial
            ? { sendInitialEvents: true, allowWatchBookmarks: true }
            : { resourceVersion: resourceVersion || undefined, allowWatchBookmarks: true }),
          timeoutSeconds,
          ...(opts.omitManagedFields ? { omitManagedFields: true } : {}),
          ...(opts.deepFreeze ? { deepFreeze: opts.deepFreeze } : {}),
          signal: ctrl.signal,
        })
        [Symbol.asyncIterator]();
      for (;;) {
        let step: IteratorResult<WatchEvent<T>>;
        silence.waiting();
        try {
          step = await waits.next(iterator);
        } finally {
          silence.delivered();
        }
        if (step.done) break;
        const ev = step.value;
        const type = ev.type as string;
        if (type === 'ERROR') {
          const status = ev.object as unknown as Status;
          throw errorFromStatus(status?.code ?? 500, status);
        }
        // The server accepted the watch and it delivers: whatever failed before is over, so the next
        // failure starts the backoff from its first step (flapping links reconnect in about a second).
        if (received++ === 0) backoff.reset();
        goneWithoutProgress = false;
        if (initial && resourceVersion === undefined) {
          // The initial state: ADDED events, then the bookmark that ends them.
          if (!begun) {
            begun = true;
            yield { type: 'init' };
          }
          if (type === 'ADDED') {
            yield { type: 'initApply', object: typed(ev.object) };
          } else if (type === 'BOOKMARK') {
            const md = ev.object?.metadata;
            if (md?.annotations?.[INITIAL_EVENTS_END] !== 'true') continue;
            const rv = md.resourceVersion ?? '';
            resourceVersion = '';
            advance(rv);
            yield { type: 'initDone', resourceVersion: rv };
          } else {
            throw new Error(`unexpected ${type} event among the initial events of a watch`);
          }
          if (signal.aborted) break;
          continue;
        }
        if (type === 'BOOKMARK') {
          const rv = ev.object?.metadata?.resourceVersion;
          if (rv && rv !== resourceVersion) {
            advance(rv);
            try {
              opts.onBookmark?.(rv);
            } catch {
              // ignored, like onError
            }
          }
          continue;
        }
        if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') continue;
        // Malformed objects (even null) are passed on: the consumer skips and reports them.
        const object = typed(ev.object);
        advance((object as Partial<KubeObject> | null)?.metadata?.resourceVersion);
        yield { type: type === 'DELETED' ? 'delete' : 'apply', object };
        if (signal.aborted) break;
      }
      if (signal.aborted) outcome = 'aborted';
      else if (silenced) [outcome, failure] = ['error', silenced];
      else if (received === 0 && clock.now() - startedAt < Math.min(SHORT_WATCH_MS, timeoutSeconds * 500))
        [outcome, failure] = ['error', new ShortWatchError()];
      else outcome = 'closed';
    } catch (err) {
      if (signal.aborted) outcome = 'aborted';
      else if (silenced) [outcome, failure] = ['error', silenced];
      else if (isGone(err)) [outcome, failure] = ['gone', err];
      else if (initial && received === 0 && (err instanceof BadRequestError || err instanceof InvalidError))
        [outcome, failure] = ['refused', err];
      else [outcome, failure] = ['error', err];
    } finally {
      signal.removeEventListener('abort', onAbort);
      waits.stop();
      ctrl.abort(); // also stops the silence timer (its abort listener)
      // Let a client-side generator run its cleanup; never wait for it or let it reject unhandled.
      try {
        Promise.resolve(iterator?.return?.()).catch(() => {});
      } catch {
        // a throwing return() changes nothing: the request is aborted anyway
      }
    }

    switch (outcome) {
      case 'aborted':
        return;
      case 'refused':
        watchList = false;
        report(failure, { phase: 'watch', resourceVersion: '', action: 'relist' });
        break;
      case 'closed':
        break; // re-watch from the last resourceVersion right away
      case 'gone':
        report(failure, { phase: 'watch', resourceVersion: resourceVersion ?? '', action: 'relist' });
        if (goneWithoutProgress && !(await sleep(backoff.next(), signal, clock))) return;
        goneWithoutProgress = received === 0;
        resourceVersion = undefined;
        break;
      case 'error':
        // A watch that stayed open for a while was accepted by the server (a refused or failing one
        // ends at once): what failed before is over, so the backoff starts from its first step again,
        // even for an idle watch that never delivered (a flapping link reconnects in about a second).
        if (clock.now() - startedAt >= ACCEPTED_WATCH_MS) backoff.reset();
        // Found dead (silent), or closed by the pool with other dead connections: re-open at once on a
        // new connection; nothing failed on the server's side.
        if (failure instanceof StaleConnectionError) {
          report(failure, { phase: 'watch', resourceVersion: resourceVersion ?? '', action: 'rewatch' });
        } else if (!(await backOff(failure, 'watch'))) return;
        break;
    }
  }
}

/**
 * The silence timer of one watch: fires `onSilence` once the watcher has waited for the stream for
 * `silenceMs` without a delivery; time the consumer spends on an event does not count. Arms one clock timer
 * at a time: a delivery only records the time, and a timer that fires early for the current wait re-arms
 * for the remainder (a per-event setTimeout/clearTimeout pair cost ~1 µs per event of a start-up's
 * thousands).
 */
class SilenceTimer {
  readonly #clock: Clock;
  readonly #silenceMs: number;
  readonly #onSilence: () => void;
  #timer: TimerHandle | undefined;
  /** When the current wait began; undefined while none is in progress. */
  #since: number | undefined;
  #stopped = false;

  constructor(clock: Clock, silenceMs: number, onSilence: () => void) {
    this.#clock = clock;
    this.#silenceMs = silenceMs;
    this.#onSilence = onSilence;
  }

  /** A wait for the stream begins. */
  waiting(): void {
    if (this.#stopped) return;
    this.#since = this.#clock.now();
    if (this.#timer === undefined) this.#arm(this.#silenceMs);
  }

  /** The wait ended (a delivery, the end, or an error). */
  delivered(): void {
    this.#since = undefined;
  }

  stop(): void {
    this.#stopped = true;
    this.#since = undefined;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    this.#timer = this.#clock.setTimeout(() => this.#fire(), ms);
  }

  #fire(): void {
    this.#timer = undefined;
    if (this.#since === undefined || this.#stopped) return; // not waiting: the next wait arms again
    const left = this.#since + this.#silenceMs - this.#clock.now();
    if (left > 0) this.#arm(left);
    else this.#onSilence();
  }
}

/**
 * `it.next()`, rejected as soon as `signal` aborts even if the iterator ignores the signal, with one abort
 * listener for every wait (adding and removing one per event cost more than the rest of the wait).
 */
class AbortableWaits {
  readonly #signal: AbortSignal;
  #reject: ((reason: unknown) => void) | undefined;
  readonly #onAbort = (): void => {
    const reject = this.#reject;
    this.#reject = undefined;
    reject?.(this.#signal.reason);
  };

  constructor(signal: AbortSignal) {
    this.#signal = signal;
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  next<V>(it: AsyncIterator<V>): Promise<IteratorResult<V>> {
    if (this.#signal.aborted) return Promise.reject(this.#signal.reason);
    const next = it.next();
    return new Promise((resolve, reject) => {
      this.#reject = reject;
      next.then(
        (v) => {
          this.#reject = undefined;
          resolve(v);
        },
        (e: unknown) => {
          this.#reject = undefined;
          reject(e);
        },
      );
    });
  }

  stop(): void {
    this.#reject = undefined;
    this.#signal.removeEventListener('abort', this.#onAbort);
  }
}

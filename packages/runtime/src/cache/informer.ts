/**
 * SharedInformer: one reflector (one list+watch, one store) for a resource and selector, shared by any
 * number of event handlers, like client-go's SharedIndexInformer.
 *
 * - `addEventHandler` registers a handler. A handler added after objects are already in the store first
 *   gets an `onAdd(obj, true)` for each of them (synchronously, inside `addEventHandler`), then live
 *   events; so every handler sees every object no matter when it joined.
 * - Handlers run synchronously in the informer's event loop and should only do cheap work (typically:
 *   put a key on a work queue). Exceptions (and rejections of promises a handler returns) are caught
 *   and reported to `onError`; a failing handler never stops the informer or the other handlers.
 * - The informer never stops before its signal aborts: malformed objects are skipped (reported), and
 *   should its reflector ever fail anyway, it is restarted (relisting) after a backoff (reported with
 *   phase 'restart'); the store keeps serving the last state meanwhile.
 * - Optional periodic resync (`resyncPeriodMs`, default off): re-delivers `onUpdate(obj, obj)` for every
 *   stored object to every handler, from the cache (no API call).
 * - An informer runs once: `start` after it stopped does nothing.
 */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { Client } from '../client/types.ts';
import { type Clock, realClock, sleep, type TimerHandle } from '../util/clock.ts';
import { Backoff } from './backoff.ts';
import {
  callHandler,
  Reflector,
  type ReflectorErrorContext,
  type ReflectorOptions,
  type ResourceEventHandler,
} from './reflector.ts';
import { type IndexFunc, type ReadonlyStore, Store } from './store.ts';
import type { StringPoolStats } from './string-pool.ts';

export type InformerErrorContext =
  | ReflectorErrorContext
  | { phase: 'resync' | 'replay'; key: string }
  /** The reflector failed (or stopped on its own); it is started again (relisting) after `delayMs`. */
  | { phase: 'restart'; resourceVersion: string; delayMs: number };

export interface SharedInformerOptions<T extends KubeObject>
  extends Omit<ReflectorOptions<T>, 'store' | 'onError'> {
  /** Re-deliver every stored object as onUpdate(obj, obj) this often (ms). 0 or unset: never. */
  resyncPeriodMs?: number;
  onError?: (err: unknown, ctx: InformerErrorContext) => void;
}

export interface EventHandlerRegistration {
  /** Stops delivering events to the handler. */
  remove(): void;
  /** True once the informer has synced and the handler has been given the initial objects. */
  hasSynced(): boolean;
}

export class SharedInformer<T extends KubeObject> {
  readonly client: Client;
  readonly resource: Resource<T>;
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  readonly fieldSelector: string | undefined;
  readonly #store: Store<T>;
  readonly #reflector: Reflector<T>;
  readonly #clock: Clock;
  readonly #resyncPeriodMs: number;
  readonly #handlers = new Set<ResourceEventHandler<T>>();
  readonly #onError: ((err: unknown, ctx: InformerErrorContext) => void) | undefined;
  readonly #restartBackoff: Backoff;
  #run: Promise<void> | undefined;
  #resyncTimer: TimerHandle | undefined;

  constructor(client: Client, resource: Resource<T>, opts: SharedInformerOptions<T> = {}) {
    this.client = client;
    this.resource = resource;
    this.namespace = resource.namespaced && opts.namespace ? opts.namespace : undefined;
    this.labelSelector = opts.labelSelector || undefined;
    this.fieldSelector = opts.fieldSelector || undefined;
    this.#clock = opts.clock ?? realClock;
    this.#resyncPeriodMs = opts.resyncPeriodMs ?? 0;
    this.#onError = opts.onError;
    this.#restartBackoff =
      opts.backoff instanceof Backoff
        ? opts.backoff
        : new Backoff({
            clock: this.#clock,
            ...(opts.random ? { random: opts.random } : {}),
            ...(opts.backoff ?? {}),
          });
    this.#store = new Store<T>({
      indexers: opts.indexers ?? {},
      onIndexError: (err, _name, key) => this.#report(err, { phase: 'transform', key }),
    });
    const { resyncPeriodMs: _resync, onError: _onError, ...reflectorOpts } = opts;
    this.#reflector = new Reflector(client, resource, {
      ...reflectorOpts,
      store: this.#store,
      onError: (err, ctx) => this.#report(err, ctx),
    });
  }

  /** The informer's store (read-only; objects are frozen). */
  get store(): ReadonlyStore<T> {
    return this.#store;
  }

  /** resourceVersion of the last list, event or bookmark applied ('' before the first list). */
  get lastSyncResourceVersion(): string {
    return this.#reflector.lastSyncResourceVersion;
  }

  /** What sharing equal long strings saved (undefined without a pool; see ReflectorOptions.stringPool). */
  stringPoolStats(): StringPoolStats | undefined {
    return this.#reflector.stringPoolStats();
  }

  hasSynced(): boolean {
    return this.#reflector.hasSynced();
  }

  /** True once `start` was called. */
  get started(): boolean {
    return this.#run !== undefined;
  }

  /** Adds an index to the store (also indexing what is already stored). */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    this.#store.addIndexer(name, fn);
  }

  addEventHandler(handler: ResourceEventHandler<T>): EventHandlerRegistration {
    if (this.#handlers.has(handler)) throw new Error('handler already registered with this informer');
    this.#handlers.add(handler);
    const unlisten = this.#reflector.addListener(handler);
    for (const obj of this.#store.list()) {
      if (!this.#handlers.has(handler)) break; // removed itself during replay
      callHandler(
        () => handler.onAdd?.(obj, true),
        (err) => this.#report(err, { phase: 'replay', key: storeKey(obj) }),
      );
    }
    return {
      remove: () => {
        this.#handlers.delete(handler);
        unlisten();
      },
      hasSynced: () => this.hasSynced(),
    };
  }

  /**
   * Starts listing and watching (once; later calls return the same promise). Resolves after `signal`
   * aborted and the watch stopped. Never rejects. If the reflector fails (or returns before `signal`
   * aborted), it is reported (phase 'restart') and started again after a backoff: an informer only
   * stops when told to.
   */
  start(signal: AbortSignal): Promise<void> {
    if (this.#run) return this.#run;
    this.#run = (async () => {
      const onAbort = (): void => this.#stopResync();
      signal.addEventListener('abort', onAbort, { once: true });
      if (this.#resyncPeriodMs > 0 && !signal.aborted) this.#scheduleResync();
      try {
        while (!signal.aborted) {
          let failure: unknown;
          try {
            await this.#reflector.run(signal);
          } catch (err) {
            failure = err ?? new Error('the reflector failed');
          }
          if (signal.aborted) break;
          failure ??= new Error('the reflector stopped although the informer was not stopped');
          let delayMs = 0;
          try {
            delayMs = this.#restartBackoff.next();
          } catch {
            delayMs = 1000; // a broken backoff must not stop the informer either
          }
          this.#report(failure, { phase: 'restart', resourceVersion: this.lastSyncResourceVersion, delayMs });
          if (!(await sleep(delayMs, signal, this.#clock))) break;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        this.#stopResync();
      }
    })();
    return this.#run;
  }

  /** Resolves `true` once the first list is in the store, `false` if `signal` aborts first. */
  waitForSync(signal?: AbortSignal): Promise<boolean> {
    return this.#reflector.waitForSync(signal);
  }

  #scheduleResync(): void {
    this.#resyncTimer = this.#clock.setTimeout(() => {
      this.#resync();
      this.#scheduleResync();
    }, this.#resyncPeriodMs);
  }

  #stopResync(): void {
    if (this.#resyncTimer !== undefined) this.#clock.clearTimeout(this.#resyncTimer);
    this.#resyncTimer = undefined;
  }

  #resync(): void {
    if (!this.hasSynced()) return;
    for (const obj of this.#store.list()) {
      for (const handler of [...this.#handlers]) {
        callHandler(
          () => handler.onUpdate?.(obj, obj),
          (err) => this.#report(err, { phase: 'resync', key: storeKey(obj) }),
        );
      }
    }
  }

  #report(err: unknown, ctx: InformerErrorContext): void {
    try {
      this.#onError?.(err, ctx);
    } catch {
      // an error hook must not break the informer
    }
  }
}

function storeKey(obj: {
  readonly metadata: { readonly namespace?: string; readonly name?: string };
}): string {
  return obj.metadata.namespace
    ? `${obj.metadata.namespace}/${obj.metadata.name ?? ''}`
    : (obj.metadata.name ?? '');
}

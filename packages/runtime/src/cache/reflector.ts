/**
 * The reflector: applies watcher events to a {@link Store} and tells listeners what really changed.
 *
 * - Every object goes through `transform` first (default: drop `metadata.managedFields`, which is
 *   large and which controllers never read), then is deep-frozen into the store. With the default
 *   transform, long strings equal to one already stored share its copy (string-pool.ts).
 * - A (re)list is buffered from `init` to `initDone` (the store keeps serving the old state meanwhile),
 *   then swapped in with `store.replace()`, and only the differences are emitted: adds for new objects,
 *   updates for objects whose resourceVersion changed, deletes for objects that disappeared (an object
 *   re-created under the same name shows up as a delete then an add). Unchanged objects emit nothing, so
 *   a reconnect or relist does not trigger a reconcile storm.
 * - Watch events whose object has the resourceVersion already stored emit nothing either.
 * - `hasSynced()` turns true after the first complete list.
 *
 * Listeners run synchronously, in registration order, right after the store was updated; a listener
 * that throws (or returns a promise that rejects) is reported to `onError` and does not affect the
 * others.
 *
 * One bad event never stops the stream: an object the store cannot hold (not an object, no
 * `metadata`, no `metadata.name`, a non-string namespace or resourceVersion) is skipped and reported
 * to `onError` as a {@link MalformedObjectError} (phase 'event'); it is never stored. Any other failure
 * while applying one event is reported the same way and the next event is applied.
 */
import type { KubeObject } from '../api/object.ts';
import { keyOf } from '../api/object.ts';
import { type Resource, resourceId } from '../api/resource.ts';
import type { Client } from '../client/types.ts';
import { deepFreezeJson } from '../util/freeze.ts';
import { type DeepReadonly, deepFreeze, type IndexFunc, type ReadonlyStore, Store } from './store.ts';
import { StringPool, type StringPoolOptions, type StringPoolStats } from './string-pool.ts';
import { type WatcherErrorContext, type WatcherEvent, type WatcherOptions, watcher } from './watcher.ts';

/** Receives change notifications. All objects are frozen: `structuredClone` them before mutating. */
export interface ResourceEventHandler<T extends KubeObject> {
  /** `isInInitialList`: the object came with the first list (not a later relist or a watch event). */
  onAdd?(obj: DeepReadonly<T>, isInInitialList: boolean): void;
  onUpdate?(oldObj: DeepReadonly<T>, newObj: DeepReadonly<T>): void;
  /** `obj` is the last known state (from the DELETED event, or the stored one after a relist). */
  onDelete?(obj: DeepReadonly<T>): void;
}

/**
 * Maps each object before it is stored. Gets a fresh, mutable object (so it may modify and return it)
 * and must return an object with the same namespace/name.
 */
export type Transform<T extends KubeObject> = (obj: T) => T;

export type ReflectorErrorContext =
  | WatcherErrorContext
  | { phase: 'transform'; key: string }
  | { phase: 'handler'; event: 'add' | 'update' | 'delete'; key: string }
  /**
   * An event was skipped: its object was malformed (the error is a {@link MalformedObjectError}), or
   * applying it failed. `event` is the watcher event's type, `key` the object's key ('' if unknown).
   */
  | { phase: 'event'; event: string; key: string };

/** An object from a list or watch that the cache cannot hold (it is skipped, never stored). */
export class MalformedObjectError extends Error {
  /** The resource it came from (its resourceId, e.g. 'core/v1/configmaps'). */
  readonly resource: string;
  constructor(resource: string, problem: string) {
    super(`${resource}: skipping a malformed object: ${problem}`);
    this.name = 'MalformedObjectError';
    this.resource = resource;
  }
}

/** Why `obj` cannot be stored (undefined: it can). Only checks what keys and resourceVersions need. */
export function malformedObjectProblem(obj: unknown): string | undefined {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return 'it is not an object';
  const meta: unknown = (obj as { metadata?: unknown }).metadata;
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return 'it has no metadata';
  const { name, namespace, resourceVersion } = meta as Record<string, unknown>;
  if (typeof name !== 'string' || name === '') return 'it has no metadata.name';
  if (namespace !== undefined && namespace !== null && typeof namespace !== 'string')
    return 'metadata.namespace is not a string';
  if (resourceVersion !== undefined && resourceVersion !== null && typeof resourceVersion !== 'string')
    return 'metadata.resourceVersion is not a string';
  return undefined;
}

/**
 * Calls an event handler so that nothing it does escapes: a throw, or a rejection of a promise it
 * returns (an `async` handler), goes to `onError` instead.
 */
export function callHandler(fn: () => unknown, onError: (err: unknown) => void): void {
  let result: unknown;
  try {
    result = fn();
  } catch (err) {
    onError(err);
    return;
  }
  if (
    typeof result === 'object' &&
    result !== null &&
    typeof (result as PromiseLike<unknown>).then === 'function'
  ) {
    try {
      (result as PromiseLike<unknown>).then(undefined, onError);
    } catch (err) {
      onError(err);
    }
  }
}

/**
 * Whether a resource's stored strings are pooled when no `stringPool` option says: all but Secrets (a pool
 * would keep the keys of deleted or rotated Secrets alive until it starts over).
 */
export function stringPoolByDefault(resource: Resource): boolean {
  return !(resource.group === '' && resource.plural === 'secrets');
}

/** The default transform: removes `metadata.managedFields`. */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata?.managedFields !== undefined) delete obj.metadata.managedFields;
  return obj;
}

export interface ReflectorOptions<T extends KubeObject>
  extends Omit<WatcherOptions, 'signal' | 'onError' | 'onBookmark' | 'deepFreeze'> {
  /** Store to fill; default a new one with `indexers`. */
  store?: Store<T>;
  /** Extra indexers for the default store. */
  indexers?: Record<string, IndexFunc<T>>;
  /** Default {@link stripManagedFields}. Compose with it to keep that: `(o) => mine(stripManagedFields(o))`. */
  transform?: Transform<T>;
  /**
   * Equal long strings of stored objects share one copy (a {@link StringPool} per reflector, with these
   * options); `false` keeps every object's own. Default: on, except for Secrets (the pool would keep the
   * keys of deleted or rotated Secrets alive until it starts over; options here turn it on for them too).
   * With the default transform only: options with a transform of your own are an error.
   */
  stringPool?: StringPoolOptions | false;
  /** Errors the watcher recovered from, plus transform and listener failures. */
  onError?: (err: unknown, ctx: ReflectorErrorContext) => void;
}

export class Reflector<T extends KubeObject> {
  readonly client: Client;
  readonly resource: Resource<T>;
  readonly #store: Store<T>;
  readonly #opts: ReflectorOptions<T>;
  readonly #transform: Transform<T>;
  /** No transform of the user's: stored objects are JSON data (deepFreezeJson applies). */
  readonly #jsonData: boolean;
  readonly #strings: StringPool | undefined;
  readonly #listeners = new Set<ResourceEventHandler<T>>();
  #pending: DeepReadonly<T>[] | undefined;
  #synced = false;
  #syncWaiters = new Set<() => void>();
  #running = false;

  constructor(client: Client, resource: Resource<T>, opts: ReflectorOptions<T> = {}) {
    this.client = client;
    this.resource = resource;
    this.#opts = opts;
    this.#store = opts.store ?? new Store<T>({ indexers: opts.indexers ?? {} });
    this.#transform = opts.transform ?? stripManagedFields;
    this.#jsonData = this.#transform === stripManagedFields;
    if (!this.#jsonData && opts.stringPool !== undefined && opts.stringPool !== false) {
      throw new TypeError(
        `stringPool applies only with the default transform (${resourceId(resource)} has its own): remove stringPool, or the transform`,
      );
    }
    const pooled =
      this.#jsonData &&
      opts.stringPool !== false &&
      (opts.stringPool !== undefined || stringPoolByDefault(resource));
    this.#strings = pooled ? new StringPool(opts.stringPool || {}) : undefined;
  }

  /** What sharing equal long strings saved (undefined without a pool: a user transform, or turned off). */
  stringPoolStats(): StringPoolStats | undefined {
    return this.#strings?.stats();
  }

  get store(): ReadonlyStore<T> {
    return this.#store;
  }

  /** True once the first list has been applied. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /** resourceVersion of the last list, event or bookmark applied ('' before the first list). */
  get lastSyncResourceVersion(): string {
    return this.#store.resourceVersion;
  }

  /** Registers a listener; returns a function that unregisters it. */
  addListener(handler: ResourceEventHandler<T>): () => void {
    this.#listeners.add(handler);
    return () => {
      this.#listeners.delete(handler);
    };
  }

  /** Resolves `true` once synced, or `false` if `signal` aborts first. */
  waitForSync(signal?: AbortSignal): Promise<boolean> {
    if (this.#synced) return Promise.resolve(true);
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => {
        signal?.removeEventListener('abort', onAbort);
        this.#syncWaiters.delete(done);
        resolve(true);
      };
      const onAbort = (): void => {
        this.#syncWaiters.delete(done);
        resolve(false);
      };
      this.#syncWaiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * Lists and watches until `signal` aborts, then resolves. API errors and bad events never make it
   * reject (they are reported to `onError` and retried or skipped). It rejects only if it is already
   * running (one run at a time) or if the event stream itself fails, which the watcher never does;
   * SharedInformer restarts a failed run with backoff.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error('reflector is already running');
    this.#running = true;
    try {
      const {
        store: _store,
        indexers: _indexers,
        transform: _transform,
        stringPool: _stringPool,
        onError: _onError,
        ...watcherOpts
      } = this.#opts;
      await this.consume(
        watcher(this.client, this.resource, {
          // The default transform drops managedFields: the client need not parse them at all.
          omitManagedFields: this.#jsonData,
          // Stored as deepFreezeJson(object, this.#strings) makes them: the client may freeze while
          // decoding (cheaper than the walk afterwards); #prepare freezes what comes unfrozen.
          ...(this.#jsonData ? { deepFreeze: this.#strings ? { strings: this.#strings } : {} } : {}),
          ...watcherOpts,
          signal,
          onError: (err, ctx) => this.#report(err, ctx),
          onBookmark: (rv) => this.#store.setResourceVersion(rv),
        }),
      );
    } finally {
      this.#running = false;
    }
  }

  /**
   * Applies every event of `source` (any watcher-shaped stream) until it ends. An event that cannot be
   * applied is reported to `onError` (phase 'event') and skipped; only a failing `source` rejects.
   */
  async consume(source: AsyncIterable<WatcherEvent<T>>): Promise<void> {
    for await (const ev of source) {
      try {
        this.apply(ev);
      } catch (err) {
        this.#report(err, { phase: 'event', event: eventType(ev), key: eventKey(ev) });
      }
    }
  }

  /**
   * Applies one watcher event to the store and notifies listeners. Synchronous. Malformed objects are
   * skipped (reported to `onError`).
   */
  apply(ev: WatcherEvent<T>): void {
    switch (ev.type) {
      case 'init':
        this.#pending = [];
        return;
      case 'initApply': {
        const obj = this.#prepare(ev.object, ev.type);
        if (!obj) return;
        this.#pending ??= [];
        this.#pending.push(obj);
        return;
      }
      case 'initDone': {
        const initial = !this.#synced;
        const diff = this.#store.replace(this.#pending ?? [], ev.resourceVersion);
        this.#pending = undefined;
        for (const obj of diff.deleted) this.#emit('delete', obj);
        for (const obj of diff.added) this.#emit('add', obj, undefined, initial);
        for (const { old, new: obj } of diff.updated) this.#emit('update', obj, old);
        if (initial) {
          this.#synced = true;
          for (const waiter of [...this.#syncWaiters]) waiter();
        }
        return;
      }
      case 'apply': {
        const obj = this.#prepare(ev.object, ev.type);
        if (!obj) return;
        const res = this.#store.set(obj);
        this.#advance(obj);
        if (res.type === 'added') this.#emit('add', res.new, undefined, false);
        else if (res.type === 'updated') this.#emit('update', res.new, res.old);
        else if (res.type === 'replaced') {
          this.#emit('delete', res.old);
          this.#emit('add', res.new, undefined, false);
        }
        return;
      }
      case 'delete': {
        const obj = this.#prepare(ev.object, ev.type);
        if (!obj) return;
        const old = this.#store.delete(obj);
        this.#advance(obj);
        if (old) this.#emit('delete', obj);
        return;
      }
    }
  }

  #advance(obj: DeepReadonly<T>): void {
    const rv = obj.metadata.resourceVersion;
    if (rv) this.#store.setResourceVersion(rv);
  }

  /** Validates and transforms an object for the store; undefined (reported) if it cannot be stored. */
  #prepare(obj: T, event: string): DeepReadonly<T> | undefined {
    const problem = malformedObjectProblem(obj);
    if (problem) {
      this.#report(new MalformedObjectError(resourceId(this.resource), problem), {
        phase: 'event',
        event,
        key: '',
      });
      return undefined;
    }
    const key = keyOf(obj);
    let out = obj;
    try {
      out = this.#transform(obj) ?? obj;
    } catch (err) {
      this.#report(err, { phase: 'transform', key });
    }
    const after = malformedObjectProblem(out);
    if (after || keyOf(out) !== key) {
      const why = after ?? `the transform changed its key to "${keyOf(out)}"`;
      this.#report(new MalformedObjectError(resourceId(this.resource), `${key}: ${why}`), {
        phase: 'transform',
        key,
      });
      return undefined;
    }
    // Objects as parsed (the default transform only deletes a field): the JSON freeze, same result, faster.
    return this.#jsonData ? (deepFreezeJson(out, this.#strings) as DeepReadonly<T>) : deepFreeze(out);
  }

  #emit(
    event: 'add' | 'update' | 'delete',
    obj: DeepReadonly<T>,
    old?: DeepReadonly<T>,
    initial = false,
  ): void {
    const onError = (err: unknown): void =>
      this.#report(err, { phase: 'handler', event, key: keyOf(obj as KubeObject) });
    for (const l of [...this.#listeners]) {
      callHandler(() => {
        if (event === 'add') return l.onAdd?.(obj, initial);
        if (event === 'update') return l.onUpdate?.(old ?? obj, obj);
        return l.onDelete?.(obj);
      }, onError);
    }
  }

  #report(err: unknown, ctx: ReflectorErrorContext): void {
    try {
      this.#opts.onError?.(err, ctx);
    } catch {
      // an error hook must not break the reflector
    }
  }
}

function eventType(ev: unknown): string {
  const type: unknown = typeof ev === 'object' && ev !== null ? (ev as { type?: unknown }).type : undefined;
  return typeof type === 'string' ? type : 'unknown';
}

function eventKey(ev: unknown): string {
  const obj: unknown =
    typeof ev === 'object' && ev !== null ? (ev as { object?: unknown }).object : undefined;
  return malformedObjectProblem(obj) === undefined ? keyOf(obj as KubeObject) : '';
}

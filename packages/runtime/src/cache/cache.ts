/**
 * Cache: the read side controllers use, like controller-runtime's informer cache. A factory of shared
 * informers, one per (resource, namespace, label selector, field selector), each with its own store.
 *
 * - `get` / `list` read from the resource's informer. The informer is created and started lazily on
 *   first use (once the cache itself is started); a read before the informer has synced waits for the
 *   sync, until the read's `signal` aborts (in a reconciler: `cache.get(res, req, ctx)` or
 *   `{ signal: ctx.signal }`). Reads before `start` throw {@link CacheNotStartedError}.
 * - Per-resource options (`byResource`, or `configure()` before first use) restrict what is cached:
 *   a namespace, label and field selectors (sent to the API server, so only matching objects are
 *   listed, watched and held in memory), a transform, extra indexers. Reads outside a resource's
 *   namespace throw.
 * - Reads and events agree: a read with the selectors (and namespace) of an informer a watch uses is
 *   answered from that informer, which has seen every event it delivered to that watch; other reads
 *   go to the resource's own informer and filter in memory. Reads never create selector informers.
 * - Objects returned are deep-frozen and typed `DeepReadonly<T>`: `structuredClone(obj) as T` before
 *   modifying one (to build an update, say).
 */
import type { KubeObject, ObjectKey } from '../api/object.ts';
import { type Resource, resourceId } from '../api/resource.ts';
import type { Client } from '../client/types.ts';
import type { Clock } from '../util/clock.ts';
import type { BackoffOptions } from './backoff.ts';
import { type InformerErrorContext, SharedInformer } from './informer.ts';
import { stringPoolByDefault, type Transform } from './reflector.ts';
import {
  canonicalLabelSelector,
  escapeFieldValue,
  fieldMatcher,
  labelMatcher,
  parseFieldSelector,
} from './selector.ts';
import type { DeepReadonly, IndexFunc } from './store.ts';
import type { StringPoolOptions } from './string-pool.ts';

/** What to cache of one resource. */
export interface ResourceCacheOptions<T extends KubeObject> {
  /** Cache only this namespace (namespaced resources). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Default: the cache's `transform`, else strip managedFields. */
  transform?: Transform<T>;
  indexers?: Record<string, IndexFunc<T>>;
  /** Overrides the cache's resync period for this resource. */
  resyncPeriodMs?: number;
  /** Overrides the cache's `stringPool` for this resource (see ReflectorOptions.stringPool). */
  stringPool?: StringPoolOptions | false;
}

declare const resourceConfigBrand: unique symbol;
/** Per-resource options bound to their resource; make one with {@link forResource}. */
export interface ResourceCacheConfig {
  readonly [resourceConfigBrand]: true;
}
interface ResourceCacheConfigImpl {
  resource: Resource;
  options: ResourceCacheOptions<KubeObject>;
}

/** Binds options to a resource for `CacheOptions.byResource`, keeping them type-checked against it. */
export function forResource<T extends KubeObject>(
  resource: Resource<T>,
  options: ResourceCacheOptions<T>,
): ResourceCacheConfig {
  const impl: ResourceCacheConfigImpl = {
    resource,
    options: options as unknown as ResourceCacheOptions<KubeObject>,
  };
  return impl as unknown as ResourceCacheConfig;
}

export interface CacheOptions {
  /** Defaults for every resource: restrict namespaced resources to this namespace. */
  namespace?: string;
  /** Per-resource options (take precedence over the defaults). */
  byResource?: ResourceCacheConfig[];
  /** Transform for resources that have none of their own. Default strips managedFields. */
  transform?: Transform<KubeObject>;
  /**
   * Equal long strings of cached objects share one copy, per informer (ReflectorOptions.stringPool): the
   * default for every resource without a transform of its own, except Secrets; `false` turns it off.
   */
  stringPool?: StringPoolOptions | false;
  /** Periodic resync for every informer, ms. Default 0 (off). */
  resyncPeriodMs?: number;
  pageSize?: number;
  /** Stream each informer's initial state through its watch instead of LIST pages (see watcher.ts). */
  watchList?: boolean;
  watchTimeoutSeconds?: number;
  silenceTimeoutMs?: number;
  backoff?: BackoffOptions;
  clock?: Clock;
  random?: () => number;
  onError?: (err: unknown, ctx: InformerErrorContext & { resource: string }) => void;
}

export interface CacheReadOptions {
  /**
   * Stops waiting for the informer's first sync: the read rejects with the signal's reason. Pass the
   * reconcile's `ctx.signal` (or `ctx` itself: a ReconcileContext has a `signal`), so that a read of a
   * resource whose informer cannot sync (forbidden by RBAC, CRD not installed) ends with the reconcile.
   */
  signal?: AbortSignal;
}

/**
 * Selectors of a read. A read whose selectors (and namespace, or a cluster-wide informer) are those of
 * an informer a watch uses is answered from that informer: it has seen every event that watch
 * delivered. Otherwise the resource's informer answers and the selectors filter in memory.
 */
export interface CacheSelectorOptions {
  /** Only objects with these labels (on top of the resource's cache-level selector). */
  labelSelector?: string;
  /** Only objects with these fields; dotted paths like `metadata.name` or `status.phase`. */
  fieldSelector?: string;
}

/** A get with selectors: the object only if it matches them, from the informer of that scope. */
export interface CacheGetOptions extends CacheReadOptions, CacheSelectorOptions {}

export interface CacheListOptions extends CacheReadOptions, CacheSelectorOptions {
  namespace?: string;
  /** Objects filed under `value` in the store index `name` (e.g. `controllerUID`). */
  index?: { name: string; value: string };
}

export interface InformerSelector {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export class CacheNotStartedError extends Error {
  constructor() {
    super('the cache is not started, cannot read objects');
    this.name = 'CacheNotStartedError';
  }
}

/** A read in a namespace the cache does not hold for that resource. */
export class NamespaceNotCachedError extends Error {
  constructor(resource: string, namespace: string, cached: string) {
    super(`${resource}: namespace "${namespace}" is not cached (the cache holds namespace "${cached}" only)`);
    this.name = 'NamespaceNotCachedError';
  }
}

export class Cache {
  readonly client: Client;
  readonly #opts: CacheOptions;
  readonly #byResource = new Map<string, ResourceCacheOptions<KubeObject>>();
  readonly #informers = new Map<string, SharedInformer<KubeObject>>();
  /** Each resource's own informer (its cache options), by resource id: the fast path of reads. */
  readonly #own = new Map<string, SharedInformer<KubeObject>>();
  /** Resources some informer was asked for with explicit selectors: only their reads are matched. */
  readonly #selected = new Set<string>();
  #signal: AbortSignal | undefined;
  #runs: Promise<void>[] = [];
  #startWaiters = new Set<() => void>();

  constructor(client: Client, opts: CacheOptions = {}) {
    this.client = client;
    this.#opts = opts;
    for (const cfg of opts.byResource ?? []) {
      const { resource, options } = cfg as unknown as ResourceCacheConfigImpl;
      this.#byResource.set(resourceId(resource), options);
    }
  }

  /** Sets the options for one resource. Only before its informer exists (first read or getInformer). */
  configure<T extends KubeObject>(resource: Resource<T>, options: ResourceCacheOptions<T>): void {
    const id = resourceId(resource);
    for (const key of this.#informers.keys()) {
      if (key.startsWith(`${id}|`)) throw new Error(`${id}: cannot configure, its informer already exists`);
    }
    this.#byResource.set(id, options as unknown as ResourceCacheOptions<KubeObject>);
  }

  /** The effective options for a resource (per-resource, else cache defaults). */
  optionsFor<T extends KubeObject>(resource: Resource<T>): ResourceCacheOptions<T> {
    const own = this.#byResource.get(resourceId(resource)) ?? {};
    const namespace = resource.namespaced ? (own.namespace ?? this.#opts.namespace) : undefined;
    return { ...own, ...(namespace ? { namespace } : {}) } as unknown as ResourceCacheOptions<T>;
  }

  /**
   * The shared informer for a resource: by default the one the resource's cache options describe;
   * with `selector`, one for exactly that namespace and selectors. Created on first request and
   * started right away if the cache is running.
   */
  getInformer<T extends KubeObject>(resource: Resource<T>, selector?: InformerSelector): SharedInformer<T> {
    const id = resourceId(resource);
    const own = selector ? undefined : this.#own.get(id);
    if (own) return own as unknown as SharedInformer<T>;
    if (selector) this.#selected.add(id);
    const base = this.optionsFor(resource);
    const namespace = resource.namespaced
      ? (selector ? selector.namespace : base.namespace) || undefined
      : undefined;
    const labelSelector = (selector ? selector.labelSelector : base.labelSelector) || undefined;
    const fieldSelector = (selector ? selector.fieldSelector : base.fieldSelector) || undefined;
    const key = scopeKey(scopeOf(id, namespace, labelSelector, fieldSelector));
    const existing = this.#informers.get(key);
    if (existing) {
      if (!selector) this.#own.set(id, existing);
      return existing as unknown as SharedInformer<T>;
    }

    const o = this.#opts;
    const informer = new SharedInformer<T>(this.client, resource, {
      ...(namespace ? { namespace } : {}),
      ...(labelSelector ? { labelSelector } : {}),
      ...(fieldSelector ? { fieldSelector } : {}),
      ...(base.transform
        ? { transform: base.transform }
        : o.transform
          ? { transform: o.transform as unknown as Transform<T> }
          : {}),
      ...(base.indexers ? { indexers: base.indexers } : {}),
      ...stringPoolOption(resource, base, o),
      resyncPeriodMs: base.resyncPeriodMs ?? o.resyncPeriodMs ?? 0,
      ...(o.pageSize !== undefined ? { pageSize: o.pageSize } : {}),
      ...(o.watchList !== undefined ? { watchList: o.watchList } : {}),
      ...(o.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: o.watchTimeoutSeconds } : {}),
      ...(o.silenceTimeoutMs !== undefined ? { silenceTimeoutMs: o.silenceTimeoutMs } : {}),
      ...(o.backoff ? { backoff: o.backoff } : {}),
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.random ? { random: o.random } : {}),
      onError: (err, ctx) => {
        try {
          o.onError?.(err, { ...ctx, resource: id });
        } catch {
          // an error hook must not break the cache
        }
      },
    });
    this.#informers.set(key, informer as unknown as SharedInformer<KubeObject>);
    if (!selector) this.#own.set(id, informer as unknown as SharedInformer<KubeObject>);
    if (this.#signal) this.#runs.push(informer.start(this.#signal));
    return informer;
  }

  /**
   * Starts every informer created so far and any created later. Resolves once `signal` aborted and all
   * informers stopped. Never rejects. Calling it again does nothing (resolves like the first call).
   */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#signal) {
      await new Promise<void>((resolve) => {
        if (this.#signal?.aborted) resolve();
        else this.#signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    } else {
      this.#signal = signal;
      for (const informer of this.#informers.values()) this.#runs.push(informer.start(signal));
      for (const waiter of [...this.#startWaiters]) waiter();
      if (!signal.aborted) {
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
      }
    }
    // Informers created while the last ones were stopping join this list too.
    for (let n = 0; n < this.#runs.length; n = this.#runs.length) await Promise.all(this.#runs.slice(n));
  }

  get started(): boolean {
    return this.#signal !== undefined;
  }

  /**
   * The informers created so far that have not synced yet, described as `resourceId` plus their
   * namespace and selectors, e.g. `example.com/v1/widgets (namespace "ops")`. An informer that stays
   * here usually cannot list: RBAC forbids it, or its CRD is not installed.
   */
  unsyncedInformers(): string[] {
    const out: string[] = [];
    for (const informer of this.#informers.values()) {
      if (informer.hasSynced()) continue;
      const scope = [
        informer.namespace ? `namespace "${informer.namespace}"` : '',
        informer.labelSelector ? `labelSelector "${informer.labelSelector}"` : '',
        informer.fieldSelector ? `fieldSelector "${informer.fieldSelector}"` : '',
      ].filter(Boolean);
      const id = resourceId(informer.resource);
      out.push(scope.length > 0 ? `${id} (${scope.join(', ')})` : id);
    }
    return out;
  }

  /** True once started and every informer created so far has synced. */
  hasSynced(): boolean {
    if (!this.#signal) return false;
    for (const informer of this.#informers.values()) if (!informer.hasSynced()) return false;
    return true;
  }

  /**
   * Waits until the cache is started and every informer (including ones created meanwhile) has synced.
   * Resolves `false` if `signal` aborts first (or the cache stops before syncing).
   */
  async waitForCacheSync(signal?: AbortSignal): Promise<boolean> {
    if (!(await this.#waitStarted(signal))) return false;
    const stop = anySignal(signal, this.#signal);
    for (;;) {
      const pending = [...this.#informers.values()].filter((i) => !i.hasSynced());
      if (pending.length === 0) return true;
      const results = await Promise.all(pending.map((i) => i.waitForSync(stop)));
      if (results.includes(false)) return false;
    }
  }

  /**
   * The object with this key from the cache, or `undefined` if there is none (or, with selectors, if
   * it does not match them). Waits for the informer to sync first. With the selectors of a watch's
   * informer, reads that informer (see {@link CacheSelectorOptions}). Throws CacheNotStartedError
   * before `start`, NamespaceNotCachedError for a namespace the cache does not hold, and the abort
   * reason if `signal` aborts.
   */
  async get<T extends KubeObject>(
    resource: Resource<T>,
    key: ObjectKey,
    opts: CacheGetOptions = {},
  ): Promise<DeepReadonly<T> | undefined> {
    const namespace = resource.namespaced ? key.namespace || undefined : undefined;
    const { informer, scoped } = await this.#readyInformer(resource, namespace, opts);
    const obj = informer.store.get(resource.namespaced ? key : { name: key.name });
    if (!obj || scoped) return obj;
    return matcherOf(opts)(obj) ? obj : undefined;
  }

  /**
   * Objects of a resource from the cache, filtered by namespace, selectors and/or an index. With the
   * selectors of a watch's informer, reads that informer (see {@link CacheSelectorOptions}).
   */
  async list<T extends KubeObject>(
    resource: Resource<T>,
    opts: CacheListOptions = {},
  ): Promise<DeepReadonly<T>[]> {
    const namespace = resource.namespaced ? opts.namespace || undefined : undefined;
    const { informer, scoped } = await this.#readyInformer(resource, namespace, opts);
    const store = informer.store;
    // A cluster-wide informer answering a read of the cache's namespace: keep to that namespace.
    const ns = namespace ?? (scoped ? this.optionsFor(resource).namespace : undefined);
    let items: DeepReadonly<T>[];
    if (opts.index) {
      items = store.byIndex(opts.index.name, opts.index.value);
      if (ns) items = items.filter((o) => o.metadata.namespace === ns);
    } else items = ns ? store.listByNamespace(ns) : store.list();
    if (scoped) return items; // that informer holds exactly what the selectors select
    if (opts.labelSelector || opts.fieldSelector) items = items.filter(matcherOf(opts));
    return items;
  }

  /**
   * The informer a read goes to, synced: the one whose scope is the read's (a watch's informer, see
   * {@link CacheSelectorOptions}), else the resource's own. `scoped` tells which.
   */
  async #readyInformer<T extends KubeObject>(
    resource: Resource<T>,
    namespace: string | undefined,
    opts: CacheReadOptions & CacheSelectorOptions,
  ): Promise<{ informer: SharedInformer<T>; scoped: boolean }> {
    const id = resourceId(resource);
    const cached = this.optionsFor(resource).namespace;
    const scoped = this.#informerForScope(resource, namespace ?? cached, opts);
    if (!scoped && namespace && cached && namespace !== cached) {
      throw new NamespaceNotCachedError(id, namespace, cached);
    }
    if (!this.#signal) throw new CacheNotStartedError();
    const informer = scoped ?? this.getInformer(resource);
    if (!informer.hasSynced()) {
      opts.signal?.throwIfAborted();
      const synced = await informer.waitForSync(anySignal(opts.signal, this.#signal));
      if (!synced) {
        opts.signal?.throwIfAborted();
        throw new Error(`${id}: the cache stopped before the informer synced`);
      }
    }
    return { informer, scoped: scoped !== undefined };
  }

  /**
   * An existing informer whose selectors are the read's and whose namespace is the read's, else one
   * with those selectors across all namespaces. None for a read without selectors.
   */
  #informerForScope<T extends KubeObject>(
    resource: Resource<T>,
    namespace: string | undefined,
    selectors: CacheSelectorOptions,
  ): SharedInformer<T> | undefined {
    if (!selectors.labelSelector && !selectors.fieldSelector) return undefined;
    if (!this.#selected.has(resourceId(resource))) return undefined;
    const want = scopeOf(
      resourceId(resource),
      resource.namespaced ? namespace : undefined,
      selectors.labelSelector,
      selectors.fieldSelector,
    );
    const found =
      this.#informers.get(scopeKey(want)) ??
      (want.namespace ? this.#informers.get(scopeKey({ ...want, namespace: '' })) : undefined);
    return found as unknown as SharedInformer<T> | undefined;
  }

  #waitStarted(signal: AbortSignal | undefined): Promise<boolean> {
    if (this.#signal) return Promise.resolve(true);
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const started = (): void => {
        signal?.removeEventListener('abort', onAbort);
        this.#startWaiters.delete(started);
        resolve(true);
      };
      const onAbort = (): void => {
        this.#startWaiters.delete(started);
        resolve(false);
      };
      this.#startWaiters.add(started);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** What an informer holds: a resource, a namespace ('' for all) and canonical selectors ('' for none). */
interface InformerScope {
  resource: string;
  namespace: string;
  labelSelector: string;
  fieldSelector: string;
}

/** Throws SelectorParseError for a selector the API server would reject. */
function scopeOf(
  resource: string,
  namespace: string | undefined,
  labelSelector: string | undefined,
  fieldSelector: string | undefined,
): InformerScope {
  return {
    resource,
    namespace: namespace ?? '',
    labelSelector: canonicalLabelSelector(labelSelector ?? ''),
    fieldSelector: canonicalFieldSelector(fieldSelector ?? ''),
  };
}

/** The informers' map key: informers for equivalent selectors (`a=b`, `a==b`) are one. */
function scopeKey(s: InformerScope): string {
  return [s.resource, s.namespace, s.labelSelector, s.fieldSelector].join('|');
}

function canonicalFieldSelector(selector: string): string {
  const parts = parseFieldSelector(selector).map(
    (r) => `${r.path.join('.')}${r.op}${escapeFieldValue(r.value)}`,
  );
  return [...new Set(parts)].sort().join(',');
}

/** The in-memory filter of a read's selectors. */
function matcherOf(opts: CacheSelectorOptions): (obj: DeepReadonly<KubeObject>) => boolean {
  const labels = labelMatcher(opts.labelSelector);
  const fields = fieldMatcher(opts.fieldSelector);
  return (obj) => labels(obj.metadata.labels) && fields(obj);
}

function anySignal(...signals: (AbortSignal | undefined)[]): AbortSignal | undefined {
  const defined = signals.filter((s): s is AbortSignal => s !== undefined);
  if (defined.length <= 1) return defined[0];
  return AbortSignal.any(defined);
}

/**
 * The informer's `stringPool`: the resource's own, else the cache's for a resource without a transform of
 * its own, where the reflector pools by default (options for every resource do not turn it on for Secrets).
 */
function stringPoolOption<T extends KubeObject>(
  resource: Resource<T>,
  base: ResourceCacheOptions<T>,
  o: CacheOptions,
): { stringPool?: StringPoolOptions | false } {
  if (base.stringPool !== undefined) return { stringPool: base.stringPool };
  if (o.stringPool === undefined || base.transform || o.transform) return {};
  return o.stringPool === false || stringPoolByDefault(resource) ? { stringPool: o.stringPool } : {};
}

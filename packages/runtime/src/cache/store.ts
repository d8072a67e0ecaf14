/**
 * An indexed, keyed object store: the in-memory state behind an informer (client-go's
 * ThreadSafeStore + Indexer).
 *
 * Keys are `namespace/name` (or `name` for cluster-scoped objects), see {@link keyOf}.
 *
 * "Thread safety" in JavaScript: every method is synchronous, so no reader can observe a half-applied
 * change, and `list()`/`byIndex()` return fresh arrays (snapshots) that later writes do not touch.
 *
 * Immutability: the store deep-freezes (`Object.freeze`, recursively) every object it is given, in
 * place, and hands objects out typed `DeepReadonly<T>`. A caller that mutates a cached object anyway
 * gets a TypeError (ES modules run in strict mode) and the store is unaffected. Callers that need a
 * mutable copy (to build an update, say) must copy first: `structuredClone(obj) as T`.
 */
import { type KubeObject, keyOf, type ObjectKey } from '../api/object.ts';
import { deepFreeze as freeze } from '../util/freeze.ts';

/** Recursively read-only view of T. Functions are left as they are. */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends ReadonlyArray<infer E>
    ? ReadonlyArray<DeepReadonly<E>>
    : T extends ReadonlyMap<infer K, infer V>
      ? ReadonlyMap<DeepReadonly<K>, DeepReadonly<V>>
      : T extends ReadonlySet<infer E>
        ? ReadonlySet<DeepReadonly<E>>
        : T extends object
          ? { readonly [P in keyof T]: DeepReadonly<T[P]> }
          : T;

/** Maps an object to the index values it is filed under (none: not indexed). */
export type IndexFunc<T extends KubeObject> = (obj: DeepReadonly<T>) => readonly string[];

/** Built-in index: objects by `metadata.namespace` ('' for cluster-scoped objects). */
export const NAMESPACE_INDEX = 'namespace';
/** Built-in index: objects by the UID of their controller owner reference (`controller: true`). */
export const CONTROLLER_UID_INDEX = 'controllerUID';

export const namespaceIndexFunc = (obj: DeepReadonly<KubeObject>): string[] => [obj.metadata.namespace ?? ''];

export const controllerUIDIndexFunc = (obj: DeepReadonly<KubeObject>): string[] => {
  const owner = obj.metadata.ownerReferences?.find((ref) => ref.controller === true);
  return owner ? [owner.uid] : [];
};

/** Freezes `value` and everything reachable from it, in place. Returns it, typed read-only. */
export function deepFreeze<T>(value: T): DeepReadonly<T> {
  return freeze(value) as DeepReadonly<T>;
}

/** What `replace()` changed, in key order of the new list (deletions last). */
export interface ReplaceDiff<T extends KubeObject> {
  added: DeepReadonly<T>[];
  updated: { old: DeepReadonly<T>; new: DeepReadonly<T> }[];
  deleted: DeepReadonly<T>[];
}

/** What `set()` did. */
export type SetResult<T extends KubeObject> =
  | { type: 'added'; new: DeepReadonly<T> }
  | { type: 'updated'; old: DeepReadonly<T>; new: DeepReadonly<T> }
  /** Same key, same UID and resourceVersion as the stored object: nothing changed, the old one is kept. */
  | { type: 'unchanged'; old: DeepReadonly<T> }
  /** Same key but another UID: the object was deleted and re-created. */
  | { type: 'replaced'; old: DeepReadonly<T>; new: DeepReadonly<T> };

/** The read side of a store: what informers and caches hand to controllers. */
export interface ReadonlyStore<T extends KubeObject> {
  readonly size: number;
  /** resourceVersion of the last list or event applied, '' before the first. */
  readonly resourceVersion: string;
  get(key: string | ObjectKey): DeepReadonly<T> | undefined;
  has(key: string | ObjectKey): boolean;
  keys(): string[];
  list(): DeepReadonly<T>[];
  listByNamespace(namespace: string): DeepReadonly<T>[];
  byIndex(indexName: string, value: string): DeepReadonly<T>[];
  indexNames(): string[];
}

export interface StoreOptions<T extends KubeObject> {
  /** Extra indexers, in addition to the built-in `namespace` and `controllerUID`. */
  indexers?: Record<string, IndexFunc<T>>;
  /**
   * Called when an index function throws. The object is still stored (and found by key), just not
   * filed under that index. Default: ignore.
   */
  onIndexError?: (err: unknown, indexName: string, key: string) => void;
}

const sameVersion = (a: DeepReadonly<KubeObject>, b: DeepReadonly<KubeObject>): boolean =>
  a.metadata.uid === b.metadata.uid &&
  a.metadata.resourceVersion !== undefined &&
  a.metadata.resourceVersion === b.metadata.resourceVersion;

const sameUID = (a: DeepReadonly<KubeObject>, b: DeepReadonly<KubeObject>): boolean =>
  a.metadata.uid === undefined || b.metadata.uid === undefined || a.metadata.uid === b.metadata.uid;

interface Index {
  fn: IndexFunc<KubeObject>;
  /** index value -> keys */
  values: Map<string, Set<string>>;
}

export class Store<T extends KubeObject> implements ReadonlyStore<T> {
  #items = new Map<string, DeepReadonly<T>>();
  #indexes = new Map<string, Index>();
  /** key -> index name -> values it is filed under, to un-index cheaply. */
  #filed = new Map<string, Map<string, readonly string[]>>();
  #resourceVersion = '';
  readonly #onIndexError: ((err: unknown, indexName: string, key: string) => void) | undefined;

  constructor(opts: StoreOptions<T> = {}) {
    this.#onIndexError = opts.onIndexError;
    this.addIndexer(NAMESPACE_INDEX, namespaceIndexFunc);
    this.addIndexer(CONTROLLER_UID_INDEX, controllerUIDIndexFunc);
    for (const [name, fn] of Object.entries(opts.indexers ?? {})) this.addIndexer(name, fn);
  }

  get size(): number {
    return this.#items.size;
  }

  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Records the resourceVersion the store is current at (events advance it; bookmarks may too). */
  setResourceVersion(rv: string): void {
    this.#resourceVersion = rv;
  }

  /** Adds an index; objects already stored are indexed right away. Names must be unique. */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    if (this.#indexes.has(name)) throw new Error(`indexer "${name}" already exists`);
    const index: Index = { fn: fn as IndexFunc<KubeObject>, values: new Map() };
    this.#indexes.set(name, index);
    for (const [key, obj] of this.#items) this.#fileUnder(name, index, key, obj);
  }

  indexNames(): string[] {
    return [...this.#indexes.keys()];
  }

  get(key: string | ObjectKey): DeepReadonly<T> | undefined {
    return this.#items.get(typeof key === 'string' ? key : keyOf(key));
  }

  has(key: string | ObjectKey): boolean {
    return this.#items.has(typeof key === 'string' ? key : keyOf(key));
  }

  keys(): string[] {
    return [...this.#items.keys()];
  }

  list(): DeepReadonly<T>[] {
    return [...this.#items.values()];
  }

  listByNamespace(namespace: string): DeepReadonly<T>[] {
    return this.byIndex(NAMESPACE_INDEX, namespace);
  }

  byIndex(indexName: string, value: string): DeepReadonly<T>[] {
    const index = this.#indexes.get(indexName);
    if (!index) throw new Error(`no indexer named "${indexName}"`);
    const keys = index.values.get(value);
    if (!keys) return [];
    const out: DeepReadonly<T>[] = [];
    for (const key of keys) {
      const obj = this.#items.get(key);
      if (obj) out.push(obj);
    }
    return out;
  }

  /**
   * Adds or replaces one object (deep-freezing it in place). If the stored object has the same UID and
   * resourceVersion, the stored one is kept and `unchanged` returned.
   */
  set(obj: T | DeepReadonly<T>): SetResult<T> {
    const frozen = deepFreeze(obj) as DeepReadonly<T>;
    const key = keyOf(frozen as KubeObject);
    const old = this.#items.get(key);
    if (old && sameVersion(old, frozen)) return { type: 'unchanged', old };
    this.#put(key, frozen, old);
    if (!old) return { type: 'added', new: frozen };
    return sameUID(old, frozen)
      ? { type: 'updated', old, new: frozen }
      : { type: 'replaced', old, new: frozen };
  }

  /** Removes the object stored under `key` (or under the given object's key); returns it. */
  delete(key: string | ObjectKey | KubeObject | DeepReadonly<KubeObject>): DeepReadonly<T> | undefined {
    const k = typeof key === 'string' ? key : keyOf(key as KubeObject);
    const old = this.#items.get(k);
    if (!old) return undefined;
    this.#unfile(k);
    this.#items.delete(k);
    return old;
  }

  /**
   * Replaces the whole contents with `objects` (a fresh list) and records `resourceVersion`.
   * Returns what changed: objects not stored before (`added`), objects whose resourceVersion changed
   * (`updated`), and stored objects missing from the list (`deleted`). An object that was deleted and
   * re-created under the same key (another UID) counts as deleted plus added. Objects whose UID and
   * resourceVersion are unchanged keep their stored instance and are not reported.
   */
  replace(objects: Iterable<T | DeepReadonly<T>>, resourceVersion: string): ReplaceDiff<T> {
    const diff: ReplaceDiff<T> = { added: [], updated: [], deleted: [] };
    const seen = new Set<string>();
    for (const obj of objects) {
      const frozen = deepFreeze(obj) as DeepReadonly<T>;
      const key = keyOf(frozen as KubeObject);
      seen.add(key);
      const old = this.#items.get(key);
      if (old && sameVersion(old, frozen)) continue;
      if (!old) diff.added.push(frozen);
      else if (sameUID(old, frozen)) diff.updated.push({ old, new: frozen });
      else {
        diff.deleted.push(old);
        diff.added.push(frozen);
      }
      this.#put(key, frozen, old);
    }
    for (const [key, old] of [...this.#items]) {
      if (seen.has(key)) continue;
      diff.deleted.push(old);
      this.#unfile(key);
      this.#items.delete(key);
    }
    this.#resourceVersion = resourceVersion;
    return diff;
  }

  /** Removes everything (indexers stay). */
  clear(): void {
    this.#items.clear();
    this.#filed.clear();
    for (const index of this.#indexes.values()) index.values.clear();
    this.#resourceVersion = '';
  }

  #put(key: string, obj: DeepReadonly<T>, old: DeepReadonly<T> | undefined): void {
    if (old) this.#unfile(key);
    this.#items.set(key, obj);
    for (const [name, index] of this.#indexes) this.#fileUnder(name, index, key, obj);
  }

  #fileUnder(name: string, index: Index, key: string, obj: DeepReadonly<T>): void {
    let values: string[];
    try {
      values = [...new Set(index.fn(obj as DeepReadonly<KubeObject>))];
    } catch (err) {
      try {
        this.#onIndexError?.(err, name, key);
      } catch {
        // a failing error hook must not corrupt the store either
      }
      return;
    }
    if (values.length === 0) return;
    let filed = this.#filed.get(key);
    if (!filed) {
      filed = new Map();
      this.#filed.set(key, filed);
    }
    filed.set(name, values);
    for (const value of values) {
      let keys = index.values.get(value);
      if (!keys) {
        keys = new Set();
        index.values.set(value, keys);
      }
      keys.add(key);
    }
  }

  #unfile(key: string): void {
    const filed = this.#filed.get(key);
    if (!filed) return;
    for (const [name, values] of filed) {
      const index = this.#indexes.get(name);
      if (!index) continue;
      for (const value of values) {
        const keys = index.values.get(value);
        keys?.delete(key);
        if (keys?.size === 0) index.values.delete(value);
      }
    }
    this.#filed.delete(key);
  }
}

/**
 * The fake client's storage: objects by kind and key, one global resourceVersion, the event history
 * (compactable, as etcd's), the open watchers, and the write semantics every verb shares (create, change,
 * deletion with finalizers, the garbage collector).
 */
import { randomInt, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { KubeObject, ManagedFieldsEntry, ObjectKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { resourceId } from '../api/resource.ts';
import type { DeleteOptions, Patch, WriteOptions } from '../client/types.ts';
import { deepFreeze } from '../util/freeze.ts';
import { alreadyExistsError, badRequestError, invalidError, unprocessableError } from './errors.ts';
import { applyMerge } from './fake-fields.ts';
import { checkNewFinalizers, checkObjectName, normalizeMeta, specOf } from './fake-validation.ts';
import {
  applyJsonPatch,
  isPlainObject,
  jsonClone,
  mergePatch,
  PatchError,
  strategicMergePatch,
} from './patch.ts';

export type DeletionPolicy = NonNullable<DeleteOptions['propagationPolicy']>;
export type StoredEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
/** Objects as stored: JSON values, deep-frozen, never handed out. */
export type Obj = KubeObject & Record<string, unknown>;

export interface HistoryEntry {
  rv: number;
  resId: string;
  key: string;
  type: StoredEventType;
  object: Obj;
  /** The object before a MODIFIED/DELETED. */
  previous?: Obj;
}

export interface Watcher {
  resId: string;
  deliver(entry: HistoryEntry): void;
  close(error?: unknown): void;
}

const NAME_SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

/** Stored objects are frozen; this returns a private, mutable copy. */
export function copy<T>(value: unknown): T {
  return jsonClone(value) as T;
}

export function setOrDelete(target: object, field: string, value: unknown): void {
  const record = target as Record<string, unknown>;
  if (value === undefined) delete record[field];
  else record[field] = value;
}

export function sortKey(obj: KubeObject): [string, string] {
  return [obj.metadata.namespace ?? '', obj.metadata.name ?? ''];
}

export function compareKeys(a: [string, string], b: [string, string]): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
  return 0;
}

export function storeKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

export function parseResourceVersion(raw: string): number {
  if (!/^[0-9]+$/.test(raw)) throw badRequestError(`invalid resourceVersion "${raw}"`);
  return Number(raw);
}

export class FakeStore {
  #rv = 0;
  /** History at or below this resourceVersion has been compacted into #base. */
  #compactedRv = 0;
  #base = new Map<string, Map<string, Obj>>();
  #history: HistoryEntry[] = [];
  readonly #buckets = new Map<string, Map<string, Obj>>();
  readonly #resources = new Map<string, Resource>();
  readonly #uids = new Map<string, { resId: string; key: string }>();
  readonly watchers = new Set<Watcher>();
  /** Propagation policies of objects waiting on finalizers, by uid. */
  readonly #pendingPolicy = new Map<string, DeletionPolicy>();
  readonly #now: () => Date;
  readonly #hasStatus: (res: Resource) => boolean;

  constructor(now: () => Date, hasStatus: (res: Resource) => boolean) {
    this.#now = now;
    this.#hasStatus = hasStatus;
  }

  get rv(): number {
    return this.#rv;
  }

  get compactedRv(): number {
    return this.#compactedRv;
  }

  get history(): readonly HistoryEntry[] {
    return this.#history;
  }

  /** The current objects of a kind (frozen), unsorted. */
  current(resId: string): Map<string, Obj> {
    return this.#buckets.get(resId) ?? new Map<string, Obj>();
  }

  key(res: Resource, key: ObjectKey): ObjectKey {
    return res.namespaced ? { namespace: key.namespace || undefined, name: key.name } : { name: key.name };
  }

  objectKey(res: Resource, obj: Obj): string {
    const k = this.key(res, { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' });
    return storeKey(k.namespace, k.name);
  }

  lookup(res: Resource, key: ObjectKey | string): Obj | undefined {
    const k = typeof key === 'string' ? key : storeKey(key.namespace, key.name);
    return this.#buckets.get(resourceId(res))?.get(k);
  }

  timestamp(): string {
    return this.#now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
  }

  /** Stores `obj` (already a private copy) with a new resourceVersion, records it and notifies watchers. */
  commit(res: Resource, type: StoredEventType, obj: Obj, previous?: Obj): Obj {
    const rv = ++this.#rv;
    obj.metadata.resourceVersion = String(rv);
    normalizeMeta(obj.metadata);
    deepFreeze(obj);
    const resId = resourceId(res);
    this.#resources.set(resId, res);
    const key = this.objectKey(res, obj);
    let bucket = this.#buckets.get(resId);
    if (!bucket) {
      bucket = new Map();
      this.#buckets.set(resId, bucket);
    }
    const uid = obj.metadata.uid;
    if (type === 'DELETED') {
      bucket.delete(key);
      if (uid) this.#uids.delete(uid);
    } else {
      bucket.set(key, obj);
      if (uid) this.#uids.set(uid, { resId, key });
    }
    const entry: HistoryEntry = { rv, resId, key, type, object: obj, ...(previous ? { previous } : {}) };
    this.#history.push(entry);
    for (const watcher of [...this.watchers]) {
      if (watcher.resId === resId) watcher.deliver(entry);
    }
    return obj;
  }

  /** The objects of a kind as they were at resourceVersion `rv` (>= the compaction point). */
  stateAt(resId: string, rv: number): Map<string, Obj> {
    const state = new Map(this.#base.get(resId) ?? []);
    for (const entry of this.#history) {
      if (entry.rv > rv) break;
      if (entry.resId !== resId) continue;
      if (entry.type === 'DELETED') state.delete(entry.key);
      else state.set(entry.key, entry.object);
    }
    return state;
  }

  /** Forgets the event history at or below `rv`, as etcd compaction does. */
  compact(rv: number): void {
    const upTo = Math.min(rv, this.#rv);
    if (upTo <= this.#compactedRv) return;
    const base = new Map<string, Map<string, Obj>>();
    for (const resId of new Set([...this.#base.keys(), ...this.#history.map((e) => e.resId)])) {
      base.set(resId, this.stateAt(resId, upTo));
    }
    this.#base = base;
    this.#history = this.#history.filter((e) => e.rv > upTo);
    this.#compactedRv = upTo;
  }

  /** Upsert for seeds and setStored. */
  put(res: Resource, obj: Obj): Obj {
    const meta = obj.metadata;
    if (!meta.name) throw new Error(`FakeClient: ${resourceId(res)} object without metadata.name`);
    if (res.namespaced && !meta.namespace) {
      throw new Error(
        `FakeClient: namespaced ${resourceId(res)} object "${meta.name}" without metadata.namespace`,
      );
    }
    if (!res.namespaced) delete meta.namespace;
    if (meta.deletionTimestamp && !meta.finalizers?.length) {
      throw new Error(
        `FakeClient: ${meta.name} has a deletionTimestamp but no finalizers; it would not exist`,
      );
    }
    const existing = this.lookup(res, this.objectKey(res, obj));
    obj.apiVersion = res.apiVersion;
    obj.kind = res.kind;
    meta.uid ??= existing?.metadata.uid ?? randomUUID();
    meta.creationTimestamp ??= existing?.metadata.creationTimestamp ?? this.timestamp();
    meta.generation ??= existing?.metadata.generation ?? 1;
    return this.commit(res, existing ? 'MODIFIED' : 'ADDED', obj, existing);
  }

  /** Creates `input` (a private copy); `manage` gives the new object's metadata.managedFields. */
  createObject(
    res: Resource,
    input: Obj,
    opts: WriteOptions,
    manage?: (created: Obj) => ManagedFieldsEntry[] | undefined,
  ): Obj {
    const meta = input.metadata;
    if (res.namespaced && !meta.namespace) {
      throw badRequestError(
        `the fake client needs metadata.namespace to create ${res.plural} (it does not default it)`,
      );
    }
    if (!res.namespaced) delete meta.namespace;
    if (!meta.name) {
      if (!meta.generateName) {
        throw invalidError(res, '', [
          {
            reason: 'FieldValueRequired',
            field: 'metadata.name',
            message: 'Required value: name or generateName is required',
          },
        ]);
      }
      let name: string;
      do {
        name = meta.generateName;
        for (let i = 0; i < 5; i++) name += NAME_SUFFIX_ALPHABET[randomInt(NAME_SUFFIX_ALPHABET.length)];
      } while (this.lookup(res, storeKey(meta.namespace, name)));
      meta.name = name;
    }
    checkObjectName(res, meta.name);
    if (this.lookup(res, storeKey(meta.namespace, meta.name))) throw alreadyExistsError(res, meta.name);
    input.apiVersion = res.apiVersion;
    input.kind = res.kind;
    meta.uid = randomUUID();
    meta.creationTimestamp = this.timestamp();
    meta.generation = 1;
    delete meta.resourceVersion;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.managedFields;
    if (this.#hasStatus(res)) delete input.status;
    if (manage) setOrDelete(meta, 'managedFields', manage(input));
    if (opts.dryRun) return input;
    return this.commit(res, 'ADDED', input);
  }

  /** Validates and commits a change to an existing object; `next` is a private copy. */
  writeExisting(res: Resource, stored: Obj, next: Obj, opts: WriteOptions, bumpsGeneration: boolean): Obj {
    normalizeMeta(next.metadata);
    checkNewFinalizers(res, stored, next);
    const statusIsSubresource = this.#hasStatus(res);
    if (
      bumpsGeneration &&
      !isDeepStrictEqual(specOf(next, statusIsSubresource), specOf(stored, statusIsSubresource))
    ) {
      next.metadata.generation = (stored.metadata.generation ?? 0) + 1;
    }
    next.metadata.resourceVersion = stored.metadata.resourceVersion;
    // A write that changes nothing is not persisted: no new resourceVersion, no watch event.
    if (isDeepStrictEqual(next, stored)) return stored;
    if (opts.dryRun) return next;
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
      return this.remove(res, next, this.#pendingPolicy.get(next.metadata.uid ?? '') ?? 'Background', stored);
    }
    return this.commit(res, 'MODIFIED', next, stored);
  }

  /** A delete that passed its preconditions: marks an object with finalizers, removes any other. */
  delete(res: Resource, stored: Obj, policy: DeletionPolicy, explicitPolicy: boolean): void {
    const meta = stored.metadata;
    if (meta.finalizers && meta.finalizers.length > 0) {
      if (!meta.deletionTimestamp) this.#markDeleting(res, stored);
      if (explicitPolicy && meta.uid) this.#pendingPolicy.set(meta.uid, policy);
      return;
    }
    this.remove(res, stored, policy);
  }

  /** Sets deletionTimestamp (and bumps generation) on an object that has finalizers. */
  #markDeleting(res: Resource, stored: Obj): Obj {
    const next = copy<Obj>(stored);
    next.metadata.deletionTimestamp = this.timestamp();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (next.metadata.generation) next.metadata.generation += 1;
    return this.commit(res, 'MODIFIED', next, stored);
  }

  /** Removes an object and runs the garbage collector for its dependents. */
  remove(res: Resource, obj: Obj, policy: DeletionPolicy, previous: Obj = obj): Obj {
    const removed = this.commit(res, 'DELETED', copy<Obj>(obj), previous);
    const uid = removed.metadata.uid;
    if (uid) {
      this.#pendingPolicy.delete(uid);
      this.#collectGarbage(uid, policy);
    }
    return removed;
  }

  /**
   * The garbage collector, run synchronously when an owner is removed. Orphan: the dependents lose their
   * ownerReference to it. Otherwise a dependent that still has another existing owner loses the dangling
   * reference, and one that has not is deleted (getting a deletionTimestamp if it has finalizers).
   */
  #collectGarbage(ownerUid: string, policy: DeletionPolicy): void {
    const dependents: Array<{ resId: string; key: string }> = [];
    for (const [resId, bucket] of this.#buckets) {
      for (const [key, obj] of bucket) {
        if (obj.metadata.ownerReferences?.some((ref) => ref.uid === ownerUid))
          dependents.push({ resId, key });
      }
    }
    for (const { resId, key } of dependents) {
      const res = this.#resources.get(resId);
      const dependent = this.#buckets.get(resId)?.get(key);
      if (!res || !dependent) continue; // already collected through another path
      const refs = dependent.metadata.ownerReferences ?? [];
      const remaining = refs.filter((ref) => ref.uid !== ownerUid);
      if (remaining.length === refs.length) continue;
      if (policy === 'Orphan' || remaining.some((ref) => this.#uids.has(ref.uid))) {
        const next = copy<Obj>(dependent);
        setOrDelete(next.metadata, 'ownerReferences', remaining.length > 0 ? remaining : undefined);
        this.commit(res, 'MODIFIED', next, dependent);
      } else if (dependent.metadata.finalizers?.length) {
        if (!dependent.metadata.deletionTimestamp) this.#markDeleting(res, dependent);
      } else {
        this.remove(res, dependent, 'Background');
      }
    }
  }
}

/** The object a main-resource write would store: server-owned metadata and (maybe) status kept. */
export function mainUpdate(res: Resource, stored: Obj, input: Obj, statusIsSubresource: boolean): Obj {
  const next = jsonClone(input);
  const meta = next.metadata;
  const old = stored.metadata;
  next.apiVersion = res.apiVersion;
  next.kind = res.kind;
  meta.name = old.name;
  setOrDelete(meta, 'namespace', old.namespace);
  meta.uid = old.uid;
  meta.creationTimestamp = old.creationTimestamp;
  setOrDelete(meta, 'generation', old.generation);
  setOrDelete(meta, 'deletionTimestamp', old.deletionTimestamp);
  setOrDelete(meta, 'deletionGracePeriodSeconds', old.deletionGracePeriodSeconds);
  setOrDelete(meta, 'managedFields', old.managedFields);
  if (statusIsSubresource) setOrDelete(next, 'status', jsonClone(stored.status));
  return next;
}

/** The object a status write would store: everything but status comes from the stored object. */
export function statusUpdate(stored: Obj, input: Obj): Obj {
  const next = copy<Obj>(stored);
  setOrDelete(next, 'status', jsonClone(input.status));
  return next;
}

/** The object a patch of `stored` yields (before the write semantics); malformed patches are 400s, others 422s. */
export function patchedObject(stored: Obj, patch: Patch): unknown {
  let patched: unknown;
  try {
    switch (patch.type) {
      case 'merge':
        if (!isPlainObject(patch.body)) throw new PatchError('a merge patch must be a JSON object', true);
        patched = mergePatch(stored, patch.body);
        break;
      case 'strategic':
        if (!isPlainObject(patch.body))
          throw new PatchError('a strategic merge patch must be a JSON object', true);
        patched = strategicMergePatch(stored, patch.body);
        break;
      case 'json':
        patched = applyJsonPatch(stored, patch.body);
        break;
      case 'apply':
        patched = applyMerge(stored, patch.body);
        break;
      default:
        throw new PatchError(`unsupported patch type "${String((patch as { type: unknown }).type)}"`, true);
    }
  } catch (err) {
    if (err instanceof PatchError)
      throw err.malformed ? badRequestError(err.message) : unprocessableError(err.message);
    throw err;
  }
  return patched;
}

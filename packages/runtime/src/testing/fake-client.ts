/**
 * FakeClient: an in-memory implementation of `Client` with the API server's semantics, for unit tests of
 * reconcilers (controller-runtime's fake client, for opkit).
 *
 * What it does like the API server:
 * - one global, monotonically increasing resourceVersion, set on every write (and on deletions, which
 *   watchers see); uid, creationTimestamp and generation 1 on create; `generateName`;
 * - metadata.generation bumps when anything but metadata (and status, for kinds with a status
 *   subresource) changes; no-op writes store nothing and do not bump the resourceVersion;
 * - optimistic concurrency (stale metadata.resourceVersion -> ConflictError; none -> unconditional);
 * - status subresource separation: `update`/`patch` ignore status, `updateStatus`/`patchStatus` change
 *   only status; `create` drops status. Kinds without a status subresource 404 on the status verbs;
 * - finalizers and deletionTimestamp, delete preconditions, and the garbage collector (synchronously);
 * - list with label/field selectors, pagination and consistent continue tokens; watch from a
 *   resourceVersion with selector transitions (an object leaving a selector is DELETED for that watch).
 *
 * Simplifications (documented so tests don't rely on them):
 * - Strategic merge patch: a JSON merge patch, except lists of objects that all have a `name` are merged by
 *   name (see `strategicMergePatch`); real per-field merge keys are not known.
 * - Server-side apply: the applied object is strategic-merged onto the existing one (created if missing).
 *   Field ownership is NOT tracked: fields a manager stops applying are not removed, there are no apply
 *   conflicts (`force` is ignored), and metadata.managedFields is never written.
 * - Deletion: `gracePeriodSeconds` is ignored (pods go away at once); `Foreground` behaves like `Background`
 *   (no foregroundDeletion finalizer); `Orphan` does not add the orphan finalizer, the orphaning happens
 *   when the owner is finally removed. Namespace deletion does not cascade to the namespace's objects.
 * - No admission, defaulting or schema validation; namespaces need not exist.
 * - A watch without a resourceVersion (or with "0") starts from the moment `watch()` is called, with no
 *   synthetic ADDED events unless `sendInitialEvents` is set.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomInt, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import {
  CustomResourceDefinitions,
  Deployments,
  Namespaces,
  Nodes,
  PersistentVolumeClaims,
  PersistentVolumes,
  PodDisruptionBudgets,
  Pods,
  Services,
  StatefulSets,
} from '../api/builtin.ts';
import type { KubeObject, ObjectKey, ObjectList, ObjectMeta, WatchEvent } from '../api/object.ts';
import { parseKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { resourceId } from '../api/resource.ts';
import type {
  Client,
  DeleteOptions,
  ListOptions,
  Patch,
  WatchOptions,
  WriteOptions,
} from '../client/types.ts';
import {
  alreadyExistsError,
  badRequestError,
  conflictError,
  goneError,
  invalidError,
  notFoundError,
  timeoutError,
  unprocessableError,
} from './errors.ts';
import {
  applyJsonPatch,
  isPlainObject,
  jsonClone,
  mergePatch,
  PatchError,
  strategicMergePatch,
} from './patch.ts';
import {
  type FieldRequirement,
  type LabelRequirement,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
  SelectorError,
} from './selectors.ts';

/** The Client method a request came through. */
export type FakeVerb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'updateStatus'
  | 'patch'
  | 'patchStatus'
  | 'delete';

export const READ_VERBS: readonly FakeVerb[] = ['get', 'list', 'watch'];

/** One recorded call. Optional fields are present only when they apply (so `deepEqual` stays simple). */
export interface FakeAction {
  verb: FakeVerb;
  resource: Resource;
  /** The request's namespace; absent for cluster-scoped kinds and all-namespace list/watch. */
  namespace?: string;
  /** Absent for list/watch and for a create that uses generateName. */
  name?: string;
  /** Only for patch/patchStatus. */
  patchType?: Patch['type'];
}

/** What an `onRequest` hook sees: the action plus a deep copy of what was sent. */
export interface FakeRequest extends FakeAction {
  object?: KubeObject;
  patch?: Patch;
  options?: ListOptions | WatchOptions | WriteOptions | DeleteOptions;
}

/** Runs before a request is served; throw to fail it. May be async. */
export type RequestHook = (request: FakeRequest) => void | Promise<void>;

export interface FakeActionFilter {
  verb?: FakeVerb | readonly FakeVerb[];
  resource?: Resource;
  namespace?: string;
  name?: string;
}

/** A seed object. The index signature lets object literals carry kind fields (spec, data, ...). */
export interface FakeObject {
  resource: Resource;
  object: KubeObject | (KubeObject & Record<string, unknown>);
}

export interface FakeClientOptions {
  /** Objects stored before the first request, as they are (status kept); they get resourceVersions. */
  objects?: FakeObject[];
  /** Default 'opkit', as the real client's. */
  fieldManager?: string;
  /**
   * Kinds with a status subresource, in addition to the built-ins that have one (Pods, Services,
   * PersistentVolumeClaims, PersistentVolumes, Namespaces, Nodes, StatefulSets, Deployments,
   * PodDisruptionBudgets, CustomResourceDefinitions). Default: the kinds of the seed objects that have a
   * status. More can be added with `withStatusSubresource`.
   */
  statusSubresource?: Resource[];
  /** Clock for creationTimestamp/deletionTimestamp. Default: the system clock. */
  now?: () => Date;
}

type DeletionPolicy = NonNullable<DeleteOptions['propagationPolicy']>;
type StoredEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
/** Objects as stored: JSON values, deep-frozen, never handed out. */
type Obj = KubeObject & Record<string, unknown>;

interface HistoryEntry {
  rv: number;
  resId: string;
  key: string;
  type: StoredEventType;
  object: Obj;
  /** The object before a MODIFIED/DELETED. */
  previous?: Obj;
}

interface Watcher {
  resId: string;
  deliver(entry: HistoryEntry): void;
  close(error?: unknown): void;
}

interface Failure {
  verb: FakeVerb | '*';
  resId?: string;
  error: Error;
}

const BUILTINS_WITH_STATUS: readonly Resource[] = [
  Pods,
  Services,
  PersistentVolumeClaims,
  PersistentVolumes,
  Namespaces,
  Nodes,
  StatefulSets,
  Deployments,
  PodDisruptionBudgets,
  CustomResourceDefinitions,
];

const NAME_SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

function deepFreeze<V>(value: V): V {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** Stored objects are frozen; this returns a private, mutable copy. */
function copy<T>(value: unknown): T {
  return jsonClone(value) as T;
}

/** Empty metadata collections vanish on the wire (omitempty); do the same so equality is wire equality. */
function normalizeMeta(meta: ObjectMeta): void {
  for (const field of ['labels', 'annotations'] as const) {
    const value = meta[field];
    if (value && Object.keys(value).length === 0) delete meta[field];
  }
  for (const field of ['finalizers', 'ownerReferences', 'managedFields'] as const) {
    const value = meta[field];
    if (value && value.length === 0) delete meta[field];
  }
}

function setOrDelete(target: object, field: string, value: unknown): void {
  const record = target as Record<string, unknown>;
  if (value === undefined) delete record[field];
  else record[field] = value;
}

/** Validates and deep-copies an object coming in from a caller. */
function incoming(value: unknown, what: string): Obj {
  if (!isPlainObject(value) || !isPlainObject(value.metadata)) {
    throw badRequestError(`${what}: the object must have metadata`);
  }
  const obj = jsonClone(value) as Obj;
  normalizeMeta(obj.metadata);
  return obj;
}

/** Everything that is not metadata (nor status, when status is a subresource): what generation tracks. */
function specOf(obj: Obj, statusIsSubresource: boolean): Record<string, unknown> {
  const { metadata: _metadata, apiVersion: _apiVersion, kind: _kind, ...rest } = obj;
  if (statusIsSubresource) delete rest.status;
  return rest;
}

function sortKey(obj: KubeObject): [string, string] {
  return [obj.metadata.namespace ?? '', obj.metadata.name ?? ''];
}

function compareKeys(a: [string, string], b: [string, string]): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  if (a[1] !== b[1]) return a[1] < b[1] ? -1 : 1;
  return 0;
}

function storeKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

interface ContinueToken {
  rv: number;
  after: [string, string];
}

function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

function decodeContinue(raw: string): ContinueToken {
  try {
    const token: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (
      isPlainObject(token) &&
      typeof token.rv === 'number' &&
      Array.isArray(token.after) &&
      token.after.length === 2 &&
      token.after.every((s) => typeof s === 'string')
    ) {
      return { rv: token.rv, after: [token.after[0] as string, token.after[1] as string] };
    }
  } catch {
    // fall through
  }
  throw badRequestError(`invalid continue token "${raw}"`);
}

function parseResourceVersion(raw: string): number {
  if (!/^[0-9]+$/.test(raw)) throw badRequestError(`invalid resourceVersion "${raw}"`);
  return Number(raw);
}

interface Selectors {
  namespace?: string;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
}

function parseSelectors(
  namespace: string | undefined,
  labelSelector?: string,
  fieldSelector?: string,
): Selectors {
  try {
    return {
      namespace,
      labels: parseLabelSelector(labelSelector ?? ''),
      fields: parseFieldSelector(fieldSelector ?? ''),
    };
  } catch (err) {
    if (err instanceof SelectorError) throw badRequestError(err.message);
    throw err;
  }
}

function selects(sel: Selectors, obj: KubeObject): boolean {
  if (sel.namespace !== undefined && obj.metadata.namespace !== sel.namespace) return false;
  return matchesLabels(sel.labels, obj.metadata.labels) && matchesFields(sel.fields, obj);
}

export class FakeClient implements Client {
  readonly fieldManager: string;

  #rv = 0;
  /** History at or below this resourceVersion has been compacted into #base. */
  #compactedRv = 0;
  #base = new Map<string, Map<string, Obj>>();
  #history: HistoryEntry[] = [];
  readonly #store = new Map<string, Map<string, Obj>>();
  readonly #resources = new Map<string, Resource>();
  readonly #uids = new Map<string, { resId: string; key: string }>();
  readonly #watchers = new Set<Watcher>();
  readonly #statusKinds = new Set<string>();
  readonly #actions: FakeAction[] = [];
  readonly #hooks: RequestHook[] = [];
  readonly #failures: Failure[] = [];
  /** Propagation policies of objects waiting on finalizers, by uid. */
  readonly #pendingPolicy = new Map<string, DeletionPolicy>();
  readonly #inHook = new AsyncLocalStorage<true>();
  readonly #now: () => Date;

  constructor(options: FakeClientOptions = {}) {
    this.fieldManager = options.fieldManager ?? 'opkit';
    this.#now = options.now ?? (() => new Date());
    const seeds = options.objects ?? [];
    for (const res of BUILTINS_WITH_STATUS) this.#statusKinds.add(resourceId(res));
    if (options.statusSubresource) {
      for (const res of options.statusSubresource) this.#statusKinds.add(resourceId(res));
    } else {
      for (const seed of seeds) {
        if ((seed.object as Obj).status !== undefined) this.#statusKinds.add(resourceId(seed.resource));
      }
    }
    for (const seed of seeds) {
      const obj = incoming(seed.object, 'seed object');
      const key = this.#objectKey(seed.resource, obj);
      if (this.#lookup(seed.resource, key)) {
        throw new Error(`FakeClient: duplicate seed object ${resourceId(seed.resource)} ${key}`);
      }
      this.#put(seed.resource, obj);
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // Test helpers

  /** Declares that `res` has a status subresource. Chainable. */
  withStatusSubresource(...resources: Resource[]): this {
    for (const res of resources) this.#statusKinds.add(resourceId(res));
    return this;
  }

  hasStatusSubresource(res: Resource): boolean {
    return this.#statusKinds.has(resourceId(res));
  }

  /** The current (latest) resourceVersion. */
  get resourceVersion(): string {
    return String(this.#rv);
  }

  /** Deep copies of the stored objects of a kind, sorted by namespace/name. */
  objects<T extends KubeObject>(res: Resource<T>, namespace?: string): T[] {
    const bucket = this.#store.get(resourceId(res));
    if (!bucket) return [];
    return [...bucket.values()]
      .filter((obj) => namespace === undefined || obj.metadata.namespace === namespace)
      .sort((a, b) => compareKeys(sortKey(a), sortKey(b)))
      .map((obj) => copy<T>(obj));
  }

  /** A deep copy of one stored object, or undefined. `key` is an ObjectKey or "namespace/name". */
  getStored<T extends KubeObject>(res: Resource<T>, key: ObjectKey | string): T | undefined {
    const k = typeof key === 'string' ? parseKey(key) : key;
    const found = this.#lookup(res, this.#key(res, k));
    return found ? copy<T>(found) : undefined;
  }

  /**
   * Stores an object as given (status included), bypassing API semantics, hooks and the action log, as
   * another actor (a kubelet, another controller) would have written it. Fills uid/creationTimestamp/
   * generation when missing, assigns a new resourceVersion and notifies watchers.
   */
  setStored<T extends KubeObject>(res: Resource<T>, obj: T): T {
    return copy<T>(this.#put(res, incoming(obj, 'setStored')));
  }

  /** Removes an object at once (no finalizers, no garbage collection), notifying watchers. */
  deleteStored(res: Resource, key: ObjectKey | string): boolean {
    const k = typeof key === 'string' ? parseKey(key) : key;
    const found = this.#lookup(res, this.#key(res, k));
    if (!found) return false;
    this.#commit(res, 'DELETED', copy<Obj>(found), found);
    return true;
  }

  /** Every request made through the Client methods, in order; optionally filtered. */
  actions(filter: FakeActionFilter = {}): FakeAction[] {
    const verbs = filter.verb === undefined ? undefined : ([] as FakeVerb[]).concat(filter.verb);
    const resId = filter.resource ? resourceId(filter.resource) : undefined;
    return this.#actions
      .filter(
        (a) =>
          (verbs === undefined || verbs.includes(a.verb)) &&
          (resId === undefined || resourceId(a.resource) === resId) &&
          (filter.namespace === undefined || a.namespace === filter.namespace) &&
          (filter.name === undefined || a.name === filter.name),
      )
      .map((a) => ({ ...a }));
  }

  /** The recorded write requests (everything but get/list/watch), including failed ones. */
  writes(filter: Omit<FakeActionFilter, 'verb'> = {}): FakeAction[] {
    return this.actions(filter).filter((a) => !READ_VERBS.includes(a.verb));
  }

  clearActions(): void {
    this.#actions.length = 0;
  }

  /**
   * Makes the next matching request fail with `error` (once). `verb` '*' matches any verb. Failures queue
   * up in order. The request is still recorded in `actions()`; the store is not changed.
   */
  failNext(verb: FakeVerb | '*', error: Error): this;
  failNext(verb: FakeVerb | '*', resource: Resource, error: Error): this;
  failNext(verb: FakeVerb | '*', resourceOrError: Resource | Error, error?: Error): this {
    if (resourceOrError instanceof Error) {
      this.#failures.push({ verb, error: resourceOrError });
    } else {
      if (!error) throw new TypeError('failNext(verb, resource, error): error is required');
      this.#failures.push({ verb, resId: resourceId(resourceOrError), error });
    }
    return this;
  }

  /**
   * Registers a hook that runs before every request (after it is recorded); throwing from it fails the
   * request. Calls the hook makes to this client are neither intercepted nor recorded, so a hook can
   * simulate a concurrent writer. Returns a function that removes the hook.
   */
  onRequest(hook: RequestHook): () => void {
    this.#hooks.push(hook);
    return () => {
      const index = this.#hooks.indexOf(hook);
      if (index >= 0) this.#hooks.splice(index, 1);
    };
  }

  /** Ends every open watch stream: cleanly, or with `error` after the already queued events. */
  closeWatches(error?: Error): void {
    for (const watcher of [...this.#watchers]) watcher.close(error);
  }

  /** How many watch streams are open (started and not yet ended). */
  activeWatches(): number {
    return this.#watchers.size;
  }

  /**
   * Forgets the event history at or below `resourceVersion` (default: all of it), as etcd compaction does:
   * watches and continue tokens from before it then fail with GoneError (410).
   */
  compact(resourceVersion: string = this.resourceVersion): void {
    const rv = Math.min(parseResourceVersion(resourceVersion), this.#rv);
    if (rv <= this.#compactedRv) return;
    const base = new Map<string, Map<string, Obj>>();
    for (const resId of new Set([...this.#base.keys(), ...this.#history.map((e) => e.resId)])) {
      base.set(resId, this.#stateAt(resId, rv));
    }
    this.#base = base;
    this.#history = this.#history.filter((e) => e.rv > rv);
    this.#compactedRv = rv;
  }

  // ---------------------------------------------------------------------------------------------------
  // Client

  async get<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    opts: { signal?: AbortSignal } = {},
  ): Promise<T> {
    const k = this.#requestKey(res, key, 'get');
    await this.#begin({ verb: 'get', resource: res, ...this.#where(res, k) }, opts.signal);
    const found = this.#lookup(res, k);
    if (!found) throw notFoundError(res, k.name);
    return copy<T>(found);
  }

  async list<T extends KubeObject>(res: Resource<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    const namespace = res.namespaced ? opts.namespace || undefined : undefined;
    await this.#begin(
      { verb: 'list', resource: res, ...(namespace ? { namespace } : {}), options: opts },
      opts.signal,
    );
    const sel = parseSelectors(namespace, opts.labelSelector, opts.fieldSelector);
    const resId = resourceId(res);

    let rv = this.#rv;
    let after: [string, string] | undefined;
    if (opts.continue) {
      const token = decodeContinue(opts.continue);
      if (token.rv < this.#compactedRv || token.rv > this.#rv) {
        throw goneError(
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      rv = token.rv;
      after = token.after;
    } else if (opts.resourceVersion && opts.resourceVersion !== '0') {
      const requested = parseResourceVersion(opts.resourceVersion);
      if (requested > this.#rv)
        throw timeoutError(`Too large resource version: ${requested}, current: ${this.#rv}`);
      if (opts.resourceVersionMatch === 'Exact') {
        if (requested < this.#compactedRv)
          throw goneError(`too old resource version: ${requested} (${this.#compactedRv})`);
        rv = requested;
      }
    }

    const state =
      rv === this.#rv ? (this.#store.get(resId) ?? new Map<string, Obj>()) : this.#stateAt(resId, rv);
    let items = [...state.values()]
      .filter((obj) => selects(sel, obj))
      .sort((a, b) => compareKeys(sortKey(a), sortKey(b)));
    if (after) {
      const start = after;
      items = items.filter((obj) => compareKeys(sortKey(obj), start) > 0);
    }

    const metadata: ObjectList<T>['metadata'] = { resourceVersion: String(rv) };
    // Without an explicit `continue` (or `onePage`) the real client follows the pages itself.
    const paged =
      (opts.continue !== undefined || opts.onePage === true) && opts.limit !== undefined && opts.limit > 0;
    if (paged && opts.limit !== undefined && items.length > opts.limit) {
      const remaining = items.length - opts.limit;
      items = items.slice(0, opts.limit);
      const last = items[items.length - 1];
      if (last) metadata.continue = encodeContinue({ rv, after: sortKey(last) });
      if (sel.labels.length === 0 && sel.fields.length === 0) metadata.remainingItemCount = remaining;
    }
    return {
      apiVersion: res.apiVersion,
      kind: `${res.kind}List`,
      metadata,
      items: items.map((obj) => copy<T>(obj)),
    };
  }

  async create<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    const input = incoming(obj, 'create');
    const namespace = res.namespaced ? input.metadata.namespace || undefined : undefined;
    if (res.namespaced && !namespace) throw badRequestError(`create ${res.kind}: a namespace is required`);
    await this.#begin(
      {
        verb: 'create',
        resource: res,
        ...(namespace ? { namespace } : {}),
        ...(input.metadata.name ? { name: input.metadata.name } : {}),
        object: input,
        options: opts,
      },
      opts.signal,
    );
    if (input.metadata.resourceVersion) {
      throw badRequestError('resourceVersion should not be set on objects to be created');
    }
    return copy<T>(this.#createObject(res, input, opts));
  }

  async update<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.#update(res, obj, opts, 'update');
  }

  async updateStatus<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.#update(res, obj, opts, 'updateStatus');
  }

  async patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions = {},
  ): Promise<T> {
    return this.#patch(res, key, patch, opts, 'patch');
  }

  async patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions = {},
  ): Promise<T> {
    return this.#patch(res, key, patch, opts, 'patchStatus');
  }

  async delete<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    opts: DeleteOptions = {},
  ): Promise<void> {
    const k = this.#requestKey(res, key, 'delete');
    await this.#begin({ verb: 'delete', resource: res, ...this.#where(res, k), options: opts }, opts.signal);
    const stored = this.#lookup(res, k);
    if (!stored) throw notFoundError(res, k.name);
    const meta = stored.metadata;
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== meta.uid) {
      throw conflictError(
        res,
        k.name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${meta.uid ?? ''}`,
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== meta.resourceVersion) {
      throw conflictError(
        res,
        k.name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${meta.resourceVersion ?? ''}`,
      );
    }
    if (opts.dryRun) return;
    const policy = opts.propagationPolicy ?? 'Background';
    if (meta.finalizers && meta.finalizers.length > 0) {
      if (!meta.deletionTimestamp) this.#markDeleting(res, stored);
      if (opts.propagationPolicy && meta.uid) this.#pendingPolicy.set(meta.uid, policy);
      return;
    }
    this.#remove(res, stored, policy);
  }

  watch<T extends KubeObject>(res: Resource<T>, opts: WatchOptions = {}): AsyncIterable<WatchEvent<T>> {
    const namespace = res.namespaced ? opts.namespace || undefined : undefined;
    const request: FakeRequest = {
      verb: 'watch',
      resource: res,
      ...(namespace ? { namespace } : {}),
      options: opts,
    };
    // The action is recorded and "now" is fixed when watch() is called; hooks, injected failures and
    // selector errors surface on the first next().
    const intercepted = !this.#inHook.getStore();
    if (intercepted) this.#actions.push(actionOf(request));
    const startRv = this.#rv;
    return {
      [Symbol.asyncIterator]: () =>
        this.#openWatch<T>(res, opts, namespace, startRv, intercepted ? request : undefined),
    };
  }

  // ---------------------------------------------------------------------------------------------------
  // Internals

  #key(res: Resource, key: ObjectKey): ObjectKey {
    return res.namespaced ? { namespace: key.namespace || undefined, name: key.name } : { name: key.name };
  }

  /**
   * The key of a request for one object. Like the real client, a missing name (or namespace, for a
   * namespaced kind) is a BadRequestError raised before any request is made (so it is not recorded).
   */
  #requestKey(res: Resource, key: ObjectKey, verb: FakeVerb): ObjectKey {
    if (!key.name) throw badRequestError(`${verb} ${res.kind}: a name is required`);
    if (res.namespaced && !key.namespace)
      throw badRequestError(`${verb} ${res.kind}: a namespace is required`);
    return this.#key(res, key);
  }

  #objectKey(res: Resource, obj: Obj): string {
    const k = this.#key(res, { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' });
    return storeKey(k.namespace, k.name);
  }

  #where(res: Resource, key: ObjectKey): { namespace?: string; name: string } {
    return res.namespaced && key.namespace
      ? { namespace: key.namespace, name: key.name }
      : { name: key.name };
  }

  #lookup(res: Resource, key: ObjectKey | string): Obj | undefined {
    const k = typeof key === 'string' ? key : storeKey(key.namespace, key.name);
    return this.#store.get(resourceId(res))?.get(k);
  }

  #timestamp(): string {
    return this.#now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
  }

  async #begin(request: FakeRequest, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.#inHook.getStore()) return;
    this.#actions.push(actionOf(request));
    await this.#intercept(request);
    signal?.throwIfAborted();
  }

  async #intercept(request: FakeRequest): Promise<void> {
    for (const hook of [...this.#hooks]) {
      const view: FakeRequest = {
        ...request,
        ...(request.object ? { object: jsonClone(request.object) } : {}),
        ...(request.patch ? { patch: jsonClone(request.patch) } : {}),
      };
      await this.#inHook.run(true, () => hook(view));
    }
    const resId = resourceId(request.resource);
    const index = this.#failures.findIndex(
      (f) => (f.verb === '*' || f.verb === request.verb) && (f.resId === undefined || f.resId === resId),
    );
    if (index >= 0) {
      const [failure] = this.#failures.splice(index, 1);
      if (failure) throw failure.error;
    }
  }

  /** Stores `obj` (already a private copy) with a new resourceVersion, records it and notifies watchers. */
  #commit(res: Resource, type: StoredEventType, obj: Obj, previous?: Obj): Obj {
    const rv = ++this.#rv;
    obj.metadata.resourceVersion = String(rv);
    normalizeMeta(obj.metadata);
    deepFreeze(obj);
    const resId = resourceId(res);
    this.#resources.set(resId, res);
    const key = this.#objectKey(res, obj);
    let bucket = this.#store.get(resId);
    if (!bucket) {
      bucket = new Map();
      this.#store.set(resId, bucket);
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
    for (const watcher of [...this.#watchers]) {
      if (watcher.resId === resId) watcher.deliver(entry);
    }
    return obj;
  }

  /** Upsert for seeds and setStored. */
  #put(res: Resource, obj: Obj): Obj {
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
    const existing = this.#lookup(res, this.#objectKey(res, obj));
    obj.apiVersion = res.apiVersion;
    obj.kind = res.kind;
    meta.uid ??= existing?.metadata.uid ?? randomUUID();
    meta.creationTimestamp ??= existing?.metadata.creationTimestamp ?? this.#timestamp();
    meta.generation ??= existing?.metadata.generation ?? 1;
    return this.#commit(res, existing ? 'MODIFIED' : 'ADDED', obj, existing);
  }

  #createObject(res: Resource, input: Obj, opts: WriteOptions): Obj {
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
      } while (this.#lookup(res, storeKey(meta.namespace, name)));
      meta.name = name;
    }
    if (meta.name.includes('/') || meta.name === '.' || meta.name === '..') {
      throw invalidError(res, meta.name, [
        { reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${meta.name}"` },
      ]);
    }
    if (this.#lookup(res, storeKey(meta.namespace, meta.name))) throw alreadyExistsError(res, meta.name);
    input.apiVersion = res.apiVersion;
    input.kind = res.kind;
    meta.uid = randomUUID();
    meta.creationTimestamp = this.#timestamp();
    meta.generation = 1;
    delete meta.resourceVersion;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.managedFields;
    if (this.hasStatusSubresource(res)) delete input.status;
    if (opts.dryRun) return input;
    return this.#commit(res, 'ADDED', input);
  }

  #checkPreconditions(res: Resource, stored: Obj, meta: ObjectMeta): void {
    const name = stored.metadata.name ?? '';
    if (meta.uid && meta.uid !== stored.metadata.uid) {
      throw conflictError(
        res,
        name,
        `Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${stored.metadata.uid ?? ''}`,
      );
    }
    if (meta.resourceVersion && meta.resourceVersion !== stored.metadata.resourceVersion) {
      throw conflictError(res, name);
    }
  }

  /** The object a main-resource write would store: server-owned metadata and (maybe) status kept. */
  #mainUpdate(res: Resource, stored: Obj, input: Obj): Obj {
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
    if (this.hasStatusSubresource(res)) setOrDelete(next, 'status', jsonClone(stored.status));
    return next;
  }

  /** The object a status write would store: everything but status comes from the stored object. */
  #statusUpdate(stored: Obj, input: Obj): Obj {
    const next = copy<Obj>(stored);
    setOrDelete(next, 'status', jsonClone(input.status));
    return next;
  }

  /** Validates and commits a change to an existing object; `next` is a private copy. */
  #writeExisting(res: Resource, stored: Obj, next: Obj, opts: WriteOptions, bumpsGeneration: boolean): Obj {
    const name = stored.metadata.name ?? '';
    normalizeMeta(next.metadata);
    if (stored.metadata.deletionTimestamp) {
      const old = new Set(stored.metadata.finalizers ?? []);
      const added = (next.metadata.finalizers ?? []).filter((f) => !old.has(f));
      if (added.length > 0) {
        throw invalidError(res, name, [
          {
            reason: 'FieldValueForbidden',
            field: 'metadata.finalizers',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
          },
        ]);
      }
    }
    const statusIsSubresource = this.hasStatusSubresource(res);
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
      return this.#remove(
        res,
        next,
        this.#pendingPolicy.get(next.metadata.uid ?? '') ?? 'Background',
        stored,
      );
    }
    return this.#commit(res, 'MODIFIED', next, stored);
  }

  async #update<T extends KubeObject>(
    res: Resource<T>,
    obj: T,
    opts: WriteOptions,
    verb: 'update' | 'updateStatus',
  ): Promise<T> {
    const input = incoming(obj, verb);
    const k = this.#key(res, { namespace: input.metadata.namespace, name: input.metadata.name ?? '' });
    await this.#begin(
      { verb, resource: res, ...this.#where(res, k), object: input, options: opts },
      opts.signal,
    );
    if (!k.name) throw badRequestError(`${verb}: metadata.name is required`);
    if (verb === 'updateStatus' && !this.hasStatusSubresource(res)) throw this.#noStatus(res, k.name);
    const stored = this.#lookup(res, k);
    if (!stored) throw notFoundError(res, k.name);
    this.#checkPreconditions(res, stored, input.metadata);
    const next =
      verb === 'updateStatus' ? this.#statusUpdate(stored, input) : this.#mainUpdate(res, stored, input);
    return copy<T>(this.#writeExisting(res, stored, next, opts, verb === 'update'));
  }

  async #patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions,
    verb: 'patch' | 'patchStatus',
  ): Promise<T> {
    const k = this.#requestKey(res, key, verb);
    await this.#begin(
      { verb, resource: res, ...this.#where(res, k), patchType: patch.type, patch, options: opts },
      opts.signal,
    );
    if (verb === 'patchStatus' && !this.hasStatusSubresource(res)) throw this.#noStatus(res, k.name);
    if (patch.type === 'apply') {
      if (!isPlainObject(patch.body) || !isPlainObject(patch.body.metadata)) {
        throw badRequestError('an apply patch must be an object with metadata');
      }
      const bodyName = patch.body.metadata.name;
      if (bodyName !== undefined && bodyName !== k.name) {
        throw badRequestError(
          `the name of the object (${bodyName}) does not match the name on the URL (${k.name})`,
        );
      }
    }
    const stored = this.#lookup(res, k);
    if (!stored) {
      if (patch.type === 'apply' && verb === 'patch') {
        const input = incoming(patch.body, 'apply');
        input.metadata.name = k.name;
        if (k.namespace) input.metadata.namespace = k.namespace;
        delete input.metadata.resourceVersion;
        return copy<T>(this.#createObject(res, input, opts));
      }
      throw notFoundError(res, k.name);
    }

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
          patched = strategicMergePatch(stored, patch.body);
          break;
        default:
          throw new PatchError(`unsupported patch type "${String((patch as { type: unknown }).type)}"`, true);
      }
    } catch (err) {
      if (err instanceof PatchError)
        throw err.malformed ? badRequestError(err.message) : unprocessableError(err.message);
      throw err;
    }
    if (!isPlainObject(patched) || !isPlainObject(patched.metadata)) {
      throw unprocessableError('the patched object must be an object with metadata');
    }
    const candidate = incoming(patched, verb);
    const meta = candidate.metadata;
    if (meta.name !== stored.metadata.name) {
      throw badRequestError(
        `the name of the object (${meta.name ?? ''}) does not match the name on the URL (${k.name})`,
      );
    }
    if (res.namespaced && meta.namespace !== stored.metadata.namespace) {
      throw badRequestError(
        `the namespace of the object (${meta.namespace ?? ''}) does not match the namespace on the URL (${k.namespace ?? ''})`,
      );
    }
    this.#checkPreconditions(res, stored, meta);
    const next =
      verb === 'patchStatus'
        ? this.#statusUpdate(stored, candidate)
        : this.#mainUpdate(res, stored, candidate);
    return copy<T>(this.#writeExisting(res, stored, next, opts, verb === 'patch'));
  }

  #noStatus(res: Resource, name: string): Error {
    return notFoundError(
      res,
      name,
      `${res.plural} "${name}": the fake client has no status subresource for ${resourceId(res)}; ` +
        'declare it with the statusSubresource option or withStatusSubresource()',
    );
  }

  /** Sets deletionTimestamp (and bumps generation) on an object that has finalizers. */
  #markDeleting(res: Resource, stored: Obj): Obj {
    const next = copy<Obj>(stored);
    next.metadata.deletionTimestamp = this.#timestamp();
    next.metadata.deletionGracePeriodSeconds = 0;
    if (next.metadata.generation) next.metadata.generation += 1;
    return this.#commit(res, 'MODIFIED', next, stored);
  }

  /** Removes an object and runs the garbage collector for its dependents. */
  #remove(res: Resource, obj: Obj, policy: DeletionPolicy, previous: Obj = obj): Obj {
    const removed = this.#commit(res, 'DELETED', copy<Obj>(obj), previous);
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
    for (const [resId, bucket] of this.#store) {
      for (const [key, obj] of bucket) {
        if (obj.metadata.ownerReferences?.some((ref) => ref.uid === ownerUid))
          dependents.push({ resId, key });
      }
    }
    for (const { resId, key } of dependents) {
      const res = this.#resources.get(resId);
      const dependent = this.#store.get(resId)?.get(key);
      if (!res || !dependent) continue; // already collected through another path
      const refs = dependent.metadata.ownerReferences ?? [];
      const remaining = refs.filter((ref) => ref.uid !== ownerUid);
      if (remaining.length === refs.length) continue;
      if (policy === 'Orphan' || remaining.some((ref) => this.#uids.has(ref.uid))) {
        const next = copy<Obj>(dependent);
        setOrDelete(next.metadata, 'ownerReferences', remaining.length > 0 ? remaining : undefined);
        this.#commit(res, 'MODIFIED', next, dependent);
      } else if (dependent.metadata.finalizers?.length) {
        if (!dependent.metadata.deletionTimestamp) this.#markDeleting(res, dependent);
      } else {
        this.#remove(res, dependent, 'Background');
      }
    }
  }

  /** The objects of a kind as they were at resourceVersion `rv` (>= the compaction point). */
  #stateAt(resId: string, rv: number): Map<string, Obj> {
    const state = new Map(this.#base.get(resId) ?? []);
    for (const entry of this.#history) {
      if (entry.rv > rv) break;
      if (entry.resId !== resId) continue;
      if (entry.type === 'DELETED') state.delete(entry.key);
      else state.set(entry.key, entry.object);
    }
    return state;
  }

  #openWatch<T extends KubeObject>(
    res: Resource<T>,
    opts: WatchOptions,
    namespace: string | undefined,
    startRv: number,
    request: FakeRequest | undefined,
  ): AsyncIterator<WatchEvent<T>> {
    const resId = resourceId(res);
    const queue: WatchEvent<KubeObject>[] = [];
    const waiters: Array<{
      resolve: (r: IteratorResult<WatchEvent<T>>) => void;
      reject: (e: unknown) => void;
    }> = [];
    let state: 'new' | 'open' | 'closed' = 'new';
    let failure: unknown;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let sel: Selectors = { labels: [], fields: [] };
    const signal = opts.signal;
    const done = (): IteratorResult<WatchEvent<T>> => ({ value: undefined, done: true });

    const push = (event: WatchEvent<KubeObject>): void => {
      if (state === 'closed') return;
      const waiter = waiters.shift();
      if (waiter) waiter.resolve({ value: copy<WatchEvent<T>>(event), done: false });
      else queue.push(event);
    };
    const finish = (error?: unknown, dropQueued = false): void => {
      if (state === 'closed') return;
      state = 'closed';
      this.#watchers.delete(watcher);
      signal?.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
      if (dropQueued) queue.length = 0;
      // A pending next() means the queue is empty: it gets the error (or the end) now; otherwise the error
      // is thrown by the next() that finds the queue drained.
      const pending = waiters.splice(0);
      const first = pending.shift();
      if (first && error !== undefined) first.reject(error);
      else if (first) first.resolve(done());
      else failure = error;
      for (const waiter of pending) waiter.resolve(done());
    };
    const onAbort = (): void => finish(undefined, true);
    const toEvent = (entry: HistoryEntry): WatchEvent<KubeObject> | undefined => {
      const now = selects(sel, entry.object);
      if (entry.type === 'ADDED') return now ? { type: 'ADDED', object: entry.object } : undefined;
      if (entry.type === 'DELETED') return now ? { type: 'DELETED', object: entry.object } : undefined;
      const before = entry.previous !== undefined && selects(sel, entry.previous);
      if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: entry.object };
      if (before && entry.previous) {
        const gone = copy<Obj>(entry.previous);
        gone.metadata.resourceVersion = entry.object.metadata.resourceVersion;
        return { type: 'DELETED', object: gone };
      }
      return undefined;
    };
    const watcher: Watcher = {
      resId,
      deliver: (entry) => {
        const event = toEvent(entry);
        if (event) push(event);
      },
      close: (error) => finish(error),
    };

    const start = async (): Promise<void> => {
      if (request) await this.#intercept(request);
      sel = parseSelectors(namespace, opts.labelSelector, opts.fieldSelector);
      if (signal?.aborted) {
        finish(undefined, true);
        return;
      }
      let from = startRv;
      if (opts.resourceVersion && opts.resourceVersion !== '0') {
        from = parseResourceVersion(opts.resourceVersion);
        if (from < this.#compactedRv)
          throw goneError(`too old resource version: ${from} (${this.#compactedRv})`);
      } else if (opts.sendInitialEvents) {
        const current = [...(this.#store.get(resId)?.values() ?? [])]
          .filter((obj) => selects(sel, obj))
          .sort((a, b) => compareKeys(sortKey(a), sortKey(b)));
        for (const obj of current) push({ type: 'ADDED', object: obj });
        if (opts.allowWatchBookmarks) {
          push({
            type: 'BOOKMARK',
            object: {
              apiVersion: res.apiVersion,
              kind: res.kind,
              metadata: {
                resourceVersion: String(this.#rv),
                annotations: { 'k8s.io/initial-events-end': 'true' },
              },
            },
          });
        }
        from = this.#rv;
      }
      // Replay and subscribe in the same synchronous step: no event can fall in between.
      for (const entry of this.#history) {
        if (entry.rv > from && entry.resId === resId) watcher.deliver(entry);
      }
      state = 'open';
      this.#watchers.add(watcher);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.timeoutSeconds !== undefined && opts.timeoutSeconds > 0) {
        timer = setTimeout(() => finish(), opts.timeoutSeconds * 1000);
      }
    };

    const iterator: AsyncIterator<WatchEvent<T>> & AsyncIterable<WatchEvent<T>> = {
      next: async () => {
        if (state === 'new') {
          try {
            await start();
          } catch (err) {
            finish();
            throw err;
          }
        }
        const event = queue.shift();
        if (event) return { value: copy<WatchEvent<T>>(event), done: false };
        if (state === 'closed') {
          if (failure !== undefined) {
            const error = failure;
            failure = undefined;
            throw error;
          }
          return done();
        }
        return new Promise<IteratorResult<WatchEvent<T>>>((resolve, reject) =>
          waiters.push({ resolve, reject }),
        );
      },
      return: async () => {
        finish(undefined, true);
        return done();
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }
}

function actionOf(request: FakeRequest): FakeAction {
  const action: FakeAction = { verb: request.verb, resource: request.resource };
  if (request.namespace !== undefined) action.namespace = request.namespace;
  if (request.name !== undefined) action.name = request.name;
  if (request.patchType !== undefined) action.patchType = request.patchType;
  return action;
}

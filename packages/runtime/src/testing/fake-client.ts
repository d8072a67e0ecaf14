/**
 * FakeClient: an in-memory implementation of `Client` with the API server's semantics, for unit tests of
 * reconcilers (controller-runtime's fake client, for opkit).
 *
 * What it does like the API server:
 * - one global, monotonically increasing resourceVersion, set on every write (and on deletions, which
 *   watchers see); uid, creationTimestamp and generation 1 on create; `generateName`;
 * - metadata.generation bumps when anything but metadata (and status, for kinds with a status
 *   subresource) changes; no-op writes store nothing and do not bump the resourceVersion;
 * - optimistic concurrency (stale metadata.resourceVersion -> ConflictError; none -> unconditional for
 *   built-in kinds, a 422 for custom resources, which do not allow unconditional updates);
 * - status subresource separation: `update`/`patch` ignore status, `updateStatus`/`patchStatus` change
 *   only status; `create` drops status. Kinds without a status subresource 404 on the status verbs;
 * - finalizers and deletionTimestamp, delete preconditions, and the garbage collector (synchronously);
 * - list with label/field selectors, pagination and consistent continue tokens; watch from a
 *   resourceVersion with selector transitions (an object leaving a selector is DELETED for that watch);
 * - metadata.managedFields: every write gives its field manager what it changed; server-side apply
 *   reports conflicts with other managers (409, naming manager and field) unless `force`, and removes the
 *   fields its manager stopped applying that no one else owns (fake-apply.ts).
 *
 * Simplifications (documented so tests don't rely on them):
 * - Strategic merge patch: a JSON merge patch, except lists of objects that all have a `name` are merged by
 *   name (see `strategicMergePatch`); real per-field merge keys are not known.
 * - Field sets follow the object's JSON keys; every list is atomic (one field), where the API server keys
 *   some built-in lists (containers by name, finalizers as a set) and so merges them on apply. Objects
 *   never carry the "." of untyped (x-kubernetes-preserve-unknown-fields) maps on apply. managedFields
 *   sent with a write are ignored (the API server would take them as a reset).
 * - Deletion: `gracePeriodSeconds` is ignored (pods go away at once); `Foreground` behaves like `Background`
 *   (no foregroundDeletion finalizer); `Orphan` does not add the orphan finalizer, the orphaning happens
 *   when the owner is finally removed. Namespace deletion does not cascade to the namespace's objects.
 * - No admission, defaulting or schema validation; namespaces need not exist. Custom resources are told
 *   from built-in kinds by their API group.
 * - A watch without a resourceVersion (or with "0") starts from the moment `watch()` is called, with no
 *   synthetic ADDED events unless `sendInitialEvents` is set.
 *
 * Files: fake-store.ts (objects, resourceVersions, history, write and deletion semantics, the garbage
 * collector), fake-query.ts (selectors, lists), fake-watch.ts and fake-delivery.ts (watch streams, their
 * delays), fake-apply.ts and fake-fields.ts (field managers), fake-validation.ts (what is refused),
 * fake-requests.ts (action log, hooks, injected failures), fake-types.ts (public types).
 */
import type { KubeObject, ObjectKey, ObjectList, WatchEvent } from '../api/object.ts';
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
import { badRequestError, notFoundError, unprocessableError } from './errors.ts';
import { managedAfterWrite, serverSideApply, type Writer } from './fake-apply.ts';
import { type FakeEventDelivery, watchDelay } from './fake-delivery.ts';
import { listObjects } from './fake-query.ts';
import { RequestLog } from './fake-requests.ts';
import {
  compareKeys,
  copy,
  FakeStore,
  mainUpdate,
  type Obj,
  parseResourceVersion,
  patchedObject,
  setOrDelete,
  sortKey,
  statusUpdate,
} from './fake-store.ts';
import {
  type FakeAction,
  type FakeActionFilter,
  type FakeClientOptions,
  type FakeRequest,
  type FakeVerb,
  READ_VERBS,
  type RequestHook,
} from './fake-types.ts';
import {
  BUILTINS_WITH_STATUS,
  checkApplyBody,
  checkDeletePreconditions,
  checkPatchedIdentity,
  checkPreconditions,
  checkUnconditionalUpdate,
  incoming,
} from './fake-validation.ts';
import { openWatch } from './fake-watch.ts';
import { isPlainObject } from './patch.ts';

export {
  type FakeAction,
  type FakeActionFilter,
  type FakeClientOptions,
  type FakeObject,
  type FakeRequest,
  type FakeVerb,
  READ_VERBS,
  type RequestHook,
} from './fake-types.ts';

export class FakeClient implements Client {
  readonly fieldManager: string;

  readonly #store: FakeStore;
  readonly #statusKinds = new Set<string>();
  readonly #requests = new RequestLog();
  readonly #delivery: FakeEventDelivery | undefined;
  #watchStreams = 0;

  constructor(options: FakeClientOptions = {}) {
    this.fieldManager = options.fieldManager ?? 'opkit';
    this.#delivery = options.eventDelivery;
    this.#store = new FakeStore(options.now ?? (() => new Date()), (res) => this.hasStatusSubresource(res));
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
      const key = this.#store.objectKey(seed.resource, obj);
      if (this.#store.lookup(seed.resource, key)) {
        throw new Error(`FakeClient: duplicate seed object ${resourceId(seed.resource)} ${key}`);
      }
      this.#store.put(seed.resource, obj);
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
    return String(this.#store.rv);
  }

  /** Deep copies of the stored objects of a kind, sorted by namespace/name. */
  objects<T extends KubeObject>(res: Resource<T>, namespace?: string): T[] {
    return [...this.#store.current(resourceId(res)).values()]
      .filter((obj) => namespace === undefined || obj.metadata.namespace === namespace)
      .sort((a, b) => compareKeys(sortKey(a), sortKey(b)))
      .map((obj) => copy<T>(obj));
  }

  /** A deep copy of one stored object, or undefined. `key` is an ObjectKey or "namespace/name". */
  getStored<T extends KubeObject>(res: Resource<T>, key: ObjectKey | string): T | undefined {
    const k = typeof key === 'string' ? parseKey(key) : key;
    const found = this.#store.lookup(res, this.#store.key(res, k));
    return found ? copy<T>(found) : undefined;
  }

  /**
   * Stores an object as given (status included), bypassing API semantics, hooks and the action log, as
   * another actor (a kubelet, another controller) would have written it. Fills uid/creationTimestamp/
   * generation when missing, assigns a new resourceVersion and notifies watchers.
   */
  setStored<T extends KubeObject>(res: Resource<T>, obj: T): T {
    return copy<T>(this.#store.put(res, incoming(obj, 'setStored')));
  }

  /** Removes an object at once (no finalizers, no garbage collection), notifying watchers. */
  deleteStored(res: Resource, key: ObjectKey | string): boolean {
    const k = typeof key === 'string' ? parseKey(key) : key;
    const found = this.#store.lookup(res, this.#store.key(res, k));
    if (!found) return false;
    this.#store.commit(res, 'DELETED', copy<Obj>(found), found);
    return true;
  }

  /** Every request made through the Client methods, in order; optionally filtered. */
  actions(filter: FakeActionFilter = {}): FakeAction[] {
    return this.#requests.actions(filter);
  }

  /** The recorded write requests (everything but get/list/watch), including failed ones. */
  writes(filter: Omit<FakeActionFilter, 'verb'> = {}): FakeAction[] {
    return this.actions(filter).filter((a) => !READ_VERBS.includes(a.verb));
  }

  clearActions(): void {
    this.#requests.clear();
  }

  /**
   * Makes the next matching request fail with `error` (once). `verb` '*' matches any verb. Failures queue
   * up in order. The request is still recorded in `actions()`; the store is not changed.
   */
  failNext(verb: FakeVerb | '*', error: Error): this;
  failNext(verb: FakeVerb | '*', resource: Resource, error: Error): this;
  failNext(verb: FakeVerb | '*', resourceOrError: Resource | Error, error?: Error): this {
    if (resourceOrError instanceof Error) {
      this.#requests.failNext(verb, undefined, resourceOrError);
    } else {
      if (!error) throw new TypeError('failNext(verb, resource, error): error is required');
      this.#requests.failNext(verb, resourceId(resourceOrError), error);
    }
    return this;
  }

  /**
   * Registers a hook that runs before every request (after it is recorded); throwing from it fails the
   * request. Calls the hook makes to this client are neither intercepted nor recorded, so a hook can
   * simulate a concurrent writer. Returns a function that removes the hook.
   */
  onRequest(hook: RequestHook): () => void {
    return this.#requests.onRequest(hook);
  }

  /** Ends every open watch stream: cleanly, or with `error` after the already queued events. */
  closeWatches(error?: Error): void {
    for (const watcher of [...this.#store.watchers]) watcher.close(error);
  }

  /** How many watch streams are open (started and not yet ended). */
  activeWatches(): number {
    return this.#store.watchers.size;
  }

  /**
   * Forgets the event history at or below `resourceVersion` (default: all of it), as etcd compaction does:
   * watches and continue tokens from before it then fail with GoneError (410).
   */
  compact(resourceVersion: string = this.resourceVersion): void {
    this.#store.compact(parseResourceVersion(resourceVersion));
  }

  // ---------------------------------------------------------------------------------------------------
  // Client

  async get<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    opts: { signal?: AbortSignal } = {},
  ): Promise<T> {
    const k = this.#requestKey(res, key, 'get');
    await this.#requests.begin({ verb: 'get', resource: res, ...this.#where(res, k) }, opts.signal);
    const found = this.#store.lookup(res, k);
    if (!found) throw notFoundError(res, k.name);
    return copy<T>(found);
  }

  async list<T extends KubeObject>(res: Resource<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    const namespace = res.namespaced ? opts.namespace || undefined : undefined;
    await this.#requests.begin(
      { verb: 'list', resource: res, ...(namespace ? { namespace } : {}), options: opts },
      opts.signal,
    );
    return listObjects(this.#store, res, namespace, opts);
  }

  async create<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    const input = incoming(obj, 'create');
    const namespace = res.namespaced ? input.metadata.namespace || undefined : undefined;
    if (res.namespaced && !namespace) throw badRequestError(`create ${res.kind}: a namespace is required`);
    await this.#requests.begin(
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
    const writer = this.#writer(res, opts);
    return copy<T>(
      this.#store.createObject(res, input, opts, (created) => managedAfterWrite(undefined, created, writer)),
    );
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
    await this.#requests.begin(
      { verb: 'delete', resource: res, ...this.#where(res, k), options: opts },
      opts.signal,
    );
    const stored = this.#store.lookup(res, k);
    if (!stored) throw notFoundError(res, k.name);
    checkDeletePreconditions(res, stored, opts.preconditions);
    if (opts.dryRun) return;
    this.#store.delete(
      res,
      stored,
      opts.propagationPolicy ?? 'Background',
      opts.propagationPolicy !== undefined,
    );
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
    const intercepted = !this.#requests.inHook;
    if (intercepted) this.#requests.record(request);
    const startRv = this.#store.rv;
    return {
      [Symbol.asyncIterator]: () =>
        openWatch<T>(
          this.#store,
          res,
          opts,
          namespace,
          startRv,
          intercepted ? () => this.#requests.intercept(request) : undefined,
          this.#delivery && watchDelay(this.#delivery, res, namespace, opts, this.#watchStreams++),
        ),
    };
  }

  // ---------------------------------------------------------------------------------------------------
  // Internals

  /**
   * The key of a request for one object. Like the real client, a missing name (or namespace, for a
   * namespaced kind) is a BadRequestError raised before any request is made (so it is not recorded).
   */
  #requestKey(res: Resource, key: ObjectKey, verb: FakeVerb): ObjectKey {
    if (!key.name) throw badRequestError(`${verb} ${res.kind}: a name is required`);
    if (res.namespaced && !key.namespace)
      throw badRequestError(`${verb} ${res.kind}: a namespace is required`);
    return this.#store.key(res, key);
  }

  #where(res: Resource, key: ObjectKey): { namespace?: string; name: string } {
    return res.namespaced && key.namespace
      ? { namespace: key.namespace, name: key.name }
      : { name: key.name };
  }

  async #update<T extends KubeObject>(
    res: Resource<T>,
    obj: T,
    opts: WriteOptions,
    verb: 'update' | 'updateStatus',
  ): Promise<T> {
    const input = incoming(obj, verb);
    const k = this.#store.key(res, { namespace: input.metadata.namespace, name: input.metadata.name ?? '' });
    await this.#requests.begin(
      { verb, resource: res, ...this.#where(res, k), object: input, options: opts },
      opts.signal,
    );
    if (!k.name) throw badRequestError(`${verb}: metadata.name is required`);
    if (verb === 'updateStatus' && !this.hasStatusSubresource(res)) throw this.#noStatus(res, k.name);
    const stored = this.#store.lookup(res, k);
    if (!stored) throw notFoundError(res, k.name);
    checkUnconditionalUpdate(res, stored, input.metadata);
    checkPreconditions(res, stored, input.metadata);
    const next =
      verb === 'updateStatus'
        ? statusUpdate(stored, input)
        : mainUpdate(res, stored, input, this.hasStatusSubresource(res));
    const writer = this.#writer(res, opts, verb === 'updateStatus');
    setOrDelete(next.metadata, 'managedFields', managedAfterWrite(stored, next, writer));
    return copy<T>(this.#store.writeExisting(res, stored, next, opts, verb === 'update'));
  }

  async #patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions,
    verb: 'patch' | 'patchStatus',
  ): Promise<T> {
    const k = this.#requestKey(res, key, verb);
    await this.#requests.begin(
      { verb, resource: res, ...this.#where(res, k), patchType: patch.type, patch, options: opts },
      opts.signal,
    );
    if (verb === 'patchStatus' && !this.hasStatusSubresource(res)) throw this.#noStatus(res, k.name);
    if (patch.type === 'apply') checkApplyBody(patch.body, k.name);
    const stored = this.#store.lookup(res, k);
    const writer = this.#writer(res, opts, verb === 'patchStatus');
    const scope = !this.hasStatusSubresource(res) ? 'all' : verb === 'patchStatus' ? 'status' : 'main';
    if (!stored) {
      if (patch.type === 'apply' && verb === 'patch') {
        const input = incoming(patch.body, 'apply');
        input.metadata.name = k.name;
        if (k.namespace) input.metadata.namespace = k.namespace;
        delete input.metadata.resourceVersion;
        const { managedFields } = serverSideApply(undefined, input, { writer, force: false, scope });
        return copy<T>(this.#store.createObject(res, input, opts, () => managedFields));
      }
      throw notFoundError(res, k.name);
    }

    const applied =
      patch.type === 'apply'
        ? serverSideApply(stored, incoming(patch.body, 'apply'), {
            writer,
            force: patch.force === true,
            scope,
          })
        : undefined;
    const patched = applied ? applied.object : patchedObject(stored, patch);
    if (!isPlainObject(patched) || !isPlainObject(patched.metadata)) {
      throw unprocessableError('the patched object must be an object with metadata');
    }
    const candidate = incoming(patched, verb);
    const meta = candidate.metadata;
    checkPatchedIdentity(res, stored, meta, k);
    checkPreconditions(res, stored, meta);
    const next =
      verb === 'patchStatus'
        ? statusUpdate(stored, candidate)
        : mainUpdate(res, stored, candidate, this.hasStatusSubresource(res));
    const managed = applied ? applied.managedFields : managedAfterWrite(stored, next, writer);
    setOrDelete(next.metadata, 'managedFields', managed);
    return copy<T>(this.#store.writeExisting(res, stored, next, opts, verb === 'patch'));
  }

  /** Who a write is from, for metadata.managedFields. */
  #writer(res: Resource, opts: WriteOptions, status = false): Writer {
    return {
      manager: opts.fieldManager ?? this.fieldManager,
      apiVersion: res.apiVersion,
      ...(status ? { subresource: 'status' as const } : {}),
      now: this.#store.timestamp(),
    };
  }

  #noStatus(res: Resource, name: string): Error {
    return notFoundError(
      res,
      name,
      `${res.plural} "${name}": the fake client has no status subresource for ${resourceId(res)}; ` +
        'declare it with the statusSubresource option or withStatusSubresource()',
    );
  }
}

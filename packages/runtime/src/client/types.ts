import type { KubeObject, ObjectKey, ObjectList, WatchEvent } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { DeepFreezeOptions } from '../util/freeze.ts';

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * Page size; `list` follows `continue` until the end unless `continue` is given explicitly or
   * `onePage` is set.
   */
  limit?: number;
  continue?: string;
  /** With `limit`: return only the first page (with its `continue` token), like an explicit `continue`. */
  onePage?: boolean;
  resourceVersion?: string;
  resourceVersionMatch?: 'Exact' | 'NotOlderThan';
  signal?: AbortSignal;
}

export interface WriteOptions {
  /** Defaults to the client's fieldManager. */
  fieldManager?: string;
  dryRun?: boolean;
  signal?: AbortSignal;
}

export type Patch =
  | { type: 'merge'; body: unknown }
  | { type: 'strategic'; body: unknown }
  | { type: 'json'; body: JsonPatchOperation[] }
  | { type: 'apply'; body: KubeObject; force?: boolean };

export interface JsonPatchOperation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: string;
  value?: unknown;
  from?: string;
}

export interface DeleteOptions {
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
  signal?: AbortSignal;
}

export interface WatchOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
  /** Server-side timeout; the server closes the stream cleanly after it. */
  timeoutSeconds?: number;
  sendInitialEvents?: boolean;
  /**
   * The caller drops `metadata.managedFields` anyway (informers do): the client may leave them out of the
   * objects it delivers, cut from the text before parsing (cheaper than parsing and deleting them). A
   * hint, not a guarantee: clients that cannot (fakes) deliver them, so the caller still drops them.
   */
  omitManagedFields?: boolean;
  /**
   * The caller freezes the objects anyway (informers store them frozen): the client may deliver them
   * deep-frozen, long string values (`strings.minLength` or more) passed through `strings`, as
   * deepFreezeJson(object, strings) would make them. Freezing while decoding saves the walk over each
   * object that freezing afterwards takes. A hint, like omitManagedFields: objects the client cannot
   * deliver so (JSON, fakes) come unfrozen, so the caller still freezes what is not frozen.
   */
  deepFreeze?: DeepFreezeOptions;
  signal?: AbortSignal;
}

/**
 * The API client. Reads (get/list) go to the API here; controllers read from the cache instead
 * (see cache/), and write through this.
 */
export interface Client {
  readonly fieldManager: string;
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: { signal?: AbortSignal }): Promise<T>;
  list<T extends KubeObject>(res: Resource<T>, opts?: ListOptions): Promise<ObjectList<T>>;
  create<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T>;
  update<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T>;
  patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T>;
  delete<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: DeleteOptions): Promise<void>;
  updateStatus<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T>;
  patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T>;
  /** A single watch stream; ends when the server closes it or `signal` aborts. Errors are thrown typed. */
  watch<T extends KubeObject>(res: Resource<T>, opts?: WatchOptions): AsyncIterable<WatchEvent<T>>;
}

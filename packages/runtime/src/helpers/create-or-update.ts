/**
 * createOrUpdate and apply: write a desired object only when the live one differs from it.
 *
 * "Desired is a subset": the desired object lists only the fields the controller owns. The live
 * object carries many more (uid, resourceVersion, managedFields, status, server defaults such as a
 * Service's clusterIP or a container's terminationMessagePath, labels added by others). Those are not
 * differences: the comparison looks only at the fields present in desired, recursively (see
 * `isSubset` in equality.ts for the exact rules on arrays, nulls and zero values), so a reconcile whose
 * desired state is already in place makes no write at all.
 */
import type { KubeObject, ObjectKey, ObjectMeta } from '../api/object.ts';
import { objectKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { AlreadyExistsError, ConflictError, NotFoundError } from '../client/errors.ts';
import type { Client, WriteOptions } from '../client/types.ts';
import { withTypeMeta } from '../util/type-meta.ts';
import { deepCopy, deepEqual, isPlainObject, isSubset } from './equality.ts';

/**
 * Where the current object is read from instead of the client: typically the manager's cache. It may
 * return a read-only (frozen) object, or `undefined` when there is none; the helpers deep-copy it.
 */
export interface ObjectReader {
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey): PromiseLike<unknown> | unknown;
}

export type OperationResult = 'created' | 'updated' | 'unchanged';

export interface CreateOrUpdateResult<T extends KubeObject> {
  operation: OperationResult;
  /** The object as written, or the live object when unchanged. */
  object: T;
}

/** Attempts before a ConflictError (or AlreadyExistsError) is thrown to the caller. */
export const DEFAULT_WRITE_ATTEMPTS = 3;

export interface CreateOrUpdateOptions<T extends KubeObject> extends WriteOptions {
  /**
   * Builds the object to write from a copy of the live object and the desired one, replacing the
   * default merge (which copies every field of desired into live: objects merged key by key, arrays and
   * values replaced, `null` removing a key). Use it for fields that need care, e.g. keeping a replica
   * count an autoscaler set. It is only called when the object exists; with it, the write happens
   * when its result differs from the live object (deep equality, ignoring status and server-set
   * metadata) rather than by the subset rule.
   */
  mutate?: (existing: T, desired: T) => T;
  /**
   * Reads the current object from here (typically the informer cache, to save a GET per reconcile);
   * a missing object may be reported as `undefined` or by throwing NotFoundError. After a conflict the
   * object is re-read from the client, since the cache was evidently behind.
   */
  reader?: ObjectReader;
  /** Attempts on conflict (default DEFAULT_WRITE_ATTEMPTS). */
  attempts?: number;
}

/**
 * Creates `desired` if it does not exist; otherwise merges it into the live object and updates (with
 * the live resourceVersion, so a concurrent change is a conflict, retried from a fresh read) only when
 * something desired owns differs. `status` is never written here (use patchStatus), and metadata the
 * server sets (uid, resourceVersion, generation, creationTimestamp, deletionTimestamp, managedFields)
 * is ignored in desired.
 */
export async function createOrUpdate<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  desired: T,
  opts: CreateOrUpdateOptions<T> = {},
): Promise<CreateOrUpdateResult<T>> {
  const { mutate, reader, attempts = DEFAULT_WRITE_ATTEMPTS, ...writeOpts } = opts;
  const key = objectKey(desired);
  const owned = ownedFields(desired);
  let source: ObjectReader | undefined = reader;
  for (let attempt = 1; ; attempt++) {
    const retry = attempt < attempts;
    const live = await read(client, res, key, source, opts.signal);
    source = undefined;
    if (live === undefined) {
      try {
        const object = await client.create(res, withTypeMeta(res, forCreate(desired)), writeOpts);
        return { operation: 'created', object };
      } catch (err) {
        if (retry && err instanceof AlreadyExistsError) continue;
        throw err;
      }
    }
    let next: T;
    if (mutate) {
      next = mutate(deepCopy(live), desired);
      if (deepEqual(ownedFields(next), ownedFields(live))) return { operation: 'unchanged', object: live };
    } else {
      if (isSubset(owned, live)) return { operation: 'unchanged', object: live };
      next = mergeInto(deepCopy(live), owned) as T;
    }
    next.metadata = { ...next.metadata, resourceVersion: live.metadata.resourceVersion };
    try {
      const object = await client.update(res, withTypeMeta(res, next), writeOpts);
      return { operation: 'updated', object };
    } catch (err) {
      if (retry && (err instanceof ConflictError || err instanceof NotFoundError)) continue;
      throw err;
    }
  }
}

export interface ApplyOptions extends WriteOptions {
  /** The field manager that owns the applied fields (default: the client's). */
  fieldManager?: string;
  /** Take ownership of fields other managers own instead of failing with a conflict. */
  force?: boolean;
  /** Reads the live object from here (a cache) instead of the client, to decide whether to apply. */
  reader?: ObjectReader;
}

/**
 * Server-side apply of `desired` (apiVersion and kind are filled in from `res` when missing), skipped
 * when the live object already matches it by the subset rule.
 *
 * Limitation of the skip: a field this manager applied before and has since dropped from desired
 * still matches, so it is not released until something else in desired changes. Apply unconditionally
 * (client.patch with type 'apply') when removing fields matters.
 */
export async function apply<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  desired: T,
  opts: ApplyOptions = {},
): Promise<CreateOrUpdateResult<T>> {
  const { fieldManager, force, reader, ...writeOpts } = opts;
  const key = objectKey(desired);
  const live = await read(client, res, key, reader, opts.signal);
  if (live !== undefined && isSubset(ownedFields(desired), live))
    return { operation: 'unchanged', object: live };
  const body = withTypeMeta(res, deepCopy(desired));
  delete body.metadata.managedFields;
  const object = await client.patch(
    res,
    key,
    { type: 'apply', body, force: force ?? false },
    { ...writeOpts, fieldManager: fieldManager ?? client.fieldManager },
  );
  return { operation: live === undefined ? 'created' : 'updated', object };
}

/** Metadata the server owns; a value in desired is never compared nor written. */
const SERVER_METADATA: readonly (keyof ObjectMeta)[] = [
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'managedFields',
];

/**
 * The part of an object a controller writes with create/update: without status, type meta (list items
 * from a cache often lack apiVersion/kind) and server-owned metadata.
 */
function ownedFields<T extends KubeObject>(obj: T): Record<string, unknown> {
  const { status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = obj as T & { status?: unknown };
  const metadata: Record<string, unknown> = { ...obj.metadata };
  for (const field of SERVER_METADATA) delete metadata[field];
  return { ...rest, metadata };
}

/**
 * Desired without the server-owned metadata the API refuses on create (resourceVersion): a new top level
 * and metadata, the rest shared with desired. No deep copy: clients serialize (or, the fake, copy) the
 * body they are given and change nothing in it, and desired is the caller's, untouched.
 */
function forCreate<T extends KubeObject>(desired: T): T {
  const metadata = { ...desired.metadata };
  for (const field of SERVER_METADATA) delete metadata[field];
  return { ...desired, metadata };
}

/** Applies `patch` onto `target` with JSON merge patch rules; returns target. */
function mergeInto(target: Record<string, unknown> | KubeObject, patch: Record<string, unknown>): unknown {
  const out = target as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (value === null) delete out[key];
    else if (isPlainObject(value) && isPlainObject(out[key])) mergeInto(out[key], value);
    else out[key] = deepCopy(value);
  }
  return out;
}

async function read<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  key: ObjectKey,
  reader: ObjectReader | undefined,
  signal: AbortSignal | undefined,
): Promise<T | undefined> {
  try {
    const found = reader
      ? ((await reader.get(res, key)) as T | undefined)
      : await client.get(res, key, { signal });
    return found === undefined || found === null ? undefined : deepCopy(found);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

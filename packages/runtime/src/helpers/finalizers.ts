/**
 * Finalizers, like controller-runtime's controllerutil finalizer helpers, but writing for you.
 *
 * addFinalizer and removeFinalizer send a JSON patch that first tests metadata.resourceVersion and
 * then sets metadata.finalizers, so the write only applies to the version of the object they looked
 * at and never drops a finalizer another controller added in between. When the object moved on (a
 * ConflictError, or the 422 a failed `test` operation returns) they re-read it from the API and try
 * again, a bounded number of times.
 */
import type { KubeObject } from '../api/object.ts';
import { objectKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { ConflictError, InvalidError, NotFoundError } from '../client/errors.ts';
import type { Client, JsonPatchOperation, WriteOptions } from '../client/types.ts';

/** How many times a finalizer write is attempted before the last ConflictError is thrown. */
export const DEFAULT_FINALIZER_ATTEMPTS = 5;

export interface FinalizerOptions extends WriteOptions {
  /** Attempts before giving up on conflicts (default DEFAULT_FINALIZER_ATTEMPTS). */
  attempts?: number;
}

/** True when the object carries the finalizer. */
export function hasFinalizer(obj: KubeObject, name: string): boolean {
  return obj.metadata.finalizers?.includes(name) ?? false;
}

/** True when the object has a deletionTimestamp: it is waiting for its finalizers. */
export function isBeingDeleted(obj: KubeObject): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}

/**
 * Ensures the object carries the finalizer. Returns the object as written, or `obj` itself when the
 * finalizer was already there (no write). Throws NotFoundError when the object does not exist.
 */
export async function addFinalizer<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  obj: T,
  name: string,
  opts: FinalizerOptions = {},
): Promise<T> {
  const result = await writeFinalizers(client, res, obj, opts, (current) =>
    current.includes(name) ? undefined : [...current, name],
  );
  return result.object;
}

/**
 * Ensures the object no longer carries the finalizer. Returns the object as written (the API returns
 * it even when this was the last finalizer of an object being deleted), `obj` itself when the
 * finalizer was not there (no write), or `undefined` when the object no longer exists.
 */
export async function removeFinalizer<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  obj: T,
  name: string,
  opts: FinalizerOptions = {},
): Promise<T | undefined> {
  try {
    const result = await writeFinalizers(client, res, obj, opts, (current) =>
      current.includes(name) ? current.filter((f) => f !== name) : undefined,
    );
    return result.object;
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** What runFinalizer did. */
export interface FinalizerOutcome<T extends KubeObject> {
  /** The object is being deleted (it has a deletionTimestamp). */
  deleted: boolean;
  /** Cleanup ran and the finalizer was removed. */
  finalized: boolean;
  /** The finalizer was added. */
  added: boolean;
  /** The object after any write; `undefined` once it is gone from the API. */
  object: T | undefined;
}

/**
 * The finalizer flow of a reconcile:
 * - object being deleted and carrying the finalizer: runs `cleanup(obj)` once, then removes the
 *   finalizer (retrying conflicts without running cleanup again) → `{ deleted, finalized }`. If cleanup
 *   throws, the finalizer stays and the error propagates, so the reconcile is retried; cleanup must
 *   therefore be idempotent.
 * - object being deleted without the finalizer: nothing to do → `{ deleted }`. Stop reconciling.
 * - object not being deleted: ensures the finalizer is present → `{ added }` when it had to add it.
 */
export async function runFinalizer<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  obj: T,
  name: string,
  cleanup: (obj: T) => Promise<void>,
  opts: FinalizerOptions = {},
): Promise<FinalizerOutcome<T>> {
  if (isBeingDeleted(obj)) {
    if (!hasFinalizer(obj, name)) return { deleted: true, finalized: false, added: false, object: obj };
    await cleanup(obj);
    const object = await removeFinalizer(client, res, obj, name, opts);
    return { deleted: true, finalized: true, added: false, object };
  }
  if (hasFinalizer(obj, name)) return { deleted: false, finalized: false, added: false, object: obj };
  const result = await writeFinalizers(client, res, obj, opts, (current) =>
    current.includes(name) ? undefined : [...current, name],
  );
  return { deleted: false, finalized: false, added: result.wrote, object: result.object };
}

/**
 * Patches metadata.finalizers to `change(current)` guarded by a resourceVersion test; `change`
 * returns undefined when there is nothing to do. Returns the latest object (`obj` itself if it never
 * had to read or write) and whether a write happened.
 */
async function writeFinalizers<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  obj: T,
  opts: FinalizerOptions,
  change: (current: readonly string[]) => string[] | undefined,
): Promise<{ object: T; wrote: boolean }> {
  const { attempts = DEFAULT_FINALIZER_ATTEMPTS, ...writeOpts } = opts;
  const key = objectKey(obj);
  let current: T = obj;
  if (!current.metadata.resourceVersion) current = await client.get(res, key, { signal: opts.signal });
  for (let attempt = 1; ; attempt++) {
    const finalizers = change(current.metadata.finalizers ?? []);
    if (finalizers === undefined) return { object: current, wrote: false };
    const rv = current.metadata.resourceVersion;
    const ops: JsonPatchOperation[] = [
      { op: 'test', path: '/metadata/resourceVersion', value: rv },
      {
        op: current.metadata.finalizers ? 'replace' : 'add',
        path: '/metadata/finalizers',
        value: finalizers,
      },
    ];
    try {
      return { object: await client.patch(res, key, { type: 'json', body: ops }, writeOpts), wrote: true };
    } catch (err) {
      if (attempt >= attempts || !(err instanceof ConflictError || err instanceof InvalidError)) throw err;
      const fresh = await client.get(res, key, { signal: opts.signal });
      // A 422 is only the failed resourceVersion test if the object really moved on; otherwise the
      // patch itself was rejected (say, an invalid finalizer name) and retrying cannot help.
      if (err instanceof InvalidError && fresh.metadata.resourceVersion === rv) throw err;
      current = fresh;
    }
  }
}

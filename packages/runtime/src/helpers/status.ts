/**
 * Status writes that only happen when the status actually changed.
 */
import type { KubeObject } from '../api/object.ts';
import { objectKey } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { Client, WriteOptions } from '../client/types.ts';
import { deepCopy, deepEqual, isPlainObject } from './equality.ts';

/** The status type of an object type (an empty record for kinds without a typed status). */
export type StatusOf<T> = T extends { status?: infer S } ? NonNullable<S> : Record<string, unknown>;

export interface PatchStatusOptions extends WriteOptions {
  /**
   * Sets `status.observedGeneration` to `metadata.generation` (when the object has one) after `mutate`
   * ran, the usual "I have acted on this spec" marker.
   */
  observedGeneration?: boolean;
  /**
   * Adds metadata.resourceVersion to the patch so it fails with ConflictError when the object changed
   * since `obj` was read. Off by default: a controller is normally the only writer of its status.
   */
  optimisticLock?: boolean;
}

export type PatchStatusResult<T extends KubeObject> =
  /** The new status deep-equals the current one: nothing was written; `object` is the input object. */
  | { changed: false; object: T }
  /** The status was written; `object` is what the API returned. */
  | { changed: true; object: T };

/**
 * Computes the new status with `mutate` and writes it through the status subresource as a JSON merge
 * patch holding only what changed, or skips the write entirely when the result deep-equals the current
 * status.
 *
 * `mutate` receives a deep copy of the current status (an empty object if there is none yet), so it may
 * modify it in place and return it, or return a new one. Merge patches replace arrays whole, so a
 * changed `conditions` array is sent in full; fields dropped from the status are sent as `null`.
 */
export async function patchStatus<T extends KubeObject>(
  client: Client,
  res: Resource<T>,
  obj: T,
  mutate: (status: StatusOf<T>) => StatusOf<T>,
  opts: PatchStatusOptions = {},
): Promise<PatchStatusResult<T>> {
  const { observedGeneration, optimisticLock, ...writeOpts } = opts;
  const current: unknown = (obj as { status?: unknown }).status;
  const base = isPlainObject(current) ? deepCopy(current) : {};
  const next: unknown = mutate(base as StatusOf<T>);
  if (observedGeneration && isPlainObject(next) && obj.metadata.generation !== undefined) {
    next.observedGeneration = obj.metadata.generation;
  }
  if (deepEqual(current ?? {}, next ?? {})) return { changed: false, object: obj };

  const body: Record<string, unknown> = { status: mergePatchOf(current, next) };
  if (optimisticLock && obj.metadata.resourceVersion) {
    body.metadata = { resourceVersion: obj.metadata.resourceVersion };
  }
  const object = await client.patchStatus(res, objectKey(obj), { type: 'merge', body }, writeOpts);
  return { changed: true, object };
}

/**
 * The JSON merge patch (RFC 7386) that turns `from` into `to`: changed and added fields with their new
 * value (objects recursively, arrays whole), removed fields as `null`.
 */
export function mergePatchOf(from: unknown, to: unknown): unknown {
  if (!isPlainObject(from) || !isPlainObject(to)) return to === undefined ? null : deepCopy(to);
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(from)) {
    if (from[key] !== undefined && (!Object.hasOwn(to, key) || to[key] === undefined)) patch[key] = null;
  }
  for (const key of Object.keys(to)) {
    const value = to[key];
    if (value === undefined) continue;
    const old = Object.hasOwn(from, key) ? from[key] : undefined;
    if (deepEqual(old, value)) continue;
    patch[key] = isPlainObject(old) && isPlainObject(value) ? mergePatchOf(old, value) : deepCopy(value);
  }
  return patch;
}

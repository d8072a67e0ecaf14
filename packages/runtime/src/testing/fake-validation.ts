/** What the fake client refuses, as the API server does: malformed objects, stale preconditions, ... */
import type { KubeObject, ObjectMeta } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { badRequestError, conflictError, invalidError } from './errors.ts';
import { isPlainObject, jsonClone } from './patch.ts';

type Obj = KubeObject & Record<string, unknown>;

/** Empty metadata collections vanish on the wire (omitempty); do the same so equality is wire equality. */
export function normalizeMeta(meta: ObjectMeta): void {
  for (const field of ['labels', 'annotations'] as const) {
    const value = meta[field];
    if (value && Object.keys(value).length === 0) delete meta[field];
  }
  for (const field of ['finalizers', 'ownerReferences', 'managedFields'] as const) {
    const value = meta[field];
    if (value && value.length === 0) delete meta[field];
  }
}

/** Validates and deep-copies an object coming in from a caller. */
export function incoming(value: unknown, what: string): Obj {
  if (!isPlainObject(value) || !isPlainObject(value.metadata)) {
    throw badRequestError(`${what}: the object must have metadata`);
  }
  const obj = jsonClone(value) as Obj;
  normalizeMeta(obj.metadata);
  return obj;
}

/** Everything that is not metadata (nor status, when status is a subresource): what generation tracks. */
export function specOf(obj: Obj, statusIsSubresource: boolean): Record<string, unknown> {
  const { metadata: _metadata, apiVersion: _apiVersion, kind: _kind, ...rest } = obj;
  if (statusIsSubresource) delete rest.status;
  return rest;
}

/** The uid and resourceVersion a write carries must match the stored object's. */
export function checkPreconditions(res: Resource, stored: Obj, meta: ObjectMeta): void {
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

/** An object being deleted can lose finalizers but not gain any. */
export function checkNewFinalizers(res: Resource, stored: Obj, next: Obj): void {
  if (!stored.metadata.deletionTimestamp) return;
  const old = new Set(stored.metadata.finalizers ?? []);
  const added = (next.metadata.finalizers ?? []).filter((f) => !old.has(f));
  if (added.length > 0) {
    throw invalidError(res, stored.metadata.name ?? '', [
      {
        reason: 'FieldValueForbidden',
        field: 'metadata.finalizers',
        message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
      },
    ]);
  }
}

export function checkObjectName(res: Resource, name: string): void {
  if (name.includes('/') || name === '.' || name === '..') {
    throw invalidError(res, name, [
      { reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}"` },
    ]);
  }
}

/** A delete's preconditions must match the stored object. */
export function checkDeletePreconditions(
  res: Resource,
  stored: Obj,
  pre: { uid?: string; resourceVersion?: string } | undefined,
): void {
  const meta = stored.metadata;
  const name = meta.name ?? '';
  if (pre?.uid && pre.uid !== meta.uid) {
    throw conflictError(
      res,
      name,
      `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${meta.uid ?? ''}`,
    );
  }
  if (pre?.resourceVersion && pre.resourceVersion !== meta.resourceVersion) {
    throw conflictError(
      res,
      name,
      `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${meta.resourceVersion ?? ''}`,
    );
  }
}

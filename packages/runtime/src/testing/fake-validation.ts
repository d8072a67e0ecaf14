/** What the fake client refuses, as the API server does: malformed objects, stale preconditions, ... */
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
import type { KubeObject, ObjectKey, ObjectMeta } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { badRequestError, conflictError, invalidError, unconditionalUpdateError } from './errors.ts';
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

/** The built-in kinds that have a status subresource. */
export const BUILTINS_WITH_STATUS: readonly Resource[] = [
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

/** The API groups Kubernetes serves itself (1.34); any other group is a custom resource's. */
const BUILTIN_GROUPS: ReadonlySet<string> = new Set([
  '',
  'admissionregistration.k8s.io',
  'apiextensions.k8s.io',
  'apiregistration.k8s.io',
  'apps',
  'authentication.k8s.io',
  'authorization.k8s.io',
  'autoscaling',
  'batch',
  'certificates.k8s.io',
  'coordination.k8s.io',
  'discovery.k8s.io',
  'events.k8s.io',
  'flowcontrol.apiserver.k8s.io',
  'internal.apiserver.k8s.io',
  'networking.k8s.io',
  'node.k8s.io',
  'policy',
  'rbac.authorization.k8s.io',
  'resource.k8s.io',
  'scheduling.k8s.io',
  'storage.k8s.io',
  'storagemigration.k8s.io',
]);

/** Custom resources are served by the CRD handler, whose update strategy refuses unconditional updates. */
export function isCustomResource(res: Resource): boolean {
  return !BUILTIN_GROUPS.has(res.group);
}

/**
 * An update (or status update) without metadata.resourceVersion: built-in kinds take it as unconditional,
 * custom resources refuse it with a 422.
 */
export function checkUnconditionalUpdate(res: Resource, stored: Obj, meta: ObjectMeta): void {
  if (!meta.resourceVersion && isCustomResource(res)) {
    throw unconditionalUpdateError(res, stored.metadata.name ?? '');
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

/**
 * An apply patch is an object with metadata, naming the object of the URL if it names one, and without
 * managedFields (an applied configuration built from a read object often still carries them).
 */
export function checkApplyBody(body: unknown, name: string): void {
  if (!isPlainObject(body) || !isPlainObject(body.metadata)) {
    throw badRequestError('an apply patch must be an object with metadata');
  }
  const managed = body.metadata.managedFields;
  if (managed !== undefined && managed !== null && !(Array.isArray(managed) && managed.length === 0)) {
    throw badRequestError('metadata.managedFields must be nil');
  }
  const bodyName = body.metadata.name;
  if (bodyName !== undefined && bodyName !== name) {
    throw badRequestError(
      `the name of the object (${String(bodyName)}) does not match the name on the URL (${name})`,
    );
  }
}

/** A patch cannot rename an object or move it to another namespace. */
export function checkPatchedIdentity(res: Resource, stored: Obj, meta: ObjectMeta, url: ObjectKey): void {
  if (meta.name !== stored.metadata.name) {
    throw badRequestError(
      `the name of the object (${meta.name ?? ''}) does not match the name on the URL (${url.name})`,
    );
  }
  if (res.namespaced && meta.namespace !== stored.metadata.namespace) {
    throw badRequestError(
      `the namespace of the object (${meta.namespace ?? ''}) does not match the namespace on the URL (${url.namespace ?? ''})`,
    );
  }
}

/**
 * Owner references, like controller-runtime's controllerutil.SetControllerReference and friends.
 *
 * The setters modify `object.metadata.ownerReferences` in place (they are meant to be called on the
 * desired object a reconciler is about to write) and return the same object for chaining.
 *
 * The object's scope is read from `object.metadata.namespace`: an object without a namespace is taken
 * to be cluster-scoped, so set the namespace on desired objects before setting their owner.
 */
import type { KubeObject, OwnerReference } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';

/** Why an owner cannot own an object. */
export type InvalidOwnerReason =
  /** The owner has no metadata.uid (it was not read back from the API). */
  | 'MissingUID'
  /** The owner has no metadata.name. */
  | 'MissingName'
  /** The owner's resource is namespaced but the owner has no metadata.namespace. */
  | 'MissingNamespace'
  /** A namespaced owner for a cluster-scoped object. */
  | 'ClusterScopedObject'
  /** Owner and object are in different namespaces. */
  | 'CrossNamespace';

/** The owner/object pair violates the owner reference rules; nothing was changed. */
export class InvalidOwnerError extends Error {
  readonly reason: InvalidOwnerReason;
  constructor(reason: InvalidOwnerReason, message: string) {
    super(message);
    this.name = 'InvalidOwnerError';
    this.reason = reason;
  }
}

/** The object already has a controller, and it is not this owner; nothing was changed. */
export class AlreadyOwnedError extends Error {
  /** The controller reference already on the object. */
  readonly existing: OwnerReference;
  /** The object's namespace/name. */
  readonly object: { namespace?: string; name?: string };
  constructor(existing: OwnerReference, object: KubeObject) {
    const name = object.metadata.namespace
      ? `${object.metadata.namespace}/${object.metadata.name ?? ''}`
      : (object.metadata.name ?? '');
    super(`object ${name} is already owned by another ${existing.kind} controller ${existing.name}`);
    this.name = 'AlreadyOwnedError';
    this.existing = { ...existing };
    this.object = { namespace: object.metadata.namespace, name: object.metadata.name };
  }
}

/** Options shared by the owner reference setters. */
export interface OwnerReferenceOptions {
  /** Sets blockOwnerDeletion (default true for a controller reference, unset for a plain one). */
  blockOwnerDeletion?: boolean;
}

/**
 * Makes `owner` the controller of `object`: adds (or refreshes) an OwnerReference with
 * `controller: true, blockOwnerDeletion: true`. Throws AlreadyOwnedError when another owner is the
 * controller, and InvalidOwnerError when the namespaces do not allow the reference (a namespaced owner
 * can only own objects in its own namespace; a cluster-scoped owner can own anything).
 */
export function setControllerReference<O extends KubeObject, T extends KubeObject>(
  owner: O,
  object: T,
  ownerResource: Resource<O>,
  opts: OwnerReferenceOptions = {},
): T {
  const ref = buildReference(owner, object, ownerResource);
  ref.controller = true;
  ref.blockOwnerDeletion = opts.blockOwnerDeletion ?? true;
  const current = getControllerOf(object);
  if (current && !sameOwner(current, ref)) throw new AlreadyOwnedError(current, object);
  upsert(object, ref);
  return object;
}

/**
 * Adds (or refreshes) a plain, non-controller OwnerReference to `owner`, so the object is garbage
 * collected with it. If the object already references this owner as its controller, the reference
 * stays a controller reference.
 */
export function setOwnerReference<O extends KubeObject, T extends KubeObject>(
  owner: O,
  object: T,
  ownerResource: Resource<O>,
  opts: OwnerReferenceOptions = {},
): T {
  const ref = buildReference(owner, object, ownerResource);
  const existing = object.metadata.ownerReferences?.find((r) => sameOwner(r, ref));
  if (existing?.controller) {
    ref.controller = true;
    if (existing.blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = existing.blockOwnerDeletion;
  }
  if (opts.blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = opts.blockOwnerDeletion;
  upsert(object, ref);
  return object;
}

/** Removes any reference to `owner` (controller or not). Returns the object. */
export function removeOwnerReference<O extends KubeObject, T extends KubeObject>(
  owner: O,
  object: T,
  ownerResource: Resource<O>,
): T {
  const target = referenceTo(owner, ownerResource);
  const refs = object.metadata.ownerReferences;
  if (!refs) return object;
  const kept = refs.filter((r) => !sameOwner(r, target));
  if (kept.length === 0) delete object.metadata.ownerReferences;
  else object.metadata.ownerReferences = kept;
  return object;
}

/** The object's controller reference (the one with `controller: true`), if any. */
export function getControllerOf(object: KubeObject): OwnerReference | undefined {
  return object.metadata.ownerReferences?.find((r) => r.controller === true);
}

/** True when the object's controller reference points at `owner` (compared by uid). */
export function isControlledBy(object: KubeObject, owner: KubeObject): boolean {
  const ref = getControllerOf(object);
  return ref !== undefined && owner.metadata.uid !== undefined && ref.uid === owner.metadata.uid;
}

/** True when the object references `owner` at all (compared by uid). */
export function hasOwnerReference(object: KubeObject, owner: KubeObject): boolean {
  const uid = owner.metadata.uid;
  return uid !== undefined && (object.metadata.ownerReferences ?? []).some((r) => r.uid === uid);
}

function referenceTo(owner: KubeObject, ownerResource: Resource): OwnerReference {
  return {
    apiVersion: ownerResource.apiVersion,
    kind: ownerResource.kind,
    name: owner.metadata.name ?? '',
    uid: owner.metadata.uid ?? '',
  };
}

function buildReference(owner: KubeObject, object: KubeObject, ownerResource: Resource): OwnerReference {
  const { name, uid, namespace: ownerNs } = owner.metadata;
  if (!name) throw new InvalidOwnerError('MissingName', `${ownerResource.kind} owner has no name`);
  if (!uid) {
    throw new InvalidOwnerError(
      'MissingUID',
      `${ownerResource.kind} owner ${name} has no uid; read it from the API`,
    );
  }
  if (ownerResource.namespaced) {
    if (!ownerNs) {
      throw new InvalidOwnerError(
        'MissingNamespace',
        `namespaced ${ownerResource.kind} owner ${name} has no namespace`,
      );
    }
    const objectNs = object.metadata.namespace;
    if (!objectNs) {
      throw new InvalidOwnerError(
        'ClusterScopedObject',
        `cluster-scoped object ${object.metadata.name ?? ''} must not have a namespace-scoped owner, owner's namespace ${ownerNs}`,
      );
    }
    if (objectNs !== ownerNs) {
      throw new InvalidOwnerError(
        'CrossNamespace',
        `cross-namespace owner references are disallowed, owner's namespace ${ownerNs}, object's namespace ${objectNs}`,
      );
    }
  }
  return referenceTo(owner, ownerResource);
}

/** Same group (any version), kind and name: the same owner, perhaps recreated with a new uid. */
function sameOwner(a: OwnerReference, b: OwnerReference): boolean {
  return groupOf(a.apiVersion) === groupOf(b.apiVersion) && a.kind === b.kind && a.name === b.name;
}

function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

function upsert(object: KubeObject, ref: OwnerReference): void {
  const refs = [...(object.metadata.ownerReferences ?? [])];
  const index = refs.findIndex((r) => sameOwner(r, ref));
  if (index >= 0) refs[index] = ref;
  else refs.push(ref);
  object.metadata.ownerReferences = refs;
}

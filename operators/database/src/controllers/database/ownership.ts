/**
 * Whose object is it? The operator writes only objects it may call its own, decided on the object as the
 * API server returns it (the informer cache shows only objects labelled managed-by, so an object someone
 * else made under a child's name is invisible there; the reconcile reads it from the API before writing).
 *
 *   controlled by this Database (its uid)             ours
 *   controlled by a Database of the same name, another uid
 *                                                     a deleted predecessor's child the garbage collector
 *                                                     has not removed yet: wait (retried, not terminal)
 *   controlled by anything else                       not ours: ObjectConflictError
 *   no controller, labelled managed-by=<operator> and instance=<name>
 *                                                     ours to adopt (a retained Secret, say)
 *   no controller, without those labels               not ours: ObjectConflictError
 *
 * An ObjectConflictError is terminal (status Failed, a Warning event naming the object, no retry until
 * something changes): the operator never takes over another controller's or a user's object.
 */
import { getControllerOf, type KubeObject } from '@opkit/runtime';
import { type Database, GROUP, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY } from '../../api/v1/database.ts';

/** `namespace/name` of an object. */
export function objectName(obj: KubeObject): string {
  const { namespace, name } = obj.metadata;
  return namespace ? `${namespace}/${name ?? ''}` : (name ?? '');
}

/** The labels that make an object without a controller ours to adopt, as `k=v, k=v`. */
export function adoptionLabels(db: Database): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY}, ${LABEL_INSTANCE}=${db.metadata.name ?? ''}`;
}

/** An object with a child's name that the operator may not take over. Names the object. */
export class ObjectConflictError extends Error {
  /** The conflicting object (for the Warning event's `related`). */
  readonly object: KubeObject;
  readonly kind: string;
  constructor(kind: string, object: KubeObject, message: string) {
    super(message);
    this.name = 'ObjectConflictError';
    this.kind = kind;
    this.object = object;
  }
}

/** A child still controlled by a deleted Database of the same name (garbage collection pending). */
export class PredecessorChildError extends Error {
  constructor(kind: string, object: KubeObject, ownerUid: string) {
    super(
      `${kind} ${objectName(object)} still belongs to a deleted Database ${object.metadata.name ?? ''} ` +
        `(uid ${ownerUid}); waiting for the garbage collector to remove it`,
    );
    this.name = 'PredecessorChildError';
  }
}

export function hasAdoptionLabels(obj: KubeObject, db: Database): boolean {
  const labels = obj.metadata.labels ?? {};
  return labels[LABEL_MANAGED_BY] === MANAGED_BY && labels[LABEL_INSTANCE] === db.metadata.name;
}

const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? apiVersion.split('/')[0] : '');

/**
 * Throws unless `live` (read from the API or the cache) is this Database's to write: ObjectConflictError
 * when it belongs to someone else, PredecessorChildError when a deleted Database of the same name still
 * controls it. Returns whether it is controlled by `db` already (false: ours to adopt).
 */
export function checkOwnership(kind: string, live: KubeObject, db: Database): boolean {
  const controller = getControllerOf(live);
  const what = `${kind} ${objectName(live)}`;
  if (controller) {
    if (controller.uid === db.metadata.uid) return true;
    if (
      controller.kind === 'Database' &&
      groupOf(controller.apiVersion) === GROUP &&
      controller.name === db.metadata.name
    ) {
      throw new PredecessorChildError(kind, live, controller.uid);
    }
    throw new ObjectConflictError(
      kind,
      live,
      `${what} already exists and is controlled by ${controller.kind} ${controller.name}; the operator does ` +
        `not take over objects another controller owns: delete or rename it, or give the Database another name`,
    );
  }
  if (hasAdoptionLabels(live, db)) return false;
  throw new ObjectConflictError(
    kind,
    live,
    `${what} already exists and is not managed by this Database (no controller, and not labelled ` +
      `${adoptionLabels(db)}); the operator does not take over other objects: delete or rename it, ` +
      `or label it so that the operator adopts it`,
  );
}

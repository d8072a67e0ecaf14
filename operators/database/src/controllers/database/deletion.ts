/**
 * Deletion. Children carry controller owner references, so the garbage collector removes the
 * StatefulSet, Services, ConfigMap and PDB with the Database. PVCs made from the StatefulSet's
 * volumeClaimTemplates are not owned by anything: they hold the data and stay, which is what
 * deletionPolicy Retain (the default) means. The credentials Secret goes with the data: under Retain it
 * has no owner reference and stays with the PVCs (the data was initialized with its passwords; a new
 * Database of the same name adopts both); under Delete the Database controls it and it is
 * garbage-collected while the finalizer deletes the PVCs. reconcile.ts moves it when the policy changes.
 *
 * deletionPolicy Delete puts the finalizer `myapp.example.com/finalizer` on the Database. When the
 * Database is deleted, the finalizer deletes the StatefulSet (so no pod is recreated onto a claim being
 * deleted) and the claims, then removes itself. It never waits for anything that could be gone already
 * or that only goes away after the Database itself (claims in use are held by the
 * kubernetes.io/pvc-protection finalizer until their pods are gone): deleting a Database never hangs.
 * Switching the policy back to Retain removes the finalizer at once.
 */
import {
  type Client,
  isBeingDeleted,
  NotFoundError,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
  type StatefulSet,
  StatefulSets,
} from '@opkit/runtime';

export const FINALIZER = 'myapp.example.com/finalizer';

export type DeletionPolicy = 'Retain' | 'Delete';

/** Whether the Database should carry the finalizer: only for deletionPolicy Delete. */
export function wantsFinalizer(policy: DeletionPolicy | undefined): boolean {
  return policy === 'Delete';
}

export interface CleanupResult {
  /** Claims a delete was issued for (they may stay Terminating until their pods are gone). */
  deletedClaims: string[];
  deletedStatefulSet: boolean;
}

/**
 * The Delete policy's cleanup: deletes the StatefulSet (when it is ours, by uid precondition) and then
 * every data claim. Missing objects are fine; deleting twice is fine. Throws other API errors (the
 * reconcile is retried with backoff and the finalizer stays until cleanup succeeded).
 */
export async function deleteData(
  client: Client,
  statefulSet: StatefulSet | undefined,
  claims: readonly PersistentVolumeClaim[],
  signal?: AbortSignal,
): Promise<CleanupResult> {
  const result: CleanupResult = { deletedClaims: [], deletedStatefulSet: false };
  if (statefulSet && !isBeingDeleted(statefulSet)) {
    try {
      await client.delete(
        StatefulSets,
        { namespace: statefulSet.metadata.namespace, name: statefulSet.metadata.name ?? '' },
        {
          propagationPolicy: 'Background',
          ...(statefulSet.metadata.uid ? { preconditions: { uid: statefulSet.metadata.uid } } : {}),
          signal,
        },
      );
      result.deletedStatefulSet = true;
    } catch (err) {
      if (!(err instanceof NotFoundError) && (err as { code?: number }).code !== 409) throw err;
    }
  }
  for (const claim of claims) {
    if (isBeingDeleted(claim)) continue;
    const name = claim.metadata.name ?? '';
    try {
      await client.delete(
        PersistentVolumeClaims,
        { namespace: claim.metadata.namespace, name },
        { ...(claim.metadata.uid ? { preconditions: { uid: claim.metadata.uid } } : {}), signal },
      );
      result.deletedClaims.push(name);
    } catch (err) {
      if (!(err instanceof NotFoundError) && (err as { code?: number }).code !== 409) throw err;
    }
  }
  return result;
}

/**
 * Volume expansion. A StatefulSet's volumeClaimTemplates are immutable, so growing spec.storage means:
 *   1. patching each existing PVC's request (the StorageClass must allow expansion; the API server's
 *      PersistentVolumeClaimResize admission refuses it otherwise, and that refusal is reported);
 *   2. recreating the StatefulSet with the bigger template, deleting the old one with
 *      propagationPolicy Orphan so its pods and PVCs stay (reconcile.ts does that part).
 * A PVC whose request grew but whose capacity has not yet is "pending" (the resizer, or a pod restart for
 * offline expansion, is still to come); the status says so until the capacity catches up.
 */
import {
  type Client,
  ForbiddenError,
  InvalidError,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
} from '@opkit/runtime';
import { compareQuantities } from './desired/quantity.ts';

/** -1, 0 or 1 like a.cmp(b); undefined when either is missing or not a quantity. */
export function compareSizes(a: string | undefined, b: string | undefined): number | undefined {
  if (a === undefined || b === undefined) return undefined;
  return compareQuantities(a, b);
}

/** `<template>-<statefulset>-<N>`: the claims a StatefulSet made from one volumeClaimTemplate. */
export function claimOrdinal(
  template: string,
  statefulSet: string,
  claimName: string | undefined,
): number | undefined {
  const prefix = `${template}-${statefulSet}-`;
  if (!claimName?.startsWith(prefix)) return undefined;
  const rest = claimName.slice(prefix.length);
  return /^(0|[1-9][0-9]*)$/.test(rest) ? Number(rest) : undefined;
}

/** The claims of a StatefulSet's template among `pvcs`, by ordinal. */
export function claimsOf(
  pvcs: readonly PersistentVolumeClaim[],
  template: string,
  statefulSet: string,
): PersistentVolumeClaim[] {
  return pvcs
    .filter((p) => claimOrdinal(template, statefulSet, p.metadata.name) !== undefined)
    .sort(
      (a, b) =>
        (claimOrdinal(template, statefulSet, a.metadata.name) ?? 0) -
        (claimOrdinal(template, statefulSet, b.metadata.name) ?? 0),
    );
}

export interface StorageReport {
  /** Claims whose request was raised by this reconcile. */
  expanded: string[];
  /** Claims asking for `size` whose capacity has not reached it yet. */
  pending: string[];
  /** Claims whose expansion the API refused (the StorageClass doesn't allow it, say), with why. */
  failed: { claim: string; message: string }[];
}

export function emptyStorageReport(): StorageReport {
  return { expanded: [], pending: [], failed: [] };
}

/**
 * Raises every claim's request to `size` (never lowers it) and reports which claims are still
 * expanding. Claims being deleted are skipped. API refusals (Forbidden, Invalid) are reported, not thrown:
 * retrying would not help until the StorageClass or the spec changes.
 */
export async function expandClaims(
  client: Client,
  claims: readonly PersistentVolumeClaim[],
  size: string,
  signal?: AbortSignal,
): Promise<StorageReport> {
  const report = emptyStorageReport();
  for (const claim of claims) {
    const name = claim.metadata.name ?? '';
    if (claim.metadata.deletionTimestamp) continue;
    const requested = claim.spec?.resources?.requests?.storage as string | undefined;
    let current: PersistentVolumeClaim = claim;
    if (compareSizes(requested, size) === -1) {
      try {
        current = await client.patch(
          PersistentVolumeClaims,
          { namespace: claim.metadata.namespace, name },
          {
            type: 'merge',
            body: {
              metadata: { uid: claim.metadata.uid },
              spec: { resources: { requests: { storage: size } } },
            },
          },
          { signal },
        );
        report.expanded.push(name);
      } catch (err) {
        if (err instanceof ForbiddenError || err instanceof InvalidError) {
          report.failed.push({ claim: name, message: err.message });
          continue;
        }
        if ((err as { code?: number }).code === 404) continue;
        throw err;
      }
    }
    const capacity = current.status?.capacity?.storage as string | undefined;
    // A claim that is not bound yet has no capacity; it is provisioned at the requested size.
    if (current.status?.phase === 'Bound' && compareSizes(capacity, size) === -1) report.pending.push(name);
  }
  return report;
}

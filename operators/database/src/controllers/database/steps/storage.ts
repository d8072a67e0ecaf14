/** The data claims of a Database, and their expansion to spec.storage (storage.ts decides, this writes). */
import {
  isBeingDeleted,
  NotFoundError,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
  StatefulSets,
  withTypeMeta,
} from '@opkit/runtime';
import { statefulSet } from '../desired/index.ts';
import { selectorString } from '../desired/labels.ts';
import { compareStrings } from '../order.ts';
import type { Run } from '../run.ts';
import { claimsOf, expandClaims } from '../storage.ts';

export async function listClaims(run: Run, stsName: string): Promise<PersistentVolumeClaim[]> {
  const pvcs = await run.deps.reader.list(PersistentVolumeClaims, {
    namespace: run.ns,
    labelSelector: selectorString(run.spec),
  });
  const templates = statefulSet(run.spec, { configHash: '' }).spec?.volumeClaimTemplates ?? [];
  return templates.flatMap((t) => claimsOf(pvcs, t.metadata?.name ?? 'data', stsName));
}

/**
 * The data claims of this Database that exist (not being deleted): the labelled ones from the cache,
 * and the first one read from the API (a claim the cache cannot see still holds data a pod would mount).
 */
export async function existingDataClaims(run: Run): Promise<PersistentVolumeClaim[]> {
  const stsName = run.db.metadata.name ?? '';
  const found = new Map<string, PersistentVolumeClaim>();
  for (const c of await listClaims(run, stsName))
    found.set(c.metadata.name ?? '', withTypeMeta(PersistentVolumeClaims, c));
  const templates = statefulSet(run.spec, { configHash: '' }).spec?.volumeClaimTemplates ?? [];
  for (const t of templates) {
    const first = `${t.metadata?.name ?? 'data'}-${stsName}-0`;
    if (found.has(first)) continue;
    const claim = await run.fresh(PersistentVolumeClaims, first);
    if (claim) found.set(first, claim);
  }
  return [...found.values()]
    .filter((c) => !isBeingDeleted(c))
    .sort((a, b) => compareStrings(a.metadata.name ?? '', b.metadata.name ?? ''));
}

/** Patches the claims to spec.storage; `recreate`: then recreate the StatefulSet (orphan deletion). */
export async function expandStorage(run: Run, stsName: string, recreate: boolean): Promise<void> {
  const claims = await listClaims(run, stsName);
  run.storage = await run.step('PersistentVolumeClaim', `data-${stsName}`, () =>
    expandClaims(run.client, claims, run.storageSize, run.signal),
  );
  const { expanded, failed } = run.storage;
  if (expanded.length > 0) {
    run.normal('StorageExpanding', 'Expand', `Expanding ${expanded.join(', ')} to ${run.storageSize}`);
  }
  if (failed.length > 0) {
    run.warning(
      'StorageExpansionFailed',
      'Expand',
      `Cannot expand ${failed.map((f) => f.claim).join(', ')} to ${run.storageSize}: ${failed[0]?.message ?? ''}`,
    );
    return;
  }
  const live = run.sts;
  if (!recreate || !live?.metadata.uid) return;
  // The template still asks for the old size: recreate the StatefulSet so new pods get the new size.
  // Orphan deletion keeps the pods and the PVCs; the new StatefulSet adopts them.
  await run.step('StatefulSet', stsName, async () => {
    try {
      await run.client.delete(
        StatefulSets,
        { namespace: run.ns, name: stsName },
        {
          propagationPolicy: 'Orphan',
          preconditions: { uid: live.metadata.uid ?? '' },
          signal: run.signal,
        },
      );
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  });
  run.recreating = true;
  run.normal(
    'StatefulSetRecreating',
    'Recreate',
    `Recreating StatefulSet ${stsName} with ${run.storageSize} volumes (pods and volumes are kept)`,
    withTypeMeta(StatefulSets, live),
  );
}

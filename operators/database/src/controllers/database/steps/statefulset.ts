/** The StatefulSet: created or updated (its immutable fields kept); a storage increase expands the claims. */
import { deepCopy, isBeingDeleted, type StatefulSet, StatefulSets, withTypeMeta } from '@opkit/runtime';
import { statefulSet } from '../desired/index.ts';
import { engineFor } from '../engines/index.ts';
import { ImageVersionError } from '../errors.ts';
import type { Run } from '../run.ts';
import { compareSizes } from '../storage.ts';
import { expandStorage } from './storage.ts';

function mainImage(sts: StatefulSet | undefined): string | undefined {
  return sts?.spec?.template?.spec?.containers?.[0]?.image;
}

/** The volumeClaimTemplates of `desired` whose storage request is bigger than the live ones'. */
function grownTemplates(live: StatefulSet, desired: StatefulSet): string[] {
  const grown: string[] = [];
  for (const want of desired.spec?.volumeClaimTemplates ?? []) {
    const name = want.metadata?.name;
    const have = live.spec?.volumeClaimTemplates?.find((t) => t.metadata?.name === name);
    const size = (s: typeof want | undefined) => s?.spec?.resources?.requests?.storage as string | undefined;
    if (have && compareSizes(size(have), size(want)) === -1) grown.push(name ?? '');
  }
  return grown;
}

export async function ensureStatefulSet(run: Run, hash: string): Promise<void> {
  const desired = run.own(statefulSet(run.spec, { configHash: hash }));
  const name = desired.metadata.name ?? '';
  const imageProblem = engineFor(run.spec.spec.engine).imageProblem?.(run.spec);
  if (imageProblem) {
    await run.step('StatefulSet', name, () => Promise.reject(new ImageVersionError(imageProblem)));
  }
  const live = await run.deps.reader.get(StatefulSets, { namespace: run.ns, name });
  if (live && isBeingDeleted(live)) {
    // Being deleted (orphan deletion while recreating it): it is recreated once it is gone.
    run.recreating = true;
    run.sts = live;
    return;
  }
  if (!live) {
    const result = await run.ensure(StatefulSets, desired);
    run.sts = result.object;
    return;
  }
  // volumeClaimTemplates are immutable: compare and update everything else.
  const grown = grownTemplates(live, desired);
  if (desired.spec && live.spec) {
    desired.spec.volumeClaimTemplates = deepCopy(live.spec.volumeClaimTemplates);
    // Immutable too: a StatefulSet created OrderedReady by an earlier operator version keeps it.
    if (live.spec.podManagementPolicy) desired.spec.podManagementPolicy = live.spec.podManagementPolicy;
  }
  const fromReplicas = live.spec?.replicas ?? 1;
  const toReplicas = desired.spec?.replicas ?? 1;
  const fromImage = mainImage(live);
  const toImage = mainImage(desired);
  const result = await run.ensure(StatefulSets, desired);
  run.sts = result.object;
  if (result.operation === 'updated') {
    const sts = withTypeMeta(StatefulSets, result.object);
    if (fromReplicas !== toReplicas) {
      run.normal(
        'Scaled',
        'Scale',
        `Scaled StatefulSet ${name} from ${fromReplicas} to ${toReplicas} replicas`,
        sts,
      );
    }
    if (fromImage !== toImage) {
      run.normal('VersionChanged', 'Update', `Rolling out ${toImage} (was ${fromImage ?? 'unknown'})`, sts);
    }
  }
  if (grown.length > 0) await expandStorage(run, name, true);
}

/** The role labels on the pods (roles.ts decides), reflected in the run's pods at once. */
import { Pods } from '@opkit/runtime';
import { selectorString } from '../desired/labels.ts';
import { type RoleLabelMemory, syncRoleLabels } from '../roles.ts';
import type { Run } from '../run.ts';

export async function labelRoles(run: Run, stsName: string, memory: RoleLabelMemory): Promise<void> {
  const key = `${run.ns}/${run.db.metadata.name ?? ''}`;
  run.pods = memory.apply(
    key,
    await run.deps.reader.list(Pods, { namespace: run.ns, labelSelector: selectorString(run.spec) }),
  );
  const changes = await run.step('Pod', stsName, () =>
    syncRoleLabels(
      run.client,
      run.ns,
      stsName,
      run.pods,
      run.signal,
      run.cluster?.record.fenced ? null : run.cluster?.record.primary,
      (pod) => memory.remember(key, pod),
    ),
  );
  if (changes.length > 0) {
    // Reflect the labels we just set (the cache catches up with the watch event): the memory has them.
    run.pods = memory.apply(key, run.pods);
    run.normal(
      'RoleAssigned',
      'Label',
      changes.map((c) => `${c.pod} is ${c.to}${c.from ? ` (was ${c.from})` : ''}`).join(', '),
    );
  }
}

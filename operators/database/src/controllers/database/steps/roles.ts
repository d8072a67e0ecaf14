/** The role labels on the pods (roles.ts decides), reflected in the run's pods at once. */
import { deepCopy, type Pod, Pods } from '@opkit/runtime';
import { ROLE_LABEL } from '../../../api/v1/database.ts';
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
    const byPod = new Map(changes.map((c) => [c.pod, c.to]));
    // Reflect the labels we just set (the cache catches up with the watch event).
    run.pods = run.pods.map((p) => {
      const role = byPod.get(p.metadata.name ?? '');
      if (!role) return p;
      const copy = deepCopy(p) as Pod;
      const labels = { ...(copy.metadata.labels ?? {}) };
      if (role === 'none') delete labels[ROLE_LABEL];
      else labels[ROLE_LABEL] = role;
      copy.metadata.labels = labels;
      return copy;
    });
    run.normal(
      'RoleAssigned',
      'Label',
      changes.map((c) => `${c.pod} is ${c.to}${c.from ? ` (was ${c.from})` : ''}`).join(', '),
    );
  }
}

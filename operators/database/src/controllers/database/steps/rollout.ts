/** The rollout (postgres): the next pod on an old revision is deleted, or the primary switched over (rollout.ts decides). */
import { ConflictError, NotFoundError, Pods } from '@opkit/runtime';
import { ANNOTATION_SWITCHOVER_TO, Databases } from '../../../api/v1/database.ts';
import { initialPrimaryPod } from '../desired/names.ts';
import { engineFor } from '../engines/index.ts';
import { nextRoll, REVISION_LABEL } from '../rollout.ts';
import type { Run } from '../run.ts';

/** postgres: deletes the next pod on an old revision, replicas first, the primary last (rollout.ts). */
export async function rollPods(run: Run): Promise<void> {
  if (!engineFor(run.spec.spec.engine).operatorRollout || run.recreating) return;
  const primary = run.cluster?.record.primary ?? initialPrimaryPod(run.spec);
  // Engines that fail over move the primary by a switchover (the procedure the annotation starts).
  const engine = engineFor(run.spec.spec.engine);
  const switchover = Boolean(engine.failover && run.deps.exec && run.spec.spec.replicas >= 2);
  const next = nextRoll(run.sts, run.pods, primary, { switchover });
  if (next.action === 'wait') run.log?.debug({ reason: next.reason }, 'rollout waits');
  if (next.action === 'switchover') return rolloutSwitchover(run, next.from, next.to, next.revision);
  if (next.action !== 'delete') return;
  const deleted = await run.step('Pod', next.pod, async () => {
    // The cache may not show a deletion this process made a moment ago: the API's copy decides.
    const live = await run.fresh(Pods, next.pod);
    const revision = live?.metadata.labels?.[REVISION_LABEL];
    if (!live || live.metadata.deletionTimestamp || revision === next.revision) return false;
    try {
      await run.client.delete(
        Pods,
        { namespace: run.ns, name: next.pod },
        { signal: run.signal, preconditions: { uid: live.metadata.uid } },
      );
      return true;
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof ConflictError) return false;
      throw err;
    }
  });
  if (!deleted) return;
  run.normal(
    'RollingPod',
    'Delete',
    `Restarting ${next.pod} (${next.role}) on revision ${next.revision}: replicas first, the primary last`,
  );
}

/** The primary's turn in a rollout: a switchover to an updated replica (once; the procedure runs it). */
async function rolloutSwitchover(run: Run, from: string, to: string, revision: string): Promise<void> {
  if (run.db.status?.failover || run.cluster?.record.fenced) return;
  if (run.db.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO] !== undefined) return;
  const asked = await run.step('Database', run.db.metadata.name ?? '', async () => {
    await run.client.patch(
      Databases.resource,
      { namespace: run.ns, name: run.db.metadata.name ?? '' },
      { type: 'merge', body: { metadata: { annotations: { [ANNOTATION_SWITCHOVER_TO]: to } } } },
      { signal: run.signal },
    );
    return true;
  });
  if (!asked) return;
  run.normal(
    'RollingSwitchover',
    'Switchover',
    `Switching over from ${from} to ${to} (on revision ${revision}) before ${from} restarts on it: replicas first, the primary last`,
  );
}

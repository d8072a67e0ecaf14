/**
 * Rolling a new pod template (a minor version through spec.image, a new configuration) when the operator
 * rolls the pods itself (postgres: StatefulSet updateStrategy OnDelete). The StatefulSet's own rolling
 * update goes from the highest ordinal down, so it restarts the primary before the replicas under it
 * whenever the primary is not `<name>-0` (after a change of primary). Here: the replicas first, the highest
 * ordinal first, the primary last, one pod at a time, each only once every other pod is Ready. Pure.
 *
 * Among the replicas, one on the old revision that is not Ready goes first (its replacement lowers
 * nothing, and a broken revision must not block the one that fixes it). The primary goes last whatever its
 * readiness (on a loaded node a probe timing out makes it NotReady for a moment: the first version of this
 * rule then restarted it second, seen on real pods), once every replica is Ready. With `switchover` (an
 * engine that fails over, with the operator able to exec), the primary is not restarted in place: the
 * decision is a switchover to a Ready replica already on the new revision (the lowest ordinal), after which
 * the former primary is a replica on the old revision and rolls as one. Without it, the primary restarts in
 * place and writes stop meanwhile.
 */
import type { Pod, StatefulSet } from '@opkit/runtime';
import { podOrdinal } from './roles.ts';

export const REVISION_LABEL = 'controller-revision-hash';

export type RollDecision =
  | { action: 'none' }
  | { action: 'wait'; reason: string }
  | { action: 'delete'; pod: string; role: 'primary' | 'replica'; revision: string }
  | { action: 'switchover'; from: string; to: string; revision: string };

export interface RollOptions {
  /** Move the primary to an updated replica by a switchover instead of restarting it in place. */
  switchover?: boolean;
}

function isReady(pod: Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** The next pod to delete so the StatefulSet recreates it on its update revision, or why not yet. */
export function nextRoll(
  sts: StatefulSet | undefined,
  pods: readonly Pod[],
  primary: string,
  opts: RollOptions = {},
): RollDecision {
  const revision = sts?.status?.updateRevision;
  if (!sts || !revision || sts.spec?.updateStrategy?.type !== 'OnDelete') return { action: 'none' };
  const name = sts.metadata.name ?? '';
  const stale = pods.filter((p) => p.metadata.labels?.[REVISION_LABEL] !== revision);
  if (stale.length === 0) return { action: 'none' };
  if ((sts.status?.observedGeneration ?? 0) < (sts.metadata.generation ?? 0))
    return { action: 'wait', reason: 'the StatefulSet controller has not seen the new template yet' };
  const terminating = pods.filter((p) => p.metadata.deletionTimestamp).map((p) => p.metadata.name);
  if (terminating.length > 0) return { action: 'wait', reason: `${terminating.join(', ')} terminating` };
  const want = sts.spec?.replicas ?? 1;
  if (pods.length < want) return { action: 'wait', reason: `${pods.length}/${want} pods exist` };
  // Replicas first: one not Ready first (replacing it lowers nothing), then the highest ordinal.
  const replicas = stale.filter((p) => p.metadata.name !== primary);
  const rank = (p: Pod): [number, number] => [isReady(p) ? 1 : 0, -(podOrdinal(name, p.metadata.name) ?? 0)];
  const next = (
    replicas.length > 0
      ? [...replicas].sort((a, b) => {
          const [x, y] = [rank(a), rank(b)];
          return x[0] - y[0] || x[1] - y[1];
        })[0]
      : stale[0]
  ) as Pod;
  // Every other replica Ready first (the one rolled before it included). The primary's own readiness does
  // not decide: a primary NotReady for a moment (a probe timing out) must not be restarted out of turn.
  const notReady = pods
    .filter((p) => p !== next && p.metadata.name !== primary && !isReady(p))
    .map((p) => p.metadata.name);
  if (notReady.length > 0) return { action: 'wait', reason: `${notReady.join(', ')} not ready` };
  if (opts.switchover && next.metadata.name === primary) {
    const to = pods
      .filter(
        (p) => p.metadata.name !== primary && p.metadata.labels?.[REVISION_LABEL] === revision && isReady(p),
      )
      .sort((a, b) => (podOrdinal(name, a.metadata.name) ?? 0) - (podOrdinal(name, b.metadata.name) ?? 0))[0];
    if (!to) return { action: 'wait', reason: `no Ready replica on revision ${revision} to switch over to` };
    return { action: 'switchover', from: primary, to: to.metadata.name ?? '', revision };
  }
  return {
    action: 'delete',
    pod: next.metadata.name ?? '',
    role: next.metadata.name === primary ? 'primary' : 'replica',
    revision,
  };
}

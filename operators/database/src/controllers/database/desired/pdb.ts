/**
 * The PodDisruptionBudgets: only with replicas > 1 (with one instance there is none, since a PDB that
 * allows no disruption blocks node drains forever). Unhealthy pods may always be evicted (AlwaysAllow):
 * a crash-looping pod never blocks a drain either.
 *   - engines without failover (mysql): `<name>` over all pods, maxUnavailable 1: at most one pod down
 *     at a time;
 *   - engines that fail over (postgres): `<name>` over the replicas (role=replica) with minAvailable
 *     replicas - 2, at most one of them down, and `<name>-primary` over the primary (role=primary) with
 *     minAvailable 1: an eviction never takes the primary. A drain waits while the operator switches
 *     over (it does when the primary's node is cordoned, failover/decide.ts); the former primary is then
 *     a replica and may go.
 *
 * Why minAvailable for a selector that covers only some of the StatefulSet's pods: with maxUnavailable,
 * the disruption controller counts the expected pods as the StatefulSet's scale (all instances), not the
 * pods the selector matches. maxUnavailable 1 over the 2 replicas of 3 instances would need 2 healthy
 * replicas after an eviction: no Ready replica could ever be evicted, and a drain of its node would
 * wait forever. With an integer minAvailable the expected count is the pods matched.
 */
import type { PodDisruptionBudget } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels, primarySelector, replicaSelector, selectorLabels } from './labels.ts';
import { childNames } from './names.ts';
import { REMOVED } from './removed.ts';

/** One budget: either maxUnavailable or minAvailable (the other is REMOVED from a live budget). */
type Budget = { maxUnavailable: number } | { minAvailable: number };

function pdb(
  d: DefaultedDatabase,
  name: string,
  budget: Budget,
  matchLabels: Record<string, string>,
): PodDisruptionBudget {
  const limit =
    'minAvailable' in budget
      ? { minAvailable: budget.minAvailable, maxUnavailable: REMOVED }
      : { maxUnavailable: budget.maxUnavailable, minAvailable: REMOVED };
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name, namespace: d.metadata.namespace, labels: commonLabels(d, 'database') },
    spec: { ...limit, selector: { matchLabels }, unhealthyPodEvictionPolicy: 'AlwaysAllow' },
  };
}

/** `<name>`: the replicas' (all pods' for engines without failover). */
export function podDisruptionBudget(db: Database | DefaultedDatabase): PodDisruptionBudget | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1) return undefined;
  const name = childNames(d).podDisruptionBudget;
  if (!engineFor(d.spec.engine).failover) return pdb(d, name, { maxUnavailable: 1 }, selectorLabels(d));
  // The replicas are replicas - 1 pods: all but one of them available.
  return pdb(d, name, { minAvailable: d.spec.replicas - 2 }, replicaSelector(d));
}

/** `<name>-primary`: the primary's, for engines that fail over (undefined otherwise). */
export function primaryDisruptionBudget(db: Database | DefaultedDatabase): PodDisruptionBudget | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1 || !engineFor(d.spec.engine).failover) return undefined;
  return pdb(d, `${childNames(d).podDisruptionBudget}-primary`, { minAvailable: 1 }, primarySelector(d));
}

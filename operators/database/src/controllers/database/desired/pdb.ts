/**
 * The PodDisruptionBudgets: only with replicas > 1 (with one instance there is none, since a PDB that
 * allows no disruption blocks node drains forever). Unhealthy pods may always be evicted (AlwaysAllow):
 * a crash-looping pod never blocks a drain either.
 *   - engines without failover (mysql): `<name>`, at most one pod down at a time;
 *   - engines that fail over (postgres): `<name>` over the replicas (role=replica), at most one down, and
 *     `<name>-primary` over the primary (role=primary) with maxUnavailable 0: an eviction never takes the
 *     primary. A drain waits while the operator switches over (it does when the primary's node is
 *     cordoned, failover/decide.ts); the former primary is then a replica and may go.
 */
import type { PodDisruptionBudget } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels, primarySelector, replicaSelector, selectorLabels } from './labels.ts';
import { childNames } from './names.ts';

function pdb(
  d: DefaultedDatabase,
  name: string,
  maxUnavailable: number,
  matchLabels: Record<string, string>,
): PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name, namespace: d.metadata.namespace, labels: commonLabels(d, 'database') },
    spec: { maxUnavailable, selector: { matchLabels }, unhealthyPodEvictionPolicy: 'AlwaysAllow' },
  };
}

/** `<name>`: the replicas' (all pods' for engines without failover). */
export function podDisruptionBudget(db: Database | DefaultedDatabase): PodDisruptionBudget | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1) return undefined;
  const failover = engineFor(d.spec.engine).failover;
  return pdb(d, childNames(d).podDisruptionBudget, 1, failover ? replicaSelector(d) : selectorLabels(d));
}

/** `<name>-primary`: the primary's, for engines that fail over (undefined otherwise). */
export function primaryDisruptionBudget(db: Database | DefaultedDatabase): PodDisruptionBudget | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1 || !engineFor(d.spec.engine).failover) return undefined;
  return pdb(d, `${childNames(d).podDisruptionBudget}-primary`, 0, primarySelector(d));
}

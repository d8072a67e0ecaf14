/**
 * The PodDisruptionBudget: only with replicas > 1, at most one pod down at a time. With one instance
 * there is none, since a PDB that allows no disruption blocks node drains forever. Unhealthy pods may
 * always be evicted (AlwaysAllow): a crash-looping pod never blocks a drain either.
 */
import type { PodDisruptionBudget } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels, selectorLabels } from './labels.ts';
import { childNames } from './names.ts';

export function podDisruptionBudget(db: Database | DefaultedDatabase): PodDisruptionBudget | undefined {
  const d = withDefaults(db);
  if (d.spec.replicas <= 1) return undefined;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: {
      name: childNames(d).podDisruptionBudget,
      namespace: d.metadata.namespace,
      labels: commonLabels(d, 'database'),
    },
    spec: {
      maxUnavailable: 1,
      selector: { matchLabels: selectorLabels(d) },
      unhealthyPodEvictionPolicy: 'AlwaysAllow',
    },
  };
}

/**
 * The ConfigMap `<name>-config`: the engine's configuration files and the scripts its pods run. No
 * secret value ever goes here (the scripts read credentials from their environment). Its hash goes on the
 * pod template, so a configuration change rolls the pods.
 */
import { createHash } from 'node:crypto';
import type { ConfigMap } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import type { ClusterRecord } from '../engines/types.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels } from './labels.ts';
import { CLUSTER_KEYS, childNames } from './names.ts';

const UNHASHED: ReadonlySet<string> = new Set(Object.values(CLUSTER_KEYS));

/** `cluster`: the operator's record of the cluster, for the engines that hand it to their pods. */
export function configMap(db: Database | DefaultedDatabase, cluster?: ClusterRecord): ConfigMap {
  const d = withDefaults(db);
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: childNames(d).configMap,
      namespace: d.metadata.namespace,
      labels: commonLabels(d, 'config'),
    },
    data: engineFor(d.spec.engine).configData(d, cluster),
  };
}

/**
 * sha256 of the ConfigMap's data (keys sorted; 32 hex digits): stable across runs and operator restarts,
 * so it only changes, and only rolls the pods, when the rendered configuration does. The cluster record
 * (CLUSTER_KEYS) is not configuration: it is left out.
 */
export function configHash(cm: Pick<ConfigMap, 'data'>): string {
  const h = createHash('sha256');
  for (const key of Object.keys(cm.data ?? {}).sort()) {
    if (UNHASHED.has(key)) continue;
    h.update(key);
    h.update('\0');
    h.update(cm.data?.[key] ?? '');
    h.update('\0');
  }
  return h.digest('hex').slice(0, 32);
}

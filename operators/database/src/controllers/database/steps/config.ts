/** The ConfigMap the pods read (with the cluster record); its hash goes on the pod template. */
import { ConfigMaps } from '@opkit/runtime';
import { configHash, configMap } from '../desired/index.ts';
import type { Run } from '../run.ts';

export async function ensureConfig(run: Run): Promise<string> {
  const desired = configMap(run.spec, run.cluster?.record);
  await run.ensure(ConfigMaps, desired);
  return configHash(desired);
}

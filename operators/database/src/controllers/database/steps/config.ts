/** The ConfigMap the pods read (with the cluster record); its hash goes on the pod template. */
import { ConfigMaps } from '@opkit/runtime';
import { CLUSTER_KEYS, configHash, configMap } from '../desired/index.ts';
import type { Run } from '../run.ts';

export async function ensureConfig(run: Run): Promise<string> {
  const desired = configMap(run.spec, run.cluster?.record);
  const key = CLUSTER_KEYS.primaryWithoutTls;
  const before = (
    await run.deps.reader.get(ConfigMaps, { namespace: run.ns, name: desired.metadata.name ?? '' })
  )?.data?.[key];
  await run.ensure(ConfigMaps, desired);
  const pod = desired.data?.[key];
  if (pod && pod !== before) {
    const note = `${pod}, the primary, runs without TLS (a pod from before the operator served TLS): its replicas may connect to it without verifying TLS (sslmode=prefer) until a primary serving TLS replaces it`;
    run.log?.info({ primary: pod }, 'replicas allowed to connect to the primary without TLS');
    run.normal('PrimaryWithoutTLS', 'Configure', note);
  }
  return configHash(desired);
}

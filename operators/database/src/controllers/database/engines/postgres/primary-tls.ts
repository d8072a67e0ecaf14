/**
 * Whether replicas may connect to the primary without verifying TLS: only when the operator itself saw
 * the designated primary's pod run without TLS, a pod from before the operator served TLS (its template
 * has no server certificate volume). That happens once, when an operator upgrade adds TLS to a running
 * Database: the rollout restarts the replicas first (now verifying TLS), while the primary still runs the
 * old template. The operator names that pod in the ConfigMap (CLUSTER_KEYS.primaryWithoutTls) and
 * instance.sh connects to it, and only to it, with sslmode=prefer (the old pg_hba admits plain text);
 * any other primary, or no key, is verify-full. The network can never trigger the downgrade. Pure.
 */
import type { Pod } from '@opkit/runtime';

/** The pod template's volume of the server certificate Secret (`<name>-server`). */
export const POSTGRES_TLS_VOLUME = 'tls';

/** Whether a pod's spec mounts the server certificate: a pod of a template that serves TLS. */
export function podServesTls(pod: Pod): boolean {
  return (pod.spec?.volumes ?? []).some((v) => v.name === POSTGRES_TLS_VOLUME && v.secret !== undefined);
}

/**
 * The designated primary's pod name when its live pod (not being deleted) runs without TLS; undefined
 * otherwise, also when the pod is not seen (then replicas stay strict: verify-full).
 */
export function primaryWithoutTls(pods: readonly Pod[], primary: string): string | undefined {
  const pod = pods.find((p) => p.metadata.name === primary && !p.metadata.deletionTimestamp);
  if (!pod || podServesTls(pod)) return undefined;
  return primary;
}

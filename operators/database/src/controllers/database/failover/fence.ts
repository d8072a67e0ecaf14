/**
 * Fencing the former primary (procedure.ts, phase Fencing): through exec into its server container, else
 * through its sidecar, else, when exec cannot reach it, by the Lease (its sidecar acknowledges the fence,
 * or the Lease has been silent long enough) or its node being NotReady for failoverDelay.
 */
import { ContainerNotFoundError, ContainerNotRunningError, messageOf, type Pod } from '@opkit/runtime';
import { ROLE_LABEL, ROLE_PRIMARY } from '../../../api/v1/database.ts';
import { CLUSTER_KEYS } from '../desired/names.ts';
import { FENCED_PRIMARY, fenceCommand } from '../engines/postgres/failover.ts';
import { nodeReady, SIDECAR_CONTAINER } from './decide.ts';
import { fencedByLease } from './lease.ts';
import type { Procedure } from './procedure.ts';
import { EXEC_TIMEOUT_MS, RETRY_MS, STEP_MS } from './timing.ts';

/** The pods were handed `none` and nobody carries role=primary (what this reconcile's steps write). */
export function fencedEverywhere(proc: Procedure): boolean {
  const cm = proc.ctx.configData?.[CLUSTER_KEYS.primary];
  const labelled = proc.ctx.pods.some(
    (p) => p.metadata.labels?.[ROLE_LABEL] === ROLE_PRIMARY && !p.metadata.deletionTimestamp,
  );
  return cm === FENCED_PRIMARY && !labelled;
}

/**
 * Stops the former primary; true once it is fenced. A server container that is not running (crashed,
 * in CrashLoopBackOff) is not fenced by that alone: the kubelet may be starting it again right now,
 * with the designation it had (the cached pod status lags), and it would come back as a writable
 * primary beside the one promoted next. So the fence (the designation `none`, then a fast shutdown if
 * a server runs) goes through the sidecar, which shares the designation file and the process
 * namespace: a server that starts later waits for a new designation (instance.sh).
 */
export async function fenceFormerPrimary(
  proc: Procedure,
  from: string,
): Promise<{ fenced: boolean; why: string; retryMs?: number }> {
  const pod = proc.pod(from);
  if (!pod) return { fenced: true, why: `${from}'s pod is gone` };
  const node = pod.spec?.nodeName ?? '';
  if (proc.silentNodes().has(node)) {
    // Its kubelet is silent: exec would fail (or hang until its timeout) without reaching it. Only the
    // Lease is read: look again every second for the sidecar's acknowledgement.
    return fenceUnreachable(proc, from, pod, `the kubelet of its node ${node} is silent`, STEP_MS);
  }
  // The server container first, whatever the cached status says: its kubelet's answer is fresh.
  let down: string;
  try {
    const r = await proc.exec(from, fenceCommand(proc.epoch));
    if (r.exitCode === 0) return { fenced: true, why: `${from} stopped (fast shutdown)` };
    return {
      fenced: false,
      why: `stopping ${from} failed (${r.exitCode}): ${r.stderr.trim().slice(-300)}`,
    };
  } catch (err) {
    // A node that does not answer, a timeout: the Lease's to fence, not the sidecar's (it would wait as long).
    if (!(err instanceof ContainerNotRunningError)) return fenceUnreachable(proc, from, pod, messageOf(err));
    down = messageOf(err);
  }
  try {
    const r = await proc.exec(from, fenceCommand(proc.epoch), EXEC_TIMEOUT_MS, SIDECAR_CONTAINER);
    if (r.exitCode === 0) {
      return {
        fenced: true,
        why: `${from} fenced through its sidecar (its server is not running: ${down}): it waits for a designation`,
      };
    }
    return {
      fenced: false,
      why: `fencing ${from} through its sidecar failed (${r.exitCode}): ${r.stderr.trim().slice(-300)}`,
    };
  } catch (err) {
    // The kubelet says neither container runs (or the pod has no sidecar): they start again with the
    // ConfigMap's `none` (the fence began once the ConfigMap said so).
    if (err instanceof ContainerNotRunningError || err instanceof ContainerNotFoundError) {
      return { fenced: true, why: `${from}'s containers are not running (${down}; ${messageOf(err)})` };
    }
    return fenceUnreachable(proc, from, pod, `${down}; its sidecar: ${messageOf(err)}`);
  }
}

/**
 * A former primary exec cannot reach (a dead kubelet): its own sidecar fences it when the Lease says
 * so (the failover cleared the holder), else it counts as fenced once its node has been NotReady for
 * failoverDelay.
 */
async function fenceUnreachable(
  proc: Procedure,
  from: string,
  pod: Pod,
  why: string,
  retryMs = RETRY_MS,
): Promise<{ fenced: boolean; why: string; retryMs?: number }> {
  const view = await proc.leaseView();
  if (view) {
    const byLease = fencedByLease({ ...view, from });
    if (byLease.kind === 'fenced') return { fenced: true, why: byLease.why };
    if (byLease.kind === 'wait') {
      return {
        fenced: false,
        why: `cannot reach ${from} (${why}); ${byLease.message}`,
        retryMs: Math.min(retryMs, byLease.afterMs + 100),
      };
    }
  }
  const nodes = await proc.nodes([pod.spec?.nodeName]);
  const node = nodeReady(nodes.get(pod.spec?.nodeName ?? ''));
  if (!node.ready && proc.ctx.now() - (node.since ?? proc.ctx.now()) >= proc.delayMs()) {
    return {
      fenced: true,
      why: `${from} cannot be reached (its node is NotReady): the Services no longer route to it, and it waits for a designation should it come back`,
    };
  }
  return { fenced: false, why: `cannot reach ${from}: ${why}` };
}

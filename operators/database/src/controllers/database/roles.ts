/**
 * Role labels on the database pods. The operator keeps `myapp.example.com/role` on every pod of a
 * Database: the designated primary (status.targetPrimary; `<name>-0` until the operator records another)
 * is the primary, the others are replicas. The read-write Service
 * (`<name>`) selects the primary, the read-only Service (`<name>-ro`) the replicas, so these labels
 * decide where clients go. A pod is only patched when its label differs.
 */
import { type Client, type Pod, Pods } from '@opkit/runtime';
import { ROLE_LABEL, ROLE_PRIMARY, ROLE_REPLICA, type Role } from '../../api/v1/database.ts';
import { compareStrings } from './order.ts';
import { newerResourceVersion } from './resource-version.ts';

export type { Role };

/** The ordinal of a StatefulSet pod (`<statefulset>-<N>`), or undefined when the name doesn't match. */
export function podOrdinal(statefulSetName: string, podName: string | undefined): number | undefined {
  if (!podName?.startsWith(`${statefulSetName}-`)) return undefined;
  const rest = podName.slice(statefulSetName.length + 1);
  return /^(0|[1-9][0-9]*)$/.test(rest) ? Number(rest) : undefined;
}

/** The role of the pod with this ordinal: primary when it is the designated primary's (default ordinal 0). */
export function roleOf(ordinal: number, primaryOrdinal = 0): Role {
  return ordinal === primaryOrdinal ? ROLE_PRIMARY : ROLE_REPLICA;
}

export interface RoleChange {
  pod: string;
  from: string | undefined;
  /** 'none': the label is removed (the fenced primary while a failover is pending). */
  to: Role | 'none';
}

/**
 * The pods whose role label must change (pure). Pods being deleted are left alone. `primary`: the
 * designated primary's pod name (default `<statefulset>-0`); null while a failover is pending: nobody is
 * the primary, the pod labelled primary loses its label (the read-write Service empties; it does not join
 * the read-only one either), the others are replicas.
 */
export function roleChanges(
  statefulSetName: string,
  pods: readonly Pod[],
  primary?: string | null,
): RoleChange[] {
  const primaryOrdinal =
    primary === null ? -1 : (podOrdinal(statefulSetName, primary ?? `${statefulSetName}-0`) ?? 0);
  const changes: RoleChange[] = [];
  for (const pod of pods) {
    if (pod.metadata.deletionTimestamp) continue;
    const ordinal = podOrdinal(statefulSetName, pod.metadata.name);
    if (ordinal === undefined) continue;
    const from = pod.metadata.labels?.[ROLE_LABEL];
    let to: RoleChange['to'] = roleOf(ordinal, primaryOrdinal);
    if (primary === null && (from === ROLE_PRIMARY || from === undefined)) to = 'none';
    if ((from ?? 'none') !== to) changes.push({ pod: pod.metadata.name ?? '', from, to });
  }
  return changes.sort((a, b) => compareStrings(a.pod, b.pod));
}

/**
 * Patches the role label of the pods that need it (a merge patch of that one label, guarded by the
 * pod's uid so a pod recreated meanwhile is not labelled from stale data). Returns what changed.
 */
export async function syncRoleLabels(
  client: Client,
  namespace: string,
  statefulSetName: string,
  pods: readonly Pod[],
  signal?: AbortSignal,
  primary?: string | null,
  /** Each pod as the patch returned it (RoleLabelMemory). */
  onPatched?: (pod: Pod) => void,
): Promise<RoleChange[]> {
  const changes = roleChanges(statefulSetName, pods, primary);
  const done: RoleChange[] = [];
  for (const change of changes) {
    const pod = pods.find((p) => p.metadata.name === change.pod);
    const body = {
      metadata: {
        labels: { [ROLE_LABEL]: change.to === 'none' ? null : change.to },
        ...(pod?.metadata.uid ? { uid: pod.metadata.uid } : {}),
      },
    };
    try {
      const patched = await client.patch(
        Pods,
        { namespace, name: change.pod },
        { type: 'merge', body },
        { signal },
      );
      onPatched?.(patched);
      done.push(change);
    } catch (err) {
      // The pod went away (or was replaced) since the cache saw it: its successor gets its own event.
      const code = (err as { code?: number }).code;
      if (code === 404 || code === 409) continue;
      throw err;
    }
  }
  return done;
}

/**
 * The role labels this process set, per Database and pod uid, with the pod's resourceVersion after the
 * patch. The cache may not have seen a patch when the next reconcile runs (another event of the pod
 * came first): its pods are read through this memory, so the pod is not labelled, nor the Event
 * recorded, a second time. An entry goes once the cache has that version (or the pod is gone).
 */
export class RoleLabelMemory {
  readonly #byDatabase = new Map<
    string,
    Map<string, { resourceVersion: string; role: string | undefined }>
  >();

  remember(key: string, pod: Pod): void {
    const uid = pod.metadata.uid;
    const rv = pod.metadata.resourceVersion;
    if (!uid || !rv) return;
    let pods = this.#byDatabase.get(key);
    if (!pods) {
      pods = new Map();
      this.#byDatabase.set(key, pods);
    }
    pods.set(uid, { resourceVersion: rv, role: pod.metadata.labels?.[ROLE_LABEL] });
  }

  /** The Database's pods as listed, with the labels set on versions the list does not have yet. */
  apply(key: string, pods: readonly Pod[]): Pod[] {
    const memo = this.#byDatabase.get(key);
    if (!memo) return [...pods];
    const listed = new Set<string>();
    const out = pods.map((p) => {
      const uid = p.metadata.uid ?? '';
      listed.add(uid);
      const m = memo.get(uid);
      if (!m) return p;
      if (!newerResourceVersion(m.resourceVersion, p.metadata.resourceVersion)) {
        memo.delete(uid);
        return p;
      }
      const labels = { ...(p.metadata.labels ?? {}) };
      if (m.role === undefined) delete labels[ROLE_LABEL];
      else labels[ROLE_LABEL] = m.role;
      return { ...p, metadata: { ...p.metadata, labels } } as Pod;
    });
    for (const uid of memo.keys()) if (!listed.has(uid)) memo.delete(uid);
    if (memo.size === 0) this.#byDatabase.delete(key);
    return out;
  }

  forget(key: string): void {
    this.#byDatabase.delete(key);
  }
}

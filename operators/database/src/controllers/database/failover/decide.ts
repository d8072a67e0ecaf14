/**
 * The failover decisions, pure (no I/O, the clock passed in): when the designated primary is lost, which
 * replica to promote, and whether synchronous mode can prove that no acknowledged write is lost.
 * procedure.ts does the I/O around them.
 *
 * The primary is lost when (reason in parentheses):
 *   - its pod is missing or being deleted (PrimaryPodMissing): at once, whatever failoverDelay: a
 *     deleted pod is going away (a StatefulSet recreates it, but with the same volume and role, so waiting
 *     for it only lengthens the outage);
 *   - its node is NotReady (PrimaryNodeNotReady), its server container is crash-looping or waiting to
 *     start again (PrimaryCrashLooping), or the pod is not Ready (PrimaryNotReady), for longer than
 *     spec.failoverDelay, counted from the last transition of the node's or the pod's Ready condition.
 *   - its node's kubelet stopped renewing the node Lease (PrimaryNodeUnresponsive, node-heartbeat.ts: not
 *     changed for 2 renew intervals by the operator's clock while other nodes' were), for longer than
 *     spec.failoverDelay counted from the last change seen: max(failoverDelay, 20 s) by default, where the
 *     node controller takes ~47 s to say NotReady. Only while the primary's sidecar renews its Lease
 *     (`leaseHeld`): a dead kubelet leaves the primary running, and exec cannot reach it, so the sidecar
 *     (which fences it once the failover clears the Lease's holder) is what makes an early failover safe;
 *     without it nothing could confirm the fence before the node is NotReady, and the read-write Service
 *     would only be emptied sooner, for nothing;
 *   - its Lease (`<name>-primary`, renewed by its sidecar) has not changed for spec.primaryLeaseSeconds
 *     plus a margin by the operator's clock (PrimaryLeaseExpired, failover/lease.ts): at once, since the
 *     primary has fenced itself by then (only when its sidecar renewed the Lease at least once);
 * and a failover starts only when at least one replica can be promoted: its pod exists, is not being
 * deleted, its server container runs, its node is not NotReady and its kubelet not silent (its readiness
 * is no criterion: an honest replica is not ready once its primary is gone, since it no longer streams).
 * A planned switchover (the switchover-to annotation, or the primary's node cordoned) needs a healthy
 * primary and a Ready target.
 */
import type { Node, Pod } from '@opkit/runtime';
import { podOrdinal } from '../roles.ts';

export const FAILOVER_REASONS = {
  podMissing: 'PrimaryPodMissing',
  notReady: 'PrimaryNotReady',
  crashLooping: 'PrimaryCrashLooping',
  nodeNotReady: 'PrimaryNodeNotReady',
  nodeUnresponsive: 'PrimaryNodeUnresponsive',
  leaseExpired: 'PrimaryLeaseExpired',
  switchover: 'Switchover',
  nodeCordoned: 'PrimaryNodeCordoned',
} as const;
export type FailoverReason = (typeof FAILOVER_REASONS)[keyof typeof FAILOVER_REASONS];

/** The server container's name in the pod (engines/postgres.ts). */
export const SERVER_CONTAINER = 'postgres';
/**
 * The sidecar's name (engines/postgres.ts): it shares the pod's in-memory `run` volume (the designation
 * file), the data volume and the process namespace with the server, so it can fence the server too.
 */
export const SIDECAR_CONTAINER = 'credentials';

type ContainerStatus = NonNullable<NonNullable<Pod['status']>['containerStatuses']>[number];

/** A time field of the typed model (a Date) or the API's RFC 3339 string, in ms; undefined when unknown. */
export function timeOf(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const ms = value instanceof Date ? value.getTime() : new Date(String(value)).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

function serverStatus(pod: Pod): ContainerStatus | undefined {
  return pod.status?.containerStatuses?.find((c) => c.name === SERVER_CONTAINER);
}

/** The pod's Ready condition: whether True, and since when. */
function podReady(pod: Pod): { ready: boolean; since: number | undefined } {
  const c = pod.status?.conditions?.find((x) => x.type === 'Ready');
  return {
    ready: c?.status === 'True' && !pod.metadata.deletionTimestamp,
    since: timeOf(c?.lastTransitionTime),
  };
}

/** The node's Ready condition; a node that is not known (not readable) counts as Ready. */
export function nodeReady(node: Node | undefined): { ready: boolean; since: number | undefined } {
  const c = node?.status?.conditions?.find((x) => x.type === 'Ready');
  if (!node || !c) return { ready: true, since: undefined };
  return { ready: c.status === 'True', since: timeOf(c.lastTransitionTime) };
}

/** The server container runs (it may be starting or not ready). */
export function serverRunning(pod: Pod): boolean {
  return Boolean(serverStatus(pod)?.state?.running);
}

/** The server container (or the bootstrap init container) is crash-looping. */
export function crashLooping(pod: Pod): boolean {
  const statuses = [
    serverStatus(pod),
    pod.status?.initContainerStatuses?.find((c) => c.name === 'bootstrap'),
  ];
  return statuses.some((s) => s?.state?.waiting?.reason === 'CrashLoopBackOff');
}

/** How the designated primary is doing, and since when (ms) that state holds, when known. */
export type PrimaryHealth =
  | { lost: false }
  | { lost: true; reason: FailoverReason; since: number | undefined; immediate: boolean };

/**
 * `silentSince`: the node's kubelet is silent (node-heartbeat.ts), and the last renewal seen was then (ms,
 * on the clock of `now`); a NotReady node keeps its own reason.
 */
export function primaryHealth(
  pod: Pod | undefined,
  node: Node | undefined,
  silentSince?: number,
): PrimaryHealth {
  if (!pod || pod.metadata.deletionTimestamp) {
    return { lost: true, reason: FAILOVER_REASONS.podMissing, since: undefined, immediate: true };
  }
  const n = nodeReady(node);
  if (!n.ready)
    return { lost: true, reason: FAILOVER_REASONS.nodeNotReady, since: n.since, immediate: false };
  if (silentSince !== undefined) {
    return { lost: true, reason: FAILOVER_REASONS.nodeUnresponsive, since: silentSince, immediate: false };
  }
  const r = podReady(pod);
  if (r.ready) return { lost: false };
  const reason = crashLooping(pod) ? FAILOVER_REASONS.crashLooping : FAILOVER_REASONS.notReady;
  return { lost: true, reason, since: r.since ?? timeOf(pod.metadata.creationTimestamp), immediate: false };
}

/**
 * A replica that may be promoted: exists, not being deleted, its server running, its node not NotReady
 * and its kubelet not silent (exec could not reach it, and the Services may not for long).
 */
export function promotable(pod: Pod, node: Node | undefined, silent = false): boolean {
  return !pod.metadata.deletionTimestamp && serverRunning(pod) && nodeReady(node).ready && !silent;
}

export interface FailoverInput {
  /** The StatefulSet's name (pods are `<name>-N`). */
  statefulSet: string;
  /** The designated primary (status.targetPrimary). */
  primary: string;
  /** spec.replicas: pods with a higher ordinal are being removed and never promoted. */
  replicas: number;
  pods: readonly Pod[];
  /** Nodes by name (only those read: the primary's and the candidates'). */
  nodes: ReadonlyMap<string, Node>;
  now: number;
  /** spec.failoverDelay in ms. */
  delayMs: number;
  /** The switchover-to annotation, when set. */
  switchoverTo?: string | undefined;
  /** The primary's Lease expired (failover/lease.ts primaryLeaseState): it has fenced itself. */
  leaseExpired?: boolean;
  /**
   * The primary's sidecar renews its Lease (primaryLeaseState 'held'): it fences the primary once the
   * failover clears the holder, so a silent node may count against the primary.
   */
  leaseHeld?: boolean;
  /** Nodes whose kubelet is silent (node-heartbeat.ts silentNodes), with for how long, ms. */
  silentNodes?: ReadonlyMap<string, number>;
}

export type FailoverDecision =
  /** Nothing to do. */
  | { kind: 'none' }
  /** The primary is lost, not for long enough yet: look again in `afterMs`. */
  | { kind: 'wait'; afterMs: number; reason: FailoverReason; message: string }
  /** The primary is lost (or a switchover was asked for) but no replica can take over. */
  | { kind: 'blocked'; reason: FailoverReason; message: string }
  /** An invalid switchover request: refuse it (and remove the annotation). */
  | { kind: 'refuse'; message: string }
  | {
      kind: 'start';
      reason: FailoverReason;
      from: string;
      to?: string;
      switchover: boolean;
      message: string;
    };

const byName = (pods: readonly Pod[], name: string) => pods.find((p) => p.metadata.name === name);

/** Whether the pod is one of spec.replicas' instances. */
function isInstance(input: FailoverInput, pod: Pod): boolean {
  const ordinal = podOrdinal(input.statefulSet, pod.metadata.name);
  return ordinal !== undefined && ordinal < input.replicas;
}

/** The pods that may be promoted, by ordinal. */
export function candidatePods(input: FailoverInput): Pod[] {
  return input.pods
    .filter((p) => p.metadata.name !== input.primary && isInstance(input, p))
    .filter((p) => {
      const node = p.spec?.nodeName ?? '';
      return promotable(p, input.nodes.get(node), input.silentNodes?.has(node) ?? false);
    })
    .sort(
      (a, b) =>
        (podOrdinal(input.statefulSet, a.metadata.name) ?? 0) -
        (podOrdinal(input.statefulSet, b.metadata.name) ?? 0),
    );
}

/** Should a failover or a switchover start now? */
export function decideFailover(input: FailoverInput): FailoverDecision {
  const primaryPod = byName(input.pods, input.primary);
  const node = input.nodes.get(primaryPod?.spec?.nodeName ?? '');
  const silentMs = input.leaseHeld ? input.silentNodes?.get(primaryPod?.spec?.nodeName ?? '') : undefined;
  let health = primaryHealth(primaryPod, node, silentMs !== undefined ? input.now - silentMs : undefined);
  if (input.leaseExpired && !(health.lost && health.immediate)) {
    health = { lost: true, reason: FAILOVER_REASONS.leaseExpired, since: undefined, immediate: true };
  }
  const candidates = candidatePods(input);
  if (health.lost) {
    const since = health.since ?? input.now;
    const lostFor = input.now - since;
    const what = describeLoss(input.primary, health.reason);
    if (!health.immediate && lostFor < input.delayMs) {
      return {
        kind: 'wait',
        afterMs: input.delayMs - lostFor,
        reason: health.reason,
        message: `${what}; failing over after failoverDelay (${Math.round(input.delayMs / 1000)}s)`,
      };
    }
    if (candidates.length === 0) {
      return { kind: 'blocked', reason: health.reason, message: `${what}, and no replica can take over` };
    }
    return { kind: 'start', reason: health.reason, from: input.primary, switchover: false, message: what };
  }
  // A healthy primary: a switchover when asked for, or when its node is cordoned (a drain is coming,
  // and the primary's PodDisruptionBudget blocks its eviction until the primary moves).
  const target = input.switchoverTo?.trim();
  if (target !== undefined && target !== '') {
    if (target === input.primary) return { kind: 'refuse', message: `${target} is already the primary` };
    const pod = byName(input.pods, target);
    if (!pod || !isInstance(input, pod)) {
      return {
        kind: 'refuse',
        message: `switchover to ${target}: no such instance (the instances are ${input.statefulSet}-0..${input.replicas - 1})`,
      };
    }
    if (!podReady(pod).ready || !candidates.includes(pod)) {
      return {
        kind: 'blocked',
        reason: FAILOVER_REASONS.switchover,
        message: `switchover to ${target}: it is not Ready (not streaming within the lag bound); waiting`,
      };
    }
    return {
      kind: 'start',
      reason: FAILOVER_REASONS.switchover,
      from: input.primary,
      to: target,
      switchover: true,
      message: `switchover from ${input.primary} to ${target} asked for`,
    };
  }
  if (node?.spec?.unschedulable) {
    const ready = candidates.filter((p) => podReady(p).ready && p.spec?.nodeName !== node.metadata.name);
    const to = ready[0]?.metadata.name;
    if (!to) {
      return {
        kind: 'blocked',
        reason: FAILOVER_REASONS.nodeCordoned,
        message: `the node ${node.metadata.name} of the primary ${input.primary} is cordoned, and no Ready replica on another node can take over`,
      };
    }
    return {
      kind: 'start',
      reason: FAILOVER_REASONS.nodeCordoned,
      from: input.primary,
      to,
      switchover: true,
      message: `the node ${node.metadata.name} of the primary ${input.primary} is cordoned: switching over to ${to}`,
    };
  }
  return { kind: 'none' };
}

function describeLoss(primary: string, reason: FailoverReason): string {
  switch (reason) {
    case FAILOVER_REASONS.podMissing:
      return `the primary ${primary}'s pod is missing or being deleted`;
    case FAILOVER_REASONS.nodeNotReady:
      return `the node of the primary ${primary} is NotReady`;
    case FAILOVER_REASONS.nodeUnresponsive:
      return `the kubelet of the primary ${primary}'s node stopped renewing the node's Lease (its heartbeat)`;
    case FAILOVER_REASONS.crashLooping:
      return `the primary ${primary} is crash-looping`;
    case FAILOVER_REASONS.leaseExpired:
      return `the primary ${primary} stopped renewing its Lease (it has fenced itself)`;
    default:
      return `the primary ${primary} is not Ready`;
  }
}

// ---------------------------------------------------------------------------------------------------
// Choosing the replica to promote.

/** A PostgreSQL LSN (`16/B374D848`) as a number; undefined when it is not one. */
export function parseLsn(text: string | undefined): bigint | undefined {
  const m = text?.trim().match(/^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/);
  if (!m) return undefined;
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}

/** What a candidate replica said about itself (engines/postgres/failover.ts queries it). */
export interface CandidateState {
  pod: string;
  ordinal: number;
  /** Still in recovery (a replica); false: it was promoted already. */
  inRecovery: boolean;
  /** WAL received and flushed (pg_last_wal_receive_lsn), when known. */
  receivedLsn: bigint | undefined;
  /** WAL replayed (pg_last_wal_replay_lsn), when known. */
  replayedLsn: bigint | undefined;
  timeline: number | undefined;
  systemIdentifier: string | undefined;
}

/** How far a candidate's WAL goes: what it received (flushed) or replayed, whichever is further. */
export function position(c: CandidateState): bigint {
  const r = c.receivedLsn ?? 0n;
  const p = c.replayedLsn ?? 0n;
  return r > p ? r : p;
}

export interface ChoiceOptions {
  /** spec.replicas (the primary and its standbys). */
  replicas: number;
  /** spec.synchronousReplicas: 0 asynchronous. */
  synchronousReplicas: number;
  /** The cluster's system identifier: a candidate of another cluster is never promoted. */
  systemIdentifier?: string | undefined;
  /** A switchover's target: promoted when it is as advanced as the most advanced candidate. */
  target?: string | undefined;
}

export type Choice = { ok: true; pod: string; lsn: bigint; note?: string } | { ok: false; message: string };

/**
 * The replica to promote among those that answered: one already promoted (a resumed procedure) first,
 * else the most advanced by WAL position, ties by ordinal. In synchronous mode (ANY N of the R-1
 * standbys) every acknowledged commit was flushed by N standbys, so at least R-1-N+1 of them must have
 * answered for the most advanced one to be proven to hold every acknowledged commit; otherwise no
 * promotion (the message says how many answered and how many are needed).
 */
export function chooseCandidate(states: readonly CandidateState[], opts: ChoiceOptions): Choice {
  const valid = states.filter(
    (s) => !opts.systemIdentifier || !s.systemIdentifier || s.systemIdentifier === opts.systemIdentifier,
  );
  const promoted = valid.filter((s) => !s.inRecovery).sort((a, b) => a.ordinal - b.ordinal);
  if (promoted[0]) {
    // Promoted by an earlier attempt of this procedure (or by hand): never promote a second one.
    return { ok: true, pod: promoted[0].pod, lsn: position(promoted[0]) };
  }
  if (valid.length === 0) return { ok: false, message: 'no replica answered' };
  const standbys = Math.max(0, opts.replicas - 1);
  if (opts.synchronousReplicas > 0) {
    const needed = standbys - opts.synchronousReplicas + 1;
    if (valid.length < needed) {
      return {
        ok: false,
        message:
          `synchronous mode (ANY ${opts.synchronousReplicas} of ${standbys} replicas): ${valid.length} ` +
          `replica(s) answered, ${needed} needed to prove that no acknowledged write is lost; waiting for more`,
      };
    }
  }
  const sorted = [...valid].sort((a, b) => {
    const d = position(b) - position(a);
    return d > 0n ? 1 : d < 0n ? -1 : a.ordinal - b.ordinal;
  });
  const best = sorted[0] as CandidateState;
  if (opts.target) {
    const t = valid.find((s) => s.pod === opts.target);
    if (t && position(t) >= position(best)) return { ok: true, pod: t.pod, lsn: position(t) };
    const note = t
      ? `${opts.target} is behind ${best.pod} (${position(t)} < ${position(best)}): promoting ${best.pod} instead, so nothing is lost`
      : `${opts.target} did not answer: promoting ${best.pod}, the most advanced replica`;
    return { ok: true, pod: best.pod, lsn: position(best), note };
  }
  return { ok: true, pod: best.pod, lsn: position(best) };
}

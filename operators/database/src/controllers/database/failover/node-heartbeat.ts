/**
 * The nodes' heartbeats, the operator's side (pure; the I/O is in node-heartbeat-io.ts). Every kubelet
 * renews the Lease `kube-node-lease/<node>` every leaseDurationSeconds / 4 (10 s by default); a dead
 * kubelet (its containers still running) stops renewing it, and the node controller marks the node
 * NotReady only after node-monitor-grace-period (~40-50 s). The operator sees it sooner by itself.
 *
 * As for the primary Lease (lease.ts), the operator never compares the kubelet's clock (renewTime) with
 * its own: it remembers, by ITS OWN monotonic clock, when it last saw each node Lease change (a new
 * resourceVersion, from its watch). A node is silent when:
 *   - the operator saw its Lease change at least once (a first look is no renewal: a Lease nobody renews,
 *     or a kubelet that died before the operator started, says nothing and leaves the node to the
 *     NotReady rule; after an operator restart the earliest a node can be silent is the full grace after
 *     its first renewal seen);
 *   - it has not changed for the grace, 2 renew intervals (one renewal missed, the next late);
 *   - other node Leases keep changing: the operator's watch is delivering heartbeats, so the silence is the
 *     node's, not the watch's. While no node Lease changed for 1.5 renew intervals (an API server outage,
 *     a broken watch: every node silent at once; or the only node of a cluster) no node is silent, and
 *     after such a blackout the silences count from its end (HeartbeatWatch).
 */
import type { Lease } from '@opkit/runtime';
import { observeLease } from './lease.ts';

/** The namespace of the nodes' Leases (one per node, named after it). */
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';
/** The kubelet's renew interval when its Lease says no duration (the default 40 s / 4). */
export const DEFAULT_NODE_RENEW_MS = 10_000;

/** What the operator saw of one node's Lease. */
export interface NodeHeartbeat {
  resourceVersion: string;
  /** When the operator first saw this version (its own monotonic clock, ms). */
  since: number;
  /** The operator saw the Lease change at least once (a renewal), not only its first look. */
  changed: boolean;
  /** The kubelet's renew interval, ms: the Lease's leaseDurationSeconds / 4 (kubelet's rule). */
  renewMs: number;
}

/** The kubelet renews its Lease every leaseDurationSeconds / 4 (pkg/kubelet/nodelease). */
export function renewIntervalMs(lease: Lease | undefined): number {
  const seconds = lease?.spec?.leaseDurationSeconds;
  return seconds && seconds > 0 ? (seconds * 1000) / 4 : DEFAULT_NODE_RENEW_MS;
}

/** How long a node Lease may stay unchanged: two renew intervals. */
export function graceMs(beat: Pick<NodeHeartbeat, 'renewMs'>): number {
  return 2 * beat.renewMs;
}

/** The heartbeat after seeing `lease` at `now`: a new version is a change (unless it is the first look). */
export function observeNodeLease(
  prev: NodeHeartbeat | undefined,
  lease: Lease | undefined,
  now: number,
): NodeHeartbeat | undefined {
  const seen = observeLease(prev, lease, now);
  if (!seen) return undefined;
  const changed = prev !== undefined && (prev.changed || prev.resourceVersion !== seen.resourceVersion);
  return {
    resourceVersion: seen.resourceVersion,
    since: seen.since,
    changed,
    renewMs: renewIntervalMs(lease),
  };
}

/**
 * What the operator saw of the node Leases together: when any of them last changed, and when changes came
 * again after a blackout (no node Lease changed for 1.5 renew intervals: an API server outage, the
 * operator's watch broken or behind). A blackout is no node's fault: every kubelet may have failed to
 * renew during it, and after it each renews at its own pace (the kubelet retries within 7 s), so no node's
 * silence is counted from before it (as after an operator restart, the count starts again).
 */
export interface HeartbeatWatch {
  lastChange: number;
  resumedAt: number;
}

/** How long no node Lease may change before the operator counts it as a blackout: 1.5 renew intervals. */
export function blackoutMs(renewMs: number): number {
  return 1.5 * renewMs;
}

/** The watch after a node Lease changed at `at` (a renewal, not a first look). */
export function afterChange(prev: HeartbeatWatch | undefined, at: number, renewMs: number): HeartbeatWatch {
  if (!prev) return { lastChange: at, resumedAt: at };
  const resumed = at - prev.lastChange > blackoutMs(renewMs);
  return { lastChange: at, resumedAt: resumed ? at : prev.resumedAt };
}

export type NodeSilence =
  /** Nothing to say: no renewal seen, or a blackout in progress (the watch may be what is silent). */
  | { kind: 'unknown' }
  /** Renewing: silent in `silentInMs` if nothing changes by then. */
  | { kind: 'beating'; silentInMs: number }
  /** Not renewed for `silentMs` (at least the grace, none of it during a blackout) while others were. */
  | { kind: 'silent'; silentMs: number };

/** Is `node`'s kubelet still renewing its Lease, by the operator's clock (`now`, monotonic ms)? */
export function nodeSilence(
  beats: ReadonlyMap<string, NodeHeartbeat>,
  watch: HeartbeatWatch | undefined,
  node: string,
  now: number,
): NodeSilence {
  const beat = beats.get(node);
  if (!beat?.changed || !watch) return { kind: 'unknown' };
  // No Lease changed lately (this node's included): the watch may be what is silent, or the only node.
  if (now - watch.lastChange > blackoutMs(beat.renewMs)) return { kind: 'unknown' };
  const grace = graceMs(beat);
  const silentMs = Math.max(0, now - Math.max(beat.since, watch.resumedAt));
  if (silentMs < grace) return { kind: 'beating', silentInMs: grace - silentMs };
  return { kind: 'silent', silentMs };
}

/** The silent nodes among `nodes`, with how long each has been silent (ms): FailoverInput.silentNodes. */
export function silentNodes(
  beats: ReadonlyMap<string, NodeHeartbeat>,
  watch: HeartbeatWatch | undefined,
  nodes: Iterable<string | undefined>,
  now: number,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const node of nodes) {
    if (!node || out.has(node)) continue;
    const s = nodeSilence(beats, watch, node, now);
    if (s.kind === 'silent') out.set(node, s.silentMs);
  }
  return out;
}

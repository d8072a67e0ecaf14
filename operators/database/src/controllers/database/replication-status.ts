/**
 * status.instances (postgres) from what the primary last said about its replicas (replication-poll.ts
 * asks it, engines/postgres/replication.ts is the query). Pure.
 *   - streaming: the replica has a WAL sender on the current primary in state `streaming`;
 *   - lagBytes / lagSeconds: its replay lag measured on the primary, COARSE so that a quiet cluster, or
 *     one under writes, does not rewrite the status at every poll: rounded down to a power of two (bytes
 *     below 1 MiB and seconds below 1 are 0; then 1, 2, 4, 8, ... MiB and 1, 2, 4, 8, ... s). The operator's
 *     /metrics (database_replication_lag_bytes / _seconds) have the exact values;
 *   - timeline: the primary's current timeline, for the primary and for each replica streaming from it;
 *     otherwise what the instance's last start reported (instances.ts).
 * A replica that is not ready because its readiness probe fails gets the precise reason when the primary
 * says why: NotStreaming (with its slot's lost WAL: it is cloned again when it restarts) or LagOverBound.
 */
import { MiB } from './desired/quantity.ts';
import { slotName } from './engines/postgres/instance.ts';
import type { ReplicationSample } from './engines/postgres/replication.ts';
import type { InstanceStatus } from './instances.ts';

/** What the designated primary said, and when. */
export interface PolledReplication {
  /** The pod that answered (the designated primary then). */
  primary: string;
  /** ms since the epoch. */
  at: number;
  sample: ReplicationSample;
}

/** The largest power of two <= n (n >= 1). */
function floorPow2(n: number): number {
  return 2 ** Math.floor(Math.log2(n));
}

/** The status' lagBytes: 0 below 1 MiB, else rounded down to a power of two MiB. */
export function lagBucketBytes(bytes: number): number {
  return bytes < MiB ? 0 : floorPow2(Math.floor(bytes / MiB)) * MiB;
}

/** The status' lagSeconds: 0 below 1 s, else rounded down to a power of two seconds. */
export function lagBucketSeconds(ms: number): number {
  return ms < 1000 ? 0 : floorPow2(Math.floor(ms / 1000));
}

/** `52 MiB`, `3 GiB`, `512 KiB` (whole units, rounded down): for messages. */
export function formatLag(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Math.max(0, bytes);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${Math.floor(v)} ${units[u]}`;
}

/**
 * The instances with what the primary said: streaming, lag and timeline, and why a replica whose
 * readiness probe fails is not ready. `polled` about another primary than `primary` is ignored.
 */
export function withReplication(
  instances: readonly InstanceStatus[],
  polled: PolledReplication | undefined,
  primary: string,
  maxLagBytes: number,
): InstanceStatus[] {
  if (!polled || polled.primary !== primary || polled.sample.inRecovery) return [...instances];
  const { sample } = polled;
  return instances.map((i) => {
    const out: InstanceStatus = { ...i };
    if (i.name === primary) {
      if (sample.timeline !== undefined) out.timeline = sample.timeline;
      return out;
    }
    const sender = sample.senders.find((s) => s.name === i.name);
    const streaming = sender?.state === 'streaming';
    out.streaming = streaming;
    if (streaming) {
      if (sample.timeline !== undefined) out.timeline = sample.timeline;
      if (sender.lagBytes !== undefined) out.lagBytes = lagBucketBytes(sender.lagBytes);
      out.lagSeconds = lagBucketSeconds(sender.lagMs);
    }
    if (!i.ready && i.reason === 'ReadinessProbeFailing') {
      if (!streaming) {
        const slot = sample.slots[slotName(i.name)];
        const why =
          slot === 'lost'
            ? ': the primary removed WAL it needs (its replication slot lost it, max_slot_wal_keep_size); it is cloned again when it restarts'
            : sender
              ? ` (its WAL sender is ${sender.state})`
              : ' (not connected to it)';
        out.reason = 'NotStreaming';
        out.message = `${i.name}: not streaming from the primary ${primary}${why}`;
      } else if (sender.lagBytes !== undefined && sender.lagBytes > maxLagBytes) {
        out.reason = 'LagOverBound';
        out.message = `${i.name}: replay lag ${formatLag(sender.lagBytes)} over the bound ${formatLag(maxLagBytes)}`;
      }
    }
    return out;
  });
}

/**
 * What the primary says about its replicas: one command the operator runs in the primary's server container
 * (pods/exec, the superuser over the local socket, no password), and its parser. Measured on the primary:
 *   - its own recovery state and timeline;
 *   - each WAL sender (pg_stat_replication, by application_name = the replica's pod name): its state, the
 *     WAL the primary wrote that the replica has not replayed yet (pg_current_wal_lsn() - replay_lsn) and
 *     replay_lag (NULL once an idle replica caught up: 0);
 *   - each physical replication slot's wal_status (`lost`: the WAL that replica needs was removed past
 *     max_slot_wal_keep_size, and its next start clones it again).
 * Lines, `|`-separated: `self|t/f|<timeline>`, `sender|<pod>|<state>|<lag bytes or empty>|<lag ms>`,
 * `slot|<slot name>|<wal_status>`.
 */
import { PSQL, sh, TIMELINE_SQL } from './failover.ts';

export function replicationCommand(): string[] {
  return sh(`${PSQL} -F '|' -c "SELECT 'self', pg_is_in_recovery(), ${TIMELINE_SQL}" \\
  -c "SELECT 'sender', application_name, state,
  CASE WHEN pg_is_in_recovery() OR replay_lsn IS NULL THEN ''
       ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint::text END,
  coalesce(floor(extract(epoch FROM replay_lag) * 1000)::bigint, 0)
  FROM pg_stat_replication ORDER BY application_name" \\
  -c "SELECT 'slot', slot_name, coalesce(wal_status, '') FROM pg_replication_slots
  WHERE slot_type = 'physical' ORDER BY slot_name"`);
}

/** One WAL sender of the primary: a replica connected to it. */
export interface SenderSample {
  /** Its application_name: the replica's pod name. */
  name: string;
  /** startup, catchup, streaming, backup or stopping. */
  state: string;
  /** WAL written on the primary and not replayed by the replica yet, bytes; undefined before it replayed any. */
  lagBytes: number | undefined;
  /** replay_lag in ms (0 when NULL: an idle replica that caught up). */
  lagMs: number;
}

export interface ReplicationSample {
  /** The instance asked is in recovery (not a primary after all). */
  inRecovery: boolean;
  timeline: number | undefined;
  senders: SenderSample[];
  /** wal_status by physical slot name (reserved, extended, unreserved, lost). */
  slots: Record<string, string>;
}

const nonNegative = (text: string | undefined): number | undefined => {
  if (text === undefined || !/^-?\d+$/.test(text)) return undefined;
  return Math.max(0, Number(text));
};

/** Parses replicationCommand's output; undefined when it holds no `self` line. */
export function parseReplication(stdout: string): ReplicationSample | undefined {
  let self: { inRecovery: boolean; timeline: number | undefined } | undefined;
  const senders: SenderSample[] = [];
  const slots: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const f = line.trim().split('|');
    if (f[0] === 'self' && f.length >= 3 && (f[1] === 't' || f[1] === 'f')) {
      const tli = Number(f[2]);
      self = { inRecovery: f[1] === 't', timeline: Number.isInteger(tli) && tli > 0 ? tli : undefined };
    } else if (f[0] === 'sender' && f.length >= 5 && f[1]) {
      senders.push({
        name: f[1],
        state: f[2] ?? '',
        lagBytes: nonNegative(f[3]),
        lagMs: nonNegative(f[4]) ?? 0,
      });
    } else if (f[0] === 'slot' && f.length >= 3 && f[1]) {
      slots[f[1]] = f[2] ?? '';
    }
  }
  return self ? { ...self, senders, slots } : undefined;
}

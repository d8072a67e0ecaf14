/**
 * health.sh: what the readiness and liveness probes run. Honest health: a replica is ready only while it
 * streams from the current primary within a lag bound, not because it answers `SELECT 1`.
 *   health.sh ready  primary (POD_NAME = PRIMARY_POD): out of recovery and answering queries;
 *                    replica: in recovery, its WAL receiver streaming from PRIMARY_HOST, and the WAL
 *                    the primary reported not replayed yet at most MAX_LAG_BYTES (default 64 MiB).
 *   health.sh live   the server answers (pg_isready exit 0 or 1: accepting, or starting/recovering);
 *                    a replica also fails when it does not stream while the primary is up (WAL removed,
 *                    another timeline, another cluster): the kubelet restarts the container, whose
 *                    `instance.sh start` repairs it (pg_rewind or a fresh clone). A replica whose replay
 *                    stays on one position while its primary is up (not streaming, or streaming WAL it
 *                    cannot apply) for STUCK_SECONDS leaves a verdict for that start (divergence.ts).
 *   health.sh startup  the server accepts connections over TCP, or a replica is stuck starting up (then
 *                    liveness, which fails on it, takes over).
 * It prints why it fails: the kubelet puts that in the probe's event. Queries go over the local socket as
 * the superuser (peer authentication), so no password is involved and editing the Secret can never take
 * every pod out of the Services.
 * Env: POD_NAME, PRIMARY_POD, PRIMARY_HOST, PRIMARY_PORT, PGHOST (the socket directory), PGPORT;
 * POSTGRES_USER, MAX_LAG_BYTES (spec.maxReplicaLag); the designated primary is the newest of the mounted ConfigMap's copy
 * and the operator's designation file (designation.ts), else the env.
 * During a failover (designation `none`): an instance out of recovery is fenced, neither ready nor live
 * (the restart waits for the new primary); a replica stays ready (it serves reads, and follows the new
 * primary once named). An instance out of recovery that is not the designated primary fails liveness
 * too: the restart makes it rejoin as a replica, should the operator be unable to stop it.
 */
import type { DefaultedDatabase } from '../../../../api/v1/database.ts';
import { parseQuantity } from '../../desired/quantity.ts';
import { designationShell } from './designation.ts';
import { stuckShell } from './divergence.ts';

/** The default bound of a ready replica's replay lag (spec.maxReplicaLag unset: 64Mi). */
export const DEFAULT_MAX_LAG_BYTES = 64 * 1024 * 1024;

/** The lag bound of a ready replica in bytes: spec.maxReplicaLag, or the default. */
export function maxLagBytes(db: Pick<DefaultedDatabase, 'spec'>): number {
  const q = db.spec.maxReplicaLag;
  const bytes = q === undefined ? undefined : parseQuantity(String(q));
  return bytes !== undefined && bytes > 0 ? Math.floor(bytes) : DEFAULT_MAX_LAG_BYTES;
}

export function healthScript(): string {
  return `#!/bin/sh
# opkit-database-operator: readiness and liveness of a PostgreSQL instance.
set -u
mode=\${1:-ready}
: "\${POD_NAME:?}" "\${PRIMARY_POD:?}" "\${PRIMARY_HOST:?}" "\${PRIMARY_PORT:?}" "\${PGHOST:?}" "\${PGPORT:?}"
# The designated primary now: PRIMARY_POD (env) is read at container start only, so after a change of
# primary the env would judge against the former one.
${designationShell()}
current=$(designation | cut -d' ' -f1)
if [ -n "$current" ]; then
  PRIMARY_HOST="$current.\${PRIMARY_HOST#*.}"
  PRIMARY_POD=$current
fi
max_lag=\${MAX_LAG_BYTES:-${DEFAULT_MAX_LAG_BYTES}}
user=\${POSTGRES_USER:-postgres}
primary_up() { pg_isready -q -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -d postgres; }
${stuckShell()}

# A replica that does not reach consistency (it answers "starting up") while the primary is up and its
# replay stays on one position (divergence.ts).
stuck_starting() {
  [ "$POD_NAME" != "$PRIMARY_POD" ] && [ "$PRIMARY_POD" != "$fenced" ] || return 1
  position=$(startup_position)
  [ -n "$position" ] && primary_up && stuck "$position" "starting up: not consistent, not replaying"
}

if [ "$mode" = startup ]; then
  # Over TCP: the server listens. A replica stuck starting up ends its startup here, so that liveness
  # (which fails on it) restarts it instead of the startup probe's half hour.
  if pg_isready -q -h 127.0.0.1 -p "$PGPORT" -U "$user" -d postgres; then exit 0; fi
  stuck_starting && exit 0
  echo "the server does not accept connections yet"
  exit 1
fi

pg_isready -q -h "$PGHOST" -p "$PGPORT" -U "$user" -d postgres
alive=$?
if [ "$mode" = live ] && [ "$alive" -gt 1 ]; then
  echo "the server does not answer"
  exit 1
fi
if [ "$mode" = ready ] && [ "$alive" -ne 0 ]; then
  echo "the server does not accept connections"
  exit 1
fi
if [ "$alive" -ne 0 ]; then
  stuck_starting && exit 1
  exit 0
fi

state=$(psql -X -A -t -q -w -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$PGPORT" -U "$user" -d postgres -F ' ' -c "
  SELECT pg_is_in_recovery(),
         coalesce((SELECT status FROM pg_stat_wal_receiver), 'none'),
         coalesce((SELECT sender_host FROM pg_stat_wal_receiver), 'none'),
         coalesce(pg_wal_lsn_diff((SELECT latest_end_lsn FROM pg_stat_wal_receiver), pg_last_wal_replay_lsn()), 0)::bigint,
         coalesce(pg_last_wal_replay_lsn()::text, 'none'),
         NOT pg_is_in_recovery() OR pg_get_wal_replay_pause_state() = 'not paused',
         (SELECT setting FROM pg_settings WHERE name = 'max_standby_streaming_delay')")
if [ $? -ne 0 ] || [ -z "$state" ]; then
  if [ "$mode" = live ]; then exit 0; fi
  echo "the server does not answer queries"
  exit 1
fi
set -- $state
recovery=$1 receiver=$2 sender=$3 lag=$4 replayed=$5 unpaused=$6 conflict_wait_ms=$7
case "\${conflict_wait_ms:-}" in '' | *[!0-9-]*) conflict_wait_ms=0 ;; esac

if [ "$POD_NAME" = "$PRIMARY_POD" ]; then
  if [ "$recovery" = t ]; then
    echo "$POD_NAME is the designated primary but is in recovery"
    [ "$mode" = live ] && exit 0
    exit 1
  fi
  exit 0
fi

if [ "$PRIMARY_POD" = "$fenced" ]; then
  if [ "$recovery" = t ]; then exit 0; fi
  echo "$POD_NAME is fenced: a failover is in progress and no instance is the primary"
  exit 1
fi
if [ "$recovery" != t ]; then
  echo "$POD_NAME is a replica but not in recovery (it acts as a primary; $PRIMARY_POD is the designated one)"
  exit 1
fi
if [ "$receiver" != streaming ] || [ "$sender" != "$PRIMARY_HOST" ]; then
  if [ "$mode" = live ]; then
    # Down, not a fault here: wait. Up and still not streaming: the container restarts and repairs.
    if primary_up; then
      if [ "$unpaused" = t ] && stuck "$replayed" "not streaming from $PRIMARY_POD (WAL receiver: $receiver)"; then
        exit 1
      fi
      echo "not streaming from $PRIMARY_HOST although it is up (WAL receiver: $receiver)"
      exit 1
    fi
    exit 0
  fi
  echo "not streaming from the primary $PRIMARY_HOST (WAL receiver: $receiver, from $sender)"
  exit 1
fi
if [ "$mode" = live ] && [ "$lag" -gt 0 ] && [ "$unpaused" = t ]; then
  # Streaming, yet WAL it received is not replayed (a record it cannot apply: the receiver reconnects
  # and the startup process fails on the same record, "incorrect prev-link"). Not when replay may
  # legitimately wait that long for the queries it conflicts with (max_standby_streaming_delay).
  if [ "$conflict_wait_ms" -lt 0 ] || [ "$conflict_wait_ms" -ge $((stuck_seconds * 1000)) ]; then exit 0; fi
  if stuck "$replayed" "WAL received from $PRIMARY_POD but not replayed ($lag bytes)"; then exit 1; fi
  exit 0
fi
[ "$mode" = live ] && healthy
if [ "$mode" = ready ] && [ "$lag" -gt "$max_lag" ]; then
  echo "replay lag $lag bytes exceeds $max_lag"
  exit 1
fi
exit 0
`;
}

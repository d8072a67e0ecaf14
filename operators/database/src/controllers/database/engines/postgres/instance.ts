/**
 * instance.sh: the operator's own bootstrap of a PostgreSQL instance, not the image's entrypoint. The
 * init container runs `instance.sh bootstrap`, the main container `instance.sh start` (the same checks,
 * then `exec postgres`), so a restart of the server container repairs what the init container would.
 *
 * The decision, from the data directory and what the operator recorded (env from the ConfigMap's
 * cluster keys: CLUSTER_SYSTEM_ID, PRIMARY_POD):
 *   empty, the designated primary, brand-new Database (no system identifier recorded)  -> initdb
 *   empty, the designated primary, initialized Database                                -> refuse
 *       (never a new, empty primary over a cluster whose data is elsewhere)
 *   empty, any other pod                                -> clone the current primary, whatever ordinals
 *   a different system identifier than the recorded one                                -> refuse
 *   a replica with data: pg_rewind when it was a primary or its timeline differs from the primary's
 *       (a fresh clone when that fails), never when its control file says its recovery as a standby was
 *       interrupted (`in archive recovery`: pg_rewind's crash recovery would end it and write WAL the
 *       primary does not have); a fresh clone when its replication slot on the primary is
 *       missing or lost its WAL (max_slot_wal_keep_size); otherwise it starts as it is
 *   a replica with data and the liveness probe's verdict that its replay was stuck while the primary was up
 *       (divergence.ts): pg_rewind if it applies and was not tried for this verdict, else a fresh clone,
 *       only when the designated primary is up, out of recovery and serves the same system identifier;
 *       the old data directory is kept aside (`<PGDATA>.diverged-<time>`) when the volume has room
 * A replica streams through a physical slot of its own (`opkit_<pod>`) with primary_conninfo and
 * primary_slot_name on the server's command line, over TLS (sslmode=verify-full against the Database's CA;
 * sslmode=prefer only to a primary the operator named as running without TLS: primary-tls.ts):
 * nothing with a password is written to the data directory (the replication password is in a passfile on an in-memory volume, written from the env).
 *
 * Failover (failover/procedure.ts): while a failover is pending the designated primary is `none`: the
 * script does not start a server, it waits (FENCE_WAIT_SECONDS, default 600, then refuses `fenced` and
 * the kubelet starts it again) until a designation newer than its wait (or, once the operator fenced it,
 * one with a higher epoch than that fence's) names the new primary, then goes
 * on as that primary's replica (or as the primary). A designated primary also waits when the newest
 * designation in its files (designation.ts) names someone else: a fenced primary restarted by the kubelet
 * never comes back as a primary on a stale env. A designated primary whose data is a standby's starts as
 * a standby only while the operator's designation file names it (the operator is promoting it).
 *
 * The outcome goes to the container's termination message (key=value lines, no secret), which the
 * kubelet puts in the pod's status: that is how the operator learns the system identifier and refusals.
 */
import { CLUSTER_KEYS, CONFIG_DIR } from '../../desired/names.ts';
import { designationShell, waitDesignationShell } from './designation.ts';
import { stuckShell } from './divergence.ts';
import { initSql } from './init-sql.ts';

/** The results the script reports; the refusals exit non-zero. */
export const INSTANCE_RESULTS = {
  initialized: 'initialized',
  cloned: 'cloned',
  existing: 'existing',
  rewound: 'rewound',
  recloned: 'recloned',
  emptyPrimary: 'empty-primary',
  foreign: 'foreign-data',
  foreignPrimary: 'foreign-primary',
  standbyAsPrimary: 'standby-as-primary',
  imageVersion: 'image-version',
  primaryUnreachable: 'primary-unreachable',
  fenced: 'fenced',
} as const;
export type InstanceResult = (typeof INSTANCE_RESULTS)[keyof typeof INSTANCE_RESULTS];

/** The replication slot of a pod on the primary: `opkit_<pod>` with `-` and `.` as `_`. */
export function slotName(pod: string): string {
  return `opkit_${pod.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`.slice(0, 63);
}

/**
 * Env: PGDATA, POD_NAME, PRIMARY_POD, PRIMARY_HOST, PRIMARY_PORT, CONFIG_FILE, PGHOST/PGPORT (its own
 * socket), REPLICATION_USER, REPLICATION_PASSWORD_FILE (the Secret's key mounted as a file: never in env, which
 * the node keeps on disk in the container's spec), PASSFILE, TLS_CA_FILE (the CA replication verifies the
 * primary's certificate with, sslmode=verify-full); APP_USER, APP_DATABASE, APP_PASSWORD_SCRAM,
 * REPLICATION_PASSWORD_SCRAM (initdb only); optional PG_MAJOR (the declared major: the image and the data must hold it), CLUSTER_SYSTEM_ID, POSTGRES_USER, WAIT_SECONDS (for the primary, when cloning;
 * default 600), REPAIR_WAIT_SECONDS (for the primary, with data; default 30), TERMINATION_LOG,
 * PRIMARY_WITHOUT_TLS_FILE (default: the ConfigMap's mounted cluster-primary-without-tls).
 */
export function instanceScript(): string {
  const R = INSTANCE_RESULTS;
  return `#!/bin/sh
# opkit-database-operator: a PostgreSQL instance.
#   instance.sh bootstrap   prepare the data directory and report (the init container)
#   instance.sh start       the same, then exec postgres (the server container)
set -eu
mode=\${1:-start}
: "\${PGDATA:?}" "\${POD_NAME:?}" "\${PRIMARY_POD:?}" "\${PRIMARY_HOST:?}" "\${PRIMARY_PORT:?}" "\${CONFIG_FILE:?}"
: "\${REPLICATION_USER:?}" "\${REPLICATION_PASSWORD_FILE:?}" "\${PASSFILE:?}" "\${TLS_CA_FILE:?}"
cluster_id=\${CLUSTER_SYSTEM_ID:-}
wait_seconds=\${WAIT_SECONDS:-600}
repair_wait_seconds=\${REPAIR_WAIT_SECONDS:-30}
fence_wait_seconds=\${FENCE_WAIT_SECONDS:-600}
termination_log=\${TERMINATION_LOG:-/dev/termination-log}
slot=$(printf 'opkit_%s' "$POD_NAME" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9_' '_' | cut -c1-63)
result=''
note=''

log() { printf 'instance: %s\\n' "$*" >&2; }
control() {
  [ -s "$PGDATA/global/pg_control" ] || return 0
  LC_ALL=C pg_controldata "$PGDATA" 2>/dev/null | sed -n "s/^$1: *//p"
}
local_id() { control 'Database system identifier'; }
local_tli() { control "Latest checkpoint's TimeLineID"; }
# The operator reads this: the container's termination message (no secret in it).
report() {
  {
    printf 'result=%s\\n' "$1"
    printf 'system-identifier=%s\\n' "$(local_id)"
    printf 'timeline=%s\\n' "$(local_tli)"
    if [ -n "\${2:-}" ]; then printf 'message=%s\\n' "$2"; fi
  } >"$termination_log" 2>/dev/null || true
}
refuse() {
  log "$2"
  report "$1" "$2"
  exit 1
}

${designationShell()}
${stuckShell()}
primary_without_tls_file=\${PRIMARY_WITHOUT_TLS_FILE:-${CONFIG_DIR}/${CLUSTER_KEYS.primaryWithoutTls}}
${waitDesignationShell(R.fenced)}

# The replication password, for libpq only: a passfile (0600) on an in-memory volume, from the Secret's
# file (an env var would be in the container's spec, which the node keeps on disk).
write_passfile() {
  mkdir -p "$(dirname "$PASSFILE")"
  old_umask=$(umask)
  umask 077
  escaped=$(tr -d '\\n' <"$REPLICATION_PASSWORD_FILE" | sed 's/[\\\\:]/\\\\&/g')
  printf '*:*:*:%s:%s\\n' "$REPLICATION_USER" "$escaped" >"$PASSFILE"
  umask "$old_umask"
}
# Over TLS, the primary's certificate and name verified against the Database's CA; sslmode=prefer only
# when the operator named this very primary as running without TLS (primary-tls.ts), never otherwise.
sslmode() {
  if [ -s "$primary_without_tls_file" ] && [ "$(head -n1 "$primary_without_tls_file")" = "$PRIMARY_POD" ]; then
    printf prefer
  else
    printf verify-full
  fi
}
conninfo() {
  printf 'host=%s port=%s user=%s passfile=%s application_name=%s sslmode=%s sslrootcert=%s' \\
    "$PRIMARY_HOST" "$PRIMARY_PORT" "$REPLICATION_USER" "$PASSFILE" "$POD_NAME" "$(sslmode)" "$TLS_CA_FILE"
}
# A replication command on the primary (IDENTIFY_SYSTEM, READ_REPLICATION_SLOT, DROP_REPLICATION_SLOT).
repl() { psql -X -A -t -q -w -v ON_ERROR_STOP=1 -d "$(conninfo) dbname=replication replication=true" -c "$1"; }
wait_primary() {
  waited=0
  until pg_isready -q -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U "$REPLICATION_USER" -d postgres; do
    if [ "$waited" -ge "$1" ]; then return 1; fi
    sleep 2
    waited=$((waited + 2))
  done
}
# Sets primary_id and primary_tli; refuses a primary of another cluster.
identify_primary() {
  ident=$(repl 'IDENTIFY_SYSTEM') || refuse ${R.primaryUnreachable} "IDENTIFY_SYSTEM on the primary $PRIMARY_HOST:$PRIMARY_PORT failed"
  primary_id=\${ident%%|*}
  rest=\${ident#*|}
  primary_tli=\${rest%%|*}
  if [ -n "$cluster_id" ] && [ "$primary_id" != "$cluster_id" ]; then
    refuse ${R.foreignPrimary} "the primary $PRIMARY_POD serves system identifier $primary_id, not this Database's $cluster_id: refusing to clone or follow it"
  fi
}

clone() {
  partial="$PGDATA.partial"
  rm -rf "$partial"
  repl "DROP_REPLICATION_SLOT $slot" >/dev/null 2>&1 || true
  log "cloning $PRIMARY_HOST:$PRIMARY_PORT into $PGDATA (replication slot $slot)"
  # Each step checked: a caller in a condition (if, &&) runs this without set -e, and the data directory
  # must never be replaced by a failed clone.
  if ! pg_basebackup --pgdata="$partial" --wal-method=stream --checkpoint=fast --no-password \\
    --create-slot --slot="$slot" --dbname="$(conninfo)" || ! touch "$partial/standby.signal" ||
    ! chmod 0700 "$partial"; then
    log "cloning $PRIMARY_HOST:$PRIMARY_PORT failed: $PGDATA is left as it was"
    rm -rf "$partial"
    exit 1
  fi
  if [ -e "$PGDATA" ]; then
    if [ -n "\${1:-}" ]; then set_aside; else rm -rf "$PGDATA"; fi
  fi
  mv "$partial" "$PGDATA" || exit 1
}
# The replaced data directory may hold writes no one else has (a former primary's): kept next to it when
# the volume still has as much free space as the new copy takes, after the clone; else deleted, and said
# (kept=).
set_aside() {
  aside="$PGDATA.diverged-$(date -u +%Y%m%dT%H%M%SZ)"
  need=$(du -sk "$partial" 2>/dev/null | cut -f1)
  free=$(df -Pk "$(dirname "$PGDATA")" 2>/dev/null | awk 'NR == 2 { print $4 }')
  if [ -n "$need" ] && [ -n "$free" ] && [ "$free" -ge "$need" ] && mv "$PGDATA" "$aside"; then
    kept="the old data directory is kept in $aside (delete it when no longer needed)"
  else
    rm -rf "$PGDATA"
    kept="the old data directory was deleted: \${free:-?} KiB free on the volume after the clone, less than the \${need:-?} KiB of data"
  fi
  log "$kept"
}

initialize() {
  : "\${APP_USER:?}" "\${APP_PASSWORD_SCRAM:?}" "\${APP_DATABASE:?}" "\${REPLICATION_PASSWORD_SCRAM:?}"
  partial="$PGDATA.partial"
  rm -rf "$partial" "$partial.log"
  log "initializing a new cluster in $PGDATA"
  initdb --pgdata="$partial" --username="\${POSTGRES_USER:-postgres}" --auth=peer \\
    --auth-host=scram-sha-256 --data-checksums --encoding=UTF8 --locale=C >/dev/null
  # The application and replication users, against a server on the socket only.
  pg_ctl start -D "$partial" -w -t 120 -s -l "$partial.log" \\
    -o "-c config_file=$CONFIG_FILE -c listen_addresses=''" || { cat "$partial.log" >&2; exit 1; }
  if ! create_users; then
    pg_ctl stop -D "$partial" -m fast -w -s || true
    exit 1
  fi
  pg_ctl stop -D "$partial" -m fast -w -s
  rm -f "$partial.log"
  chmod 0700 "$partial"
  if [ -e "$PGDATA" ]; then rm -rf "$PGDATA"; fi
  mv "$partial" "$PGDATA"
}

create_users() {
${initSql()}
}

# A replica with data: rewind or clone again when it cannot follow the primary.
repair() {
  if ! wait_primary "$repair_wait_seconds"; then
    log "the primary $PRIMARY_HOST:$PRIMARY_PORT is not ready: starting as a standby as it is"
    result=${R.existing}
    return 0
  fi
  identify_primary
  id=$(local_id)
  if [ "$primary_id" != "$id" ]; then
    refuse ${R.foreign} "$PGDATA holds system identifier $id, the primary $PRIMARY_POD $primary_id: refusing to start. Move the data away or delete the volume of $POD_NAME so it is cloned again"
  fi
  tli=$(local_tli)
  state=$(control 'Database cluster state')
  rewind=''
  case $state in
    'in archive recovery')
      # A standby whose recovery was interrupted (killed, evicted), a rewound former primary's included:
      # never pg_rewind it. Not shut down cleanly, it would get pg_rewind's single-user crash recovery,
      # which ends recovery and writes WAL the primary does not have, on the same timeline ("no rewind
      # required", then "incorrect prev-link" for ever). It goes on as a standby (a newer timeline of the
      # primary is followed: recovery_target_timeline=latest).
      log "$PGDATA was a standby in recovery (timeline $tli, $primary_tli on the primary): starting it as a standby again" ;;
    'shut down in recovery')
      # A standby shut down cleanly: pg_rewind (no crash recovery needed) only onto another timeline.
      if [ "$tli" != "$primary_tli" ]; then rewind=1; fi ;;
    *)
      # A former primary (shut down, in production, crashed), or a directory without standby.signal.
      if [ ! -e "$PGDATA/standby.signal" ] || [ "$tli" != "$primary_tli" ]; then rewind=1; fi ;;
  esac
  # The liveness probe's verdict: as it is, it did not follow the primary.
  verdict=''
  if [ -s "$diverged_file" ]; then
    read -r v_at v_for v_why <"$diverged_file" || true
    verdict="replay stuck at \${v_at:-?} for \${v_for:-?}s while $PRIMARY_POD was up: \${v_why:-}"
    log "$verdict"
    if [ -n "$rewind" ] && [ -e "$rewound_file" ]; then rewind=''; fi
    if [ -z "$rewind" ]; then
      reclone_diverged && return 0
      verdict=''
    fi
  fi
  if [ -n "$rewind" ]; then
    log "timeline $tli here, $primary_tli on the primary (or a former primary; $state): pg_rewind"
    rewind_log="$opkit_run_dir/pg_rewind.log"
    if pg_rewind --target-pgdata="$PGDATA" --source-server="$(conninfo) dbname=postgres" >"$rewind_log" 2>&1; then
      cat "$rewind_log" >&2
      touch "$PGDATA/standby.signal"
      result=${R.rewound}
      if [ -n "$verdict" ]; then
        if grep -q 'no rewind required' "$rewind_log"; then
          reclone_diverged && return 0
        else
          : >"$rewound_file"
          rm -f "$diverged_file" "$stuck_file"
        fi
      fi
    else
      cat "$rewind_log" >&2
      log "pg_rewind failed: cloning the primary again"
      kept=''
      clone aside
      result=${R.recloned}
      note="timeline $tli here, $primary_tli on the primary, and pg_rewind failed; $kept"
      return 0
    fi
  fi
  restart_lsn=$(repl "READ_REPLICATION_SLOT $slot" | cut -d'|' -f2)
  if [ -z "$restart_lsn" ]; then
    log "replication slot $slot on the primary is missing or lost its WAL (max_slot_wal_keep_size): cloning the primary again"
    clone
    result=${R.recloned}
    note="its replication slot $slot on the primary was missing or had lost its WAL (max_slot_wal_keep_size)"
    return 0
  fi
  touch "$PGDATA/standby.signal"
  result=\${result:-${R.existing}}
}

# A replica that did not follow the primary as it was (the verdict): a fresh clone, only from a designated
# primary that is up (repair() waited for it), out of recovery, with this data's system identifier
# (identify_primary and repair() checked it); never the designated primary's own data (repair() runs for
# replicas only). False (started as it is, the verdict kept) when the primary is in recovery.
reclone_diverged() {
  in_recovery=$(psql -X -A -t -q -w -d "$(conninfo) dbname=postgres" -c 'SELECT pg_is_in_recovery()' 2>/dev/null || true)
  if [ "$in_recovery" != f ]; then
    log "the primary $PRIMARY_POD is not out of recovery (\${in_recovery:-no answer}): not cloning it, starting as it is"
    return 1
  fi
  log "cloning $PRIMARY_POD again: its WAL had diverged from this one at \${v_at:-?}"
  kept=''
  clone aside
  rm -f "$diverged_file" "$stuck_file" "$rewound_file"
  result=${R.recloned}
  note="re-cloned from $PRIMARY_POD: its WAL had diverged at \${v_at:-?} ($verdict); $kept"
  return 0
}

# The image must hold the declared major version (spec.image is free-form), and so must the data.
if [ -n "\${PG_MAJOR:-}" ]; then
  server_major=$(postgres --version 2>/dev/null | awk '{ print $3 }' | cut -d. -f1)
  if [ "$server_major" != "$PG_MAJOR" ]; then
    refuse ${R.imageVersion} "the image runs PostgreSQL \${server_major:-(no postgres binary found)}, but spec.version is $PG_MAJOR: refusing to start. Set spec.image to a PostgreSQL $PG_MAJOR image"
  fi
  if [ -s "$PGDATA/PG_VERSION" ] && [ "$(cat "$PGDATA/PG_VERSION")" != "$PG_MAJOR" ]; then
    refuse ${R.imageVersion} "$PGDATA holds PostgreSQL $(cat "$PGDATA/PG_VERSION") data, but spec.version is $PG_MAJOR: refusing to start (a major upgrade is not done in place)"
  fi
fi

write_passfile
if [ "$PRIMARY_POD" = "$fenced" ]; then
  wait_designation "a failover is in progress (no primary is designated)"
elif [ "$PRIMARY_POD" = "$POD_NAME" ]; then
  set -- $(designation)
  if [ -n "\${1:-}" ] && [ "$1" != "$POD_NAME" ]; then
    wait_designation "$POD_NAME is the primary by its env, but the newest designation is \${1} (epoch \${2:-0})"
  fi
fi
if [ "$POD_NAME" = "$PRIMARY_POD" ]; then role=primary; else role=replica; fi
if [ "$role" = replica ] && [ "$(sslmode)" = prefer ]; then
  log "the operator says the primary $PRIMARY_POD runs without TLS (a pod from before TLS): connecting to it with sslmode=prefer, verify-full at the next restart once it serves TLS"
  note="connected to the primary $PRIMARY_POD with sslmode=prefer: the operator saw it run without TLS"
fi
if [ -s "$PGDATA/PG_VERSION" ] && [ -s "$PGDATA/global/pg_control" ]; then
  id=$(local_id)
  if [ -n "$cluster_id" ] && [ "$id" != "$cluster_id" ]; then
    refuse ${R.foreign} "$PGDATA holds system identifier $id, this Database's is $cluster_id: refusing to start on another cluster's data. Move the data away or delete the volume of $POD_NAME"
  fi
  if [ "$role" = primary ]; then
    promoting=''
    if [ -s "$designation_file" ]; then read -r promoting _ <"$designation_file" || true; fi
    if [ -e "$PGDATA/standby.signal" ] && [ "$promoting" = "$POD_NAME" ]; then
      log "$POD_NAME is being promoted by the operator: starting as a standby until it is"
    elif [ -e "$PGDATA/standby.signal" ]; then
      refuse ${R.standbyAsPrimary} "$POD_NAME is the designated primary but holds a standby's data directory: refusing to start it as a standby of itself"
    fi
    result=${R.existing}
  else
    repair
  fi
else
  if [ "$role" = primary ]; then
    if [ -n "$cluster_id" ]; then
      refuse ${R.emptyPrimary} "the data directory of $POD_NAME, the primary of cluster $cluster_id, is empty: refusing to initialize a new, empty primary in place of the cluster's data"
    fi
    initialize
    result=${R.initialized}
  else
    if ! wait_primary "$wait_seconds"; then
      refuse ${R.primaryUnreachable} "the primary $PRIMARY_HOST:$PRIMARY_PORT is not ready after \${wait_seconds}s"
    fi
    identify_primary
    clone
    result=${R.cloned}
  fi
fi

# Settings only the command line carries: never a password in postgresql.auto.conf.
auto="$PGDATA/postgresql.auto.conf"
if [ -f "$auto" ] && grep -q -e '^primary_conninfo' -e '^primary_slot_name' "$auto"; then
  grep -v -e '^primary_conninfo' -e '^primary_slot_name' "$auto" >"$auto.tmp" || true
  mv "$auto.tmp" "$auto"
fi
report "$result" "$note"
log "$POD_NAME ($role): $result"
if [ "$mode" = bootstrap ]; then exit 0; fi
# The last look before a primary starts: a fence written while this script ran (the operator's, through
# the sidecar, when it found the server down) names none or another pod, and wins: no server, and the
# next start (the kubelet's) waits for the designation. A fence after this line finds postgres running
# once its postmaster.pid is written, and stops it; in the few milliseconds before that, the fence sees no
# server, and the primary's sidecar fences it by the Lease (at its next pass, within 2 s).
if [ "$role" = primary ]; then
  set -- $(designation)
  if [ -n "\${1:-}" ] && [ "$1" != "$POD_NAME" ]; then
    refuse ${R.fenced} "the designation changed to $1 (epoch \${2:-0}) while $POD_NAME was starting as the primary: not starting; the next start follows the designation"
  fi
fi
if [ "$role" = replica ]; then
  exec postgres -D "$PGDATA" -c "config_file=$CONFIG_FILE" -c "primary_conninfo=$(conninfo)" \\
    -c "primary_slot_name=$slot"
fi
exec postgres -D "$PGDATA" -c "config_file=$CONFIG_FILE"
`;
}

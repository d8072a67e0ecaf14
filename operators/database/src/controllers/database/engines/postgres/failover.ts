/**
 * The commands the operator runs in a PostgreSQL pod's server container (the fence also in its sidecar),
 * through the API's pods/exec, to fail over: fence the former primary, read each replica's WAL position,
 * promote one, tell every pod who the primary is now, restart the others so they follow it. Each is a `sh -c` script over the
 * container's own environment (PGDATA, PGHOST = the socket directory, PGPORT, POSTGRES_USER) and is
 * idempotent, so a procedure resumed after an operator restart may run it again. The superuser is only
 * reachable over the local socket (peer authentication): no password, no network path.
 *
 * The designation file (POSTGRES_DESIGNATION_FILE, on the pod's in-memory `run` volume) tells health.sh
 * and instance.sh who the primary is at once; the ConfigMap's mounted copy follows within the kubelet's
 * sync period (about a minute on real clusters). Both scripts prefer whichever file is newer.
 */
import { parseLsn } from '../../failover/decide.ts';

/** The primary designation while a failover is pending (no pod is ever named so): nobody is primary. */
export const FENCED_PRIMARY = 'none';
/** Where the operator writes the designated primary in each pod (the in-memory `run` volume). */
export const POSTGRES_DESIGNATION_FILE = '/run/opkit/primary';

/** `sh -c <script> sh <args...>`: the script reads its arguments as $1..., never interpolated. */
export function sh(script: string, ...args: string[]): string[] {
  return ['sh', '-c', script, 'sh', ...args];
}

/** psql as the superuser over the local socket (peer authentication), unaligned tuples only. */
export const PSQL = `psql -X -A -t -q -w -v ON_ERROR_STOP=1 -U "\${POSTGRES_USER:-postgres}" -d postgres`;

/** Writes `$1 $2` (pod, epoch) to the designation file atomically (a shell function the commands share). */
const DESIGNATE = `designate() {
  f=\${DESIGNATION_FILE:-${POSTGRES_DESIGNATION_FILE}}
  mkdir -p "$(dirname "$f")" && printf '%s %s\\n' "$1" "$2" >"$f.new" && mv -f "$f.new" "$f"
}`;

/**
 * Fences the former primary: the designation becomes FENCED_PRIMARY (so health.sh fails readiness and a
 * restart waits instead of starting a primary), then a fast shutdown, which sends the remaining WAL to the
 * connected standbys and waits for them to confirm it (a switchover loses no acknowledged write).
 * Succeeds (prints `fenced`) only when the designation was written and the server is stopped, also when it
 * was not running (pg_ctl status 3); fails when either is not sure: the designation is the whole fence of a
 * server that is down, and pg_ctl status 1 or 4 (a pid file being written, no data directory) says nothing.
 * Run in the server container, or in the sidecar, which shares the designation file, the data volume and
 * the process namespace (the procedure, when the server container is down).
 */
export function fenceCommand(epoch: number): string[] {
  return sh(
    `${DESIGNATE}
designate ${FENCED_PRIMARY} "$1" || { echo "writing the designation ${FENCED_PRIMARY} failed" >&2; exit 1; }
pg_ctl status -D "$PGDATA" >/dev/null 2>&1
case $? in
  0) pg_ctl stop -D "$PGDATA" -m fast -w -t 50 >&2 || exit 1 ;;
  3) ;;
  *) echo "pg_ctl status cannot tell whether a server runs in $PGDATA" >&2; exit 1 ;;
esac
echo fenced`,
    String(epoch),
  );
}

/**
 * The instance's timeline (SQL): a replica's the one it receives (or its last checkpoint's), a primary's
 * the one of the WAL it writes now (pg_control_checkpoint lags a promotion until the next checkpoint).
 */
export const TIMELINE_SQL = `CASE WHEN pg_is_in_recovery()
       THEN coalesce((SELECT received_tli FROM pg_stat_wal_receiver), (SELECT timeline_id FROM pg_control_checkpoint()))
       ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END`;

/**
 * One line about the instance, `|`-separated: in recovery (t/f), received (flushed) LSN, replayed LSN,
 * timeline, system identifier, the current WAL LSN when it is a primary, the host it streams from.
 */
export function stateCommand(): string[] {
  return sh(`${PSQL} -F '|' -c "SELECT pg_is_in_recovery(),
  coalesce(pg_last_wal_receive_lsn()::text, ''),
  coalesce(pg_last_wal_replay_lsn()::text, ''),
  ${TIMELINE_SQL},
  (SELECT system_identifier FROM pg_control_system()),
  CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_lsn()::text END,
  coalesce((SELECT sender_host FROM pg_stat_wal_receiver WHERE status = 'streaming'), '')"`);
}

export interface InstanceState {
  inRecovery: boolean;
  receivedLsn: bigint | undefined;
  replayedLsn: bigint | undefined;
  timeline: number | undefined;
  systemIdentifier: string | undefined;
  /** A primary's current WAL position. */
  currentLsn: bigint | undefined;
  /** The host a replica streams from (`<pod>.<name>-headless`), when streaming. */
  streamingFrom: string | undefined;
}

/** Parses stateCommand's output; undefined when it is not that line. */
export function parseInstanceState(stdout: string): InstanceState | undefined {
  const line = stdout.trim().split('\n').at(-1) ?? '';
  const f = line.split('|');
  if (f.length < 7 || (f[0] !== 't' && f[0] !== 'f')) return undefined;
  const tli = Number(f[3]);
  return {
    inRecovery: f[0] === 't',
    receivedLsn: parseLsn(f[1]),
    replayedLsn: parseLsn(f[2]),
    timeline: Number.isInteger(tli) && tli > 0 ? tli : undefined,
    systemIdentifier: /^\d+$/.test(f[4] ?? '') ? f[4] : undefined,
    currentLsn: parseLsn(f[5]),
    streamingFrom: f[6] ? f[6] : undefined,
  };
}

/**
 * Promotes the instance: first the designation file names it (so its probes judge it as the primary
 * at once, and a restarted instance.sh waiting for a designation starts it), then `pg_ctl promote -w`,
 * then the replication slots of the other instances (`slots`), reserving WAL from now on: slots live on
 * the primary only, and a replica that finds none would be cloned again in full (instance.sh) instead of
 * just following. Idempotent: an instance already out of recovery is not promoted again, existing slots
 * are kept. Prints `promoted`.
 */
export function promoteCommand(pod: string, epoch: number, slots: readonly string[] = []): string[] {
  return sh(
    `${DESIGNATE}
designate "$1" "$2"
if ! pg_ctl status -D "$PGDATA" >/dev/null 2>&1; then
  echo "the server is not running: it is promoted once it runs (instance.sh starts it as a standby)" >&2
  exit 2
fi
if [ "$(${PSQL} -c 'SELECT pg_is_in_recovery()')" = t ]; then
  pg_ctl promote -D "$PGDATA" -w -t 60 >&2 || exit 1
fi
${PSQL} -v slots="$3" <<'EOSQL' >/dev/null || exit 1
SELECT pg_create_physical_replication_slot(s, true)
  FROM unnest(string_to_array(:'slots', ' ')) s
 WHERE s <> '' AND NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = s);
EOSQL
# The control file names the new timeline only after a checkpoint, and the one promotion requests is spread
# out: pg_rewind of the former primary reads the timeline there, and would say "no rewind required" while
# it still says the old one (pg_rewind's documentation asks for this CHECKPOINT). Not fatal: it is asked
# again on the next promote call.
${PSQL} -c 'CHECKPOINT' >/dev/null || echo "CHECKPOINT after the promotion failed; pg_rewind may see the old timeline until the next one" >&2
echo promoted`,
    pod,
    String(epoch),
    slots.join(' '),
  );
}

/** Tells the instance who the primary is now (the designation file). */
export function designateCommand(pod: string, epoch: number): string[] {
  return sh(`${DESIGNATE}\ndesignate "$1" "$2"`, pod, String(epoch));
}

/**
 * Restarts the server so it follows the new primary: a fast shutdown; the kubelet starts the container
 * again, and instance.sh reads the new PRIMARY_POD from the ConfigMap and rewinds or clones as needed.
 */
export function restartCommand(): string[] {
  return sh(`if pg_ctl status -D "$PGDATA" >/dev/null 2>&1; then
  pg_ctl stop -D "$PGDATA" -m fast -w -t 50 >&2 || exit 1
fi
echo stopped`);
}

/** synchronous_standby_names for ANY n of the Database's possible instances (`<name>-0`..`<name>-4`). */
export function synchronousStandbyNames(name: string, n: number, maxInstances = 5): string {
  if (n <= 0) return '';
  const pods = Array.from({ length: maxInstances }, (_, i) => `"${name}-${i}"`).join(', ');
  return `ANY ${n} (${pods})`;
}

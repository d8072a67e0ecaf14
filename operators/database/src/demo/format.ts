/**
 * What the demo prints, as pure functions of what it observed: the Databases' printer columns, the pods'
 * progress, the per-instance replication table, and the parsing of what psql returned.
 */
import type { Pod } from '@opkit/runtime';
import type { Database } from '../api/v1/database.ts';
import { compareStrings } from '../controllers/database/order.ts';

/** Rows padded into columns, like kubectl's tables. */
export function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd((widths[i] ?? 0) + 3))
        .join('')
        .trimEnd(),
    )
    .join('\n');
}

export function age(created: string | undefined, now = Date.now()): string {
  if (!created) return '<unknown>';
  const s = Math.max(0, Math.round((now - Date.parse(created)) / 1000));
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
}

/** The CRD's printer columns, formatted like kubectl (when kubectl is not installed). */
export function printerTable(list: { items: Database[] }, now = Date.now()): string {
  return table([
    ['NAME', 'ENGINE', 'VERSION', 'REPLICAS', 'READY', 'PHASE', 'AGE'],
    ...list.items.map((d) => [
      d.metadata.name ?? '',
      d.spec.engine,
      d.spec.version,
      String(d.spec.replicas ?? 1),
      String(d.status?.readyReplicas ?? ''),
      d.status?.phase ?? '',
      age(d.metadata.creationTimestamp, now),
    ]),
  ]);
}

/** A pod's state in a word or two, like kubectl's STATUS column (Init:0/1, ContainerCreating, Ready, ...). */
export function podState(pod: Pod): string {
  if (pod.metadata.deletionTimestamp) return 'Terminating';
  const s = pod.status;
  const inits = s?.initContainerStatuses ?? [];
  const initTotal = pod.spec?.initContainers?.length ?? inits.length;
  const initDone = inits.filter((c) => c.state?.terminated?.exitCode === 0).length;
  if (initDone < initTotal) {
    const waiting = inits.find(
      (c) => c.state?.waiting?.reason && c.state.waiting.reason !== 'PodInitializing',
    );
    const failed = inits.find((c) => (c.state?.terminated?.exitCode ?? 0) !== 0);
    if (failed) return `Init:Error(${failed.name})`;
    return waiting ? `Init:${waiting.state!.waiting!.reason}` : `Init:${initDone}/${initTotal}`;
  }
  const containers = s?.containerStatuses ?? [];
  const waiting = containers.find((c) => c.state?.waiting?.reason);
  if (waiting) return waiting.state!.waiting!.reason!;
  if (s?.phase === 'Running') {
    const ready = s.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    const restarts = containers.reduce((n, c) => n + (c.restartCount ?? 0), 0);
    return `${ready ? 'Ready' : 'Running, not ready'}${restarts ? ` (${restarts} restarts)` : ''}`;
  }
  return s?.phase ?? 'Pending';
}

/** One line for the pods of a Database: `pg-0 Ready, pg-1 Init:0/1` (by name), or `no pods yet`. */
export function podProgress(pods: Pod[]): string {
  if (!pods.length) return 'no pods yet';
  return [...pods]
    .sort((a, b) => compareStrings(a.metadata.name ?? '', b.metadata.name ?? ''))
    .map((p) => `${p.metadata.name} ${podState(p)}`)
    .join(', ');
}

/** A replica as the primary's pg_stat_replication sees it. */
export interface ReplicationRow {
  /** application_name: the replica's pod name (the pods' primary_conninfo sets it). */
  name: string;
  /** streaming, catchup, startup, backup, stopping */
  state: string;
  /** The primary's current WAL position minus the replica's replay position, in bytes. */
  lagBytes: number;
  /** replay_lag in seconds (0 when the replica has caught up and nothing was written since). */
  lagSeconds: number;
}

/**
 * The unaligned output (`psql -At -F '|'`) of
 * `SELECT application_name, state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), extract(epoch from replay_lag)`.
 * Empty fields (a replica that has not replayed anything yet) become 0.
 */
export function parseReplication(out: string): ReplicationRow[] {
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [name = '', state = '', bytes = '', seconds = ''] = l.split('|');
      return { name, state, lagBytes: Number(bytes) || 0, lagSeconds: Number(seconds) || 0 };
    });
}

export interface InstanceRow {
  name: string;
  /** The pod's role label (primary, replica), or '-' when not labelled yet. */
  role: string;
  ready: boolean;
  /** The replica's pg_stat_replication row on the primary; undefined for the primary or when not seen. */
  replication?: ReplicationRow;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** The per-instance table: INSTANCE ROLE READY STREAMING LAG. */
export function instanceTable(rows: InstanceRow[]): string {
  return table([
    ['INSTANCE', 'ROLE', 'READY', 'STREAMING', 'REPLAY LAG'],
    ...rows.map((r) => {
      const primary = r.role === 'primary';
      const rep = r.replication;
      return [
        r.name,
        r.role,
        r.ready ? 'yes' : 'no',
        primary
          ? '-'
          : rep
            ? rep.state === 'streaming'
              ? 'yes'
              : `no (${rep.state})`
            : 'no (not connected)',
        primary || !rep ? '-' : `${formatBytes(rep.lagBytes)}, ${rep.lagSeconds.toFixed(1)} s`,
      ];
    }),
  ]);
}

/** What the demo's psql pod reports (its termination message): the row written and where it was read. */
export interface RowCheck {
  written?: { id: string; server: string; recovery: boolean; tries: number };
  read?: { note: string; server: string; recovery: boolean; tries: number };
}

/**
 * Parses the psql pod's report, lines of `written|<id>|<server addr>|<in recovery t/f>|<tries>` and
 * `read|<note>|<server addr>|<in recovery t/f>|<tries>`.
 */
export function parseRowCheck(message: string): RowCheck {
  const out: RowCheck = {};
  for (const line of message.split('\n')) {
    const f = line.trim().split('|');
    if (f[0] === 'written' && f.length >= 5)
      out.written = { id: f[1] ?? '', server: f[2] ?? '', recovery: f[3] === 't', tries: Number(f[4]) || 0 };
    if (f[0] === 'read' && f.length >= 5)
      out.read = { note: f[1] ?? '', server: f[2] ?? '', recovery: f[3] === 't', tries: Number(f[4]) || 0 };
  }
  return out;
}

/** `[ 12.3s]`: the seconds since `started`, as the demo prefixes its progress lines. */
export function stamp(started: number, now = Date.now()): string {
  return `[${((now - started) / 1000).toFixed(1).padStart(5)}s]`;
}

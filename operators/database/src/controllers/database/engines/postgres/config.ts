/**
 * postgresql.conf and pg_hba.conf, rendered from the Database: the settings the operator manages
 * (rendered last, so they always win), the defaults it derives from the spec, and spec.parameters.
 */
import { type DefaultedDatabase, RESERVED_PARAMETERS } from '../../../../api/v1/database.ts';
import { MiB, parseQuantity } from '../../desired/quantity.ts';
import { compareStrings } from '../../order.ts';
import { synchronousStandbyNames } from './failover.ts';
import {
  POD_PATHS,
  POSTGRES_ADMIN_USER,
  POSTGRES_FILES,
  POSTGRES_REPLICATION_USER,
  POSTGRES_TLS_FILES,
  type PostgresPaths,
} from './layout.ts';

/** A postgresql.conf string literal. */
export function pgQuote(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** The settings the operator manages (replication and paths): rendered last, so they always win. */
export function managedSettings(paths: PostgresPaths = POD_PATHS): [string, string][] {
  return [
    ['listen_addresses', paths.listenAddresses],
    ['port', String(paths.port)],
    ['unix_socket_directories', paths.socketDir],
    ['hba_file', `${paths.configDir}/${POSTGRES_FILES.hba}`],
    ['wal_level', 'replica'],
    ['max_wal_senders', '10'],
    ['max_replication_slots', '10'],
    ['hot_standby', 'on'],
    // TLS always on: pg_hba only lets the application and replication users in over TLS (hostssl).
    ['ssl', 'on'],
    ['ssl_cert_file', `${paths.tlsDir}/${POSTGRES_TLS_FILES.cert}`],
    ['ssl_key_file', `${paths.tlsDir}/${POSTGRES_TLS_FILES.key}`],
    ['ssl_ca_file', `${paths.tlsDir}/${POSTGRES_TLS_FILES.ca}`],
  ];
}

/** max_slot_wal_keep_size: the most WAL the primary keeps for a replica that does not stream. */
export const POSTGRES_SLOT_WAL_BOUND = '1GB';

/** Defaults derived from the spec, which spec.parameters may override. */
export function tunedSettings(db: DefaultedDatabase): [string, string][] {
  const out: [string, string][] = [
    ['password_encryption', 'scram-sha-256'],
    // spec.parameters may raise it to TLSv1.3.
    ['ssl_min_protocol_version', 'TLSv1.2'],
    // Each replica streams through a replication slot, which keeps the WAL it has not received yet,
    // bounded: a replica gone for good must not fill the primary's volume. Past the bound its slot is
    // invalidated and the replica is cloned again (instance.sh). Fixed, not derived from spec.storage,
    // so growing the volume does not roll the pods; set spec.parameters for volumes under ~4Gi.
    ['max_slot_wal_keep_size', POSTGRES_SLOT_WAL_BOUND],
    // A little WAL beyond the slots, for pg_rewind of a former primary.
    ['wal_keep_size', '128MB'],
    // Needed by pg_rewind, so a former primary can rejoin as a replica after a failover.
    ['wal_log_hints', 'on'],
  ];
  const memory = parseQuantity(db.spec.resources?.limits?.memory);
  if (memory !== undefined && memory > 0) {
    // A quarter of the memory limit, the usual starting point.
    out.push(['shared_buffers', `${Math.max(32, Math.floor(memory / 4 / MiB))}MB`]);
  }
  return out;
}

/**
 * spec.parameters that may be rendered: well-formed, single-line and not managed by the operator (the
 * API server already refuses the others; this is the second line of defence).
 */
export function userSettings(db: DefaultedDatabase, reserved: readonly string[]): [string, string][] {
  const managed = new Set(reserved.map((r) => r.toLowerCase()));
  return Object.entries(db.spec.parameters ?? {})
    .filter(([k, v]) => PARAMETER_NAME.test(k) && !/[\r\n]/.test(v) && !managed.has(k.toLowerCase()))
    .sort(([a], [b]) => compareStrings(a, b));
}

/**
 * postgresql.conf: tuned defaults, then spec.parameters, then the managed settings (later lines win in
 * postgresql.conf, so a parameter can never undo replication). Deterministic: the same spec renders the
 * same text, so the config hash only changes when the configuration does.
 */
export function postgresConf(db: DefaultedDatabase, paths: PostgresPaths = POD_PATHS): string {
  const managed = managedSettings(paths);
  const sync = synchronousStandbyNames(db.metadata.name ?? '', db.spec.synchronousReplicas ?? 0);
  // Only when asked for: an asynchronous Database renders (and hashes) as before.
  if (sync) managed.push(['synchronous_standby_names', sync]);
  const line = ([k, v]: [string, string]) => `${k} = ${pgQuote(v)}`;
  const reserved = [...RESERVED_PARAMETERS.postgres, ...managed.map(([k]) => k)];
  return [
    '# Rendered by opkit-database-operator from the Database spec: set spec.parameters instead of editing.',
    '',
    '# Defaults (spec.parameters may override them)',
    ...tunedSettings(db).map(line),
    '',
    '# spec.parameters',
    ...userSettings(db, reserved).map(line),
    '',
    '# Managed by the operator (replication, paths)',
    ...managed.map(line),
    '',
  ].join('\n');
}

/** A name in pg_hba.conf: double-quoted, so that it is taken literally (never a keyword like `all`). */
function hbaName(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Who may connect to what, besides the superuser: the application user to its database. */
export interface HbaUsers {
  appUser: string;
  appDatabase: string;
  adminUser?: string;
  replicationUser?: string;
}

/**
 * pg_hba.conf, first match wins:
 *   - the superuser only through the local socket by peer authentication (the scripts and probes, as
 *     the image's `postgres` OS user); over the network it is rejected whatever the password;
 *   - the replication user, over TLS (hostssl) by SCRAM, for replication and for pg_rewind (the postgres
 *     database) only;
 *   - the application user, by SCRAM, to its database only: over TLS (hostssl), or the local socket;
 *   - everything else rejected, TCP without TLS included. No `host all all all`.
 * `network`: where clients come from (`all`: pod CIDRs are not known here).
 */
export function pgHbaConf(users: HbaUsers, network = 'all'): string {
  const admin = users.adminUser ?? POSTGRES_ADMIN_USER;
  const repl = users.replicationUser ?? POSTGRES_REPLICATION_USER;
  const app = hbaName(users.appUser);
  const appDb = hbaName(users.appDatabase);
  const rows: [string, string, string, string, string][] = [
    ['# TYPE', 'DATABASE', 'USER', 'ADDRESS', 'METHOD'],
    ['local', 'all', hbaName(admin), '', 'peer'],
    ['host', 'all', hbaName(admin), network, 'reject'],
    ['hostssl', 'replication', hbaName(repl), network, 'scram-sha-256'],
    // pg_rewind of a replica that diverged reads the primary's files through the postgres database.
    ['hostssl', 'postgres', hbaName(repl), network, 'scram-sha-256'],
    ['local', appDb, app, '', 'scram-sha-256'],
    ['hostssl', appDb, app, network, 'scram-sha-256'],
    ['local', 'all', 'all', '', 'reject'],
    ['host', 'all', 'all', network, 'reject'],
  ];
  const width = (i: number) => Math.max(...rows.map((r) => (r[i] ?? '').length)) + 2;
  const widths = [width(0), width(1), width(2), width(3)];
  return [
    '# Rendered by opkit-database-operator.',
    ...rows.map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('')
        .trimEnd(),
    ),
    '',
  ].join('\n');
}

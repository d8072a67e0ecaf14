/**
 * PostgreSQL on the official image (postgres:<major>, Debian, uid/gid 999).
 *
 * One cluster per Database: `<name>-0` starts as the primary, the other pods are hot standbys fed by
 * streaming replication.
 *   - The primary is initialized by the image's entrypoint (initdb with POSTGRES_USER/POSTGRES_PASSWORD),
 *     which then runs primaryInitScript() from /docker-entrypoint-initdb.d: the application user and
 *     database, and the replication user.
 *   - A replica's init container runs replicaBootstrapScript(): when its data directory is empty it
 *     clones the primary with `pg_basebackup -R` as the replication user, so the main container then
 *     finds a data directory with standby.signal and primary_conninfo and starts as a standby.
 *   - postgresql.conf and pg_hba.conf come from the ConfigMap (`-c config_file=`): WAL for replication,
 *     replication connections allowed from the pod network with SCRAM passwords.
 * Every script reads its inputs from the environment (credentials via secretKeyRef), so the same text
 * runs in the pod and, with other hosts, ports and paths, in the replication test on real postgres.
 */
import { type DefaultedDatabase, RESERVED_PARAMETERS } from '../../../api/v1/database.ts';
import {
  CONFIG_DIR,
  childNames,
  INITDB_DIR,
  initialPrimaryPod,
  podHost,
  SECRET_KEYS,
  VOLUMES,
} from '../desired/names.ts';
import { MiB, parseQuantity } from '../desired/quantity.ts';
import {
  execProbe,
  fieldEnv,
  LIVENESS_TIMING,
  READINESS_TIMING,
  STARTUP_TIMING,
  secretEnv,
  valueEnv,
} from './common.ts';
import type { DataLayout, Engine, EnginePod, EnvVar, PodContext, Probes } from './types.ts';

export const POSTGRES_PORT = 5432;
export const POSTGRES_UID = 999;
export const POSTGRES_ADMIN_USER = 'postgres';
export const POSTGRES_REPLICATION_USER = 'replicator';
/** The image's socket directory (psql's compiled-in default on Debian). */
export const POSTGRES_SOCKET_DIR = '/var/run/postgresql';
/** Seconds the pod gets to stop; the preStop fast shutdown waits a little less. */
export const POSTGRES_TERMINATION_GRACE = 60;

export const POSTGRES_FILES = {
  conf: 'postgresql.conf',
  hba: 'pg_hba.conf',
  primaryInit: 'primary-init.sh',
  replicaBootstrap: 'replica-bootstrap.sh',
} as const;
/** Name of the primary init script inside /docker-entrypoint-initdb.d. */
export const POSTGRES_INITDB_FILE = '10-opkit-init.sh';

/** The major version of a spec.version ('16' -> 16, '16.4' -> 16). */
export function postgresMajor(version: string): number {
  const major = Number.parseInt(version, 10);
  if (!Number.isInteger(major) || major <= 0) throw new Error(`not a postgres version: ${version}`);
  return major;
}

/** The official image for a version: postgres:<major>, which follows the latest minor release. */
export function postgresImage(version: string): string {
  return `postgres:${postgresMajor(version)}`;
}

/**
 * The data layout of the official image. Up to 17 the image declares /var/lib/postgresql/data; the data
 * goes in a subdirectory of the mount (PGDATA=/var/lib/postgresql/data/pgdata). From 18 on the image
 * keeps data in /var/lib/postgresql/<major>/docker (pg_ctlcluster style, so `pg_upgrade --link` works
 * across majors on one volume) and expects the mount at /var/lib/postgresql; it refuses to start when
 * /var/lib/postgresql/data is a mount.
 */
export function postgresLayout(version: string): DataLayout {
  const major = postgresMajor(version);
  if (major >= 18)
    return { mountPath: '/var/lib/postgresql', dataDir: `/var/lib/postgresql/${major}/docker` };
  return { mountPath: '/var/lib/postgresql/data', dataDir: '/var/lib/postgresql/data/pgdata' };
}

/** Where the server listens and finds its files: the pod's values, or a test's. */
export interface PostgresPaths {
  port: number;
  /** Directory holding pg_hba.conf (the ConfigMap mount). */
  configDir: string;
  socketDir: string;
  listenAddresses: string;
}

export const POD_PATHS: PostgresPaths = {
  port: POSTGRES_PORT,
  configDir: CONFIG_DIR,
  socketDir: POSTGRES_SOCKET_DIR,
  listenAddresses: '*',
};

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
  ];
}

/** Defaults derived from the spec, which spec.parameters may override. */
export function tunedSettings(db: DefaultedDatabase): [string, string][] {
  const out: [string, string][] = [
    ['password_encryption', 'scram-sha-256'],
    // WAL kept for replicas that fall behind. No replication slots: a replica that is gone for good
    // must not fill the primary's volume. Fixed rather than derived from spec.storage, so that growing
    // the volume is not a configuration change that restarts the pods.
    ['wal_keep_size', '512MB'],
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
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * postgresql.conf: tuned defaults, then spec.parameters, then the managed settings (later lines win in
 * postgresql.conf, so a parameter can never undo replication). Deterministic: the same spec renders the
 * same text, so the config hash only changes when the configuration does.
 */
export function postgresConf(db: DefaultedDatabase, paths: PostgresPaths = POD_PATHS): string {
  const managed = managedSettings(paths);
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

/**
 * pg_hba.conf. The superuser connects locally by peer authentication (the probes and the init scripts,
 * running as the image's `postgres` OS user), everything else with a SCRAM password. Replication is
 * allowed only to the replication user, from the pod network (`all`: pod CIDRs are not known here).
 */
export function pgHbaConf(
  adminUser = POSTGRES_ADMIN_USER,
  replicationUser = POSTGRES_REPLICATION_USER,
  network = 'all',
): string {
  const rows: [string, string, string, string, string][] = [
    ['# TYPE', 'DATABASE', 'USER', 'ADDRESS', 'METHOD'],
    ['local', 'all', adminUser, '', 'peer'],
    ['local', 'all', 'all', '', 'scram-sha-256'],
    ['host', 'replication', replicationUser, network, 'scram-sha-256'],
    ['host', 'all', 'all', network, 'scram-sha-256'],
  ];
  const widths = [8, 13, Math.max(16, adminUser.length + 2, replicationUser.length + 2), 10];
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

/**
 * Runs on the primary when its data directory is initialized (from /docker-entrypoint-initdb.d, against
 * the entrypoint's socket-only temporary server): creates the application user, its database and the
 * replication user, with the passwords from the environment. psql reads the values with backquoted
 * `printf` (a shell builtin), so no password appears in a process's arguments, and quotes them with
 * format(%I, %L). Idempotent: creates what is missing, then (re)sets the passwords and ownership.
 * Env: APP_USER, APP_PASSWORD, APP_DATABASE, REPLICATION_USER, REPLICATION_PASSWORD; POSTGRES_USER;
 * PGHOST/PGPORT to reach another server (the test).
 */
export function primaryInitScript(): string {
  return `#!/bin/sh
# opkit-database-operator: primary initialization (application and replication users).
set -eu
: "\${APP_USER:?}" "\${APP_PASSWORD:?}" "\${APP_DATABASE:?}" "\${REPLICATION_USER:?}" "\${REPLICATION_PASSWORD:?}"

psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password --username "\${POSTGRES_USER:-postgres}" --dbname postgres <<'EOSQL'
\\set app_user \`printf '%s' "$APP_USER"\`
\\set app_password \`printf '%s' "$APP_PASSWORD"\`
\\set app_database \`printf '%s' "$APP_DATABASE"\`
\\set replication_user \`printf '%s' "$REPLICATION_USER"\`
\\set replication_password \`printf '%s' "$REPLICATION_PASSWORD"\`
SELECT format('CREATE ROLE %I', :'app_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_user') \\gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOREPLICATION PASSWORD %L', :'app_user', :'app_password') \\gexec
SELECT format('CREATE ROLE %I', :'replication_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'replication_user') \\gexec
SELECT format('ALTER ROLE %I WITH LOGIN REPLICATION NOSUPERUSER PASSWORD %L', :'replication_user', :'replication_password') \\gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'app_database', :'app_user')
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'app_database') \\gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', :'app_database', :'app_user') \\gexec
\\connect :"app_database"
SELECT format('ALTER SCHEMA public OWNER TO %I', :'app_user') \\gexec
EOSQL
`;
}

/**
 * The init container of every pod. On a replica whose data directory is empty it waits for the primary,
 * then clones it with `pg_basebackup -R` (WAL streamed during the copy, a fast checkpoint) as the
 * replication user into a sibling directory, and moves that into place only once complete, so a crash
 * mid-copy never leaves a data directory that looks initialized. -R writes standby.signal and
 * primary_conninfo (with application_name = the pod name, as pg_stat_replication shows it), so the main
 * container starts as a standby. On the primary, or when the data directory is already initialized, it
 * does nothing: safe on every restart.
 * Env: PGDATA, POD_NAME, PRIMARY_POD, PRIMARY_HOST, PRIMARY_PORT, REPLICATION_USER, REPLICATION_PASSWORD;
 * WAIT_SECONDS (how long to wait for the primary; default 600).
 */
export function replicaBootstrapScript(): string {
  return `#!/bin/sh
# opkit-database-operator: replica bootstrap (pg_basebackup from the primary).
set -eu
: "\${PGDATA:?}" "\${POD_NAME:?}" "\${PRIMARY_POD:?}" "\${PRIMARY_HOST:?}" "\${PRIMARY_PORT:?}"
: "\${REPLICATION_USER:?}" "\${REPLICATION_PASSWORD:?}"
wait_seconds=\${WAIT_SECONDS:-600}

log() { printf 'bootstrap: %s\\n' "$*" >&2; }

if [ "$POD_NAME" = "$PRIMARY_POD" ]; then
  log "$POD_NAME is the primary: nothing to do"
  exit 0
fi
if [ -s "$PGDATA/PG_VERSION" ]; then
  log "$PGDATA already holds a database: nothing to do"
  exit 0
fi

waited=0
until pg_isready -q -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U "$REPLICATION_USER" -d postgres; do
  if [ "$waited" -ge "$wait_seconds" ]; then
    log "the primary $PRIMARY_HOST:$PRIMARY_PORT is not ready after \${wait_seconds}s"
    exit 1
  fi
  sleep 2
  waited=$((waited + 2))
done

partial="$PGDATA.partial"
rm -rf "$partial"
log "cloning $PRIMARY_HOST:$PRIMARY_PORT into $PGDATA"
PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup --pgdata="$partial" --write-recovery-conf \\
  --wal-method=stream --checkpoint=fast --no-password \\
  --dbname="host=$PRIMARY_HOST port=$PRIMARY_PORT user=$REPLICATION_USER application_name=$POD_NAME"
chmod 0700 "$partial"
if [ -e "$PGDATA" ]; then
  rm -rf "$PGDATA"
fi
mv "$partial" "$PGDATA"
log "done: $POD_NAME will start as a standby of $PRIMARY_HOST"
`;
}

/** pg_isready over TCP: the server accepts connections. */
function isReady(paths: Pick<PostgresPaths, 'port'>, adminUser: string): string[] {
  return ['pg_isready', '-q', '-h', '127.0.0.1', '-p', String(paths.port), '-U', adminUser, '-d', 'postgres'];
}

/**
 * The probe commands.
 *   startup:   pg_isready over TCP. The entrypoint's temporary server during initialization listens on
 *              the socket only, so startup succeeds only once the real server runs.
 *   readiness: pg_isready over TCP, then a real query (`SELECT 1` through psql on the socket, peer
 *              authentication): the server answers queries, not just the port. No password is involved,
 *              so editing the Secret can never take every pod out of the Services.
 *   liveness:  pg_isready exit 0 (accepting) or 1 (rejecting: starting, recovering, stopping) both mean
 *              the server is alive; only no answer (2) restarts it. Long crash recoveries survive.
 */
export function postgresProbeCommands(
  paths: Pick<PostgresPaths, 'port' | 'socketDir'> = POD_PATHS,
  adminUser = POSTGRES_ADMIN_USER,
): { startup: string[]; readiness: string[]; liveness: string[] } {
  const ready = isReady(paths, adminUser).join(' ');
  const query =
    `psql -X -q -w -v ON_ERROR_STOP=1 -h ${paths.socketDir} -p ${paths.port} -U ${adminUser} ` +
    `-d postgres -tAc 'SELECT 1' >/dev/null`;
  return {
    startup: isReady(paths, adminUser),
    readiness: ['sh', '-c', `${ready} && ${query}`],
    liveness: ['sh', '-c', `${ready}; [ $? -le 1 ]`],
  };
}

export function postgresProbes(): Probes {
  const c = postgresProbeCommands();
  return {
    startup: execProbe(c.startup, STARTUP_TIMING),
    readiness: execProbe(c.readiness, READINESS_TIMING),
    liveness: execProbe(c.liveness, LIVENESS_TIMING),
  };
}

/**
 * preStop: a fast shutdown. Kubernetes sends SIGTERM, which postgres treats as a *smart* shutdown that
 * waits for every client to disconnect (pooled connections never do), ending in SIGKILL and crash
 * recovery. Fast shutdown rolls back open transactions and stops cleanly within the grace period.
 */
export function postgresPreStopCommand(): string[] {
  return ['sh', '-c', `pg_ctl stop -D "$PGDATA" -m fast -w -t ${POSTGRES_TERMINATION_GRACE - 10}`];
}

/** Credentials and identity, all from the Secret or the downward API. */
function credentialEnv(db: DefaultedDatabase): EnvVar[] {
  return [
    secretEnv('REPLICATION_USER', db, SECRET_KEYS.replicationUsername),
    secretEnv('REPLICATION_PASSWORD', db, SECRET_KEYS.replicationPassword),
    fieldEnv('POD_NAME', 'metadata.name'),
  ];
}

function postgresPod(db: DefaultedDatabase, ctx: PodContext): EnginePod {
  const layout = postgresLayout(db.spec.version);
  const names = childNames(db);
  const dataMount = { name: VOLUMES.data, mountPath: layout.mountPath };
  const configMount = { name: VOLUMES.config, mountPath: CONFIG_DIR, readOnly: true };
  const probes = postgresProbes();
  const bootstrap = {
    name: 'bootstrap',
    image: ctx.image,
    command: ['sh', `${CONFIG_DIR}/${POSTGRES_FILES.replicaBootstrap}`],
    env: [
      valueEnv('PGDATA', layout.dataDir),
      valueEnv('PRIMARY_POD', initialPrimaryPod(db)),
      valueEnv('PRIMARY_HOST', podHost(db, 0)),
      valueEnv('PRIMARY_PORT', POSTGRES_PORT),
      ...credentialEnv(db),
    ],
    volumeMounts: [dataMount, configMount],
    resources: ctx.resources,
    securityContext: ctx.securityContext,
  };
  const server = {
    name: 'postgres',
    image: ctx.image,
    args: ['postgres', '-c', `config_file=${CONFIG_DIR}/${POSTGRES_FILES.conf}`],
    ports: [{ name: 'postgres', containerPort: POSTGRES_PORT, protocol: 'TCP' }],
    env: [
      valueEnv('PGDATA', layout.dataDir),
      secretEnv('POSTGRES_USER', db, SECRET_KEYS.adminUsername),
      secretEnv('POSTGRES_PASSWORD', db, SECRET_KEYS.adminPassword),
      valueEnv('POSTGRES_INITDB_ARGS', '--data-checksums'),
      secretEnv('APP_USER', db, SECRET_KEYS.appUsername),
      secretEnv('APP_PASSWORD', db, SECRET_KEYS.appPassword),
      secretEnv('APP_DATABASE', db, SECRET_KEYS.database),
      ...credentialEnv(db),
    ],
    volumeMounts: [
      dataMount,
      configMount,
      { name: VOLUMES.initdb, mountPath: INITDB_DIR, readOnly: true },
      { name: 'shm', mountPath: '/dev/shm' },
    ],
    startupProbe: probes.startup,
    readinessProbe: probes.readiness,
    livenessProbe: probes.liveness,
    lifecycle: { preStop: { exec: { command: postgresPreStopCommand() } } },
    resources: ctx.resources,
    securityContext: ctx.securityContext,
  };
  return {
    initContainers: [bootstrap],
    containers: [server],
    volumes: [
      { name: VOLUMES.config, configMap: { name: names.configMap, defaultMode: 0o444 } },
      {
        name: VOLUMES.initdb,
        configMap: {
          name: names.configMap,
          items: [{ key: POSTGRES_FILES.primaryInit, path: POSTGRES_INITDB_FILE, mode: 0o555 }],
        },
      },
      // Parallel queries use POSIX shared memory; a container's default /dev/shm is 64 MB.
      { name: 'shm', emptyDir: { medium: 'Memory' } },
    ],
    terminationGracePeriodSeconds: POSTGRES_TERMINATION_GRACE,
  };
}

export const postgres: Engine = {
  name: 'postgres',
  port: POSTGRES_PORT,
  portName: 'postgres',
  uid: POSTGRES_UID,
  gid: POSTGRES_UID,
  adminUsername: POSTGRES_ADMIN_USER,
  replicationUsername: POSTGRES_REPLICATION_USER,
  image: postgresImage,
  layout: postgresLayout,
  configData: (db) => ({
    [POSTGRES_FILES.conf]: postgresConf(db),
    [POSTGRES_FILES.hba]: pgHbaConf(),
    [POSTGRES_FILES.primaryInit]: primaryInitScript(),
    [POSTGRES_FILES.replicaBootstrap]: replicaBootstrapScript(),
  }),
  pod: postgresPod,
};

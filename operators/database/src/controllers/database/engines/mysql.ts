/**
 * MySQL on the official image (mysql:<version>, Oracle Linux, uid/gid 999).
 *
 * One cluster per Database: `<name>-0` starts as the primary, the other pods replicate from it with GTID
 * auto-positioning.
 *   - Every pod runs mysqld through the image's entrypoint (startScript()): server_id derived from the
 *     pod ordinal, report_host its stable DNS name, data in a subdirectory of the volume.
 *   - my.cnf from the ConfigMap: gtid_mode=ON, enforce_gtid_consistency=ON, log_bin, binlog_format=ROW.
 *   - Each pod initializes its own data directory (the entrypoint, then initUsersScript() from
 *     /docker-entrypoint-initdb.d). Users are created with sql_log_bin=0 on every pod, so no pod has a
 *     transaction of its own in its GTID set: a replica receives everything the primary binary-logged,
 *     from its first transaction on, and there are no errant transactions. A replica persists
 *     super_read_only during initialization, so it is read-only from its first real start.
 *   - The `replication` sidecar (replicationAgentScript()) makes a replica run CHANGE REPLICATION SOURCE
 *     TO <name>-0.<name>-headless ... SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1; START REPLICA;
 *     keeps super_read_only on, and restarts a stopped connection. Every pass only changes what differs.
 * A replica added after the primary purged binary logs it needs (binlog_expire_logs_seconds, 30 days by
 * default) cannot catch up this way; seeding it with the clone plugin is the next step.
 * Every script reads its inputs from the environment (credentials via secretKeyRef): no secret value is
 * in the ConfigMap or the StatefulSet.
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
import { compareStrings } from '../order.ts';
import {
  execProbe,
  fieldEnv,
  LIVENESS_TIMING,
  READINESS_TIMING,
  STARTUP_TIMING,
  secretEnv,
  valueEnv,
} from './common.ts';
import type { DataLayout, Engine, EnginePod, PodContext, Probes } from './types.ts';

export const MYSQL_PORT = 3306;
export const MYSQL_UID = 999;
export const MYSQL_ADMIN_USER = 'root';
export const MYSQL_REPLICATION_USER = 'replicator';
/** server_id = base + ordinal: unique in the cluster and never 0 (0 refuses replication). */
export const MYSQL_SERVER_ID_BASE = 100;
export const MYSQL_TERMINATION_GRACE = 60;
/** The image's socket (its /etc/my.cnf). */
export const MYSQL_SOCKET = '/var/run/mysqld/mysqld.sock';

export const MYSQL_FILES = {
  cnf: 'my.cnf',
  start: 'start.sh',
  initUsers: 'init-users.sh',
  agent: 'replication-agent.sh',
} as const;
export const MYSQL_INITDB_FILE = '10-opkit-users.sh';
/** Where my.cnf is mounted: the image's /etc/my.cnf includes /etc/mysql/conf.d/ last, so it wins. */
export const MYSQL_CNF_PATH = '/etc/mysql/conf.d/opkit.cnf';

/** The official image: mysql:<version> (8.0, 8.4: the tag follows the latest patch release). */
export function mysqlImage(version: string): string {
  return `mysql:${version}`;
}

/** The volume at /var/lib/mysql (the image's VOLUME); data in /var/lib/mysql/data (--datadir). */
export function mysqlLayout(_version: string): DataLayout {
  return { mountPath: '/var/lib/mysql', dataDir: '/var/lib/mysql/data' };
}

const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const BARE_VALUE = /^[A-Za-z0-9_.,:/+*-]+$/;

/** An option-file value: bare when it is plain, else double-quoted with \ and " escaped. */
export function cnfValue(value: string): string {
  return BARE_VALUE.test(value) ? value : `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** mysql treats '-' and '_' in option names alike. */
const normalize = (name: string) => name.toLowerCase().replace(/-/g, '_');

/** The settings the operator manages: rendered last (later options win), so they always apply. */
export function mysqlManagedSettings(
  dataDir = mysqlLayout('').dataDir,
  port = MYSQL_PORT,
): [string, string][] {
  return [
    ['datadir', dataDir],
    ['port', String(port)],
    ['gtid_mode', 'ON'],
    ['enforce_gtid_consistency', 'ON'],
    ['log_bin', 'binlog'],
    ['binlog_format', 'ROW'],
    ['log_replica_updates', 'ON'],
    ['relay_log', 'relay-bin'],
  ];
}

/** Defaults derived from the spec, which spec.parameters may override. */
export function mysqlTunedSettings(db: DefaultedDatabase): [string, string][] {
  // Grants are by '%': no reverse DNS lookups on connect.
  const out: [string, string][] = [['skip_name_resolve', 'ON']];
  const memory = parseQuantity(db.spec.resources?.limits?.memory);
  if (memory !== undefined && memory > 0) {
    // Half the memory limit for the buffer pool; mysqld rounds it to its chunk size.
    out.push(['innodb_buffer_pool_size', `${Math.max(32, Math.floor(memory / 2 / MiB))}M`]);
  }
  return out;
}

export function mysqlUserSettings(db: DefaultedDatabase, reserved: readonly string[]): [string, string][] {
  const managed = new Set(reserved.map(normalize));
  return Object.entries(db.spec.parameters ?? {})
    .filter(([k, v]) => PARAMETER_NAME.test(k) && !/[\r\n]/.test(v) && !managed.has(normalize(k)))
    .sort(([a], [b]) => compareStrings(a, b));
}

/**
 * my.cnf ([mysqld]): tuned defaults, spec.parameters, then the managed settings. server_id and
 * report_host are per pod and come from startScript()'s command line.
 */
export function myCnf(db: DefaultedDatabase): string {
  const managed = mysqlManagedSettings(mysqlLayout(db.spec.version).dataDir);
  const reserved = [
    ...RESERVED_PARAMETERS.mysql,
    'skip_log_bin',
    'disable_log_bin',
    ...managed.map(([k]) => k),
  ];
  const line = ([k, v]: [string, string]) => `${k} = ${cnfValue(v)}`;
  return [
    '# Rendered by opkit-database-operator from the Database spec: set spec.parameters instead of editing.',
    '[mysqld]',
    '# Defaults (spec.parameters may override them)',
    ...mysqlTunedSettings(db).map(line),
    '# spec.parameters',
    ...mysqlUserSettings(db, reserved).map(line),
    '# Managed by the operator (replication, paths)',
    ...managed.map(line),
    '',
  ].join('\n');
}

/**
 * The database container's command: mysqld through the official entrypoint (which initializes an empty
 * data directory first), with this pod's identity. server_id = SERVER_ID_BASE + the pod ordinal.
 * Env: POD_NAME, HEADLESS_SERVICE, MYSQL_DATADIR, MYSQL_PORT; SERVER_ID_BASE (default 100).
 */
export function startScript(): string {
  return `#!/bin/sh
# opkit-database-operator: start mysqld with this pod's server_id and report_host.
set -eu
: "\${POD_NAME:?}" "\${HEADLESS_SERVICE:?}" "\${MYSQL_DATADIR:?}" "\${MYSQL_PORT:?}"
ordinal=\${POD_NAME##*-}
case "$ordinal" in
  '' | *[!0-9]*)
    printf 'start: cannot read the pod ordinal from POD_NAME=%s\\n' "$POD_NAME" >&2
    exit 1
    ;;
esac
server_id=$((\${SERVER_ID_BASE:-${MYSQL_SERVER_ID_BASE}} + ordinal))
exec docker-entrypoint.sh mysqld --datadir="$MYSQL_DATADIR" --server-id="$server_id" \\
  --report-host="$POD_NAME.$HEADLESS_SERVICE" --report-port="$MYSQL_PORT" "$@"
`;
}

/**
 * Shell functions shared by the scripts: SQL literals and identifiers, an option-file value, and a
 * private client option file holding the root password (so it is in no process's arguments).
 */
const SQL_HELPERS = `sql_str() { printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\\\/\\\\\\\\/g' -e "s/'/''/g")"; }
# shellcheck disable=SC2016 # the backquotes are SQL, not command substitution
sql_ident() { printf '\`%s\`' "$(printf '%s' "$1" | sed -e 's/\`/\`\`/g')"; }
cnf_str() { printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\\\/\\\\\\\\/g' -e 's/"/\\\\"/g')"; }
client_cnf=$(mktemp)
trap 'rm -f "$client_cnf"' EXIT
printf '[client]\\nuser=root\\npassword=%s\\n' "$(cnf_str "$MYSQL_ROOT_PASSWORD")" >"$client_cnf"`;

/**
 * Runs on every pod when its data directory is initialized (from /docker-entrypoint-initdb.d, against
 * the entrypoint's socket-only temporary server, after it set the root password). With sql_log_bin=0:
 * the application database and user and the replication user, created on each pod for itself and never
 * binary-logged. A replica also persists super_read_only. Idempotent: CREATE ... IF NOT EXISTS, then the
 * passwords are (re)set from the environment.
 * Env: MYSQL_ROOT_PASSWORD, APP_DATABASE, APP_USER, APP_PASSWORD, REPLICATION_USER,
 * REPLICATION_PASSWORD, POD_NAME, PRIMARY_POD; MYSQL_SOCKET (default the image's).
 */
export function initUsersScript(): string {
  return `#!/bin/sh
# opkit-database-operator: users of this instance (not binary-logged).
set -eu
: "\${MYSQL_ROOT_PASSWORD:?}" "\${APP_DATABASE:?}" "\${APP_USER:?}" "\${APP_PASSWORD:?}"
: "\${REPLICATION_USER:?}" "\${REPLICATION_PASSWORD:?}" "\${POD_NAME:?}" "\${PRIMARY_POD:?}"
socket=\${MYSQL_SOCKET:-${MYSQL_SOCKET}}
${SQL_HELPERS}
# A GRANT's database name is a pattern: escape its wildcards.
grant_db=$(sql_ident "$(printf '%s' "$APP_DATABASE" | sed -e 's/[_%]/\\\\&/g')")
app_user="$(sql_str "$APP_USER")@'%'"
repl_user="$(sql_str "$REPLICATION_USER")@'%'"
# printf, not echo: dash's echo would interpret the backslashes of an escaped password.
line() { printf '%s\\n' "$1"; }
{
  line "SET SESSION sql_log_bin = 0;"
  line "CREATE DATABASE IF NOT EXISTS $(sql_ident "$APP_DATABASE");"
  line "CREATE USER IF NOT EXISTS $app_user IDENTIFIED BY $(sql_str "$APP_PASSWORD");"
  line "ALTER USER $app_user IDENTIFIED BY $(sql_str "$APP_PASSWORD");"
  line "GRANT ALL PRIVILEGES ON $grant_db.* TO $app_user;"
  line "CREATE USER IF NOT EXISTS $repl_user IDENTIFIED BY $(sql_str "$REPLICATION_PASSWORD");"
  line "ALTER USER $repl_user IDENTIFIED BY $(sql_str "$REPLICATION_PASSWORD");"
  line "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO $repl_user;"
  if [ "$POD_NAME" != "$PRIMARY_POD" ]; then
    line "SET PERSIST super_read_only = ON;"
  fi
} | mysql --defaults-extra-file="$client_cnf" --protocol=socket --socket="$socket"
printf 'init-users: users of %s ready\\n' "$POD_NAME" >&2
`;
}

/**
 * The `replication` sidecar. Every AGENT_INTERVAL seconds (10) on a replica, once the local server
 * answers over TCP (so never the entrypoint's temporary server):
 *   1. super_read_only ON (SET PERSIST), unless it already is;
 *   2. when the replication source is not SOURCE_HOST:SOURCE_PORT as REPLICATION_USER with
 *      auto-positioning: STOP REPLICA (if configured); CHANGE REPLICATION SOURCE TO ... SOURCE_AUTO_POSITION
 *      = 1, GET_SOURCE_PUBLIC_KEY = 1 (caching_sha2_password without TLS); START REPLICA;
 *   3. when the connection thread is OFF: START REPLICA; an applier error is logged (it needs a human).
 * On the primary it does nothing. SQL goes through stdin and the password through a private option file.
 * Env: MYSQL_ROOT_PASSWORD, POD_NAME, PRIMARY_POD, SOURCE_HOST, SOURCE_PORT, REPLICATION_USER,
 * REPLICATION_PASSWORD, MYSQL_PORT; AGENT_INTERVAL; AGENT_ONCE=1 runs a single pass (tests).
 */
export function replicationAgentScript(): string {
  return `#!/bin/sh
# opkit-database-operator: replication agent (GTID auto-positioning from the primary).
set -u
: "\${MYSQL_ROOT_PASSWORD:?}" "\${POD_NAME:?}" "\${PRIMARY_POD:?}" "\${SOURCE_HOST:?}" "\${SOURCE_PORT:?}"
: "\${REPLICATION_USER:?}" "\${REPLICATION_PASSWORD:?}" "\${MYSQL_PORT:?}"
interval=\${AGENT_INTERVAL:-10}
${SQL_HELPERS}
sleeper=''
trap 'if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null; fi; exit 0' TERM INT

log() { printf 'replication-agent: %s\\n' "$*" >&2; }
sql() { printf '%s\\n' "$1" | mysql --defaults-extra-file="$client_cnf" --protocol=TCP -h 127.0.0.1 -P "$MYSQL_PORT" -N -B; }

replica_pass() {
  read_only=$(sql 'SELECT @@GLOBAL.super_read_only') || return 1
  if [ "$read_only" != 1 ]; then
    log "making $POD_NAME read-only (super_read_only)"
    sql 'SET PERSIST super_read_only = ON' || return 1
  fi
  current=$(sql "SELECT CONCAT_WS(' ', HOST, PORT, USER, AUTO_POSITION) FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = ''") || return 1
  if [ "$current" != "$SOURCE_HOST $SOURCE_PORT $REPLICATION_USER 1" ]; then
    log "replicating from $SOURCE_HOST:$SOURCE_PORT (was: \${current:-not configured})"
    stop=''
    if [ -n "$current" ]; then stop='STOP REPLICA;'; fi
    sql "$stop CHANGE REPLICATION SOURCE TO SOURCE_HOST = $(sql_str "$SOURCE_HOST"), SOURCE_PORT = $SOURCE_PORT, SOURCE_USER = $(sql_str "$REPLICATION_USER"), SOURCE_PASSWORD = $(sql_str "$REPLICATION_PASSWORD"), SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1, SOURCE_CONNECT_RETRY = 10; START REPLICA;" || return 1
    return 0
  fi
  state=$(sql "SELECT CONCAT_WS(' ', c.SERVICE_STATE, a.SERVICE_STATE) FROM performance_schema.replication_connection_status c JOIN performance_schema.replication_applier_status a USING (CHANNEL_NAME) WHERE c.CHANNEL_NAME = ''") || return 1
  case "$state" in
    'ON ON' | 'CONNECTING ON') ;;
    *)
      errors=$(sql "SELECT CONCAT_WS(': ', LAST_ERROR_NUMBER, LAST_ERROR_MESSAGE) FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '' AND LAST_ERROR_NUMBER <> 0 UNION ALL SELECT CONCAT_WS(': ', LAST_ERROR_NUMBER, LAST_ERROR_MESSAGE) FROM performance_schema.replication_applier_status_by_worker WHERE CHANNEL_NAME = '' AND LAST_ERROR_NUMBER <> 0") || errors=''
      log "replication is '$state'\${errors:+ (last error: $errors)}: starting it"
      sql 'START REPLICA' || return 1
      ;;
  esac
}

log "started on $POD_NAME (primary: $PRIMARY_POD, source: $SOURCE_HOST:$SOURCE_PORT)"
while :; do
  if [ "$POD_NAME" != "$PRIMARY_POD" ] && sql 'SELECT 1' >/dev/null 2>&1; then
    replica_pass || log "pass failed; retrying in \${interval}s"
  fi
  if [ -n "\${AGENT_ONCE:-}" ]; then exit 0; fi
  sleep "$interval" &
  sleeper=$!
  wait "$sleeper"
  sleeper=''
done
`;
}

/**
 * The probe commands.
 *   startup, readiness: a real query as root over TCP (`mysql ... -e 'SELECT 1'`): `mysqladmin ping`
 *              succeeds even on "access denied", and the entrypoint's temporary server during
 *              initialization listens on the socket only.
 *   liveness:  `mysqladmin ping` over TCP, on purpose: it answers while the server runs, whatever the
 *              credentials, so a changed Secret never gets a healthy server restarted.
 */
export function mysqlProbeCommands(port = MYSQL_PORT): {
  startup: string[];
  readiness: string[];
  liveness: string[];
} {
  const query = [
    'sh',
    '-c',
    `mysql --protocol=TCP -h 127.0.0.1 -P ${port} -uroot -p"$MYSQL_ROOT_PASSWORD" -e 'SELECT 1' >/dev/null 2>&1`,
  ];
  return {
    startup: query,
    readiness: query,
    liveness: ['mysqladmin', '--protocol=TCP', '-h', '127.0.0.1', '-P', String(port), 'ping'],
  };
}

export function mysqlProbes(): Probes {
  const c = mysqlProbeCommands();
  return {
    startup: execProbe(c.startup, STARTUP_TIMING),
    readiness: execProbe(c.readiness, READINESS_TIMING),
    liveness: execProbe(c.liveness, LIVENESS_TIMING),
  };
}

function mysqlPod(db: DefaultedDatabase, ctx: PodContext): EnginePod {
  const layout = mysqlLayout(db.spec.version);
  const names = childNames(db);
  const configMount = { name: VOLUMES.config, mountPath: CONFIG_DIR, readOnly: true };
  const probes = mysqlProbes();
  const identity = [
    fieldEnv('POD_NAME', 'metadata.name'),
    valueEnv('PRIMARY_POD', initialPrimaryPod(db)),
    valueEnv('MYSQL_PORT', MYSQL_PORT),
    secretEnv('MYSQL_ROOT_PASSWORD', db, SECRET_KEYS.adminPassword),
    secretEnv('REPLICATION_USER', db, SECRET_KEYS.replicationUsername),
    secretEnv('REPLICATION_PASSWORD', db, SECRET_KEYS.replicationPassword),
  ];
  const server = {
    name: 'mysql',
    image: ctx.image,
    command: ['sh', `${CONFIG_DIR}/${MYSQL_FILES.start}`],
    ports: [{ name: 'mysql', containerPort: MYSQL_PORT, protocol: 'TCP' }],
    env: [
      ...identity,
      valueEnv('HEADLESS_SERVICE', names.headless),
      valueEnv('MYSQL_DATADIR', layout.dataDir),
      // Time zone tables would be loaded with binary logging on, as transactions of each pod's own.
      valueEnv('MYSQL_INITDB_SKIP_TZINFO', '1'),
      secretEnv('APP_DATABASE', db, SECRET_KEYS.database),
      secretEnv('APP_USER', db, SECRET_KEYS.appUsername),
      secretEnv('APP_PASSWORD', db, SECRET_KEYS.appPassword),
    ],
    volumeMounts: [
      { name: VOLUMES.data, mountPath: layout.mountPath },
      configMount,
      { name: VOLUMES.config, mountPath: MYSQL_CNF_PATH, subPath: MYSQL_FILES.cnf, readOnly: true },
      { name: VOLUMES.initdb, mountPath: INITDB_DIR, readOnly: true },
    ],
    startupProbe: probes.startup,
    readinessProbe: probes.readiness,
    livenessProbe: probes.liveness,
    resources: ctx.resources,
    securityContext: ctx.securityContext,
  };
  const agent = {
    name: 'replication',
    image: ctx.image,
    command: ['sh', `${CONFIG_DIR}/${MYSQL_FILES.agent}`],
    env: [...identity, valueEnv('SOURCE_HOST', podHost(db, 0)), valueEnv('SOURCE_PORT', MYSQL_PORT)],
    volumeMounts: [configMount],
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
    securityContext: ctx.securityContext,
  };
  return {
    initContainers: [],
    containers: [server, agent],
    volumes: [
      { name: VOLUMES.config, configMap: { name: names.configMap, defaultMode: 0o444 } },
      {
        name: VOLUMES.initdb,
        configMap: {
          name: names.configMap,
          items: [{ key: MYSQL_FILES.initUsers, path: MYSQL_INITDB_FILE, mode: 0o555 }],
        },
      },
    ],
    terminationGracePeriodSeconds: MYSQL_TERMINATION_GRACE,
  };
}

export const mysql: Engine = {
  name: 'mysql',
  port: MYSQL_PORT,
  portName: 'mysql',
  uid: MYSQL_UID,
  gid: MYSQL_UID,
  adminUsername: MYSQL_ADMIN_USER,
  replicationUsername: MYSQL_REPLICATION_USER,
  image: mysqlImage,
  layout: mysqlLayout,
  configData: (db) => ({
    [MYSQL_FILES.cnf]: myCnf(db),
    [MYSQL_FILES.start]: startScript(),
    [MYSQL_FILES.initUsers]: initUsersScript(),
    [MYSQL_FILES.agent]: replicationAgentScript(),
  }),
  pod: mysqlPod,
};

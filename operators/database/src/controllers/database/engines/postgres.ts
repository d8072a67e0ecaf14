/**
 * PostgreSQL on the official image (postgres:<major>, Debian, uid/gid 999), bootstrapped by the
 * operator's own scripts, not by the image's entrypoint (so any image holding the server binaries works).
 *
 * One cluster per Database, one primary: the pod the operator designates (status.targetPrimary, first
 * `<name>-0`); the other pods are hot standbys fed by streaming replication through a physical slot each.
 *   - instance.sh (postgres/instance.ts) prepares the data directory in the init container and again
 *     before the server starts: initdb for a brand-new Database only, a clone of the current primary for
 *     an empty data directory, pg_rewind or a fresh clone for a replica that cannot follow, a refusal
 *     for another cluster's data or an empty primary of an initialized cluster. It reports the outcome
 *     and the system identifier in the container's termination message, which the operator records.
 *   - health.sh (postgres/health.ts) is the readiness and liveness probes: a replica is ready while it
 *     streams from the primary within a lag bound.
 *   - postgresql.conf and pg_hba.conf come from the ConfigMap (`-c config_file=`).
 * Every script reads its inputs from the environment (credentials via secretKeyRef, the operator's record
 * via configMapKeyRef), so the same text runs in the pod and, with other hosts, ports and paths, in the
 * replication test on real postgres.
 */
import { type DefaultedDatabase, RESERVED_PARAMETERS } from '../../../api/v1/database.ts';
import { primaryLeaseSeconds } from '../desired/defaults.ts';
import {
  CLUSTER_KEYS,
  CONFIG_DIR,
  childNames,
  DERIVED_SECRET_KEYS,
  initialPrimaryPod,
  podName,
  SECRET_KEYS,
  VOLUMES,
} from '../desired/names.ts';
import { MiB, parseQuantity } from '../desired/quantity.ts';
import { SERVER_CONTAINER, SIDECAR_CONTAINER } from '../failover/decide.ts';
import {
  configEnv,
  execProbe,
  fieldEnv,
  LIVENESS_TIMING,
  READINESS_TIMING,
  STARTUP_TIMING,
  secretEnv,
  valueEnv,
} from './common.ts';
import { CREDENTIAL_FILES, credentialsScript } from './postgres/credentials.ts';
import { FENCED_PRIMARY, synchronousStandbyNames } from './postgres/failover.ts';
import { healthScript, maxLagBytes } from './postgres/health.ts';
import { observePostgres } from './postgres/identity.ts';
import { postgresImageProblem } from './postgres/image.ts';
import { instanceScript } from './postgres/instance.ts';
import { LEASE_TOKEN_DIR, leaseScript } from './postgres/lease.ts';
import { POSTGRES_TLS_VOLUME } from './postgres/primary-tls.ts';
import { roleVerifier } from './postgres/scram.ts';
import type {
  ClusterRecord,
  DataLayout,
  Engine,
  EnginePod,
  EnvVar,
  PodContext,
  Probes,
  VolumeMount,
} from './types.ts';

export * from './postgres/credentials.ts';
export * from './postgres/designation.ts';
export * from './postgres/failover.ts';
export * from './postgres/health.ts';
export * from './postgres/identity.ts';
export * from './postgres/image.ts';
export * from './postgres/instance.ts';
export * from './postgres/lease.ts';
export * from './postgres/primary-tls.ts';
export * from './postgres/replication.ts';
export * from './postgres/report.ts';
export * from './postgres/scram.ts';

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
  instance: 'instance.sh',
  health: 'health.sh',
  credentials: 'credentials.sh',
  lease: 'lease.sh',
} as const;
/** The projected volume of the instance ServiceAccount's token (the credentials sidecar only). */
export const POSTGRES_LEASE_TOKEN_VOLUME = 'lease-token';
/** Lifetime of the projected token (the kubelet rotates it at 80%). */
export const LEASE_TOKEN_SECONDS = 3600;
/** Where the credentials sidecar mounts the Secret (its verifiers and the replication password). */
export const POSTGRES_CREDENTIALS_DIR = '/etc/opkit-credentials';
/** The in-memory volume of the replication passfile (never on the data volume). */
export const POSTGRES_RUN_DIR = '/run/opkit';
export const POSTGRES_PASSFILE = `${POSTGRES_RUN_DIR}/pgpass`;
/**
 * Where the server certificate Secret (`<name>-server`: tls.crt, tls.key, ca.crt) is mounted. The
 * kubelet makes the files root:<fsGroup 999> 0640 (defaultMode 0640, the pod's fsGroup), which
 * PostgreSQL accepts for a key owned by root (0600 if owned by the server's uid); it updates them in
 * place when the certificate is renewed, and the credentials sidecar reloads the server.
 */
export const POSTGRES_TLS_DIR = '/etc/opkit-tls';
export const POSTGRES_TLS_FILES = { cert: 'tls.crt', key: 'tls.key', ca: 'ca.crt' } as const;

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
  /** Directory holding tls.crt, tls.key and ca.crt (the server certificate Secret's mount). */
  tlsDir: string;
}

export const POD_PATHS: PostgresPaths = {
  port: POSTGRES_PORT,
  configDir: CONFIG_DIR,
  socketDir: POSTGRES_SOCKET_DIR,
  listenAddresses: '*',
  tlsDir: POSTGRES_TLS_DIR,
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
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
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

/**
 * The probe commands.
 *   startup:   health.sh startup: the server accepts connections over TCP (a standby once it is
 *              consistent), or a replica is stuck starting up while its primary is up (health.ts).
 *   readiness: health.sh ready: the primary out of recovery and answering; a replica streaming from
 *              the current primary within the lag bound (health.ts).
 *   liveness:  health.sh live: the server answers (starting and recovering count), and a replica does
 *              not fail to stream, nor stay stuck on one position, while its primary is up (then the
 *              restart repairs it: divergence.ts).
 */
export function postgresProbeCommands(paths: Pick<PostgresPaths, 'configDir'> = POD_PATHS): {
  startup: string[];
  readiness: string[];
  liveness: string[];
} {
  const health = `${paths.configDir}/${POSTGRES_FILES.health}`;
  return {
    startup: ['sh', health, 'startup'],
    readiness: ['sh', health, 'ready'],
    liveness: ['sh', health, 'live'],
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

/** Identity and the cluster record: the pod's name, and what the operator decided (the ConfigMap's cluster keys). */
function instanceEnv(db: DefaultedDatabase, layout: DataLayout): EnvVar[] {
  return [
    valueEnv('PGDATA', layout.dataDir),
    valueEnv('PG_MAJOR', postgresMajor(db.spec.version)),
    valueEnv('PGHOST', POSTGRES_SOCKET_DIR),
    valueEnv('PGPORT', POSTGRES_PORT),
    valueEnv('CONFIG_FILE', `${CONFIG_DIR}/${POSTGRES_FILES.conf}`),
    valueEnv('PASSFILE', POSTGRES_PASSFILE),
    // Replication verifies the primary's certificate and name against the Database's CA.
    valueEnv('TLS_CA_FILE', `${POSTGRES_TLS_DIR}/${POSTGRES_TLS_FILES.ca}`),
    fieldEnv('POD_NAME', 'metadata.name'),
    // Read when each container starts: a new record reaches the pods without rolling them.
    configEnv('PRIMARY_POD', db, CLUSTER_KEYS.primary),
    valueEnv('PRIMARY_HOST', `$(PRIMARY_POD).${childNames(db).headless}`),
    valueEnv('PRIMARY_PORT', POSTGRES_PORT),
    configEnv('CLUSTER_SYSTEM_ID', db, CLUSTER_KEYS.systemIdentifier),
    secretEnv('POSTGRES_USER', db, SECRET_KEYS.adminUsername),
    secretEnv('REPLICATION_USER', db, SECRET_KEYS.replicationUsername),
    // A file of the Secret's volume, not env: the node writes a container's env to disk (its spec).
    valueEnv('REPLICATION_PASSWORD_FILE', `${POSTGRES_CREDENTIALS_DIR}/${SECRET_KEYS.replicationPassword}`),
    // For initdb (a brand-new Database only).
    secretEnv('APP_USER', db, SECRET_KEYS.appUsername),
    secretEnv('APP_PASSWORD_SCRAM', db, DERIVED_SECRET_KEYS.appPasswordScram),
    secretEnv('REPLICATION_PASSWORD_SCRAM', db, DERIVED_SECRET_KEYS.replicationPasswordScram),
    secretEnv('APP_DATABASE', db, SECRET_KEYS.database),
  ];
}

/**
 * The volume mounts of an instance's containers, in one order: the data volume (the bootstrap and the
 * server), the ConfigMap, the passfile's directory, the server certificate, the socket directory,
 * /dev/shm (the server) and the credentials files.
 */
function instanceMounts(layout: DataLayout, opts: { data?: boolean; shm?: boolean } = {}): VolumeMount[] {
  return [
    ...(opts.data ? [{ name: VOLUMES.data, mountPath: layout.mountPath }] : []),
    { name: VOLUMES.config, mountPath: CONFIG_DIR, readOnly: true },
    { name: 'run', mountPath: POSTGRES_RUN_DIR },
    { name: POSTGRES_TLS_VOLUME, mountPath: POSTGRES_TLS_DIR, readOnly: true },
    { name: 'socket', mountPath: POSTGRES_SOCKET_DIR },
    ...(opts.shm ? [{ name: 'shm', mountPath: '/dev/shm' }] : []),
    { name: 'credentials', mountPath: POSTGRES_CREDENTIALS_DIR, readOnly: true },
  ];
}

function postgresPod(db: DefaultedDatabase, ctx: PodContext): EnginePod {
  const layout = postgresLayout(db.spec.version);
  const names = childNames(db);
  const probes = postgresProbes();
  const instance = `${CONFIG_DIR}/${POSTGRES_FILES.instance}`;
  const env = instanceEnv(db, layout);
  const bootstrap = {
    name: 'bootstrap',
    image: ctx.image,
    command: ['sh', instance, 'bootstrap'],
    env,
    volumeMounts: instanceMounts(layout, { data: true }),
    resources: ctx.resources,
    securityContext: ctx.securityContext,
  };
  const server = {
    name: SERVER_CONTAINER,
    image: ctx.image,
    command: ['sh', instance, 'start'],
    ports: [{ name: 'postgres', containerPort: POSTGRES_PORT, protocol: 'TCP' }],
    env: [...env, valueEnv('MAX_LAG_BYTES', maxLagBytes(db))],
    volumeMounts: instanceMounts(layout, { data: true, shm: true }),
    startupProbe: probes.startup,
    readinessProbe: probes.readiness,
    livenessProbe: probes.liveness,
    lifecycle: { preStop: { exec: { command: postgresPreStopCommand() } } },
    resources: ctx.resources,
    securityContext: ctx.securityContext,
  };
  // Applies password changes from the Secret (SCRAM verifiers) and keeps the passfile current; renews
  // the primary lease beside it (lease.sh, in the background), or fences the instance.
  const credentials = {
    name: SIDECAR_CONTAINER,
    image: ctx.image,
    command: [
      'sh',
      '-c',
      `sh ${CONFIG_DIR}/${POSTGRES_FILES.lease} & exec sh ${CONFIG_DIR}/${POSTGRES_FILES.credentials}`,
    ],
    env: [
      // The primary lease (lease.sh): the pod, the Lease, its duration, the data directory to stop.
      fieldEnv('POD_NAME', 'metadata.name'),
      fieldEnv('POD_NAMESPACE', 'metadata.namespace'),
      valueEnv('LEASE_NAME', names.lease),
      valueEnv('LEASE_SECONDS', primaryLeaseSeconds(db)),
      valueEnv('LEASE_TOKEN_DIR', LEASE_TOKEN_DIR),
      valueEnv('PGDATA', layout.dataDir),
      valueEnv('PGHOST', POSTGRES_SOCKET_DIR),
      valueEnv('PGPORT', POSTGRES_PORT),
      valueEnv('PASSFILE', POSTGRES_PASSFILE),
      valueEnv('CREDENTIALS_DIR', POSTGRES_CREDENTIALS_DIR),
      // The ConfigMap volume (not env): the kubelet updates it in place when spec.replicas changes.
      valueEnv('INSTANCES_FILE', `${CONFIG_DIR}/${CLUSTER_KEYS.instances}`),
      // A renewed server certificate (updated in place by the kubelet) is loaded with a reload.
      valueEnv('TLS_DIR', POSTGRES_TLS_DIR),
      secretEnv('POSTGRES_USER', db, SECRET_KEYS.adminUsername),
    ],
    volumeMounts: [
      // Read-only: pg_ctl stop (the fence) reads postmaster.pid.
      { name: VOLUMES.data, mountPath: layout.mountPath, readOnly: true },
      ...instanceMounts(layout),
      { name: POSTGRES_LEASE_TOKEN_VOLUME, mountPath: LEASE_TOKEN_DIR, readOnly: true },
    ],
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
    securityContext: ctx.securityContext,
  };
  return {
    initContainers: [bootstrap],
    containers: [server, credentials],
    volumes: [
      { name: VOLUMES.config, configMap: { name: names.configMap, defaultMode: 0o444 } },
      // Only the keys the sidecar needs; updated in place by the kubelet when the Secret changes.
      {
        name: 'credentials',
        secret: {
          secretName: names.secret,
          defaultMode: 0o440,
          items: CREDENTIAL_FILES.map((key) => ({ key, path: key })),
        },
      },
      // The server certificate: root:999 0640 with the pod's fsGroup (what PostgreSQL requires of a
      // root-owned key), updated in place by the kubelet when it is renewed.
      { name: POSTGRES_TLS_VOLUME, secret: { secretName: names.serverSecret, defaultMode: 0o640 } },
      // The replication passfile: in memory, written from the env at every start.
      { name: 'run', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
      // The socket directory (the image's is only writable by its postgres user, not by any uid).
      { name: 'socket', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
      // Parallel queries use POSIX shared memory; a container's default /dev/shm is 64 MB.
      { name: 'shm', emptyDir: { medium: 'Memory' } },
      // The instance ServiceAccount's token and the cluster's CA, for the primary lease (the sidecar
      // only: the pod does not automount a token, the server's container has none).
      {
        name: POSTGRES_LEASE_TOKEN_VOLUME,
        projected: {
          defaultMode: 0o440,
          sources: [
            { serviceAccountToken: { path: 'token', expirationSeconds: LEASE_TOKEN_SECONDS } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          ],
        },
      },
    ],
    serviceAccountName: names.instanceAccount,
    terminationGracePeriodSeconds: POSTGRES_TERMINATION_GRACE,
    // Not postgres as PID 1: a process orphaned in the container (a probe's or an exec's psql whose
    // shell was killed on timeout) is re-parented to PID 1, and a postmaster that reaps a child killed
    // by a signal takes it for a crashed backend and restarts every backend (PostgreSQL <= 16; seen on
    // real pods under load as "server process ... terminated by signal 13", then spurious failovers).
    // With a shared process namespace the pod's pause process is PID 1 and reaps them.
    shareProcessNamespace: true,
  };
}

/** The SCRAM verifiers of the application and replication users (what credentials.sh applies). */
export function postgresVerifiers(
  db: DefaultedDatabase,
  plain: Readonly<Record<string, string>>,
): Record<string, string> {
  const id = db.metadata.uid ?? `${db.metadata.namespace ?? ''}/${db.metadata.name ?? ''}`;
  const out: Record<string, string> = {};
  const pairs = [
    [DERIVED_SECRET_KEYS.appPasswordScram, SECRET_KEYS.appUsername, SECRET_KEYS.appPassword],
    [
      DERIVED_SECRET_KEYS.replicationPasswordScram,
      SECRET_KEYS.replicationUsername,
      SECRET_KEYS.replicationPassword,
    ],
  ] as const;
  for (const [key, user, password] of pairs) {
    const u = plain[user];
    const p = plain[password];
    if (u && p) out[key] = roleVerifier(p, id, u);
  }
  return out;
}

/** The cluster record the pods read: the designated primary and the system identifier once known. */
export function postgresClusterData(db: DefaultedDatabase, cluster?: ClusterRecord): Record<string, string> {
  return {
    [CLUSTER_KEYS.primary]: cluster?.fenced ? FENCED_PRIMARY : (cluster?.primary ?? initialPrimaryPod(db)),
    [CLUSTER_KEYS.epoch]: String(cluster?.epoch ?? 0),
    [CLUSTER_KEYS.systemIdentifier]: cluster?.systemIdentifier ?? '',
    [CLUSTER_KEYS.primaryWithoutTls]: cluster?.fenced ? '' : (cluster?.primaryWithoutTls ?? ''),
    [CLUSTER_KEYS.instances]: Array.from({ length: db.spec.replicas }, (_, i) => `${podName(db, i)}\n`).join(
      '',
    ),
  };
}

export const postgres: Engine = {
  name: 'postgres',
  operatorRollout: true,
  port: POSTGRES_PORT,
  portName: 'postgres',
  uid: POSTGRES_UID,
  gid: POSTGRES_UID,
  adminUsername: POSTGRES_ADMIN_USER,
  replicationUsername: POSTGRES_REPLICATION_USER,
  image: postgresImage,
  layout: postgresLayout,
  configData: (db, cluster) => ({
    [POSTGRES_FILES.conf]: postgresConf(db),
    [POSTGRES_FILES.hba]: pgHbaConf({ appUser: db.spec.username, appDatabase: db.spec.databaseName }),
    [POSTGRES_FILES.instance]: instanceScript(),
    [POSTGRES_FILES.health]: healthScript(),
    [POSTGRES_FILES.credentials]: credentialsScript(),
    [POSTGRES_FILES.lease]: leaseScript(),
    ...postgresClusterData(db, cluster),
  }),
  pod: postgresPod,
  observe: observePostgres,
  failover: true,
  imageProblem: (db) => postgresImageProblem(db.spec.image, db.spec.version),
  derivedSecretData: postgresVerifiers,
  tls: true,
};

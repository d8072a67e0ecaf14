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
import type { DefaultedDatabase } from '../../../api/v1/database.ts';
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
import { pgHbaConf, postgresConf } from './postgres/config.ts';
import { CREDENTIAL_FILES, credentialsScript } from './postgres/credentials.ts';
import { FENCED_PRIMARY } from './postgres/failover.ts';
import { healthScript, maxLagBytes } from './postgres/health.ts';
import { observePostgres } from './postgres/identity.ts';
import { postgresImageProblem } from './postgres/image.ts';
import { instanceScript } from './postgres/instance.ts';
import {
  LEASE_TOKEN_SECONDS,
  POD_PATHS,
  POSTGRES_ADMIN_USER,
  POSTGRES_CREDENTIALS_DIR,
  POSTGRES_FILES,
  POSTGRES_LEASE_TOKEN_VOLUME,
  POSTGRES_PASSFILE,
  POSTGRES_PORT,
  POSTGRES_REPLICATION_USER,
  POSTGRES_RUN_DIR,
  POSTGRES_SOCKET_DIR,
  POSTGRES_TERMINATION_GRACE,
  POSTGRES_TLS_DIR,
  POSTGRES_TLS_FILES,
  POSTGRES_UID,
  type PostgresPaths,
  postgresImage,
  postgresLayout,
  postgresMajor,
} from './postgres/layout.ts';
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

export * from './postgres/config.ts';
export * from './postgres/credentials.ts';
export * from './postgres/designation.ts';
export * from './postgres/failover.ts';
export * from './postgres/health.ts';
export * from './postgres/identity.ts';
export * from './postgres/image.ts';
export * from './postgres/instance.ts';
export * from './postgres/layout.ts';
export * from './postgres/lease.ts';
export * from './postgres/primary-tls.ts';
export * from './postgres/replication.ts';
export * from './postgres/report.ts';
export * from './postgres/scram.ts';

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
  stored: Readonly<Record<string, string>> = {},
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
    if (u && p) out[key] = roleVerifier(p, id, u, stored[key]);
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

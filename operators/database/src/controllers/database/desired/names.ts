/**
 * Names of everything a Database owns, and the keys of its credentials Secret. A leaf module: the
 * engines and the builders both use it.
 */
import type { KubeObject } from '@opkit/runtime';

/** The names of a Database's children, all in the Database's namespace. */
export interface ChildNames {
  /** StatefulSet `<name>`; its pods are `<name>-0` (the first primary), `<name>-1`, ... */
  statefulSet: string;
  /** Headless Service `<name>-headless`: stable pod DNS names `<name>-N.<name>-headless`. */
  headless: string;
  /** Read-write Service `<name>`: selects the primary. */
  readWrite: string;
  /** Read-only Service `<name>-ro`: selects the replicas (only with replicas > 1). */
  readOnly: string;
  /** Credentials Secret `<name>-credentials`. */
  secret: string;
  /** postgres: the Database's CA, Secret `<name>-ca` (ca.crt, ca.key). */
  caSecret: string;
  /** postgres: the server certificate, Secret `<name>-server` (kubernetes.io/tls: tls.crt, tls.key, ca.crt). */
  serverSecret: string;
  /** postgres: how an application connects, Secret `<name>-app` (derived from the credentials and the CA). */
  appSecret: string;
  /** Engine configuration and scripts `<name>-config`. */
  configMap: string;
  /** PodDisruptionBudget `<name>` (only with replicas > 1). */
  podDisruptionBudget: string;
  /** postgres: the primary Lease `<name>-primary` (coordination.k8s.io), renewed by the primary's sidecar. */
  lease: string;
  /** postgres: the instances' ServiceAccount, Role and RoleBinding `<name>-instance` (the lease only). */
  instanceAccount: string;
}

export function childNames(db: KubeObject): ChildNames {
  const name = db.metadata.name ?? '';
  return {
    statefulSet: name,
    headless: `${name}-headless`,
    readWrite: name,
    readOnly: `${name}-ro`,
    secret: `${name}-credentials`,
    caSecret: `${name}-ca`,
    serverSecret: `${name}-server`,
    appSecret: `${name}-app`,
    configMap: `${name}-config`,
    podDisruptionBudget: name,
    lease: `${name}-primary`,
    instanceAccount: `${name}-instance`,
  };
}

/** Name of the pod with this ordinal. */
export function podName(db: KubeObject, ordinal: number): string {
  return `${db.metadata.name ?? ''}-${ordinal}`;
}

/** The pod that starts as the primary: ordinal 0. */
export function initialPrimaryPod(db: KubeObject): string {
  return podName(db, 0);
}

/** A pod's stable DNS name within the namespace: `<name>-N.<name>-headless`. */
export function podHost(db: KubeObject, ordinal: number): string {
  return `${podName(db, ordinal)}.${childNames(db).headless}`;
}

/** Keys of the credentials Secret. Usernames and the database name are there too, so pods read them all from one place. */
export const SECRET_KEYS = {
  adminUsername: 'admin-username',
  adminPassword: 'admin-password',
  appUsername: 'app-username',
  appPassword: 'app-password',
  replicationUsername: 'replication-username',
  replicationPassword: 'replication-password',
  database: 'database',
  host: 'host',
  port: 'port',
} as const;

export type SecretKey = (typeof SECRET_KEYS)[keyof typeof SECRET_KEYS];

/**
 * Keys the operator derives from the passwords (postgres: the SCRAM verifiers the pods apply with ALTER
 * ROLE). Unlike the others, they are rewritten whenever the password they derive from changes.
 */
export const DERIVED_SECRET_KEYS = {
  appPasswordScram: 'app-password-scram',
  replicationPasswordScram: 'replication-password-scram',
} as const;

export type DerivedSecretKey = (typeof DERIVED_SECRET_KEYS)[keyof typeof DERIVED_SECRET_KEYS];

/** The password keys: generated randomly, never regenerated. */
export const PASSWORD_KEYS = [
  SECRET_KEYS.adminPassword,
  SECRET_KEYS.appPassword,
  SECRET_KEYS.replicationPassword,
] as const;

/**
 * Keys of the ConfigMap that carry the operator's record of the cluster (not configuration: they are
 * left out of the config hash, and the pods read them as env when a container starts).
 */
export const CLUSTER_KEYS = {
  primary: 'cluster-primary',
  /** Grows with every change of the designated primary (status.primaryEpoch): see postgres/designation.ts. */
  epoch: 'cluster-primary-epoch',
  systemIdentifier: 'cluster-system-identifier',
  /** The pods spec.replicas asks for, one per line: slots of other pods are dropped on the primary. */
  instances: 'cluster-instances',
  /**
   * The designated primary's pod name when the operator saw that pod run without TLS (its template from
   * before TLS: no server certificate volume), else empty: only replicas of that pod may connect without
   * verifying TLS (engines/postgres/primary-tls.ts).
   */
  primaryWithoutTls: 'cluster-primary-without-tls',
} as const;

/** Volume names in the pod template. */
export const VOLUMES = {
  /** The volumeClaimTemplate: one PVC per pod, `data-<name>-N`. */
  data: 'data',
  /** The ConfigMap, all keys, at CONFIG_DIR. */
  config: 'config',
  /** The ConfigMap's init script only, at /docker-entrypoint-initdb.d. */
  initdb: 'initdb',
} as const;

/** Where the ConfigMap is mounted in every container. */
export const CONFIG_DIR = '/etc/opkit';
/** Where the official images look for first-start scripts. */
export const INITDB_DIR = '/docker-entrypoint-initdb.d';

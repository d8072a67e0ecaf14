/**
 * What an engine module provides: everything engine-specific about the pods (image, port, data layout,
 * environment, probes, configuration files, scripts, replication wiring). The builders in desired/ put
 * these pieces into the StatefulSet and ConfigMap; they know nothing about either engine.
 */
import type { Pod, StatefulSet } from '@opkit/runtime';
import type { DefaultedDatabase, EngineName } from '../../../api/v1/database.ts';

type PodSpec = NonNullable<NonNullable<NonNullable<StatefulSet['spec']>['template']>['spec']>;
export type Container = PodSpec['containers'][number];
export type Volume = NonNullable<PodSpec['volumes']>[number];
export type VolumeMount = NonNullable<Container['volumeMounts']>[number];
export type EnvVar = NonNullable<Container['env']>[number];
export type Probe = NonNullable<Container['readinessProbe']>;
export type ResourceRequirements = NonNullable<Container['resources']>;
export type SecurityContext = NonNullable<Container['securityContext']>;

/** Where the data volume is mounted and where, inside it, the engine keeps its files. */
export interface DataLayout {
  /** Mount path of the `data` volume. */
  mountPath: string;
  /**
   * The engine's data directory: a SUBDIRECTORY of the mount, because a fresh volume may hold
   * lost+found, and initdb / mysqld --initialize refuse a non-empty directory.
   */
  dataDir: string;
}

export interface Probes {
  startup: Probe;
  readiness: Probe;
  liveness: Probe;
}

/** What the builders hand the engine for its containers. */
export interface PodContext {
  /** The image to run (spec.image, or the engine's official image for spec.version). */
  image: string;
  /** Resources of the database container (spec.resources or the defaults). */
  resources: ResourceRequirements;
  /** The restricted container security context every container gets. */
  securityContext: SecurityContext;
}

/** The engine's part of the pod template. */
export interface EnginePod {
  initContainers: Container[];
  /** The database container first, then any sidecars. */
  containers: Container[];
  /** Volumes besides `data` (the volumeClaimTemplate). */
  volumes: Volume[];
  terminationGracePeriodSeconds: number;
  /**
   * One process namespace for the pod, so the sandbox's pause process is PID 1 and reaps orphans, not
   * the server (postgres: a postmaster that is PID 1 takes an orphaned probe process it reaps for a
   * crashed backend and restarts every connection).
   */
  shareProcessNamespace?: boolean;
  /** The pod's ServiceAccount (postgres: the instances', for the primary lease; its token mounted in one sidecar only). */
  serviceAccountName?: string;
}

/**
 * What the operator recorded about a cluster (status.targetPrimary, status.systemIdentifier), handed to
 * the pods through the ConfigMap's cluster keys.
 */
export interface ClusterRecord {
  /** The designated primary's pod name. */
  primary: string;
  /** The cluster's identity (PostgreSQL system identifier), once an instance reported it. */
  systemIdentifier?: string;
  /** A failover is pending: no instance is the primary (the pods get FENCED_PRIMARY). */
  fenced?: boolean;
  /** status.primaryEpoch: grows with every change of designation. */
  epoch?: number;
  /**
   * The designated primary's pod, when the operator observed it running without TLS (a pod from before
   * the operator served TLS): its replicas may connect without verifying TLS, and only to it.
   */
  primaryWithoutTls?: string;
}

/** What the operator recorded in the Database's status about its cluster. */
export interface ClusterStatus {
  targetPrimary?: string;
  systemIdentifier?: string;
  primaryEpoch?: number;
}

/** An instance that refused to start, as it reported it. */
export interface InstanceProblem {
  pod: string;
  /** What it reported (e.g. foreign-data). */
  reason: string;
  message: string;
}

/** The record to keep and hand to the pods, and what the instances' reports say is wrong. */
export interface ClusterObservation {
  record: ClusterRecord;
  problems: InstanceProblem[];
  /** The designated primary's timeline, as it last reported it. */
  timeline?: number;
  /** A failure retrying cannot fix (the data is gone): the Database goes Failed with this. */
  failure?: { reason: string; message: string };
  /** What each pod's last start reported (instance.sh), by pod name. */
  reports?: Record<string, InstanceStart>;
}

/** What an instance's last start did to its data directory, as it reported it. */
export interface InstanceStart {
  /** initialized, cloned, existing, rewound, recloned, or a refusal. */
  result: string;
  /** When the container that reported it finished (ms since the epoch), when known. */
  at?: number;
  timeline?: number;
  message?: string;
}

export interface Engine {
  readonly name: EngineName;
  /**
   * The operator rolls the pods (StatefulSet updateStrategy OnDelete; rollout.ts): replicas first, the
   * primary last, whatever its ordinal. Otherwise the StatefulSet's rolling update, highest ordinal first.
   */
  readonly operatorRollout?: boolean;
  /** The port clients and replicas connect to. */
  readonly port: number;
  /** Name of the container port (Services target it by name). */
  readonly portName: string;
  /** The uid and gid the official image runs the server as. */
  readonly uid: number;
  readonly gid: number;
  /** The superuser: postgres / root. */
  readonly adminUsername: string;
  /** The user replicas connect as. */
  readonly replicationUsername: string;
  /** The official image for a version (postgres:<major>, mysql:<version>). */
  image(version: string): string;
  layout(version: string): DataLayout;
  /** The ConfigMap's data: configuration files and scripts. Never a secret value. */
  configData(db: DefaultedDatabase, cluster?: ClusterRecord): Record<string, string>;
  pod(db: DefaultedDatabase, ctx: PodContext): EnginePod;
  /**
   * The cluster record from the previous one and the pods' reports. Engines without one (mysql) keep
   * `<name>-0` as the primary.
   */
  observe?(db: DefaultedDatabase, prev: ClusterStatus | undefined, pods: readonly Pod[]): ClusterObservation;
  /**
   * Secret keys derived from the plain values (DERIVED_SECRET_KEYS), kept in step with them by the
   * operator: postgres' SCRAM verifiers. `stored`: the derived keys the Secret holds now (an engine
   * may keep a value it can tell is still derived from the same plain values).
   */
  derivedSecretData?(
    db: DefaultedDatabase,
    plain: Readonly<Record<string, string>>,
    stored?: Readonly<Record<string, string>>,
  ): Record<string, string>;
  /**
   * TLS by default (postgres): the operator keeps a CA (`<name>-ca`), a server certificate
   * (`<name>-server`) the pods mount, and the application's connection Secret (`<name>-app`).
   */
  readonly tls?: boolean;
  /**
   * The engine fails over by itself (postgres): its pods start in parallel (a lost primary must not block
   * replacing the others) and the primary has a PodDisruptionBudget of its own (minAvailable 1: it moves
   * by switchover, never by eviction; desired/pdb.ts).
   */
  readonly failover?: boolean;
  /** Why spec.image cannot run spec.version (checked before the StatefulSet is written), if it cannot. */
  imageProblem?(db: DefaultedDatabase): string | undefined;
}

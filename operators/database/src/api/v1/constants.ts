/**
 * The Database API's constants (database.ts re-exports them): its group and version, the engines and the
 * versions each supports, the settings the operator reserves, the labels and annotations it owns, the
 * phases, conditions and defaults the status and the controllers use.
 */

export const GROUP = 'myapp.example.com';
export const VERSION = 'v1';

export const ENGINES = ['mysql', 'postgres'] as const;
export type EngineName = (typeof ENGINES)[number];

/**
 * Versions each engine supports, oldest first: the CEL rules, the docs and the image tags all come from
 * this list. The order matters: an upgrade is a move to a later entry.
 */
export const SUPPORTED_VERSIONS = {
  mysql: ['8.0', '8.4'],
  postgres: ['14', '15', '16', '17'],
} as const satisfies Record<EngineName, readonly string[]>;

export type SupportedVersion<E extends EngineName = EngineName> = (typeof SUPPORTED_VERSIONS)[E][number];

/**
 * How each engine may move between versions in place.
 *   'next':  one step up the list at a time (mysql 8.0 -> 8.4, the documented upgrade path);
 *   'never': the version never changes in place (postgres: a major upgrade needs pg_upgrade or a dump and
 *            restore, which the official image does not do; data files of another major do not start).
 */
export const VERSION_UPGRADES = {
  mysql: 'next',
  postgres: 'never',
} as const satisfies Record<EngineName, 'next' | 'never'>;

/**
 * Settings the operator manages itself (replication, paths, ports, identity). `spec.parameters` may not
 * set them: the API server refuses them, and the config renderer drops them as a second line of defence.
 * Lower case; for mysql, with '_' (mysql treats '-' and '_' in option names alike).
 */
export const RESERVED_PARAMETERS = {
  mysql: [
    'bind_address',
    'datadir',
    'enforce_gtid_consistency',
    'gtid_mode',
    'log_bin',
    'log_replica_updates',
    'log_slave_updates',
    'pid_file',
    'port',
    'read_only',
    'relay_log',
    'report_host',
    'report_port',
    'server_id',
    'skip_networking',
    'skip_replica_start',
    'skip_slave_start',
    'socket',
    'super_read_only',
    'user',
  ],
  postgres: [
    'archive_mode',
    'config_file',
    'data_directory',
    'hba_file',
    'hot_standby',
    'ident_file',
    'listen_addresses',
    'max_replication_slots',
    'max_wal_senders',
    'port',
    'primary_conninfo',
    'primary_slot_name',
    'restore_command',
    'ssl',
    'ssl_ca_file',
    'ssl_cert_file',
    'ssl_key_file',
    'synchronous_standby_names',
    'unix_socket_directories',
    'wal_level',
  ],
} as const satisfies Record<EngineName, readonly string[]>;

/** app.kubernetes.io/name: the engine ('mysql' | 'postgres'). */
export const LABEL_NAME = 'app.kubernetes.io/name';
/** app.kubernetes.io/instance: the Database's name. */
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
/** app.kubernetes.io/managed-by: always MANAGED_BY. */
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
/** app.kubernetes.io/component: 'database' on the pods and StatefulSet, else what the object is. */
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
/** The role the operator maintains on each pod: ROLE_PRIMARY or ROLE_REPLICA. Services select on it. */
export const LABEL_ROLE = `${GROUP}/role`;
/** Same as LABEL_ROLE. */
export const ROLE_LABEL = LABEL_ROLE;
export const MANAGED_BY = 'opkit-database-operator';
export const ROLE_PRIMARY = 'primary';
export const ROLE_REPLICA = 'replica';
export type Role = typeof ROLE_PRIMARY | typeof ROLE_REPLICA;
/** Pod template annotation: hash of the rendered configuration, so a config change rolls the pods. */
export const ANNOTATION_CONFIG_HASH = `${GROUP}/config-hash`;

/** The label keys the operator owns; podLabels may not set them. */
export const OPERATOR_LABELS = [
  LABEL_NAME,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  LABEL_COMPONENT,
  LABEL_ROLE,
] as const;

export const PHASES = [
  'Pending',
  'Provisioning',
  'Running',
  'Updating',
  'Degraded',
  'Failed',
  'Deleting',
] as const;
export type Phase = (typeof PHASES)[number];

/**
 * Annotation on a Database asking for a planned switchover to one of its pods
 * (`kubectl annotate db <name> myapp.example.com/switchover-to=<name>-1`); the operator consumes it.
 */
export const ANNOTATION_SWITCHOVER_TO = `${GROUP}/switchover-to`;
/** spec.maxReplicaLag when unset (health.ts' DEFAULT_MAX_LAG_BYTES). */
export const DEFAULT_MAX_REPLICA_LAG = '64Mi';
/**
 * spec.primaryLeaseSeconds when unset: a primary that cannot renew its Lease for that long fences itself
 * (engines/postgres/lease.ts), and the operator counts it lost once the Lease has not changed for that
 * long plus PRIMARY_LEASE_MARGIN_SECONDS (failover/lease.ts). Longer than an API server restart.
 */
export const DEFAULT_PRIMARY_LEASE_SECONDS = 15;
/** spec.failoverDelay when unset: seconds the primary may be lost before a failover starts. */
export const DEFAULT_FAILOVER_DELAY_SECONDS = 10;
/** The phases of a failover or switchover recorded in status.failover (failover/procedure.ts). */
export const FAILOVER_PHASES = ['Fencing', 'Promoting', 'Rejoining'] as const;
export type FailoverPhase = (typeof FAILOVER_PHASES)[number];

export const CONDITION_READY = 'Ready';
export const CONDITION_PROGRESSING = 'Progressing';
export const CONDITION_DEGRADED = 'Degraded';

/**
 * databases.myapp.example.com/v1 Database: the single source of truth for the custom resource. The
 * TypeScript types, the CRD manifest (openAPIV3Schema, CEL rules, subresources, printer columns) and
 * client-side validation all come from this one definition.
 *
 * What the API server enforces by itself (x-kubernetes-validations), so that a bad edit is refused at
 * `kubectl apply` time instead of surfacing later as a failed reconcile:
 *   - the version is one the engine supports (SUPPORTED_VERSIONS);
 *   - the engine never changes;
 *   - storage never shrinks (PVCs cannot shrink);
 *   - no version downgrade; postgres majors never change in place; mysql moves one release at a time;
 *   - databaseName, username and storageClassName never change (they only apply at initialization / to
 *     the PVCs created first, so a later change would silently do nothing);
 *   - parameters cannot override the settings the operator manages (RESERVED_PARAMETERS);
 *   - podLabels cannot override the operator's own labels.
 */
import { type DefaultedTypeOf, defineCustomResource, s, type TypeOf } from '@opkit/runtime';

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

// ---------------------------------------------------------------------------------------------------
// CEL rules, generated from the constants above.

const celString = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const celList = (vs: readonly string[]) => `[${vs.map(celString).join(', ')}]`;

type Rule = {
  rule: string;
  messageExpression: string;
  fieldPath: string;
  reason: 'FieldValueForbidden';
};

/**
 * Every rule below reports under its field (fieldPath) with reason FieldValueForbidden: the API server then
 * prints `spec.version: Forbidden: <message>` instead of `Invalid value: "object"` (the rule's type, not
 * the value sent); the messageExpression puts the value sent into the message.
 */
const FORBIDDEN = 'FieldValueForbidden' as const;

/**
 * The CEL string expression `e` as it goes into a message (unquoted: a '"' in a messageExpression would
 * make the generated YAML differ from what the formatter writes).
 */
const quoted = (e: string) => e;

/**
 * A CEL expression: version `a` is lower than version `b`, both CEL string expressions of dotted numbers
 * ('8.0', '16'); false when either is not one (the schema or the supported-version rule reports that).
 */
function lowerVersion(a: string, b: string): string {
  const num = "'^[0-9]{1,6}([.][0-9]{1,6})?$'";
  const part = (e: string, i: number) =>
    i === 0 ? `int(${e}.split('.')[0])` : `(${e}.split('.').size() > 1 ? int(${e}.split('.')[1]) : 0)`;
  return (
    `(${a}.matches(${num}) && ${b}.matches(${num}) && ` +
    `(${part(a, 0)} < ${part(b, 0)} || (${part(a, 0)} == ${part(b, 0)} && ${part(a, 1)} < ${part(b, 1)})))`
  );
}

/** spec rule: the version is one SUPPORTED_VERSIONS lists for the engine (an empty one is the schema's). */
export function supportedVersionRule(): Rule {
  const rule = ENGINES.map(
    (e) => `(self.engine == ${celString(e)} && self.version in ${celList(SUPPORTED_VERSIONS[e])})`,
  ).join(' || ');
  const message = ENGINES.reduceRight(
    (rest, e) =>
      `self.engine == ${celString(e)} ? ${celString(
        `: supported ${e} versions are ${SUPPORTED_VERSIONS[e].join(', ')}`,
      )} : ${rest}`,
    celString(''),
  );
  return {
    rule: `self.version == '' || ${rule}`,
    messageExpression: `'unsupported ' + self.engine + ' version ' + ${quoted('self.version')} + (${message})`,
    fieldPath: '.version',
    reason: FORBIDDEN,
  };
}

/** A CEL map literal from version to its position in the list. */
const rankMap = (e: EngineName) =>
  `{${SUPPORTED_VERSIONS[e].map((v, i) => `${celString(v)}: ${i}`).join(', ')}}`;

const DOWNGRADE_ADVICE = 'downgrades are not supported: restore a backup into a new Database instead';

/** spec transition rules on version: no downgrade (to any version), then each engine's upgrade path. */
export function versionTransitionRules(): Rule[] {
  const move = `'version ' + ${quoted('oldSelf.version')} + ' -> ' + ${quoted('self.version')}`;
  const rules: Rule[] = [
    {
      rule: `self.engine != oldSelf.engine || !${lowerVersion('self.version', 'oldSelf.version')}`,
      messageExpression: `${move} + ' is a ' + self.engine + ' downgrade: ' + ${celString(DOWNGRADE_ADVICE)}`,
      fieldPath: '.version',
      reason: FORBIDDEN,
    },
  ];
  for (const e of ENGINES) {
    const same = `self.engine != ${celString(e)} || oldSelf.engine != ${celString(e)} || self.version == oldSelf.version`;
    if (VERSION_UPGRADES[e] === 'never') {
      rules.push({
        rule: `${same} || ${lowerVersion('self.version', 'oldSelf.version')}`,
        messageExpression: `${move} + ${celString(
          `: ${e} major version changes are not done in place (that needs pg_upgrade or a dump and restore): ` +
            'create a new Database with the new version and migrate the data',
        )}`,
        fieldPath: '.version',
        reason: FORBIDDEN,
      });
      continue;
    }
    const m = rankMap(e);
    const known = `!(self.version in ${m}) || !(oldSelf.version in ${m})`;
    rules.push({
      rule: `${same} || ${known} || ${m}[self.version] <= ${m}[oldSelf.version] + 1`,
      messageExpression: `${move} + ${celString(
        `: ${e} upgrades go one release at a time (${SUPPORTED_VERSIONS[e].join(' -> ')}): upgrade to the next version first`,
      )}`,
      fieldPath: '.version',
      reason: FORBIDDEN,
    });
  }
  return rules;
}

/**
 * spec rule: parameters do not set operator-managed settings. The message lists them for the engine (naming
 * the keys sent would need a filter over map keys of unbounded length: over the API server's cost budget).
 */
export function reservedParametersRule(): Rule {
  const checks = ENGINES.map((e) => {
    const key = e === 'mysql' ? `k.lowerAscii().replace('-', '_')` : 'k.lowerAscii()';
    return `(self.engine == ${celString(e)} && self.parameters.exists(k, ${key} in ${celList(RESERVED_PARAMETERS[e])}))`;
  });
  const message = ENGINES.reduceRight(
    (rest, e) =>
      `self.engine == ${celString(e)} ? ${celString(
        `parameters may not set settings the operator manages for ${e}: ${RESERVED_PARAMETERS[e].join(', ')}`,
      )} : ${rest}`,
    celString('parameters may not set settings the operator manages'),
  );
  return {
    rule: `!has(self.parameters) || !(${checks.join(' || ')})`,
    messageExpression: message,
    fieldPath: '.parameters',
    reason: FORBIDDEN,
  };
}

/** spec transition rule: `field` (a string field of the spec) never changes; the message shows the change. */
function immutableRule(field: string, why: string): Rule {
  return {
    rule: `self.${field} == oldSelf.${field}`,
    messageExpression: `'${field} is immutable (' + ${quoted(`oldSelf.${field}`)} + ' -> ' + ${quoted(`self.${field}`)} + '): ' + ${celString(why)}`,
    fieldPath: `.${field}`,
    reason: FORBIDDEN,
  };
}

// ---------------------------------------------------------------------------------------------------
// The schema.

const IDENTIFIER = '^[a-z_][a-z0-9_]*$';
const storageClass = (o: string) =>
  `(has(${o}.storageClassName) ? ${quoted(`${o}.storageClassName`)} : 'unset')`;

const toleration = s.object({
  key: s.string({ description: 'Taint key the toleration applies to; empty matches all keys.' }).optional(),
  operator: s.enum(['Exists', 'Equal'], { description: 'Exists or Equal (default Equal).' }).optional(),
  value: s.string({ description: 'Taint value the toleration matches (operator Equal).' }).optional(),
  effect: s
    .enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'], { description: 'Taint effect to match.' })
    .optional(),
  tolerationSeconds: s
    .integer({ format: 'int64', description: 'How long a NoExecute taint is tolerated.' })
    .optional(),
});

const spec = s.object(
  {
    engine: s.enum(ENGINES, { description: 'Database engine: mysql or postgres. Immutable.' }).rule({
      rule: 'self == oldSelf',
      messageExpression: `'engine is immutable (' + ${quoted('oldSelf')} + ' -> ' + ${quoted('self')} + '): create a new Database to change engines'`,
      reason: FORBIDDEN,
    }),
    version: s.string({
      description:
        `Engine version: mysql ${SUPPORTED_VERSIONS.mysql.join(', ')}; ` +
        `postgres ${SUPPORTED_VERSIONS.postgres.join(', ')} (major versions). ` +
        'mysql upgrades one release at a time; postgres majors are not changed in place.',
      minLength: 1,
      maxLength: 16,
    }),
    storage: s
      .quantity({ description: 'Size of each instance volume, e.g. 10Gi. May grow, never shrink.' })
      .rule({
        rule: "!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",
        messageExpression: `'storage ' + ${quoted('string(self)')} + ' must be greater than zero'`,
        reason: FORBIDDEN,
      })
      .rule({
        rule:
          '!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || ' +
          'quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0',
        // A static message: the quantities in a messageExpression exceed the API server's cost budget.
        message: 'storage may not shrink: volumes can only grow',
        reason: FORBIDDEN,
      }),
    replicas: s.integer({
      description: 'Number of instances: one primary, the rest streaming replicas.',
      minimum: 1,
      maximum: 5,
      default: 1,
      format: 'int32',
    }),
    deletionPolicy: s.enum(['Retain', 'Delete'], {
      description:
        'What happens to the data volumes when the Database is deleted. Retain (default) keeps them; ' +
        'Delete removes them.',
      default: 'Retain',
    }),
    storageClassName: s
      .string({
        description: 'StorageClass of the volumes; the cluster default when unset. Immutable.',
        minLength: 1,
        maxLength: 253,
      })
      .optional(),
    resources: s
      .resources({
        description:
          'Compute resources of the database container. When unset, requests of 100m CPU and 256Mi memory.',
      })
      .optional(),
    databaseName: s.string({
      description: 'Name of the application database created at initialization. Immutable.',
      pattern: IDENTIFIER,
      maxLength: 63,
      default: 'app',
    }),
    username: s.string({
      description: 'Application user created at initialization, owner of databaseName. Immutable.',
      pattern: IDENTIFIER,
      maxLength: 32,
      default: 'app',
    }),
    parameters: s
      .record(s.string({ maxLength: 1024, pattern: '^[^\\r\\n]*$', description: 'Value of the setting.' }), {
        description:
          'Engine configuration settings (postgresql.conf / my.cnf [mysqld]), e.g. ' +
          '{max_connections: "200"}. Settings the operator manages for replication are refused.',
        maxProperties: 64,
      })
      .rule({
        rule: "self.all(k, k.size() <= 64 && k.matches('^[A-Za-z_][A-Za-z0-9_.-]*$'))",
        message: 'parameter names are letters, digits, "_", "." and "-", at most 64 characters',
        reason: FORBIDDEN,
      })
      .optional(),
    podAnnotations: s
      .record(s.string(), { description: 'Extra annotations on the database pods.', maxProperties: 64 })
      .optional(),
    podLabels: s
      .record(s.string({ maxLength: 63 }), {
        description: 'Extra labels on the database pods. The operator-managed labels cannot be set.',
        maxProperties: 64,
      })
      .rule({
        rule: `!self.exists(k, k in ${celList(OPERATOR_LABELS)})`,
        message: `podLabels may not set the labels the operator manages: ${OPERATOR_LABELS.join(', ')}`,
        reason: FORBIDDEN,
      })
      .optional(),
    serviceType: s.enum(['ClusterIP', 'NodePort', 'LoadBalancer'], {
      description: 'Type of the read-write and read-only Services (default ClusterIP).',
      default: 'ClusterIP',
    }),
    image: s
      .string({
        description:
          'Overrides the official image (e.g. a mirror in a private registry). It must be the same ' +
          'engine and version as the official one.',
        minLength: 1,
        maxLength: 512,
      })
      .optional(),
    nodeSelector: s
      .record(s.string(), { description: 'Node labels the database pods must be scheduled on.' })
      .optional(),
    tolerations: s
      .array(toleration, { description: 'Taints the database pods tolerate.', maxItems: 32 })
      .optional(),
    priorityClassName: s
      .string({ description: 'PriorityClass of the database pods.', maxLength: 253 })
      .optional(),
    failoverDelay: s
      .integer({
        description:
          `postgres: seconds the primary may be lost (its pod not Ready, its container crash-looping, its ` +
          `node NotReady) before the operator fails over to the most advanced replica (default ` +
          `${DEFAULT_FAILOVER_DELAY_SECONDS}; 0 fails over at once). A deleted primary pod fails over at once.`,
        minimum: 0,
        maximum: 3600,
        format: 'int32',
      })
      .optional(),
    primaryLeaseSeconds: s
      .integer({
        description:
          `postgres: seconds the primary may fail to renew its Lease (<name>-primary) before it fences ` +
          `itself (stops accepting writes) and the operator may fail over without reaching it (default ` +
          `${DEFAULT_PRIMARY_LEASE_SECONDS}). A primary that cannot reach the API server for that long ` +
          `stops: keep it longer than an API server restart.`,
        minimum: 8,
        maximum: 600,
        format: 'int32',
      })
      .optional(),
    maxReplicaLag: s
      .quantity({
        description:
          'postgres: the lag bound of a ready replica: the WAL it received and has not replayed yet, e.g. ' +
          `128Mi (default ${DEFAULT_MAX_REPLICA_LAG}). A replica further behind is not ready: out of the ` +
          'read-only Service, never a switchover target, named in the conditions (LagOverBound). ' +
          'Changing it restarts the pods (replicas first).',
      })
      .rule({
        rule: "!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",
        message: 'maxReplicaLag must be greater than zero',
        reason: FORBIDDEN,
      })
      .optional(),
    synchronousReplicas: s
      .integer({
        description:
          'postgres: how many replicas must confirm each commit before it is acknowledged ' +
          "(synchronous_standby_names 'ANY N (...)'); 0 (default) is asynchronous. With N > 0 a failover " +
          'only promotes a replica once it can prove no acknowledged write is lost. Less than replicas.',
        minimum: 0,
        maximum: 4,
        format: 'int32',
      })
      .optional(),
  },
  {
    description: 'DatabaseSpec is the desired state of a Database.',
    validations: [
      supportedVersionRule(),
      ...versionTransitionRules(),
      immutableRule('databaseName', 'it is only applied when the database is initialized'),
      immutableRule('username', 'it is only applied when the database is initialized'),
      {
        rule:
          'has(self.storageClassName) == has(oldSelf.storageClassName) && ' +
          '(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)',
        messageExpression:
          `'storageClassName is immutable (' + ${storageClass('oldSelf')} + ' -> ' + ${storageClass('self')} + ` +
          `'): existing volumes keep their class'`,
        fieldPath: '.storageClassName',
        reason: FORBIDDEN,
      },
      reservedParametersRule(),
      {
        rule: '!has(self.synchronousReplicas) || self.synchronousReplicas == 0 || self.synchronousReplicas < self.replicas',
        // A static message: string(int) in a messageExpression is over the API server's cost budget.
        message:
          'synchronousReplicas must be less than replicas: each commit waits for that many replicas, and ' +
          'the primary is not one of them',
        fieldPath: '.synchronousReplicas',
        reason: FORBIDDEN,
      },
      {
        rule: "!has(self.synchronousReplicas) || self.synchronousReplicas == 0 || self.engine == 'postgres'",
        message: 'synchronousReplicas is only supported for postgres',
        fieldPath: '.synchronousReplicas',
        reason: FORBIDDEN,
      },
      {
        rule: "!has(self.maxReplicaLag) || self.engine == 'postgres'",
        message: 'maxReplicaLag is only supported for postgres',
        fieldPath: '.maxReplicaLag',
        reason: FORBIDDEN,
      },
    ],
  },
);

const status = s.object(
  {
    phase: s.enum(PHASES, { description: 'Summary of the Database state.' }).optional(),
    replicas: s.integer({ format: 'int32', description: 'Instances that exist.' }).optional(),
    readyReplicas: s.integer({ format: 'int32', description: 'Instances that are ready.' }).optional(),
    currentPrimary: s
      .string({ description: 'Name of the pod that is the primary (the designated one, while it is ready).' })
      .optional(),
    targetPrimary: s
      .string({
        description:
          'The pod the operator designated as the primary: recorded, never derived from ordinals (first <name>-0).',
      })
      .optional(),
    timeline: s
      .integer({
        format: 'int64',
        description: "postgres: the primary's timeline (1 at initdb; each promotion starts a new one).",
      })
      .optional(),
    primaryEpoch: s
      .integer({
        format: 'int64',
        description:
          'postgres: grows with every change of the designated primary (fenced, promoted), so the pods ' +
          'can tell the newest designation from a stale one.',
      })
      .optional(),
    replicationMode: s
      .string({
        description: 'postgres: Asynchronous, or Synchronous (ANY N): how many replicas confirm each commit.',
      })
      .optional(),
    failover: s
      .object(
        {
          reason: s.string({ description: 'Why: PrimaryPodMissing, PrimaryNotReady, Switchover, ...' }),
          from: s.string({ description: 'The former primary.' }),
          to: s.string({ description: 'The instance being promoted (once chosen).' }).optional(),
          phase: s.enum(FAILOVER_PHASES, {
            description:
              'Fencing: the former primary is being stopped and taken out of the read-write Service; ' +
              'Promoting: the most advanced replica is being promoted; Rejoining: the other instances ' +
              'restart to follow it.',
          }),
          switchover: s
            .boolean({ description: 'A planned switchover (asked for), not a failover.' })
            .optional(),
          startedAt: s.string({ description: 'When it started (RFC 3339).' }),
          message: s.string({ description: 'What it waits for, when it waits.' }).optional(),
          restarted: s
            .array(s.string(), { description: 'Instances restarted to follow the new primary.', maxItems: 8 })
            .optional(),
        },
        {
          description:
            'postgres: a failover or switchover in progress. Recorded before each step, so a restarted ' +
            'operator (or a new leader) resumes it where it was.',
        },
      )
      .optional(),
    lastFailover: s
      .object(
        {
          reason: s.string({ description: 'Why it happened.' }),
          from: s.string({ description: 'The former primary.' }),
          to: s.string({ description: 'The promoted instance.' }),
          switchover: s.boolean({ description: 'A planned switchover.' }).optional(),
          timeline: s.integer({ format: 'int64', description: 'The new timeline.' }).optional(),
          startedAt: s.string({ description: 'When it started (RFC 3339).' }),
          completedAt: s.string({ description: 'When it completed (RFC 3339).' }),
        },
        { description: 'postgres: the last completed failover or switchover.' },
      )
      .optional(),
    systemIdentifier: s
      .string({
        description:
          "postgres: the cluster's identity (PostgreSQL system identifier), recorded from the first primary's " +
          'report. An empty volume of an initialized cluster is cloned, never initialized again.',
      })
      .optional(),
    instances: s
      .array(
        s.object({
          name: s.string({ description: 'The pod.' }),
          role: s.enum(['primary', 'replica'], { description: 'What the operator designated it.' }),
          ready: s.boolean({
            description:
              'The pod is Ready: for a replica, streaming from the current primary within the lag bound ' +
              '(spec.maxReplicaLag of WAL received and not replayed yet, measured by its readiness probe).',
          }),
          reason: s
            .string({
              description:
                'Why it is not ready (CamelCase): PodMissing, Unschedulable, Bootstrapping, CrashLoopBackOff, ' +
                'NotStreaming, LagOverBound, ReadinessProbeFailing, ...',
            })
            .optional(),
          message: s.string({ description: 'Why it is not ready, in a sentence.' }).optional(),
          result: s
            .string({
              description:
                'What its last start did to the data directory (instance.sh): initialized, cloned, existing, rewound, recloned, or a refusal.',
            })
            .optional(),
          resultAt: s.string({ description: 'When that start finished (RFC 3339).' }).optional(),
          timeline: s
            .integer({
              format: 'int64',
              description:
                "Its PostgreSQL timeline: the primary's current one, for the primary and each replica " +
                'streaming from it (as the primary last said); otherwise the one its last start reported.',
            })
            .optional(),
          streaming: s
            .boolean({
              description:
                'A replica: it streams WAL from the current primary (a WAL sender in state streaming there), ' +
                'as the primary last said; the operator asks it every 30 s.',
            })
            .optional(),
          lagBytes: s
            .integer({
              format: 'int64',
              description:
                'A streaming replica: WAL the primary wrote that it has not replayed yet, measured on the ' +
                'primary. Coarse, so that writes do not rewrite the status at every poll: 0 below 1 MiB, ' +
                "else rounded down to a power of two MiB (1, 2, 4, ... MiB); the operator's /metrics " +
                '(database_replication_lag_bytes) has the exact value.',
            })
            .optional(),
          lagSeconds: s
            .integer({
              format: 'int64',
              description:
                "A streaming replica: its replay lag (pg_stat_replication's replay_lag; 0 once an idle " +
                'replica caught up), 0 below 1 s, else rounded down to a power of two seconds; exact in ' +
                'database_replication_lag_seconds.',
            })
            .optional(),
        }),
        {
          description:
            'postgres: each instance spec.replicas asks for, whether its pod exists or not, in ordinal order.',
          maxItems: 16,
        },
      )
      .optional(),
    endpoints: s
      .object(
        {
          readWrite: s.string({ description: 'DNS name of the read-write (primary) Service.' }),
          readOnly: s
            .string({ description: 'DNS name of the read-only (replicas) Service, when replicas > 1.' })
            .optional(),
          port: s.integer({ minimum: 1, maximum: 65535, description: 'Port of both Services.' }),
        },
        { description: 'Where clients connect.' },
      )
      .optional(),
    secretName: s.string({ description: 'Secret with the credentials and connection details.' }).optional(),
    observedGeneration: s
      .integer({
        format: 'int64',
        description:
          'The generation whose spec the children reflect: a reconcile that failed before applying the spec ' +
          'keeps the previous one (the conditions carry the generation they describe).',
      })
      .optional(),
    conditions: s
      .conditions({ description: 'Ready, Progressing and Degraded (metav1.Condition).' })
      .optional(),
    selector: s.string({ description: 'Label selector of the pods (for the scale subresource).' }).optional(),
  },
  { description: 'DatabaseStatus is the observed state of a Database.' },
);

export const Databases = defineCustomResource({
  group: GROUP,
  version: VERSION,
  kind: 'Database',
  plural: 'databases',
  singular: 'database',
  shortNames: ['db'],
  scope: 'Namespaced',
  description: 'Database is a MySQL or PostgreSQL cluster: one primary and streaming replicas.',
  spec,
  status,
  printerColumns: [
    { name: 'Engine', jsonPath: '.spec.engine' },
    { name: 'Version', jsonPath: '.spec.version' },
    { name: 'Replicas', jsonPath: '.spec.replicas' },
    { name: 'Ready', jsonPath: '.status.readyReplicas' },
    { name: 'Phase', jsonPath: '.status.phase' },
    { name: 'Primary', jsonPath: '.status.currentPrimary' },
    { name: 'Timeline', jsonPath: '.status.timeline', type: 'integer' },
    { name: 'Age', jsonPath: '.metadata.creationTimestamp' },
    // -o wide: how commits are confirmed, and why it is not Ready (names the instance and why).
    { name: 'Replication', jsonPath: '.status.replicationMode', priority: 1 },
    {
      name: 'Message',
      jsonPath: '.status.conditions[?(@.type=="Ready")].message',
      type: 'string',
      priority: 1,
    },
  ],
  validations: [
    {
      rule: "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 52",
      // A static message: string(size()) in a messageExpression is over the API server's cost estimate.
      message:
        'a Database name must be a DNS label of at most 52 characters starting with a letter: it names the ' +
        'Services (<name>, <name>-ro, <name>-headless) and the pods (<name>-N, labelled with a revision hash)',
      // The field path needs metadata.name declared in the schema: defineCustomResource declares it for this.
      fieldPath: '.metadata.name',
      reason: FORBIDDEN,
    },
  ],
  scale: {
    specReplicasPath: '.spec.replicas',
    statusReplicasPath: '.status.readyReplicas',
    labelSelectorPath: '.status.selector',
  },
});

export type Database = TypeOf<typeof Databases>;
export type DatabaseSpec = Database['spec'];
export type DatabaseStatus = NonNullable<Database['status']>;
/** A Database as read back from the API server: the defaulted spec fields are present. */
export type DefaultedDatabase = DefaultedTypeOf<typeof Databases>;
export type DefaultedDatabaseSpec = DefaultedDatabase['spec'];

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
 *
 * The constants these come from are in constants.ts (re-exported here), the CEL rules in rules.ts.
 */
import { type DefaultedTypeOf, defineCustomResource, s, type TypeOf } from '@opkit/runtime';
import {
  DEFAULT_FAILOVER_DELAY_SECONDS,
  DEFAULT_MAX_REPLICA_LAG,
  DEFAULT_PRIMARY_LEASE_SECONDS,
  ENGINES,
  FAILOVER_PHASES,
  GROUP,
  OPERATOR_LABELS,
  PHASES,
  SUPPORTED_VERSIONS,
  VERSION,
} from './constants.ts';
import {
  celList,
  FORBIDDEN,
  immutableRule,
  quoted,
  reservedParametersRule,
  supportedVersionRule,
  versionTransitionRules,
} from './rules.ts';

export * from './constants.ts';
export { reservedParametersRule, supportedVersionRule, versionTransitionRules } from './rules.ts';

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

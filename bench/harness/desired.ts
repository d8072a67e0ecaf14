/**
 * The workload and what every Database must end up with, from opkit's own pure builders
 * (operators/database/src/controllers/database/desired): the expected children for the convergence
 * check, and the exact objects the floor writer creates.
 */
import {
  type Database,
  Databases,
  type DefaultedDatabase,
} from '../../operators/database/src/api/v1/database.ts';
import {
  configMap,
  credentialsSecret,
  endpoints,
  headlessService,
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  podDisruptionBudget,
  primaryDisruptionBudget,
  primaryLease,
  readOnlyService,
  readWriteService,
  statefulSet,
  usesPrimaryLease,
} from '../../operators/database/src/controllers/database/desired/index.ts';
import { selectorString } from '../../operators/database/src/controllers/database/desired/labels.ts';
import { childNames } from '../../operators/database/src/controllers/database/desired/names.ts';
import {
  appSecret,
  caSecret,
  secretValue,
  serverHosts,
  serverSecret,
} from '../../operators/database/src/controllers/database/desired/tls.ts';
import { engineFor } from '../../operators/database/src/controllers/database/engines/index.ts';
import { instanceStatuses } from '../../operators/database/src/controllers/database/instances.ts';
import { configHash } from '../../operators/database/src/controllers/database/reconcile.ts';
import { computeStatus } from '../../operators/database/src/controllers/database/status.ts';
import {
  generateCa,
  issueServerCertificate,
} from '../../operators/database/src/controllers/database/tls/pki.ts';
import type { KubeObject } from './kube.ts';

export type BenchDatabase = KubeObject & {
  spec: { engine: 'mysql' | 'postgres'; version: string; storage: string; replicas?: number };
};

/** The versions the workload uses (the newest each engine supports). */
export const WORKLOAD_VERSIONS = { mysql: '8.4', postgres: '17' } as const;
export const WORKLOAD_STORAGE = '1Gi';

/** N Databases: engines alternate, replicas cycle 1, 2, 3 (so some have no PDB and no read-only Service). */
export function inputs(n: number, namespace: string): BenchDatabase[] {
  return Array.from({ length: n }, (_, i) => {
    const engine = i % 2 === 0 ? 'mysql' : 'postgres';
    return {
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: { name: `db-${String(i).padStart(5, '0')}`, namespace },
      spec: {
        engine,
        version: WORKLOAD_VERSIONS[engine],
        storage: WORKLOAD_STORAGE,
        replicas: [1, 2, 3][i % 3]!,
      },
    };
  });
}

function defaulted(db: KubeObject): DefaultedDatabase {
  return Databases.applyDefaults(structuredClone(db) as unknown as Database) as DefaultedDatabase;
}

function ownerRef(db: KubeObject) {
  return {
    apiVersion: 'myapp.example.com/v1',
    kind: 'Database',
    name: db.metadata.name,
    uid: db.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Every child of a Database as opkit's builders make it (with the controller reference when uid is known). */
export function desiredChildren(db: KubeObject): KubeObject[] {
  const spec = defaulted(db);
  const cm = configMap(spec);
  const children = [
    credentialsSecret(spec),
    cm,
    headlessService(spec),
    readWriteService(spec),
    readOnlyService(spec),
    statefulSet(spec, { configHash: configHash(cm) }),
    podDisruptionBudget(spec),
    primaryDisruptionBudget(spec),
    // postgres: the primary lease's objects.
    ...(usesPrimaryLease(spec)
      ? [instanceServiceAccount(spec), instanceRole(spec), instanceRoleBinding(spec), primaryLease(spec)]
      : []),
  ].filter((c) => c !== undefined) as unknown as KubeObject[];
  const ns = db.metadata.namespace;
  // Under Retain (the default) the credentials Secret carries no owner: it outlives the Database.
  const owned = (c: KubeObject) => c.kind !== 'Secret' || spec.spec.deletionPolicy === 'Delete';
  return children.map((c) => ({
    ...c,
    metadata: {
      ...c.metadata,
      namespace: c.metadata.namespace ?? ns,
      ...(db.metadata.uid && owned(c) ? { ownerReferences: [ownerRef(db)] } : {}),
    },
  }));
}

/** The engine makes TLS Secrets (postgres: `<name>-ca`, `<name>-server`, `<name>-app`). */
export function hasTls(db: KubeObject): boolean {
  return engineFor(defaulted(db).spec.engine).tls === true;
}

/** Names of the TLS Secrets a Database must have (none for engines without TLS). */
export function tlsSecretNames(db: KubeObject): string[] {
  if (!hasTls(db)) return [];
  const names = childNames(db);
  return [names.caSecret, names.serverSecret, names.appSecret];
}

/**
 * The TLS Secrets the operator derives and reissues at will (`-server`: when the names it must hold
 * change, e.g. on a scale-up; `-app`: follows the credentials and the CA), unlike the credentials and
 * the CA, which must never change.
 */
export function derivedSecretNames(db: KubeObject): string[] {
  if (!hasTls(db)) return [];
  const names = childNames(db);
  return [names.serverSecret, names.appSecret];
}

/**
 * The TLS Secrets opkit's TLS step (tls/step.ts) writes for a Database, made with opkit's own builders
 * and certificate generation: a new CA, a server certificate it signs for `serverHosts`, and `-app` from
 * the plain values of `credentials` (the credentials Secret as written). Ownership as opkit sets it: the
 * CA like the credentials (owned only under deletionPolicy Delete), the other two always by the Database.
 */
export async function desiredTlsSecrets(
  db: KubeObject,
  credentials: KubeObject,
  now: Date = new Date(),
): Promise<KubeObject[]> {
  if (!hasTls(db)) return [];
  const spec = defaulted(db);
  const ca = await generateCa(`${db.metadata.namespace ?? 'default'}/${db.metadata.name}`, now);
  const server = await issueServerCertificate(ca, serverHosts(spec), now);
  const plain = Object.fromEntries(
    Object.keys((credentials as { data?: Record<string, string> }).data ?? {}).map((k) => [
      k,
      secretValue(credentials as never, k) ?? '',
    ]),
  );
  const secrets = [
    { secret: caSecret(spec, ca), owned: spec.spec.deletionPolicy === 'Delete' },
    { secret: serverSecret(spec, server, ca.certPem), owned: true },
    { secret: appSecret(spec, plain, ca.certPem), owned: true },
  ];
  return secrets.map(({ secret, owned }) => ({
    ...(secret as unknown as KubeObject),
    metadata: {
      ...(secret.metadata as KubeObject['metadata']),
      namespace: secret.metadata.namespace ?? db.metadata.namespace,
      ...(db.metadata.uid && owned ? { ownerReferences: [ownerRef(db)] } : {}),
    },
  }));
}

/**
 * "Kind/name" of every child a Database must have; `tls: false` leaves the TLS Secrets out (for the
 * peers that do not make them yet: a known difference the equivalence check names).
 */
/** The primary's PodDisruptionBudget (engines that fail over: postgres). */
export const PRIMARY_PDB = /^PodDisruptionBudget\/.+-primary$/;

export function expectedChildKeys(
  db: KubeObject,
  opts: { tls?: boolean; primaryPdb?: boolean } = {},
): string[] {
  const keys = desiredChildren(db)
    .filter((c) => opts.primaryPdb !== false || !PRIMARY_PDB.test(`${c.kind}/${c.metadata.name}`))
    .map((c) => `${c.kind}/${c.metadata.name}`);
  if (opts.tls === false) return keys;
  return [...keys, ...tlsSecretNames(db).map((n) => `Secret/${n}`)];
}

export function statefulSetName(db: KubeObject): string {
  const sts = desiredChildren(db).find((c) => c.kind === 'StatefulSet');
  return sts?.metadata.name ?? db.metadata.name;
}

/**
 * The status opkit writes right after creating the children (the StatefulSet exists, no pods yet);
 * `children`: desiredChildren(db), when the caller has them already.
 */
export function floorStatus(db: KubeObject, children = desiredChildren(db)): unknown {
  const spec = defaulted(db);
  const sts = children.find((c) => c.kind === 'StatefulSet');
  const secret = children.find((c) => c.kind === 'Secret');
  // The engine's cluster record before any pod reported (postgres: targetPrimary <name>-0).
  const cluster = engineFor(spec.spec.engine).observe?.(spec, undefined, []);
  return computeStatus(spec as unknown as Database, undefined, {
    statefulSet: { ...(sts as object), metadata: { ...sts?.metadata, generation: 1 } } as never,
    pods: [],
    statefulSetName: sts?.metadata.name ?? db.metadata.name,
    ...(secret ? { secretName: secret.metadata.name } : {}),
    endpoints: endpoints(spec),
    selector: selectorString(spec),
    ...(cluster ? { cluster } : {}),
    // postgres: status.instances, none of the pods exists yet (what opkit reports then).
    ...(cluster
      ? {
          instances: instanceStatuses(
            sts?.metadata.name ?? db.metadata.name,
            spec.spec.replicas,
            cluster.record.primary,
            [],
            cluster.reports,
          ),
        }
      : {}),
  });
}

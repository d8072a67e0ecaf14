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
  podDisruptionBudget,
  readOnlyService,
  readWriteService,
  statefulSet,
} from '../../operators/database/src/controllers/database/desired/index.ts';
import { selectorString } from '../../operators/database/src/controllers/database/desired/labels.ts';
import { engineFor } from '../../operators/database/src/controllers/database/engines/index.ts';
import { configHash } from '../../operators/database/src/controllers/database/reconcile.ts';
import { computeStatus } from '../../operators/database/src/controllers/database/status.ts';
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

/** "Kind/name" of every child a Database must have. */
export function expectedChildKeys(db: KubeObject): string[] {
  return desiredChildren(db).map((c) => `${c.kind}/${c.metadata.name}`);
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
  });
}

/** The schema as the single source of truth (docs/runtime.md, "Schema"). */
import { type Client, CustomResourceDefinitions, defineCustomResource, s, type TypeOf } from '@opkit/runtime';

// #region schema
export const Databases = defineCustomResource({
  group: 'example.com',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  shortNames: ['db'],
  scope: 'Namespaced',
  spec: s.object({
    engine: s.enum(['mysql', 'postgres'], { description: 'The database engine.' }),
    version: s.string({ pattern: '^[0-9]+(\\.[0-9]+)*$' }).rule('self == oldSelf', 'version is immutable'),
    replicas: s.integer({ minimum: 1, maximum: 5, default: 1 }),
    storage: s.quantity({ default: '1Gi' }),
    backup: s.object({ schedule: s.string(), retain: s.integer({ minimum: 1, default: 7 }) }).optional(),
  }),
  status: s.object({
    readyReplicas: s.integer().optional(),
    phase: s.enum(['Pending', 'Running', 'Failed']).optional(),
    conditions: s.conditions().optional(),
  }),
  printerColumns: [
    { name: 'Engine', jsonPath: '.spec.engine' },
    { name: 'Ready', jsonPath: '.status.readyReplicas' },
  ],
  scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.readyReplicas' },
});

// 1. The TypeScript type: engine is 'mysql' | 'postgres', replicas optional (defaulted), ...
export type Database = TypeOf<typeof Databases>;

// 2. The CRD (structural openAPIV3Schema with defaults, CEL rules, status and scale subresources).
export async function installCrd(client: Client): Promise<void> {
  await client.create(CustomResourceDefinitions, Databases.crd());
}

// 3. Client-side validation and defaulting with the API server's field paths.
export function check(obj: Database): string[] {
  const defaulted = Databases.applyDefaults(obj); // spec.replicas: 1, spec.storage: '1Gi'
  console.log(defaulted.spec.replicas);
  return Databases.validate(obj).map((e) => `${e.path}: ${e.message}`);
}

// 4. The typed descriptor for the client, the cache and controllers.
export const example: Database = Databases.build({
  metadata: { namespace: 'default', name: 'orders' },
  spec: { engine: 'postgres', version: '16.4' },
});
// await client.create(Databases.resource, example); controllerFor(mgr, Databases.resource)...
// #endregion schema

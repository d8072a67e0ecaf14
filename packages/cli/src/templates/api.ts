/**
 * The files `opkit create api` writes for one kind, e.g. --group myapp --version v1 --kind Database:
 *
 *   src/api/v1/database.ts                   schema (defineCustomResource): type, validation, CRD
 *   src/controllers/database/controller.ts   watches and rbac (what the controller reads and writes)
 *   src/controllers/database/reconcile.ts    the reconcile skeleton: sets the Ready condition
 *   config/samples/myapp_v1_database.yaml    a sample object
 *   test/unit/database.test.ts               the controller against the FakeClient
 *   test/integration/database.test.ts        the controller against a real kube-apiserver
 */
import { kindFileName, lowerFirst, pluralizeKind } from '../names.ts';

export interface KindInfo {
  /** 'myapp' */
  group: string;
  /** 'myapp.example.com' */
  fullGroup: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  projectName: string;
}

export interface KindNames {
  /** 'database' */
  file: string;
  /** 'Databases': the defineCustomResource result */
  definition: string;
  /** 'setupDatabaseController' */
  setup: string;
  /** 'reconcileDatabase' */
  reconcile: string;
  apiPath: string;
  controllerPath: string;
  reconcilePath: string;
  samplePath: string;
  unitTestPath: string;
  integrationTestPath: string;
}

export function kindNames(k: Pick<KindInfo, 'group' | 'version' | 'kind'>): KindNames {
  const file = kindFileName(k.kind);
  const plural = pluralizeKind(k.kind);
  return {
    file,
    definition: plural === k.kind ? `${k.kind}Resource` : plural,
    setup: `setup${k.kind}Controller`,
    reconcile: `reconcile${k.kind}`,
    apiPath: `src/api/${k.version}/${file}.ts`,
    controllerPath: `src/controllers/${file}/controller.ts`,
    reconcilePath: `src/controllers/${file}/reconcile.ts`,
    samplePath: `config/samples/${k.group}_${k.version}_${file}.yaml`,
    unitTestPath: `test/unit/${file}.test.ts`,
    integrationTestPath: `test/integration/${file}.test.ts`,
  };
}

export function apiModule(k: KindInfo): string {
  const n = kindNames(k);
  const what = lowerFirst(k.kind);
  return `/**
 * ${k.kind}: the ${k.fullGroup}/${k.version} API. This schema is the single source of truth: the TypeScript
 * type, client-side validation and the CRD (\`opkit generate\` -> config/crd/bases) all come from it.
 * After a change run \`npm run generate\` and, against a cluster, \`npx opkit install\`.
 */
import { defineCustomResource, s, type TypeOf } from '@opkit/runtime';

/** What a user asks for. */
export const ${k.kind}Spec = s.object(
  {
    // TODO(user): the fields of a ${k.kind}. This one is an example: replace it.
    size: s.integer({
      minimum: 0,
      default: 1,
      description: 'Size is an example field of ${k.kind}; replace it with your own.',
    }),
  },
  { description: '${k.kind}Spec is the desired state of a ${k.kind}.' },
);

/** What the operator observed; written by the controller through the status subresource. */
export const ${k.kind}Status = s.object(
  {
    observedGeneration: s
      .integer({ format: 'int64', description: 'The metadata.generation the status was computed for.' })
      .optional(),
    conditions: s
      .conditions({ description: 'The latest observations of the ${what}\\'s state (Ready, ...).' })
      .optional(),
  },
  { description: '${k.kind}Status is the observed state of a ${k.kind}.' },
);

export const ${n.definition} = defineCustomResource({
  group: '${k.fullGroup}',
  version: '${k.version}',
  kind: '${k.kind}',
  plural: '${k.plural}',
  scope: '${k.namespaced ? 'Namespaced' : 'Cluster'}',
  description: '${k.kind} is the Schema for the ${k.plural} API.',
  spec: ${k.kind}Spec,
  status: ${k.kind}Status,
  printerColumns: [
    { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: 'Age', jsonPath: '.metadata.creationTimestamp' },
  ],
});

export type ${k.kind} = TypeOf<typeof ${n.definition}>;
`;
}

export function controllerModule(k: KindInfo): string {
  const n = kindNames(k);
  return `/**
 * The ${k.kind} controller: what it watches (controllerFor ... complete) and what it may do (rbac).
 */
import type { RbacRule } from '@opkit/cli/rbac';
import { controllerFor, type Manager } from '@opkit/runtime';
import { ${n.definition} } from '../../api/${k.version}/${n.file}.ts';
import { ${n.reconcile} } from './reconcile.ts';

/**
 * Everything the reconcile reads or writes: \`opkit generate\` turns it into config/rbac/role.yaml (least
 * privilege: no wildcards, only these verbs). Add a rule for each kind the controller creates or reads,
 * e.g. { resource: StatefulSets, verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
 * { resource: Events, verbs: ['create', 'patch'] } for an event recorder.
 */
export const rbac: RbacRule[] = [
  // update and patch: adding or removing a finalizer (addFinalizer, removeFinalizer) writes the object itself.
  { resource: ${n.definition}.resource, verbs: ['get', 'list', 'watch', 'update', 'patch'] },
  { resource: ${n.definition}.resource, subresource: 'status', verbs: ['get', 'patch', 'update'] },
  // Children whose ownerReference blocks the owner's deletion (setControllerReference) need this.
  { resource: ${n.definition}.resource, subresource: 'finalizers', verbs: ['update'] },
];

/** Registers the controller with the manager; src/main.ts calls it. */
export function ${n.setup}(mgr: Manager) {
  // Add .owns(Child) for each kind this controller creates, so that changes to them reconcile the owner.
  return controllerFor(mgr, ${n.definition}.resource).complete(${n.reconcile}({ client: mgr.client, cache: mgr.cache }));
}
`;
}

export function reconcileModule(k: KindInfo): string {
  const n = kindNames(k);
  const what = lowerFirst(k.kind);
  return `/**
 * Reconciles one ${k.kind}: read it, drive the world towards its spec, report what is true in its status.
 * Idempotent: it runs again and again for the same key, also when nothing changed, and then writes nothing.
 */
import { type Cache, type Client, patchStatus, type Reconciler, setCondition } from '@opkit/runtime';
import { type ${k.kind}, ${n.definition} } from '../../api/${k.version}/${n.file}.ts';

export interface ${k.kind}ReconcilerDeps {
  /** Writes: status patches, children. */
  client: Client;
  /** Reads: the manager's shared informer cache (up to date, no API round trip). */
  cache: Pick<Cache, 'get'>;
}

export function ${n.reconcile}({ client, cache }: ${k.kind}ReconcilerDeps): Reconciler<${k.kind}> {
  return async (req, ctx) => {
    const current = await cache.get(${n.definition}.resource, req, { signal: ctx.signal });
    if (!current) return; // deleted: children with an ownerReference to it are garbage collected
    const ${what} = structuredClone(current) as ${k.kind};

    // TODO(user): create or update what the ${what} stands for (createOrUpdate, setControllerReference),
    // and only then say it is Ready.

    const { changed } = await patchStatus(
      client,
      ${n.definition}.resource,
      ${what},
      (status) => ({
        ...status,
        conditions: setCondition(status.conditions, {
          type: 'Ready',
          status: 'True',
          reason: 'Reconciled',
          message: 'The ${k.kind} is reconciled',
          observedGeneration: ${what}.metadata.generation,
        }),
      }),
      { observedGeneration: true, signal: ctx.signal },
    );
    if (changed) ctx.log.info('status updated');
  };
}
`;
}

export function sampleYaml(k: KindInfo): string {
  return `apiVersion: ${k.fullGroup}/${k.version}
kind: ${k.kind}
metadata:
  name: ${kindFileName(k.kind)}-sample
  labels:
    app.kubernetes.io/name: ${k.projectName}
    app.kubernetes.io/managed-by: opkit
spec:
  # TODO(user): the fields of your ${k.kind}.
  size: 1
`;
}

export function unitTest(k: KindInfo): string {
  const n = kindNames(k);
  const ns = k.namespaced ? "namespace: 'default', " : '';
  const key = k.namespaced ? "{ namespace: 'default', name: 'sample' }" : "{ name: 'sample' }";
  return `/**
 * The ${k.kind} controller against the FakeClient: no cluster, milliseconds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createManager, findCondition, silentLogger } from '@opkit/runtime';
import { FakeClient } from '@opkit/runtime/testing';
import { ${n.definition} } from '../../src/api/${k.version}/${n.file}.ts';
import { ${n.setup} } from '../../src/controllers/${n.file}/controller.ts';

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(\`timed out waiting for \${what}\`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('a new ${k.kind} becomes Ready, and a second reconcile writes nothing', async () => {
  const client = new FakeClient({ statusSubresource: [${n.definition}.resource] });
  const mgr = await createManager({ client, logger: silentLogger() });
  ${n.setup}(mgr);
  const stop = new AbortController();
  const running = mgr.start({ signal: stop.signal });
  try {
    await client.create(${n.definition}.resource, ${n.definition}.build({ metadata: { ${ns}name: 'sample' }, spec: { size: 1 } }));
    await until('the Ready condition', async () => {
      const got = await client.get(${n.definition}.resource, ${key});
      return findCondition(got.status?.conditions, 'Ready')?.status === 'True';
    });
    const got = await client.get(${n.definition}.resource, ${key});
    assert.equal(got.status?.observedGeneration, got.metadata.generation);
    assert.equal(findCondition(got.status?.conditions, 'Ready')?.reason, 'Reconciled');
    // The status write triggers another reconcile, which must find nothing to do.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(client.writes({ resource: ${n.definition}.resource }).filter((w) => w.verb === 'patchStatus').length, 1);
  } finally {
    stop.abort();
    await running;
  }
});
`;
}

export function integrationTest(k: KindInfo): string {
  const n = kindNames(k);
  const ns = k.namespaced ? "namespace: 'default', " : '';
  const key = k.namespaced ? "{ namespace: 'default', name: 'sample' }" : "{ name: 'sample' }";
  return `/**
 * The ${k.kind} controller against a real kube-apiserver (started by @opkit/controlplane), with the CRD
 * the schema defines: the API server's validation and defaulting apply.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createManager, findCondition, type Manager, silentLogger } from '@opkit/runtime';
import { ${n.definition} } from '../../src/api/${k.version}/${n.file}.ts';
import { ${n.setup} } from '../../src/controllers/${n.file}/controller.ts';
import { eventually, startTestEnv, type TestEnv } from './helpers.ts';

describe('${k.kind} controller against a real API server', { timeout: 300_000 }, () => {
  let env: TestEnv;
  let mgr: Manager;
  const stop = new AbortController();
  let running: Promise<void>;

  before(async () => {
    env = await startTestEnv([${n.definition}.crd()]);
    mgr = await createManager({ kubeconfig: env.kubeconfig, logger: silentLogger() });
    ${n.setup}(mgr);
    running = mgr.start({ signal: stop.signal });
  });

  after(async () => {
    stop.abort();
    await running;
    await env?.stop();
  });

  test('a new ${k.kind} gets its defaults and becomes Ready', async () => {
    await env.client.create(${n.definition}.resource, ${n.definition}.build({ metadata: { ${ns}name: 'sample' }, spec: {} }));
    const ready = await eventually('the Ready condition', async () => {
      const got = await env.client.get(${n.definition}.resource, ${key});
      return findCondition(got.status?.conditions, 'Ready')?.status === 'True' ? got : undefined;
    });
    assert.equal(ready.spec.size, 1, 'the schema default applies');
    assert.equal(ready.status?.observedGeneration, ready.metadata.generation);
  });

  test('the API server rejects what the schema forbids', async () => {
    await assert.rejects(
      env.client.create(${n.definition}.resource, ${n.definition}.build({ metadata: { ${ns}name: 'invalid' }, spec: { size: -1 } })),
      /size/,
    );
  });
});
`;
}

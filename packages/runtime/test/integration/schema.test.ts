/**
 * The generated CRDs against a real kube-apiserver: the API server accepts them as structural schemas
 * with compiling CEL rules, defaults objects the way applyDefaults does, and rejects what validate()
 * rejects with the same field paths, reasons and messages.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource, type Resource } from '../../src/api/resource.ts';
import {
  ApiError,
  createClient,
  InvalidError,
  loadConfig,
  NotFoundError,
  type RestClient,
  type StatusCause,
} from '../../src/client/index.ts';
import {
  type CustomResourceDefinitionManifest,
  defineCustomResource,
  type FieldError,
  fieldErrorReason,
  s,
  type TypeOf,
} from '../../src/schema/index.ts';

const Databases = defineCustomResource({
  group: 'schema.opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  shortNames: ['sdb'],
  scope: 'Namespaced',
  description: 'Database is a managed MySQL or PostgreSQL cluster.',
  spec: s.object(
    {
      engine: s.enum(['mysql', 'postgres']),
      version: s.string({ minLength: 1 }),
      storage: s.quantity(),
      replicas: s.integer({ minimum: 1, maximum: 5, default: 1, format: 'int32' }),
      deletionPolicy: s.enum(['Retain', 'Delete'], { default: 'Retain' }),
      storageClassName: s.string().optional(),
    },
    {
      validations: [
        { rule: 'self.engine == oldSelf.engine', message: 'engine is immutable', fieldPath: '.engine' },
      ],
    },
  ),
  status: s.object({
    phase: s.enum(['Pending', 'Ready', 'Failed']).optional(),
    replicas: s.integer({ format: 'int32' }).optional(),
    readyReplicas: s.integer({ format: 'int32' }).optional(),
    selector: s.string().optional(),
    conditions: s.conditions().optional(),
  }),
  printerColumns: [
    { name: 'Engine', jsonPath: '.spec.engine' },
    { name: 'Replicas', jsonPath: '.spec.replicas' },
    { name: 'Phase', jsonPath: '.status.phase' },
    { name: 'Age', jsonPath: '.metadata.creationTimestamp' },
  ],
  scale: {
    specReplicasPath: '.spec.replicas',
    statusReplicasPath: '.status.replicas',
    labelSelectorPath: '.status.selector',
  },
  validations: [{ rule: 'self.metadata.name.size() <= 40', message: 'name must be at most 40 characters' }],
});
type Database = TypeOf<typeof Databases>;

/** Every builder in one CRD: the API server must take all of it as a structural schema. */
const Gadgets = defineCustomResource({
  group: 'schema.opkit.dev',
  version: 'v1',
  kind: 'Gadget',
  plural: 'gadgets',
  scope: 'Cluster',
  spec: s.object({
    name: s.string({ maxLength: 5, pattern: '^[a-z]+$' }).optional(),
    size: s.string({ enum: ['S', 'M', 'L'], default: 'M' }),
    ratio: s.number({ minimum: 0, exclusiveMinimum: true, maximum: 1, multipleOf: 0.25 }).optional(),
    enabled: s.boolean({ default: true }),
    port: s.intOrString({ default: 8080 }),
    when: s.string({ format: 'date-time' }).optional(),
    id: s.string({ format: 'uuid' }).optional(),
    note: s.string().nullable().optional(),
    tags: s.array(s.string(), { listType: 'set', maxItems: 3 }).optional(),
    ports: s
      .array(
        s.object({
          name: s.string(),
          port: s.integer({ minimum: 1, maximum: 65535 }),
          protocol: s.enum(['TCP', 'UDP'], { default: 'TCP' }),
        }),
        {
          listType: 'map',
          listMapKeys: ['name', 'protocol'],
          maxItems: 4,
        },
      )
      .optional(),
    labels: s.record(s.string({ maxLength: 63 }), { maxProperties: 2 }).optional(),
    resources: s.resources().optional(),
    selector: s.labelSelector().optional(),
    template: s.embedded().optional(),
    extra: s.unknown().optional(),
    config: s.unknownObject().optional(),
    backup: s
      .object({ schedule: s.string({ default: '@daily' }), keep: s.integer({ minimum: 0, default: 7 }) })
      .default({}),
    open: s.object({ known: s.string().optional() }, { preserveUnknownFields: true }).optional(),
    immutable: s.string().rule('self == oldSelf', 'immutable is immutable').optional(),
  }),
  status: s.object({
    conditions: s.conditions().optional(),
    observedGeneration: s.integer({ format: 'int64' }).optional(),
  }),
});

interface CrdStatus {
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
}
type CrdObject = CustomResourceDefinitionManifest & { status?: CrdStatus };
const CRDs: Resource<CrdObject> = defineResource<CrdObject>({
  group: 'apiextensions.k8s.io',
  version: 'v1',
  kind: 'CustomResourceDefinition',
  plural: 'customresourcedefinitions',
  namespaced: false,
});

let cp: ControlPlane;
let client: RestClient;
const NS = 'schema-test';

function kubectl(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('kubectl', ['--kubeconfig', cp.kubeconfigPath, ...args], { stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

/** Installs a CRD with `kubectl apply` and waits until the API server reports it Established. */
async function install(crd: CustomResourceDefinitionManifest, res: Resource): Promise<CrdObject> {
  const applied = await kubectl(['apply', '--server-side', '-f', '-'], JSON.stringify(crd));
  assert.equal(applied.code, 0, `kubectl apply failed: ${applied.stderr}`);
  const deadline = Date.now() + 30_000;
  let current: CrdObject;
  for (;;) {
    current = await client.get(CRDs, { name: crd.metadata.name });
    const established = current.status?.conditions?.find((c) => c.type === 'Established');
    if (established?.status === 'True') break;
    assert.ok(
      Date.now() < deadline,
      `${crd.metadata.name} not Established: ${JSON.stringify(current.status)}`,
    );
    await new Promise((r) => setTimeout(r, 100));
  }
  await client.waitForServed(res, { timeoutMs: 30_000 });
  return current;
}

/** Creates, retrying the NotFound a just-served CRD may still answer with. */
async function create<T extends KubeObject>(res: Resource<T>, obj: T): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await client.create(res, obj);
    } catch (err) {
      if (!(err instanceof NotFoundError) || i >= 50) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** The InvalidError a write fails with. */
async function rejection(write: Promise<unknown>): Promise<InvalidError> {
  try {
    await write;
  } catch (err) {
    if (err instanceof InvalidError) return err;
    throw err;
  }
  assert.fail('the API server accepted the object');
}

/**
 * Causes from the OpenAPI schema: without the note the CEL pass adds when it is skipped ('<nil>'), and
 * without the scale subresource's own complaint about a non-integer replicas field ('.spec.replicas').
 */
const schemaCauses = (err: InvalidError) =>
  err.causes
    .filter((c) => c.field !== '<nil>' && !c.field?.startsWith('.'))
    .map((c: StatusCause) => `${c.reason} ${c.field}: ${c.message}`)
    .sort();
const localCauses = (errors: FieldError[]) =>
  errors.map((e) => `${fieldErrorReason(e.type)} ${e.path}: ${e.message}`).sort();

const database = (name: string, spec: Record<string, unknown>): Database =>
  Databases.build({ metadata: { name, namespace: NS }, spec: spec as Database['spec'] });

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), {
      fieldManager: 'opkit-schema-test',
    });
    const ns = await kubectl(['create', 'namespace', NS]);
    assert.equal(ns.code, 0, ns.stderr);
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

describe('generated CRDs on a real API server', () => {
  test('the Database CRD is accepted: structural, CEL compiles, names accepted', async () => {
    const crd = await install(Databases.crd(), Databases.resource);
    const conditions = Object.fromEntries((crd.status?.conditions ?? []).map((c) => [c.type, c]));
    assert.equal(conditions.NamesAccepted?.status, 'True');
    assert.equal(conditions.Established?.status, 'True');
    assert.equal(conditions.NonStructuralSchema, undefined);
    // The server kept the schema as generated (nothing pruned or rewritten).
    assert.deepEqual(crd.spec.versions[0]?.schema.openAPIV3Schema, Databases.openAPISchema());
  });

  test('the kitchen-sink CRD is accepted too', async () => {
    const crd = await install(Gadgets.crd(), Gadgets.resource);
    assert.equal(
      crd.status?.conditions?.find((c) => c.type === 'NonStructuralSchema'),
      undefined,
    );
    assert.deepEqual(crd.spec.versions[0]?.schema.openAPIV3Schema, Gadgets.openAPISchema());
  });

  test('the API server defaults a Database the way applyDefaults does', async () => {
    const db = database('orders', { engine: 'postgres', version: '16', storage: '10Gi' });
    assert.deepEqual(Databases.validate(db), []);
    const created = await create(Databases.resource, db);
    assert.deepEqual(created.spec, Databases.applyDefaults(db).spec);
    assert.equal(created.spec.replicas, 1);
    assert.equal(created.spec.deletionPolicy, 'Retain');
  });

  test('replicas: 9 is rejected, naming spec.replicas, exactly as validate() says', async () => {
    const db = database('too-many', { engine: 'mysql', version: '8.0', storage: '1Gi', replicas: 9 });
    const local = Databases.validate(db);
    assert.deepEqual(
      local.map((e) => e.path),
      ['spec.replicas'],
    );
    const err = await rejection(client.create(Databases.resource, db));
    assert.equal(err.code, 422);
    assert.ok(err.causes.some((c) => c.field === 'spec.replicas'));
    assert.match(
      err.message,
      /spec\.replicas: Invalid value: 9: spec\.replicas in body should be less than or equal to 5/,
    );
    assert.deepEqual(schemaCauses(err), localCauses(local));
  });

  test('changing the immutable engine is rejected by the CEL rule, naming spec.engine', async () => {
    const current = await client.get(Databases.resource, { namespace: NS, name: 'orders' });
    const err = await rejection(
      client.update(Databases.resource, { ...current, spec: { ...current.spec, engine: 'mysql' } }),
    );
    assert.deepEqual(
      err.causes.map((c) => [c.field, c.reason]),
      [['spec.engine', 'FieldValueInvalid']],
    );
    assert.match(err.message, /spec\.engine: Invalid value: .*engine is immutable/);
    // Other fields still change.
    const updated = await client.update(Databases.resource, {
      ...current,
      spec: { ...current.spec, replicas: 3 },
    });
    assert.equal(updated.spec.replicas, 3);
  });

  test('the whole-object CEL rule runs', async () => {
    const long = `db-${'x'.repeat(40)}`;
    const err = await rejection(
      client.create(Databases.resource, database(long, { engine: 'mysql', version: '8', storage: 1 })),
    );
    assert.match(err.message, /name must be at most 40 characters/);
  });

  test('validate() matches the API server, cause for cause', async () => {
    const base = { engine: 'mysql', version: '8.0', storage: '1Gi' };
    const cases: Record<string, unknown>[] = [
      { ...base, engine: 'oracle', replicas: 0 },
      { ...base, engine: 5, replicas: 'three' },
      { engine: 'mysql', replicas: 2.5 },
      { ...base, version: '', storage: 'lots' },
      { ...base, storage: true, storageClassName: 7 },
      { ...base, deletionPolicy: 'Keep' },
    ];
    for (const [i, spec] of cases.entries()) {
      const db = database(`case-${i}`, spec);
      const local = Databases.validate(db);
      assert.ok(local.length > 0, `case ${i} should be invalid`);
      const err = await rejection(client.create(Databases.resource, db));
      assert.deepEqual(schemaCauses(err), localCauses(local), `case ${i}: ${JSON.stringify(spec)}`);
    }
  });

  test('gadgets: nested defaults, lists, maps and formats agree with the API server', async () => {
    const gadget = Gadgets.build({
      metadata: { name: 'g1' },
      spec: {
        ports: [{ name: 'http', port: 80 }],
        labels: { team: 'db' },
        resources: { requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: 2 } },
        selector: {
          matchLabels: { app: 'g' },
          matchExpressions: [{ key: 'tier', operator: 'In', values: ['a'] }],
        },
        template: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [] } },
        extra: [1, 'two', { three: 3 }],
        config: { anything: { goes: true } },
        open: { known: 'k', unknown: 'kept' },
        note: null,
        immutable: 'x',
      },
    });
    assert.deepEqual(Gadgets.validate(gadget), []);
    const created = await create(Gadgets.resource, gadget);
    assert.deepEqual(created.spec, Gadgets.applyDefaults(gadget).spec);
    assert.deepEqual(created.spec.backup, { schedule: '@daily', keep: 7 });
    assert.deepEqual(created.spec.ports, [{ name: 'http', port: 80, protocol: 'TCP' }]);

    const bad: Record<string, unknown>[] = [
      { name: 'TooLongName', tags: ['a', 'b', 'a', 'c'] },
      { ratio: 0, port: true, when: 'yesterday', id: 'nope' },
      { ratio: 0.3, labels: { a: 'x', b: 'y', c: 'z' } },
      { ports: [{ name: 'a', port: 0 }, { name: 'a', port: 1, protocol: 'TCP' }, { port: 2 }] },
      { resources: { limits: { cpu: 'lots' } }, template: { spec: {} } },
      { backup: { keep: -1 }, enabled: 'yes', size: 'XL' },
    ];
    for (const [i, spec] of bad.entries()) {
      const g = Gadgets.build({
        metadata: { name: `bad-${i}` },
        spec: spec as TypeOf<typeof Gadgets>['spec'],
      });
      const local = Gadgets.validate(g);
      assert.ok(local.length > 0, `case ${i} should be invalid`);
      const err = await rejection(client.create(Gadgets.resource, g));
      assert.deepEqual(schemaCauses(err), localCauses(local), `case ${i}: ${JSON.stringify(spec)}`);
    }
  });

  test('printer columns and the scale subresource work with kubectl', async () => {
    const get = await kubectl(['get', 'databases.schema.opkit.dev', '-n', NS, 'orders']);
    assert.equal(get.code, 0, get.stderr);
    assert.match(get.stdout, /^NAME\s+ENGINE\s+REPLICAS\s+PHASE\s+AGE\n/);
    assert.match(get.stdout, /orders\s+postgres\s+3\s+/);
    const scale = await kubectl(['scale', 'databases.schema.opkit.dev/orders', '-n', NS, '--replicas=4']);
    assert.equal(scale.code, 0, scale.stderr);
    const scaled = await client.get(Databases.resource, { namespace: NS, name: 'orders' });
    assert.equal(scaled.spec.replicas, 4);
    // Through the scale subresource too, the schema's maximum holds.
    const over = await kubectl(['scale', 'databases.schema.opkit.dev/orders', '-n', NS, '--replicas=9']);
    assert.notEqual(over.code, 0);
    assert.match(over.stderr, /spec\.replicas/);
  });

  test('status goes through the status subresource and is validated', async () => {
    const current = await client.get(Databases.resource, { namespace: NS, name: 'orders' });
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const withStatus: Database = {
      ...current,
      status: {
        phase: 'Ready',
        replicas: 4,
        conditions: [{ type: 'Ready', status: 'True', reason: 'Up', message: '', lastTransitionTime: now }],
      },
    };
    assert.deepEqual(Databases.validate(withStatus), []);
    const updated = await client.updateStatus(Databases.resource, withStatus);
    assert.equal(updated.status?.phase, 'Ready');
    const dup: Database = {
      ...updated,
      status: {
        ...updated.status,
        conditions: [...(updated.status?.conditions ?? []), ...(updated.status?.conditions ?? [])],
      },
    };
    const local = Databases.validate(dup);
    assert.deepEqual(
      local.map((e) => `${e.type} ${e.path}`),
      ['Duplicate status.conditions[1]'],
    );
    const err = await rejection(client.updateStatus(Databases.resource, dup));
    assert.deepEqual(schemaCauses(err), localCauses(local));
    assert.ok(err instanceof ApiError);
  });
});

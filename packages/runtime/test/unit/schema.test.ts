/**
 * The schema DSL: type inference, the structural openAPIV3Schema, client-side validation and defaulting,
 * and defineCustomResource's CRD manifest.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Condition, KubeObject } from '../../src/api/object.ts';
import {
  applyDefaults,
  assertValid,
  type CustomObject,
  checkSchema,
  type DefaultedTypeOf,
  defineCustomResource,
  type FieldError,
  formatFieldError,
  type Infer,
  type InferDefaulted,
  type IntOrString,
  type LabelSelector,
  QUANTITY_PATTERN,
  type Quantity,
  type ResourceRequirements,
  SchemaError,
  SchemaValidationError,
  type SpecOf,
  type StatusOf,
  s,
  type TypeOf,
  toOpenAPI,
  validate,
} from '../../src/schema/index.ts';

/** Compile-time assertions: `expectType<Equal<A, B>>()` fails to type-check unless A and B are identical. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(): T | undefined {
  return undefined;
}

const DatabaseSpec = s.object(
  {
    engine: s.enum(['mysql', 'postgres'], { description: 'The database engine.' }),
    version: s.string({ description: 'Engine version, e.g. "8.0".', minLength: 1 }),
    storage: s.quantity({ description: 'Size of each volume.' }),
    replicas: s.integer({ minimum: 1, maximum: 5, default: 1, format: 'int32' }),
    deletionPolicy: s.enum(['Retain', 'Delete'], { default: 'Retain' }),
    storageClassName: s.string().optional(),
  },
  {
    description: 'DatabaseSpec is the desired state of a Database.',
    validations: [
      { rule: 'self.engine == oldSelf.engine', message: 'engine is immutable', fieldPath: '.engine' },
    ],
  },
);

const DatabaseStatus = s.object({
  phase: s.enum(['Pending', 'Ready', 'Failed']).optional(),
  replicas: s.integer({ format: 'int32' }).optional(),
  readyReplicas: s.integer({ format: 'int32' }).optional(),
  selector: s.string().optional(),
  observedGeneration: s.integer({ format: 'int64' }).optional(),
  conditions: s.conditions().optional(),
});

const Databases = defineCustomResource({
  group: 'opkit.dev',
  version: 'v1alpha1',
  kind: 'Database',
  plural: 'databases',
  shortNames: ['db'],
  categories: ['opkit'],
  scope: 'Namespaced',
  description: 'Database is a managed MySQL or PostgreSQL cluster.',
  spec: DatabaseSpec,
  status: DatabaseStatus,
  printerColumns: [
    { name: 'Engine', jsonPath: '.spec.engine' },
    { name: 'Replicas', jsonPath: '.spec.replicas' },
    { name: 'Ready', jsonPath: '.status.readyReplicas' },
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

const db = (spec: Record<string, unknown>, name = 'orders'): unknown => ({
  apiVersion: 'opkit.dev/v1alpha1',
  kind: 'Database',
  metadata: { name, namespace: 'shop' },
  spec,
});
const valid = { engine: 'postgres', version: '16', storage: '10Gi' };
const brief = (errors: FieldError[]) => errors.map((e) => `${e.type} ${e.path}`).sort();

describe('type inference', () => {
  test('object, enum, quantity, optional and defaulted keys', () => {
    type Spec = Infer<typeof DatabaseSpec>;
    expectType<
      Equal<
        Spec,
        {
          engine: 'mysql' | 'postgres';
          version: string;
          storage: Quantity;
          replicas?: number;
          deletionPolicy?: 'Retain' | 'Delete';
          storageClassName?: string;
        }
      >
    >();
    // After defaulting (as read back from the API server) the defaulted keys are present.
    expectType<
      Equal<
        InferDefaulted<typeof DatabaseSpec>,
        {
          engine: 'mysql' | 'postgres';
          version: string;
          storage: Quantity;
          replicas: number;
          deletionPolicy: 'Retain' | 'Delete';
          storageClassName?: string;
        }
      >
    >();
    const plain = s.string();
    expectType<Equal<Infer<typeof plain>, string>>();
    const sized = s.string({ enum: ['S', 'M', 'L'], default: 'M' });
    expectType<Equal<Infer<typeof sized>, 'S' | 'M' | 'L'>>();
    expectType<Equal<typeof sized.presence, 'defaulted'>>();
    const port = s.intOrString();
    expectType<Equal<Infer<typeof port>, IntOrString>>();
    const tags = s.array(s.string(), { listType: 'set' });
    expectType<Equal<Infer<typeof tags>, string[]>>();
    const labels = s.record(s.string());
    expectType<Equal<Infer<typeof labels>, Record<string, string>>>();
    const maybe = s.string().nullable().optional();
    const holder = s.object({ maybe, n: s.default(s.number(), 0.5), u: s.unknown() });
    expectType<Equal<Infer<typeof holder>, { u: unknown; maybe?: string | null; n?: number }>>();
    const open = s.object({ a: s.string() }, { preserveUnknownFields: true });
    expectType<Equal<Infer<typeof open>, { a: string } & { [key: string]: unknown }>>();
    // The canned schemas carry the runtime's types.
    expectType<Equal<Infer<ReturnType<typeof s.conditions>>, Condition[]>>();
    const conds: Condition[] = [] as Infer<ReturnType<typeof s.conditions>>;
    expectType<Equal<Infer<ReturnType<typeof s.resources>>, ResourceRequirements>>();
    expectType<Equal<Infer<ReturnType<typeof s.labelSelector>>, LabelSelector>>();
    assert.deepEqual(conds, []);
  });

  test('custom resource object types', () => {
    expectType<Equal<SpecOf<typeof Databases>, Infer<typeof DatabaseSpec>>>();
    expectType<Equal<StatusOf<typeof Databases>, Infer<typeof DatabaseStatus>>>();
    expectType<Equal<Database, CustomObject<Infer<typeof DatabaseSpec>, Infer<typeof DatabaseStatus>>>>();
    const d: Database = {
      metadata: { name: 'orders' },
      spec: { engine: 'mysql', version: '8.0', storage: '1Gi' },
      status: { phase: 'Ready', conditions: [] },
    };
    const k: KubeObject = d;
    const stored: DefaultedTypeOf<typeof Databases> = Databases.applyDefaults(d);
    const replicas: number = stored.spec.replicas;
    assert.equal(replicas, 1);
    assert.equal(k.metadata.name, 'orders');
    const Plain = defineCustomResource({
      group: 'opkit.dev',
      version: 'v1',
      kind: 'Plain',
      plural: 'plains',
      scope: 'Cluster',
      spec: s.object({ size: s.integer().optional() }),
    });
    expectType<Equal<TypeOf<typeof Plain>, CustomObject<{ size?: number }, never>>>();
  });

  test('mistakes do not compile', () => {
    // @ts-expect-error 'oracle' is not an engine
    const bad: Infer<typeof DatabaseSpec> = { engine: 'oracle', version: '1', storage: 1 };
    // @ts-expect-error version is required
    const missing: Infer<typeof DatabaseSpec> = { engine: 'mysql', storage: 1 };
    // @ts-expect-error the default must be one of the values
    assert.throws(() => s.enum(['a', 'b'], { default: 'c' }), TypeError);
    // @ts-expect-error list map keys are keys of the item
    s.array(s.object({ name: s.string() }), { listType: 'map', listMapKeys: ['nmae'] });
    // @ts-expect-error a default has the schema's type
    s.integer().default('1');
    // @ts-expect-error spec is required on a Database
    const noSpec: Database = { metadata: { name: 'x' } };
    assert.ok(bad && missing && noSpec);
  });
});

describe('toOpenAPI', () => {
  test('the Database spec', () => {
    assert.deepEqual(toOpenAPI(DatabaseSpec), {
      type: 'object',
      description: 'DatabaseSpec is the desired state of a Database.',
      properties: {
        engine: { type: 'string', enum: ['mysql', 'postgres'], description: 'The database engine.' },
        version: { type: 'string', minLength: 1, description: 'Engine version, e.g. "8.0".' },
        storage: {
          anyOf: [{ type: 'integer' }, { type: 'string' }],
          pattern: QUANTITY_PATTERN,
          'x-kubernetes-int-or-string': true,
          description: 'Size of each volume.',
        },
        replicas: { type: 'integer', format: 'int32', minimum: 1, maximum: 5, default: 1 },
        deletionPolicy: { type: 'string', enum: ['Retain', 'Delete'], default: 'Retain' },
        storageClassName: { type: 'string' },
      },
      required: ['engine', 'version', 'storage'],
      'x-kubernetes-validations': [
        { rule: 'self.engine == oldSelf.engine', message: 'engine is immutable', fieldPath: '.engine' },
      ],
    });
  });

  test('the quantity pattern is the one k8s.io/apimachinery generates', () => {
    assert.equal(
      QUANTITY_PATTERN,
      String.raw`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`,
    );
    const re = new RegExp(QUANTITY_PATTERN);
    for (const q of ['1', '500m', '1Gi', '2.5', '.5', '1e3', '+1k', '-1M']) assert.ok(re.test(q), q);
    for (const q of ['', 'abc', '1GB', '1 Gi', 'Gi']) assert.ok(!re.test(q), q);
  });

  test('arrays, maps, int-or-string, unknown and embedded objects', () => {
    assert.deepEqual(toOpenAPI(s.array(s.string(), { listType: 'set', maxItems: 3, minItems: 1 })), {
      type: 'array',
      items: { type: 'string' },
      minItems: 1,
      maxItems: 3,
      'x-kubernetes-list-type': 'set',
    });
    assert.deepEqual(toOpenAPI(s.record(s.integer({ minimum: 0 }), { maxProperties: 4 })), {
      type: 'object',
      additionalProperties: { type: 'integer', minimum: 0 },
      maxProperties: 4,
    });
    assert.deepEqual(toOpenAPI(s.intOrString({ default: '25%' })), {
      anyOf: [{ type: 'integer' }, { type: 'string' }],
      'x-kubernetes-int-or-string': true,
      default: '25%',
    });
    assert.deepEqual(toOpenAPI(s.unknown()), { 'x-kubernetes-preserve-unknown-fields': true });
    assert.deepEqual(toOpenAPI(s.unknownObject()), {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    });
    assert.deepEqual(toOpenAPI(s.embedded({ description: 'A pod template.' })), {
      type: 'object',
      'x-kubernetes-embedded-resource': true,
      'x-kubernetes-preserve-unknown-fields': true,
      description: 'A pod template.',
    });
    assert.deepEqual(
      toOpenAPI(
        s.object(
          { a: s.number({ minimum: 0, exclusiveMinimum: true, multipleOf: 0.5 }).nullable() },
          { preserveUnknownFields: true, mapType: 'atomic' },
        ),
      ),
      {
        type: 'object',
        properties: {
          a: { type: 'number', minimum: 0, exclusiveMinimum: true, multipleOf: 0.5, nullable: true },
        },
        required: ['a'],
        'x-kubernetes-preserve-unknown-fields': true,
        'x-kubernetes-map-type': 'atomic',
      },
    );
  });

  test('modifiers are immutable and chainable', () => {
    const base = s.string();
    const rich = base
      .describe('the name')
      .rule('self.size() > 0', 'must not be empty')
      .rule({ rule: 'self == oldSelf', message: 'is immutable', reason: 'FieldValueForbidden' })
      .default('x');
    assert.deepEqual(toOpenAPI(base), { type: 'string' });
    assert.deepEqual(toOpenAPI(rich), {
      type: 'string',
      description: 'the name',
      default: 'x',
      'x-kubernetes-validations': [
        { rule: 'self.size() > 0', message: 'must not be empty' },
        { rule: 'self == oldSelf', message: 'is immutable', reason: 'FieldValueForbidden' },
      ],
    });
    assert.equal(base.presence, 'required');
    assert.equal(base.optional().presence, 'optional');
    assert.equal(rich.presence, 'defaulted');
    assert.equal(rich.optional().presence, 'defaulted', 'optional() keeps a default');
    assert.ok(Object.isFrozen(rich) && Object.isFrozen(rich.def));
  });

  test('conditions, resources and label selectors look like controller-gen output', () => {
    const conditions = toOpenAPI(s.conditions());
    assert.equal(conditions.type, 'array');
    assert.equal(conditions['x-kubernetes-list-type'], 'map');
    assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type']);
    assert.deepEqual(conditions.items?.required, [
      'type',
      'status',
      'lastTransitionTime',
      'reason',
      'message',
    ]);
    assert.deepEqual(conditions.items?.properties?.status?.enum, ['True', 'False', 'Unknown']);
    assert.equal(conditions.items?.properties?.lastTransitionTime?.format, 'date-time');
    assert.deepEqual(conditions.items?.properties?.observedGeneration, {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      description: 'The .metadata.generation the condition was set based upon.',
    });

    const resources = toOpenAPI(s.resources());
    assert.equal(resources.type, 'object');
    assert.equal(resources.required, undefined);
    for (const k of ['limits', 'requests'] as const) {
      const map = resources.properties?.[k];
      assert.equal(map?.type, 'object');
      assert.deepEqual(map?.additionalProperties, {
        anyOf: [{ type: 'integer' }, { type: 'string' }],
        pattern: QUANTITY_PATTERN,
        'x-kubernetes-int-or-string': true,
      });
    }
    assert.deepEqual(resources.properties?.claims?.['x-kubernetes-list-map-keys'], ['name']);

    const selector = toOpenAPI(s.labelSelector());
    assert.equal(selector['x-kubernetes-map-type'], 'atomic');
    assert.deepEqual(selector.properties?.matchLabels, {
      type: 'object',
      additionalProperties: { type: 'string' },
    });
    assert.deepEqual(selector.properties?.matchExpressions?.items?.required, ['key', 'operator']);
  });

  test('reports what the API server would reject', () => {
    const problems = (schema: Parameters<typeof checkSchema>[0]) => checkSchema(schema).join('\n');
    assert.match(
      problems(
        s.object({
          ports: s.array(s.object({ name: s.string().optional(), port: s.integer() }), {
            listType: 'map',
            listMapKeys: ['name'],
          }),
        }),
      ),
      /ports: list map key "name" must be required or have a default/,
    );
    assert.match(
      problems(s.array(s.object({ a: s.string() }), { listType: 'set' })),
      /listType 'set' needs scalar items/,
    );
    assert.match(problems(s.array(s.string(), { listType: 'map' })), /listType 'map' needs object items/);
    assert.match(
      problems(s.object({ n: s.integer({ maximum: 5 }).default(9) })),
      /n: default is invalid: n.default: Invalid value: 9: n.default in body should be less than or equal to 5/,
    );
    assert.match(
      problems(s.object({ o: s.object({ a: s.string() }).default({ a: 'x', b: 1 } as { a: string }) })),
      /o.default.b: Forbidden/,
    );
    assert.match(problems(s.string({ pattern: '([' })), /pattern "\(\[" does not compile/);
    assert.match(problems(s.integer({ minimum: 0.5 })), /minimum 0.5 is not an integer/);
    assert.deepEqual(checkSchema(DatabaseSpec), []);
    assert.throws(() => toOpenAPI(s.array(s.string(), { listType: 'map' })), SchemaError);
    assert.throws(() => s.string({ enum: ['a'], default: 'b' }), /not one of the enum values/);
    assert.throws(() => s.quantity({ default: 'lots' }), /not a quantity/);
  });
});

describe('validate', () => {
  test('a valid Database has no errors', () => {
    assert.deepEqual(Databases.validate(db(valid)), []);
    assert.deepEqual(
      Databases.validate(
        db({
          ...valid,
          replicas: 5,
          deletionPolicy: 'Delete',
          storage: 10737418240,
          storageClassName: 'fast',
        }),
      ),
      [],
    );
  });

  test('replicas out of range and an unsupported engine, with API server paths and messages', () => {
    const errors = Databases.validate(db({ ...valid, engine: 'oracle', replicas: 9 }));
    assert.deepEqual(errors, [
      {
        type: 'NotSupported',
        path: 'spec.engine',
        message: 'Unsupported value: "oracle": supported values: "mysql", "postgres"',
        value: 'oracle',
      },
      {
        type: 'Invalid',
        path: 'spec.replicas',
        message: 'Invalid value: 9: spec.replicas in body should be less than or equal to 5',
        value: 9,
      },
    ]);
    assert.equal(
      formatFieldError(errors[1]!),
      'spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5',
    );
    const low = Databases.validate(db({ ...valid, replicas: 0 }));
    assert.equal(
      low[0]?.message,
      'Invalid value: 0: spec.replicas in body should be greater than or equal to 1',
    );
  });

  test('required fields, wrong types, bad quantities, metadata', () => {
    assert.deepEqual(brief(Databases.validate(db({ engine: 'mysql' }))), [
      'Required spec.storage',
      'Required spec.version',
    ]);
    const typed = Databases.validate(db({ ...valid, replicas: 2.5, version: 16, storage: 'lots' }));
    assert.deepEqual(brief(typed), [
      'Invalid spec.storage',
      'TypeInvalid spec.replicas',
      'TypeInvalid spec.version',
    ]);
    assert.equal(
      typed.find((e) => e.path === 'spec.replicas')?.message,
      'Invalid value: "number": spec.replicas in body must be of type integer: "number"',
    );
    assert.match(typed.find((e) => e.path === 'spec.storage')?.message ?? '', /should match/);
    assert.deepEqual(brief(Databases.validate({ metadata: { name: 'x' } })), ['Required spec']);
    assert.deepEqual(brief(Databases.validate(db(valid, 'Bad_Name'))), ['Invalid metadata.name']);
    assert.deepEqual(brief(Databases.validate({ kind: 'Database', spec: valid })), ['Required metadata']);
    assert.deepEqual(brief(Databases.validate({ ...(db(valid) as object), kind: 'Table' })), [
      'Invalid kind',
    ]);
    assert.deepEqual(brief(Databases.validate({ metadata: { generateName: 'db-' }, spec: valid })), []);
  });

  test('status: conditions are a map keyed by type', () => {
    const cond = (type: string) => ({
      type,
      status: 'True',
      reason: 'Ok',
      message: '',
      lastTransitionTime: '2025-01-01T00:00:00Z',
    });
    const obj = {
      ...(db(valid) as object),
      status: { conditions: [cond('Ready'), cond('Synced'), cond('Ready')] },
    };
    const errors = Databases.validate(obj);
    assert.deepEqual(errors, [
      {
        type: 'Duplicate',
        path: 'status.conditions[2]',
        message: 'Duplicate value: {"type":"Ready"}',
        value: { type: 'Ready' },
      },
    ]);
    const broken = { ...cond('Ready'), status: 'Maybe', lastTransitionTime: 'yesterday', reason: '' };
    assert.deepEqual(
      brief(Databases.validate({ ...(db(valid) as object), status: { conditions: [broken] } })),
      [
        'Invalid status.conditions[0].reason',
        'NotSupported status.conditions[0].status',
        'TypeInvalid status.conditions[0].lastTransitionTime',
      ],
    );
  });

  test('arrays, sets, maps, lengths, formats, null', () => {
    const schema = s.object({
      name: s.string({ minLength: 2, maxLength: 5, pattern: '^[a-z]+$' }).optional(),
      tags: s.array(s.string(), { listType: 'set', maxItems: 3 }).optional(),
      items: s
        .array(s.object({ name: s.string(), v: s.integer().optional() }), {
          listType: 'map',
          listMapKeys: ['name'],
          minItems: 1,
        })
        .optional(),
      limits: s.record(s.quantity(), { maxProperties: 2 }).optional(),
      labels: s.record(s.string({ maxLength: 3 })).optional(),
      id: s.string({ format: 'uuid' }).optional(),
      flag: s.boolean().optional(),
      maybe: s.string().nullable().optional(),
      port: s.intOrString().optional(),
      pod: s.embedded().optional(),
    });
    const check = (v: unknown) => brief(validate(schema, v, { path: 'spec' }));
    // Only the first failing string constraint is reported (maxLength, minLength, pattern), as upstream.
    assert.deepEqual(check({ name: 'ABCDEFG' }), ['TooLong spec.name']);
    assert.deepEqual(check({ name: 'abc1' }), ['Invalid spec.name']);
    assert.deepEqual(check({ name: 'a' }), ['Invalid spec.name']);
    assert.deepEqual(check({ tags: ['a', 'b', 'a', 'c'] }), ['Duplicate spec.tags[2]', 'TooMany spec.tags']);
    assert.deepEqual(check({ items: [] }), ['Invalid spec.items']);
    assert.deepEqual(check({ items: [{ name: 'a' }, { name: 'a', v: 1 }, { v: 2 }] }), [
      'Duplicate spec.items[1]',
      'Required spec.items[2].name',
    ]);
    assert.deepEqual(check({ limits: { cpu: 'abc', memory: '1Gi', 'nvidia.com/gpu': 1 } }), [
      'Invalid spec.limits.cpu',
      'TooMany spec.limits',
    ]);
    assert.deepEqual(check({ labels: { 'a.b/c': 'toolong' } }), ['TooLong spec.labels.a.b/c']);
    assert.deepEqual(check({ id: 'nope', flag: 'yes', port: true }), [
      'TypeInvalid spec.flag',
      'TypeInvalid spec.id',
      'TypeInvalid spec.port',
      'TypeInvalid spec.port',
    ]);
    assert.deepEqual(check({ id: '0b5e4a4e-8a1f-4c4b-9d59-0d0f3c2b1a00', port: '80%', maybe: null }), []);
    // Non-nullable nulls: dropped in objects (so only a required one fails), type errors in arrays.
    assert.deepEqual(check({ name: null, labels: { a: null } }), []);
    assert.deepEqual(check({ items: [{ name: null }], tags: [null] }), [
      'Required spec.items[0].name',
      'TypeInvalid spec.tags[0]',
    ]);
    assert.deepEqual(check({ pod: { spec: {} } }), [
      'Required spec.pod.apiVersion',
      'Required spec.pod.kind',
    ]);
    assert.deepEqual(check({ items: 'x', tags: {}, limits: [] }), [
      'TypeInvalid spec.items',
      'TypeInvalid spec.limits',
      'TypeInvalid spec.tags',
    ]);
    assert.deepEqual(check('x'), ['TypeInvalid spec']);
  });

  test("the duration format: Go's units, microseconds with either micro sign", () => {
    const schema = s.string({ format: 'duration' });
    for (const ok of ['10h', '1h30m', '-1.5s', '250ms', '3us', '3\u00b5s', '3\u03bcs', '1m 30s']) {
      assert.deepEqual(validate(schema, ok), [], ok);
    }
    for (const bad of ['', 'h', '10', '1s junk!', '1s;']) {
      assert.deepEqual(
        brief(validate(schema, bad, { path: 'spec.timeout' })),
        ['TypeInvalid spec.timeout'],
        bad,
      );
    }
  });

  test('values are validated after defaulting, as the API server does', () => {
    const ports = s.array(
      s.object({ name: s.string(), protocol: s.enum(['TCP', 'UDP'], { default: 'TCP' }) }),
      { listType: 'map', listMapKeys: ['name', 'protocol'] },
    );
    const value = [{ name: 'a' }, { name: 'a', protocol: 'TCP' }];
    assert.deepEqual(brief(validate(ports, value, { path: 'spec.ports' })), ['Duplicate spec.ports[1]']);
    assert.deepEqual(validate(ports, value, { defaults: false }), []);
  });

  test('unknown fields are ignored unless rejected', () => {
    assert.deepEqual(Databases.validate(db({ ...valid, extra: 1 })), []);
    assert.deepEqual(brief(Databases.validate(db({ ...valid, extra: 1 }), { unknownFields: 'reject' })), [
      'Forbidden spec.extra',
    ]);
    const strict = s.object({ a: s.string() }, { additionalProperties: false });
    assert.deepEqual(brief(validate(strict, { a: 'x', b: 1 })), ['Forbidden b']);
  });

  test('assertValid narrows or throws with every error', () => {
    const value: unknown = { engine: 'mysql', version: '8', storage: 1 };
    assertValid(DatabaseSpec, value);
    const engine: 'mysql' | 'postgres' = value.engine;
    assert.equal(engine, 'mysql');
    assert.throws(
      () => assertValid(DatabaseSpec, { engine: 'mysql' }, { path: 'spec' }),
      (err: unknown) =>
        err instanceof SchemaValidationError &&
        err.errors.length === 2 &&
        err.message === 'value is invalid: [spec.version: Required value, spec.storage: Required value]',
    );
  });
});

describe('applyDefaults', () => {
  test('fills defaults like the API server, without touching the input', () => {
    const input = { engine: 'mysql' as const, version: '8.0', storage: '1Gi' };
    const out = applyDefaults(DatabaseSpec, input);
    assert.deepEqual(out, {
      engine: 'mysql',
      version: '8.0',
      storage: '1Gi',
      replicas: 1,
      deletionPolicy: 'Retain',
    });
    assert.deepEqual(input, { engine: 'mysql', version: '8.0', storage: '1Gi' });
    assert.equal(applyDefaults(DatabaseSpec, { ...input, replicas: 3 }).replicas, 3);
    // A non-nullable null is dropped, or defaulted when there is a default.
    const nulls = { ...input, storageClassName: null } as unknown as typeof input;
    assert.equal('storageClassName' in applyDefaults(DatabaseSpec, nulls), false);
    assert.equal(
      applyDefaults(DatabaseSpec, { ...input, replicas: null } as unknown as typeof input).replicas,
      1,
    );
  });

  test('defaults nest: inside defaults, arrays and maps', () => {
    const schema = s.object({
      backup: s
        .object({ enabled: s.boolean({ default: false }), schedule: s.string({ default: '@daily' }) })
        .default({}),
      users: s.array(s.object({ name: s.string(), admin: s.boolean({ default: false }) })).optional(),
      pools: s.record(s.object({ size: s.integer({ default: 5 }) })).optional(),
      note: s.string().nullable().default('n'),
    });
    const out = applyDefaults(schema, {
      users: [{ name: 'a' }, { name: 'b', admin: true }],
      pools: { x: {} },
      note: null,
    });
    assert.deepEqual(out, {
      backup: { enabled: false, schedule: '@daily' },
      users: [
        { name: 'a', admin: false },
        { name: 'b', admin: true },
      ],
      pools: { x: { size: 5 } },
      note: null,
    });
    const schedule: string = out.backup.schedule;
    assert.equal(schedule, '@daily');
  });

  test('a Database read back has its defaults', () => {
    const out = Databases.applyDefaults(
      Databases.build({ metadata: { name: 'a' }, spec: valid as Database['spec'] }),
    );
    assert.equal(out.spec.replicas, 1);
    assert.equal(out.spec.deletionPolicy, 'Retain');
  });
});

describe('defineCustomResource', () => {
  test('the Resource descriptor and helpers', () => {
    const r = Databases.resource;
    assert.deepEqual(
      { ...r },
      {
        group: 'opkit.dev',
        version: 'v1alpha1',
        kind: 'Database',
        plural: 'databases',
        namespaced: true,
        apiVersion: 'opkit.dev/v1alpha1',
      },
    );
    assert.equal(Databases.crdName, 'databases.opkit.dev');
    assert.equal(Databases.singular, 'database');
    assert.equal(Databases.listKind, 'DatabaseList');
    const built = Databases.build({
      metadata: { name: 'a', namespace: 'b' },
      spec: valid as Database['spec'],
    });
    assert.deepEqual(built, {
      apiVersion: 'opkit.dev/v1alpha1',
      kind: 'Database',
      metadata: { name: 'a', namespace: 'b' },
      spec: valid,
    });
    assert.ok(Databases.is(built));
    assert.ok(!Databases.is({ apiVersion: 'v1', kind: 'ConfigMap', metadata: {} }));
  });

  test('the CRD manifest', () => {
    const crd = Databases.crd();
    assert.equal(crd.apiVersion, 'apiextensions.k8s.io/v1');
    assert.equal(crd.kind, 'CustomResourceDefinition');
    assert.deepEqual(crd.metadata, { name: 'databases.opkit.dev' });
    assert.deepEqual(crd.spec.names, {
      kind: 'Database',
      listKind: 'DatabaseList',
      plural: 'databases',
      singular: 'database',
      shortNames: ['db'],
      categories: ['opkit'],
    });
    assert.equal(crd.spec.scope, 'Namespaced');
    assert.equal(crd.spec.versions.length, 1);
    const v = crd.spec.versions[0]!;
    assert.equal(v.name, 'v1alpha1');
    assert.ok(v.served && v.storage);
    assert.deepEqual(v.subresources, {
      status: {},
      scale: {
        specReplicasPath: '.spec.replicas',
        statusReplicasPath: '.status.replicas',
        labelSelectorPath: '.status.selector',
      },
    });
    assert.deepEqual(v.additionalPrinterColumns, [
      { name: 'Engine', type: 'string', jsonPath: '.spec.engine' },
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ]);
    const root = v.schema.openAPIV3Schema;
    assert.equal(root.type, 'object');
    assert.equal(root.description, 'Database is a managed MySQL or PostgreSQL cluster.');
    assert.deepEqual(Object.keys(root.properties ?? {}), [
      'apiVersion',
      'kind',
      'metadata',
      'spec',
      'status',
    ]);
    assert.equal(root.properties?.apiVersion?.type, 'string');
    assert.equal(root.properties?.kind?.type, 'string');
    assert.deepEqual(root.properties?.metadata, { type: 'object' });
    assert.deepEqual(root.properties?.spec, toOpenAPI(DatabaseSpec));
    assert.deepEqual(root.properties?.status, toOpenAPI(DatabaseStatus));
    assert.deepEqual(root.required, ['spec']);
    assert.deepEqual(root['x-kubernetes-validations'], [
      { rule: 'self.metadata.name.size() <= 40', message: 'name must be at most 40 characters' },
    ]);
    // Each call is a fresh copy.
    crd.spec.versions.length = 0;
    assert.equal(Databases.crd().spec.versions.length, 1);
    assert.deepEqual(Databases.openAPISchema(), root);
  });

  test('a spec without required fields defaults to {}; spec rules; no status', () => {
    const Tuning = defineCustomResource({
      group: 'opkit.dev',
      version: 'v1',
      kind: 'Tuning',
      plural: 'tunings',
      scope: 'Cluster',
      spec: s.object({ level: s.integer({ default: 3 }) }),
      validations: { spec: [{ rule: 'self.level <= 10', message: 'too high' }] },
    });
    const crd = Tuning.crd();
    const v = crd.spec.versions[0]!;
    assert.equal(v.subresources, undefined);
    assert.equal(v.additionalPrinterColumns, undefined);
    const root = v.schema.openAPIV3Schema;
    assert.equal(root.required, undefined);
    assert.deepEqual(root.properties?.spec?.default, {});
    assert.deepEqual(root.properties?.spec?.['x-kubernetes-validations'], [
      { rule: 'self.level <= 10', message: 'too high' },
    ]);
    assert.equal(root.properties?.status, undefined);
    const out = Tuning.applyDefaults({ metadata: { name: 't' } } as TypeOf<typeof Tuning>);
    assert.deepEqual(out.spec, { level: 3 });
    assert.deepEqual(brief(Tuning.validate({ metadata: { name: 't', namespace: 'x' } })), [
      'Forbidden metadata.namespace',
    ]);
  });

  test('inconsistent definitions fail early', () => {
    const base = {
      group: 'opkit.dev',
      version: 'v1',
      kind: 'Thing',
      plural: 'things',
      scope: 'Namespaced' as const,
      spec: s.object({ size: s.integer(), name: s.string() }),
      status: s.object({ count: s.integer().optional(), tags: s.array(s.string()).optional() }),
    };
    const fails = (extra: object, pattern: RegExp) =>
      assert.throws(
        () => defineCustomResource({ ...base, ...extra }),
        (err: unknown) => {
          assert.ok(err instanceof SchemaError);
          assert.match(err.message, pattern);
          return true;
        },
      );
    fails({ group: 'nodots' }, /group "nodots" must be a lower-case DNS subdomain/);
    fails({ plural: 'Things' }, /plural "Things" must be a DNS label/);
    fails(
      { printerColumns: [{ name: 'Tags', jsonPath: '.status.tags' }] },
      /cannot infer the type of .status.tags/,
    );
    fails(
      { scale: { specReplicasPath: '.spec.name', statusReplicasPath: '.status.count' } },
      /specReplicasPath .spec.name must be an integer/,
    );
    fails(
      { scale: { specReplicasPath: '.spec.size', statusReplicasPath: '.status.missing' } },
      /statusReplicasPath .status.missing is not declared/,
    );
    fails(
      { spec: s.object({ n: s.integer({ maximum: 1 }).default(2) }) },
      /Thing: spec.n: default is invalid/,
    );
    const ok = defineCustomResource({
      ...base,
      printerColumns: [{ name: 'Tags', jsonPath: '.status.tags', type: 'string', priority: 1 }],
      scale: { specReplicasPath: '.spec.size', statusReplicasPath: '.status.count' },
    });
    assert.equal(ok.crd().spec.versions[0]?.additionalPrinterColumns?.[0]?.priority, 1);
  });
});

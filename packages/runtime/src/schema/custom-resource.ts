/**
 * defineCustomResource: one definition of a custom resource gives its typed Resource descriptor (for the
 * client, informers and controllers), its CustomResourceDefinition manifest and client-side validation.
 *
 *   const Databases = defineCustomResource({
 *     group: 'opkit.dev', version: 'v1alpha1', kind: 'Database', plural: 'databases', scope: 'Namespaced',
 *     spec: s.object({ engine: s.enum(['mysql', 'postgres']), replicas: s.integer({ minimum: 1, default: 1 }) }),
 *     status: s.object({ readyReplicas: s.integer().optional(), conditions: s.conditions().optional() }),
 *   });
 *   type Database = TypeOf<typeof Databases>;
 *   await client.create(Databases.resource, db);
 */
import type { KubeObject, ObjectMeta } from '../api/object.ts';
import { defineResource, type Resource } from '../api/resource.ts';
import { deepFreeze } from '../util/freeze.ts';
import { SchemaError, toOpenAPI } from './openapi.ts';
import { s } from './s.ts';
import {
  type AnySchema,
  type FieldError,
  type Infer,
  type InferDefaulted,
  type JSONSchemaProps,
  type ObjectDef,
  type ObjectSchema,
  Schema,
  type Shape,
  type ValidationRule,
} from './types.ts';
import { applyDefaults, type ValidateOptions, validate } from './validate.ts';

/** A custom object: any Kubernetes object with a typed spec and an optional typed status. */
export type CustomObject<Spec, Status = never> = KubeObject & { spec: Spec; status?: Status };

export type PrinterColumnType = 'integer' | 'number' | 'string' | 'boolean' | 'date';

export interface PrinterColumn {
  name: string;
  /** JSONPath within the object, e.g. '.spec.engine'. */
  jsonPath: string;
  /** Inferred from the schema when jsonPath is a plain field path ('.spec.engine'). */
  type?: PrinterColumnType;
  description?: string;
  /** 0 shows in the standard view; higher only in `-o wide`. */
  priority?: number;
  format?: 'int32' | 'int64' | 'float' | 'double' | 'byte' | 'date' | 'date-time' | 'password';
}

export interface ScaleSubresource {
  /** e.g. '.spec.replicas' */
  specReplicasPath: string;
  /** e.g. '.status.replicas' */
  statusReplicasPath: string;
  /** e.g. '.status.selector': a string label selector for the HorizontalPodAutoscaler. */
  labelSelectorPath?: string;
}

export interface CustomResourceInit<Sp extends ObjectSchema, St extends ObjectSchema> {
  /** API group, a DNS subdomain with at least one dot, e.g. 'opkit.dev'. */
  group: string;
  version: string;
  kind: string;
  /** Lower-case plural, e.g. 'databases'. */
  plural: string;
  /** Default: kind in lower case. */
  singular?: string;
  /** Default: `${kind}List`. */
  listKind?: string;
  shortNames?: string[];
  categories?: string[];
  scope: 'Namespaced' | 'Cluster';
  /**
   * The spec. It is required in the CRD when it has required fields; otherwise it defaults to {} so that
   * its nested defaults always apply and `spec` is always there when read back.
   */
  spec: Sp;
  /** The status; given, the CRD gets the status subresource. */
  status?: St;
  /** additionalPrinterColumns (kubectl get). */
  printerColumns?: PrinterColumn[];
  scale?: ScaleSubresource;
  /**
   * CEL rules: an array applies to the whole object (`self.metadata.name`, `self.spec`, ...); use the
   * object form to put rules on the spec as well. Rules on fields belong in their schemas (`validations`).
   */
  validations?:
    | readonly ValidationRule[]
    | { object?: readonly ValidationRule[]; spec?: readonly ValidationRule[] };
  /** Description of the kind (the root of the openAPIV3Schema). */
  description?: string;
}

export interface CustomResourceDefinitionNames {
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames?: string[];
  categories?: string[];
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: JSONSchemaProps };
  subresources?: { status?: Record<string, never>; scale?: ScaleSubresource };
  additionalPrinterColumns?: (PrinterColumn & { type: PrinterColumnType })[];
}

/** An apiextensions.k8s.io/v1 CustomResourceDefinition, ready to create, apply or print as YAML. */
export interface CustomResourceDefinitionManifest extends KubeObject {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: ObjectMeta & { name: string };
  spec: {
    group: string;
    names: CustomResourceDefinitionNames;
    scope: 'Namespaced' | 'Cluster';
    versions: CustomResourceDefinitionVersion[];
  };
}

export interface CustomResourceObjectInit<Spec, Status> {
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}

/** What defineCustomResource returns. `St` is never when the resource has no status. */
export interface CustomResource<Sp extends ObjectSchema, St extends ObjectSchema = never> {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  readonly singular: string;
  readonly listKind: string;
  /** 'group/version' */
  readonly apiVersion: string;
  readonly scope: 'Namespaced' | 'Cluster';
  /** The CRD's name: 'plural.group'. */
  readonly crdName: string;
  /** The typed descriptor for the client, informers and controllers. */
  readonly resource: Resource<CustomObject<Infer<Sp>, Infer<St>>>;
  readonly specSchema: Sp;
  readonly statusSchema: St | undefined;
  /** The whole object's schema (apiVersion, kind, metadata, spec, status). */
  readonly schema: AnySchema;
  /** The CRD version's openAPIV3Schema (a fresh copy). */
  openAPISchema(): JSONSchemaProps;
  /** The CustomResourceDefinition manifest (a fresh copy). */
  crd(): CustomResourceDefinitionManifest;
  /**
   * What the API server would reject, CEL rules aside: schema errors with its field paths, a wrong
   * apiVersion or kind, a missing or malformed metadata.name.
   */
  validate(obj: unknown, opts?: Pick<ValidateOptions, 'unknownFields'>): FieldError[];
  /** A copy with the schema defaults applied, as the API server stores it. */
  applyDefaults(
    obj: CustomObject<Infer<Sp>, Infer<St>>,
  ): CustomObject<InferDefaulted<Sp>, InferDefaulted<St>>;
  /** An object of this kind with apiVersion and kind set. */
  build(init: CustomResourceObjectInit<Infer<Sp>, Infer<St>>): CustomObject<Infer<Sp>, Infer<St>>;
  /** Whether an object is of this kind (by apiVersion and kind). */
  is(obj: KubeObject): obj is CustomObject<Infer<Sp>, Infer<St>>;
}

/** The object type of a custom resource: `type Database = TypeOf<typeof Databases>`. */
export type TypeOf<D> = D extends { readonly resource: Resource<infer T> } ? T : never;
/** The object type after defaulting: defaulted spec and status fields are present. */
export type DefaultedTypeOf<D> =
  D extends CustomResource<infer Sp, infer St> ? CustomObject<InferDefaulted<Sp>, InferDefaulted<St>> : never;
export type SpecOf<D> = D extends CustomResource<infer Sp, ObjectSchema> ? Infer<Sp> : never;
export type StatusOf<D> = D extends CustomResource<ObjectSchema, infer St> ? Infer<St> : never;

const API_VERSION_DOC =
  'APIVersion defines the versioned schema of this representation of an object. Servers should convert ' +
  'recognized schemas to the latest internal value, and may reject unrecognized values. More info: ' +
  'https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
const KIND_DOC =
  'Kind is a string value representing the REST resource this object represents. Servers may infer this ' +
  'from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: ' +
  'https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must " +
  "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is " +
  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

export function defineCustomResource<Sp extends ObjectSchema, St extends ObjectSchema = never>(
  init: CustomResourceInit<Sp, St>,
): CustomResource<Sp, St> {
  const problems = checkNames(init);
  const singular = init.singular ?? init.kind.toLowerCase();
  const listKind = init.listKind ?? `${init.kind}List`;
  const apiVersion = `${init.group}/${init.version}`;
  const { object: objectRules, spec: specRules } = splitRules(init.validations);

  let spec: AnySchema = init.spec;
  for (const r of specRules) spec = spec.rule(r);
  if (spec.presence === 'required' && !hasRequired(spec)) spec = spec.default({});
  const props: Record<string, AnySchema> = {
    apiVersion: s.string({ description: API_VERSION_DOC }).optional(),
    kind: s.string({ description: KIND_DOC }).optional(),
    metadata: new Schema<ObjectMeta, ObjectMeta, ObjectDef, 'optional'>(
      { kind: 'object', properties: metadataFields(objectRules), objectMeta: true },
      'optional',
    ),
    spec,
  };
  if (init.status) props.status = init.status.optional();
  const root: AnySchema = s.object(props as Shape, {
    ...(init.description !== undefined ? { description: init.description } : {}),
    validations: objectRules,
  });

  let openAPIV3Schema: JSONSchemaProps = {};
  try {
    openAPIV3Schema = toOpenAPI(root);
  } catch (err) {
    if (!(err instanceof SchemaError)) throw err;
    problems.push(...err.problems);
  }
  const columns = (init.printerColumns ?? []).map((c) => printerColumn(root, c, problems));
  if (init.scale) checkScale(root, init.scale, problems);
  if (problems.length > 0) throw new SchemaError(problems.map((p) => `${init.kind}: ${p}`));

  const version: CustomResourceDefinitionVersion = {
    name: init.version,
    served: true,
    storage: true,
    schema: { openAPIV3Schema },
  };
  if (init.status || init.scale) {
    version.subresources = {};
    if (init.status) version.subresources.status = {};
    if (init.scale) version.subresources.scale = { ...init.scale };
  }
  if (columns.length > 0) version.additionalPrinterColumns = columns;
  const names: CustomResourceDefinitionNames = { kind: init.kind, listKind, plural: init.plural, singular };
  if (init.shortNames?.length) names.shortNames = [...init.shortNames];
  if (init.categories?.length) names.categories = [...init.categories];
  const manifest: CustomResourceDefinitionManifest = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${init.plural}.${init.group}` },
    spec: { group: init.group, names, scope: init.scope, versions: [version] },
  };
  deepFreeze(manifest);

  type T = CustomObject<Infer<Sp>, Infer<St>>;
  const resource = defineResource<T>({
    group: init.group,
    version: init.version,
    kind: init.kind,
    plural: init.plural,
    namespaced: init.scope === 'Namespaced',
  });

  const def: CustomResource<Sp, St> = {
    group: init.group,
    version: init.version,
    kind: init.kind,
    plural: init.plural,
    singular,
    listKind,
    apiVersion,
    scope: init.scope,
    crdName: manifest.metadata.name,
    resource,
    specSchema: init.spec,
    statusSchema: init.status,
    schema: root,
    openAPISchema: () => structuredClone(openAPIV3Schema),
    crd: () => structuredClone(manifest),
    validate(obj, opts) {
      const errors = validate(root, obj, opts?.unknownFields ? { unknownFields: opts.unknownFields } : {});
      if (obj && typeof obj === 'object') {
        const o = obj as { apiVersion?: unknown; kind?: unknown; metadata?: unknown };
        if (o.apiVersion !== undefined && o.apiVersion !== apiVersion) {
          errors.push(fieldError('Invalid', 'apiVersion', o.apiVersion, `must be ${apiVersion}`));
        }
        if (o.kind !== undefined && o.kind !== init.kind) {
          errors.push(fieldError('Invalid', 'kind', o.kind, `must be ${init.kind}`));
        }
        errors.push(...validateMetadata(o.metadata, init.scope));
      }
      return errors;
    },
    applyDefaults: (obj) => applyDefaults(root, obj) as CustomObject<InferDefaulted<Sp>, InferDefaulted<St>>,
    build: (o) => {
      const out = { apiVersion, kind: init.kind, metadata: o.metadata, spec: o.spec } as T;
      if (o.status !== undefined) out.status = o.status;
      return out;
    },
    is: (obj): obj is T => obj.apiVersion === apiVersion && obj.kind === init.kind,
  };
  return Object.freeze(def);
}

/**
 * The metadata fields the schema declares: none, except name when an object rule reports under
 * `.metadata.name` (the API server accepts a fieldPath only to a declared field, and allows declaring
 * name and generateName only). Its maxLength, the API server's own limit, bounds the cost of the rules.
 */
function metadataFields(rules: readonly ValidationRule[]): Record<string, AnySchema> {
  return rules.some((r) => r.fieldPath === '.metadata.name')
    ? { name: s.string({ maxLength: 253 }).optional() }
    : {};
}

function splitRules(rules: CustomResourceInit<ObjectSchema, ObjectSchema>['validations']): {
  object: readonly ValidationRule[];
  spec: readonly ValidationRule[];
} {
  const isList = (r: typeof rules): r is readonly ValidationRule[] => Array.isArray(r);
  if (rules === undefined) return { object: [], spec: [] };
  if (isList(rules)) return { object: rules, spec: [] };
  return { object: rules.object ?? [], spec: rules.spec ?? [] };
}

function fieldError(type: 'Invalid', path: string, value: unknown, detail: string): FieldError {
  return { type, path, message: `Invalid value: ${JSON.stringify(value)}: ${detail}`, value };
}

function validateMetadata(meta: unknown, scope: 'Namespaced' | 'Cluster'): FieldError[] {
  if (!meta || typeof meta !== 'object' || Array.isArray(meta)) {
    return [{ type: 'Required', path: 'metadata', message: 'Required value' }];
  }
  const m = meta as { name?: unknown; generateName?: unknown; namespace?: unknown };
  const errors: FieldError[] = [];
  if (!m.name && !m.generateName) {
    errors.push({
      type: 'Required',
      path: 'metadata.name',
      message: 'Required value: name or generateName is required',
    });
  } else if (
    m.name !== undefined &&
    (typeof m.name !== 'string' || m.name.length > 253 || !DNS1123_SUBDOMAIN.test(m.name))
  ) {
    errors.push(fieldError('Invalid', 'metadata.name', m.name, DNS1123_SUBDOMAIN_MSG));
  }
  if (scope === 'Cluster' && m.namespace) {
    errors.push({
      type: 'Forbidden',
      path: 'metadata.namespace',
      message: 'Forbidden: not allowed on this type',
      value: m.namespace,
    });
  }
  return errors;
}

function hasRequired(schema: AnySchema): boolean {
  return (
    schema.def.kind === 'object' &&
    Object.values(schema.def.properties).some((p) => p.presence === 'required')
  );
}

function checkNames(init: CustomResourceInit<ObjectSchema, ObjectSchema>): string[] {
  const problems: string[] = [];
  if (!DNS1123_SUBDOMAIN.test(init.group) || !init.group.includes('.')) {
    problems.push(
      `group ${JSON.stringify(init.group)} must be a lower-case DNS subdomain with at least one dot`,
    );
  }
  if (!DNS1123_LABEL.test(init.version))
    problems.push(`version ${JSON.stringify(init.version)} must be a DNS label`);
  if (!DNS1123_LABEL.test(init.plural))
    problems.push(`plural ${JSON.stringify(init.plural)} must be a DNS label`);
  if (init.singular !== undefined && !DNS1123_LABEL.test(init.singular)) {
    problems.push(`singular ${JSON.stringify(init.singular)} must be a DNS label`);
  }
  for (const n of init.shortNames ?? []) {
    if (!DNS1123_LABEL.test(n)) problems.push(`short name ${JSON.stringify(n)} must be a DNS label`);
  }
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(init.kind))
    problems.push(`kind ${JSON.stringify(init.kind)} must be alphanumeric`);
  return problems;
}

/** The schema a plain field path ('.spec.engine') leads to, if the schema declares it. */
function resolve(root: AnySchema, jsonPath: string): AnySchema | undefined {
  if (!/^(\.[A-Za-z_$][A-Za-z0-9_$-]*)+$/.test(jsonPath)) return undefined;
  let node: AnySchema | undefined = root;
  for (const key of jsonPath.slice(1).split('.')) {
    const d: AnySchema['def'] | undefined = node?.def;
    if (d?.kind === 'object') node = d.properties[key];
    else if (d?.kind === 'record') node = d.values;
    else return undefined;
  }
  return node;
}

function columnType(schema: AnySchema): PrinterColumnType | undefined {
  const d = schema.def;
  switch (d.kind) {
    case 'string':
      return d.format === 'date-time' ? 'date' : 'string';
    case 'integer':
    case 'number':
    case 'boolean':
      return d.kind;
    case 'int-or-string':
      return 'string';
    default:
      return undefined;
  }
}

function printerColumn(
  root: AnySchema,
  c: PrinterColumn,
  problems: string[],
): PrinterColumn & { type: PrinterColumnType } {
  let type = c.type;
  if (type === undefined) {
    if (c.jsonPath === '.metadata.creationTimestamp') type = 'date';
    else {
      const target = resolve(root, c.jsonPath);
      type = target ? columnType(target) : undefined;
    }
  }
  if (!c.jsonPath.startsWith('.')) problems.push(`printer column ${c.name}: jsonPath must start with '.'`);
  if (type === undefined) {
    problems.push(`printer column ${c.name}: cannot infer the type of ${c.jsonPath}; set type`);
    type = 'string';
  }
  const out: PrinterColumn & { type: PrinterColumnType } = { name: c.name, type, jsonPath: c.jsonPath };
  if (c.description !== undefined) out.description = c.description;
  if (c.priority !== undefined) out.priority = c.priority;
  if (c.format !== undefined) out.format = c.format;
  return out;
}

function checkScale(root: AnySchema, scale: ScaleSubresource, problems: string[]): void {
  const check = (label: string, path: string, prefix: string, kind: string) => {
    if (!path.startsWith(prefix)) {
      problems.push(`scale: ${label} ${path} must start with ${prefix}`);
      return;
    }
    const target = resolve(root, path);
    if (!target) problems.push(`scale: ${label} ${path} is not declared in the schema`);
    else if (target.def.kind !== kind)
      problems.push(`scale: ${label} ${path} must be ${kind === 'integer' ? 'an' : 'a'} ${kind}`);
  };
  check('specReplicasPath', scale.specReplicasPath, '.spec.', 'integer');
  check('statusReplicasPath', scale.statusReplicasPath, '.status.', 'integer');
  if (scale.labelSelectorPath !== undefined) {
    const prefix = scale.labelSelectorPath.startsWith('.spec.') ? '.spec.' : '.status.';
    check('labelSelectorPath', scale.labelSelectorPath, prefix, 'string');
  }
}

/**
 * Schema builders: `s.object({ engine: s.enum(['mysql', 'postgres']), replicas: s.integer({ default: 1 }) })`.
 * Options carrying `default` make the property 'defaulted' (optional on input); `.optional()` makes it optional.
 */
import type { Condition } from '../api/object.ts';
import {
  type AnySchema,
  type ArrayDef,
  type BooleanDef,
  type IntegerDef,
  type IntOrStringDef,
  type ListType,
  type MapType,
  type NumberDef,
  type ObjectDef,
  type Presence,
  type RecordDef,
  Schema,
  type Shape,
  type ShapeInput,
  type ShapeOutput,
  type StringDef,
  type UnknownDef,
  type ValidationRule,
} from './types.ts';

/** resource.Quantity as the API accepts it: '500m', '1Gi', 2. */
export type Quantity = string | number;
/** intstr.IntOrString */
export type IntOrString = string | number;

/** The pattern k8s.io/apimachinery's generated CRDs put on resource.Quantity. */
export const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

export interface CommonOptions {
  description?: string;
  title?: string;
  example?: unknown;
  /** x-kubernetes-validations CEL rules on this field. */
  validations?: readonly ValidationRule[];
}

export interface StringOptions<V extends string = string> extends CommonOptions {
  enum?: readonly V[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  format?: string;
  default?: V;
}

export interface EnumOptions<V extends string> extends CommonOptions {
  default?: V;
}

export interface NumericOptions extends CommonOptions {
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  default?: number;
}

export interface IntegerOptions extends NumericOptions {
  format?: 'int32' | 'int64';
}

export interface NumberOptions extends NumericOptions {
  format?: 'float' | 'double';
}

export interface BooleanOptions extends CommonOptions {
  default?: boolean;
}

export interface IntOrStringOptions extends CommonOptions {
  pattern?: string;
  default?: string | number;
}

export interface QuantityOptions extends CommonOptions {
  default?: Quantity;
}

/** Keys of an array item's object type, for listMapKeys. */
type ItemKeys<T> = T extends object ? Extract<keyof T, string> : never;

export interface ArrayOptions<Item = unknown> extends CommonOptions {
  minItems?: number;
  maxItems?: number;
  /** x-kubernetes-list-type: how server-side apply merges the list ('atomic' when unset). */
  listType?: ListType;
  /** x-kubernetes-list-map-keys, for listType 'map': keys that must be required or defaulted scalars. */
  listMapKeys?: readonly ItemKeys<Item>[];
}

export interface ObjectOptions extends CommonOptions {
  /**
   * true: keep undeclared fields (same as preserveUnknownFields). false: validate() reports undeclared
   * fields (client side only; the API server prunes them, or rejects them under strict field validation).
   */
  additionalProperties?: boolean;
  /** x-kubernetes-preserve-unknown-fields: true. */
  preserveUnknownFields?: boolean;
  /** x-kubernetes-map-type. */
  mapType?: MapType;
  minProperties?: number;
  maxProperties?: number;
}

export interface RecordOptions extends CommonOptions {
  minProperties?: number;
  maxProperties?: number;
  mapType?: MapType;
}

type PresenceOf<O> = O extends { default: unknown } ? 'defaulted' : 'required';
type EnumOf<O> = O extends { enum: readonly (infer V extends string)[] } ? V : string;
type KeepsUnknown<O> = O extends { preserveUnknownFields: true } | { additionalProperties: true }
  ? true
  : false;
type WithUnknown<T, O> = KeepsUnknown<O> extends true ? T & { [key: string]: unknown } : T;

/** Embedded Kubernetes object (x-kubernetes-embedded-resource). */
export interface EmbeddedObject {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

function common(opts: CommonOptions | undefined): {
  description?: string;
  title?: string;
  example?: unknown;
  validations?: readonly ValidationRule[];
  default?: unknown;
} {
  const out: {
    description?: string;
    title?: string;
    example?: unknown;
    validations?: readonly ValidationRule[];
    default?: unknown;
  } = {};
  if (!opts) return out;
  if (opts.description !== undefined) out.description = opts.description;
  if (opts.title !== undefined) out.title = opts.title;
  if (opts.example !== undefined) out.example = opts.example;
  if (opts.validations?.length) out.validations = [...opts.validations];
  const d = (opts as { default?: unknown }).default;
  if (d !== undefined) out.default = d;
  return out;
}

/** Copies the listed option keys that are set. */
function pick<O extends object, K extends keyof O>(
  opts: O | undefined,
  keys: readonly K[],
): Partial<Pick<O, K>> {
  const out: Partial<Pick<O, K>> = {};
  if (!opts) return out;
  for (const k of keys) if (opts[k] !== undefined) out[k] = opts[k];
  return out;
}

function presenceOf(def: { default?: unknown }): 'defaulted' | 'required' {
  return def.default === undefined ? 'required' : 'defaulted';
}

function make<In, Out, D extends AnySchema['def'], P extends Presence>(def: D): Schema<In, Out, D, P> {
  return new Schema<In, Out, D, P>(def, presenceOf(def) as P);
}

function string<const O extends StringOptions = StringOptions>(
  opts?: O,
): Schema<EnumOf<O>, EnumOf<O>, StringDef, PresenceOf<O>> {
  const def: StringDef = {
    kind: 'string',
    ...common(opts),
    ...pick(opts, ['pattern', 'minLength', 'maxLength', 'format'] as const),
  };
  if (opts?.enum) {
    if (opts.enum.length === 0) throw new TypeError('s.string: enum must not be empty');
    def.enum = [...opts.enum];
    if (def.default !== undefined && !opts.enum.includes(def.default as string)) {
      throw new TypeError(`s.string: default ${JSON.stringify(def.default)} is not one of the enum values`);
    }
  }
  return make(def);
}

/** A string that is one of `values`; its type is their literal union. */
function enumOf<
  const V extends readonly [string, ...string[]],
  const O extends EnumOptions<V[number]> = EnumOptions<V[number]>,
>(values: V, opts?: O): Schema<V[number], V[number], StringDef, PresenceOf<O>> {
  if (values.length === 0) throw new TypeError('s.enum: needs at least one value');
  const def: StringDef = { kind: 'string', ...common(opts), enum: [...values] };
  if (def.default !== undefined && !values.includes(def.default as string)) {
    throw new TypeError(`s.enum: default ${JSON.stringify(def.default)} is not one of ${values.join(', ')}`);
  }
  return make(def);
}

const NUMERIC_KEYS = [
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'format',
] as const;

function integer<const O extends IntegerOptions = IntegerOptions>(
  opts?: O,
): Schema<number, number, IntegerDef, PresenceOf<O>> {
  const def: IntegerDef = { kind: 'integer', ...common(opts), ...pick(opts, NUMERIC_KEYS) };
  return make(def);
}

function number<const O extends NumberOptions = NumberOptions>(
  opts?: O,
): Schema<number, number, NumberDef, PresenceOf<O>> {
  const def: NumberDef = { kind: 'number', ...common(opts), ...pick(opts, NUMERIC_KEYS) };
  return make(def);
}

function boolean<const O extends BooleanOptions = BooleanOptions>(
  opts?: O,
): Schema<boolean, boolean, BooleanDef, PresenceOf<O>> {
  return make({ kind: 'boolean', ...common(opts) } satisfies BooleanDef);
}

/** intstr.IntOrString: `anyOf: [integer, string]` with x-kubernetes-int-or-string. */
function intOrString<const O extends IntOrStringOptions = IntOrStringOptions>(
  opts?: O,
): Schema<IntOrString, IntOrString, IntOrStringDef, PresenceOf<O>> {
  return make({
    kind: 'int-or-string',
    ...common(opts),
    ...pick(opts, ['pattern'] as const),
  } satisfies IntOrStringDef);
}

/** resource.Quantity, exactly as k8s.io/apimachinery's generated CRDs describe it. */
function quantity<const O extends QuantityOptions = QuantityOptions>(
  opts?: O,
): Schema<Quantity, Quantity, IntOrStringDef, PresenceOf<O>> {
  const def: IntOrStringDef = { kind: 'int-or-string', ...common(opts), pattern: QUANTITY_PATTERN };
  if (typeof def.default === 'string' && !new RegExp(QUANTITY_PATTERN).test(def.default)) {
    throw new TypeError(`s.quantity: default ${JSON.stringify(def.default)} is not a quantity`);
  }
  return make(def);
}

function array<I extends AnySchema>(
  items: I,
  opts?: ArrayOptions<I['__output']>,
): Schema<I['__input'][], I['__output'][], ArrayDef, 'required'> {
  const def: ArrayDef = {
    kind: 'array',
    items,
    ...common(opts),
    ...pick(opts, ['minItems', 'maxItems', 'listType'] as const),
  };
  if (opts?.listMapKeys?.length) def.listMapKeys = [...opts.listMapKeys];
  return new Schema(def, 'required');
}

/** An object with fixed properties. Properties not marked optional or defaulted are required. */
function object<S extends Shape, const O extends ObjectOptions = ObjectOptions>(
  properties: S,
  opts?: O,
): Schema<WithUnknown<ShapeInput<S>, O>, WithUnknown<ShapeOutput<S>, O>, ObjectDef, 'required'> {
  const def: ObjectDef = {
    kind: 'object',
    properties: { ...properties },
    ...common(opts),
    ...pick(opts, ['mapType', 'minProperties', 'maxProperties'] as const),
  };
  if (opts?.preserveUnknownFields || opts?.additionalProperties === true) def.preserveUnknownFields = true;
  if (opts?.additionalProperties === false) def.rejectUnknownFields = true;
  return new Schema(def, 'required');
}

/** A map from free keys to `values` (additionalProperties). */
function record<V extends AnySchema>(
  values: V,
  opts?: RecordOptions,
): Schema<Record<string, V['__input']>, Record<string, V['__output']>, RecordDef, 'required'> {
  const def: RecordDef = {
    kind: 'record',
    values,
    ...common(opts),
    ...pick(opts, ['minProperties', 'maxProperties', 'mapType'] as const),
  };
  return new Schema(def, 'required');
}

/** Any JSON value, kept as is (x-kubernetes-preserve-unknown-fields without a type). */
function unknown(opts?: CommonOptions): Schema<unknown, unknown, UnknownDef, 'required'> {
  return new Schema({ kind: 'unknown', ...common(opts) } satisfies UnknownDef, 'required');
}

/** Any JSON object, kept as is (type: object with x-kubernetes-preserve-unknown-fields). */
function unknownObject(
  opts?: CommonOptions,
): Schema<Record<string, unknown>, Record<string, unknown>, UnknownDef, 'required'> {
  return new Schema({ kind: 'unknown', object: true, ...common(opts) } satisfies UnknownDef, 'required');
}

/** A whole Kubernetes object (x-kubernetes-embedded-resource): apiVersion and kind are required. */
function embedded<T extends object = EmbeddedObject>(
  opts?: CommonOptions,
): Schema<T, T, UnknownDef, 'required'> {
  const def: UnknownDef = { kind: 'unknown', object: true, embeddedResource: true, ...common(opts) };
  return new Schema(def, 'required');
}

function optional<In, Out, D extends AnySchema['def'], P extends Presence>(
  schema: Schema<In, Out, D, P>,
): Schema<In, Out, D, P extends 'defaulted' ? 'defaulted' : 'optional'> {
  return schema.optional();
}

function withDefault<In, Out, D extends AnySchema['def'], P extends Presence>(
  schema: Schema<In, Out, D, P>,
  value: In,
): Schema<In, Out, D, 'defaulted'> {
  return schema.default(value);
}

function nullable<In, Out, D extends AnySchema['def'], P extends Presence>(
  schema: Schema<In, Out, D, P>,
): Schema<In | null, Out | null, D, P> {
  return schema.nullable();
}

const DNS_LABEL_OR_QUALIFIED =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$';

/** metav1.Condition, as controller-gen writes it. Its type is the runtime's `Condition`. */
function condition() {
  return object(
    {
      type: string({
        description: 'Type of condition in CamelCase or in foo.example.com/CamelCase.',
        maxLength: 316,
        pattern: DNS_LABEL_OR_QUALIFIED,
      }),
      status: enumOf(['True', 'False', 'Unknown'], { description: 'Status of the condition.' }),
      observedGeneration: integer({
        description: 'The .metadata.generation the condition was set based upon.',
        format: 'int64',
        minimum: 0,
      }).optional(),
      lastTransitionTime: string({
        description: 'Last time the condition transitioned from one status to another.',
        format: 'date-time',
      }),
      reason: string({
        description: "A programmatic identifier for the condition's last transition, in CamelCase.",
        minLength: 1,
        maxLength: 1024,
        pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
      }),
      message: string({
        description: 'A human readable message with details about the transition.',
        maxLength: 32768,
      }),
    },
    { description: 'Condition contains details for one aspect of the current state of this API Resource.' },
  );
}

/** metav1.Condition list: `listType: map` keyed by `type`, like `+listType=map +listMapKey=type`. */
function conditions(opts?: CommonOptions): Schema<Condition[], Condition[], ArrayDef, 'required'> {
  return array(condition(), { ...opts, listType: 'map', listMapKeys: ['type'] });
}

/** core/v1 ResourceRequirements: limits and requests are maps of quantities. */
export interface ResourceRequirements {
  limits?: Record<string, Quantity>;
  requests?: Record<string, Quantity>;
  claims?: { name: string; request?: string }[];
}

function resources(
  opts?: CommonOptions,
): Schema<ResourceRequirements, ResourceRequirements, ObjectDef, 'required'> {
  return object(
    {
      claims: array(object({ name: string(), request: string().optional() }), {
        listType: 'map',
        listMapKeys: ['name'],
      }).optional(),
      limits: record(quantity(), {
        description: 'Limits describes the maximum amount of compute resources allowed.',
      }).optional(),
      requests: record(quantity(), {
        description: 'Requests describes the minimum amount of compute resources required.',
      }).optional(),
    },
    { description: 'ResourceRequirements describes the compute resource requirements.', ...opts },
  );
}

/** metav1.LabelSelector (x-kubernetes-map-type: atomic). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    values?: string[];
  }[];
}

function labelSelector(opts?: CommonOptions): Schema<LabelSelector, LabelSelector, ObjectDef, 'required'> {
  return object(
    {
      matchExpressions: array(
        object({
          key: string(),
          operator: enumOf(['In', 'NotIn', 'Exists', 'DoesNotExist']),
          values: array(string(), { listType: 'atomic' }).optional(),
        }),
        { listType: 'atomic' },
      ).optional(),
      matchLabels: record(string()).optional(),
    },
    { mapType: 'atomic', ...opts },
  );
}

/** The schema builders. */
export const s = {
  string,
  enum: enumOf,
  integer,
  number,
  boolean,
  intOrString,
  quantity,
  array,
  object,
  record,
  unknown,
  unknownObject,
  embedded,
  optional,
  default: withDefault,
  nullable,
  conditions,
  resources,
  labelSelector,
} as const;

/**
 * The schema model: one `Schema` value describes a field once, and carries
 *   - its TypeScript types (phantom `__input` / `__output`, read with `Infer` / `InferDefaulted`),
 *   - a plain runtime description (`def`) that openapi.ts turns into a structural openAPIV3Schema and
 *     validate.ts checks values against.
 * Schemas are immutable: every modifier returns a new one.
 */

/**
 * Whether a property may be left out of its parent object:
 *   'required'  listed in the parent's `required`;
 *   'optional'  may be absent, stays absent;
 *   'defaulted' may be absent on input, the API server (and applyDefaults) fills in `default`.
 */
export type Presence = 'required' | 'optional' | 'defaulted';

/** One x-kubernetes-validations entry: a CEL rule the API server evaluates (never evaluated client-side). */
export interface ValidationRule {
  /** CEL expression; `self` is the value of the field, `oldSelf` its previous value (transition rule). */
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  /** JSON path relative to the field the rule is on, e.g. '.engine': the error then names that field. */
  fieldPath?: string;
  /** Evaluate the transition rule also when there is no old value (`oldSelf` is then an optional). */
  optionalOldSelf?: boolean;
}

/** Settings every kind of schema has. */
export interface CommonDef {
  description?: string;
  title?: string;
  /** Set exactly when the schema's presence is 'defaulted'. */
  default?: unknown;
  nullable?: boolean;
  example?: unknown;
  validations?: readonly ValidationRule[];
}

export interface StringDef extends CommonDef {
  kind: 'string';
  enum?: readonly string[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  /** OpenAPI format, e.g. 'date-time', 'uuid', 'byte', 'ipv4'. The API server checks the formats it knows. */
  format?: string;
}

export interface NumericDef extends CommonDef {
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  enum?: readonly number[];
}

export interface IntegerDef extends NumericDef {
  kind: 'integer';
  format?: 'int32' | 'int64';
}

export interface NumberDef extends NumericDef {
  kind: 'number';
  format?: 'float' | 'double';
}

export interface BooleanDef extends CommonDef {
  kind: 'boolean';
}

/** x-kubernetes-int-or-string: an integer or a string (resource.Quantity, intstr.IntOrString). */
export interface IntOrStringDef extends CommonDef {
  kind: 'int-or-string';
  /** Applies to string values only. */
  pattern?: string;
}

export type ListType = 'atomic' | 'set' | 'map';
export type MapType = 'granular' | 'atomic';

export interface ArrayDef extends CommonDef {
  kind: 'array';
  items: AnySchema;
  minItems?: number;
  maxItems?: number;
  listType?: ListType;
  listMapKeys?: readonly string[];
}

export interface ObjectDef extends CommonDef {
  kind: 'object';
  properties: Readonly<Record<string, AnySchema>>;
  /** x-kubernetes-preserve-unknown-fields: the API server keeps fields the schema does not declare. */
  preserveUnknownFields?: boolean;
  /** Client-side only: validate() reports undeclared fields (the API server prunes them). */
  rejectUnknownFields?: boolean;
  mapType?: MapType;
  minProperties?: number;
  maxProperties?: number;
  /**
   * The root's metadata (ObjectMeta): written as a bare `type: object` (the API server validates it
   * itself and allows nothing else there), and any fields pass validate().
   */
  objectMeta?: boolean;
}

/** A map: an object whose keys are free and whose values all follow one schema (additionalProperties). */
export interface RecordDef extends CommonDef {
  kind: 'record';
  values: AnySchema;
  minProperties?: number;
  maxProperties?: number;
  mapType?: MapType;
}

/** Anything (x-kubernetes-preserve-unknown-fields), optionally an object or an embedded Kubernetes object. */
export interface UnknownDef extends CommonDef {
  kind: 'unknown';
  /** type: object (the value must be an object). */
  object?: boolean;
  /** x-kubernetes-embedded-resource: the value is a Kubernetes object with apiVersion, kind and metadata. */
  embeddedResource?: boolean;
}

export type SchemaDef =
  | StringDef
  | IntegerDef
  | NumberDef
  | BooleanDef
  | IntOrStringDef
  | ArrayDef
  | ObjectDef
  | RecordDef
  | UnknownDef;

/**
 * A schema for values of type `In` (what you write: defaulted keys optional) that read back as `Out`
 * (after defaulting: defaulted keys present). `D` is the runtime description, `P` the presence in a parent.
 */
export class Schema<In, Out = In, D extends SchemaDef = SchemaDef, P extends Presence = Presence> {
  readonly def: D;
  readonly presence: P;
  /** Phantom: never set at run time. Use `Infer<typeof schema>`. */
  declare readonly __input: In;
  /** Phantom: never set at run time. Use `InferDefaulted<typeof schema>`. */
  declare readonly __output: Out;

  constructor(def: D, presence: P) {
    this.def = Object.freeze(def);
    this.presence = presence;
    Object.freeze(this);
  }

  /** The property may be left out (a defaulted property stays defaulted). */
  optional(): Schema<In, Out, D, P extends 'defaulted' ? 'defaulted' : 'optional'> {
    const presence = (this.presence === 'defaulted' ? 'defaulted' : 'optional') as P extends 'defaulted'
      ? 'defaulted'
      : 'optional';
    return new Schema(this.def, presence);
  }

  /** The property may be left out; the API server then sets `value`. */
  default(value: In): Schema<In, Out, D, 'defaulted'> {
    return new Schema({ ...this.def, default: value }, 'defaulted');
  }

  /** null is a valid value (nullable: true). */
  nullable(): Schema<In | null, Out | null, D, P> {
    return new Schema({ ...this.def, nullable: true }, this.presence);
  }

  describe(description: string): Schema<In, Out, D, P> {
    return new Schema({ ...this.def, description }, this.presence);
  }

  /** Adds an x-kubernetes-validations CEL rule, e.g. `.rule('self == oldSelf', 'is immutable')`. */
  rule(rule: string | ValidationRule, message?: string): Schema<In, Out, D, P> {
    const entry: ValidationRule = typeof rule === 'string' ? { rule, ...(message ? { message } : {}) } : rule;
    return new Schema({ ...this.def, validations: [...(this.def.validations ?? []), entry] }, this.presence);
  }
}

/** Any schema: the constraint for generic parameters. */
export type AnySchema = Schema<unknown, unknown, SchemaDef, Presence>;
export type ObjectSchema = Schema<unknown, unknown, ObjectDef, Presence>;

/** The TypeScript type a schema describes, as written (optional and defaulted keys are optional). */
export type Infer<S extends AnySchema> = S['__input'];
/** The type after defaulting (applyDefaults, or as read back from the API server): defaulted keys present. */
export type InferDefaulted<S extends AnySchema> = S['__output'];

/** The properties of an object schema. */
export type Shape = { readonly [key: string]: AnySchema };

type Simplify<T> = { [K in keyof T]: T[K] };
type KeysWith<S extends Shape, P extends Presence> = {
  [K in keyof S]: S[K]['presence'] extends P ? K : never;
}[keyof S];

/** Input type of an object: required keys required, optional and defaulted keys optional. */
export type ShapeInput<S extends Shape> = Simplify<
  { [K in KeysWith<S, 'required'>]: S[K]['__input'] } & {
    [K in Exclude<keyof S, KeysWith<S, 'required'>>]?: S[K]['__input'];
  }
>;
/** Output type of an object: only optional keys optional. */
export type ShapeOutput<S extends Shape> = Simplify<
  { [K in Exclude<keyof S, KeysWith<S, 'optional'>>]: S[K]['__output'] } & {
    [K in KeysWith<S, 'optional'>]?: S[K]['__output'];
  }
>;

/** The JSON type names used in openAPIV3Schema `type`. */
export type JSONSchemaType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';

/** apiextensions.k8s.io/v1 JSONSchemaProps, with the JSON field names the API server reads. */
export interface JSONSchemaProps {
  type?: JSONSchemaType;
  description?: string;
  title?: string;
  format?: string;
  default?: unknown;
  example?: unknown;
  nullable?: boolean;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  items?: JSONSchemaProps;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  additionalProperties?: JSONSchemaProps;
  minProperties?: number;
  maxProperties?: number;
  anyOf?: JSONSchemaProps[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: ListType;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: MapType;
  'x-kubernetes-validations'?: ValidationRule[];
}

/** k8s.io/apimachinery field.ErrorType, without the 'FieldValue' prefix. */
export type FieldErrorType =
  | 'Required'
  | 'Invalid'
  | 'NotSupported'
  | 'TooLong'
  | 'TooMany'
  | 'Duplicate'
  | 'TypeInvalid'
  | 'Forbidden';

/** One validation failure, shaped like the API server's StatusCause. */
export interface FieldError {
  type: FieldErrorType;
  /** Field path as the API server writes it: 'spec.replicas', 'spec.items[2].name', 'spec.limits.cpu'. */
  path: string;
  /** The API server's cause message, e.g. 'Invalid value: 9: spec.replicas in body should be ...'. */
  message: string;
  /** The offending value, when there is one. */
  value?: unknown;
}

/**
 * Client-side validation and defaulting with the API server's semantics for the structural (OpenAPI)
 * part of a schema. Field paths and messages follow apiextensions-apiserver: 'spec.replicas',
 * 'spec.items[2].name', 'spec.limits.cpu'. CEL rules (x-kubernetes-validations) are not evaluated.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { copyJson } from '../util/copy.ts';
import type { AnySchema, FieldError, FieldErrorType, Infer, InferDefaulted, SchemaDef } from './types.ts';

export interface ValidateOptions {
  /** Path of the value itself, prefixed to every error path (default '': the value is the root). */
  path?: string;
  /**
   * 'reject': report fields no schema declares (what the API server does under strict field validation).
   * Default 'ignore': the API server prunes them.
   */
  unknownFields?: 'ignore' | 'reject';
  /**
   * Validate the value as the API server does: after defaulting (and dropping non-nullable nulls).
   * Default true; false checks the value exactly as given.
   */
  defaults?: boolean;
}

interface Ctx {
  errors: FieldError[];
  rejectUnknown: boolean;
}

/** Checks `value` against the schema's OpenAPI constraints; an empty list means valid. */
export function validate(schema: AnySchema, value: unknown, opts: ValidateOptions = {}): FieldError[] {
  const ctx: Ctx = { errors: [], rejectUnknown: opts.unknownFields === 'reject' };
  const subject = opts.defaults === false ? value : applyDefaults(schema, value);
  walk(schema.def, subject, opts.path ?? '', ctx);
  return ctx.errors;
}

/** Thrown by assertValid: carries every field error. */
export class SchemaValidationError extends Error {
  readonly errors: readonly FieldError[];
  constructor(errors: readonly FieldError[], subject = 'value') {
    super(
      errors.length === 1
        ? `${subject} is invalid: ${formatFieldError(errors[0]!)}`
        : `${subject} is invalid: [${errors.map(formatFieldError).join(', ')}]`,
    );
    this.name = 'SchemaValidationError';
    this.errors = errors;
  }
}

/** Throws SchemaValidationError unless `value` is valid; narrows it to the schema's type. */
export function assertValid<S extends AnySchema>(
  schema: S,
  value: unknown,
  opts?: ValidateOptions,
): asserts value is Infer<S> {
  const errors = validate(schema, value, opts);
  if (errors.length > 0) throw new SchemaValidationError(errors);
}

/** 'spec.replicas: Invalid value: 9: ...', like field.Error.Error(). */
export function formatFieldError(e: FieldError): string {
  return e.path ? `${e.path}: ${e.message}` : e.message;
}

/** The StatusCause reason the API server uses for an error type, e.g. 'FieldValueInvalid'. */
export function fieldErrorReason(type: FieldErrorType): string {
  return `FieldValue${type}`;
}

/**
 * A deep copy of `value` as the API server stores it: a missing (or, unless nullable, null) property with
 * a default gets a copy of it, a non-nullable null without one is dropped, and this goes on inside every
 * value.
 */
export function applyDefaults<S extends AnySchema>(schema: S, value: NoInfer<Infer<S>>): InferDefaulted<S> {
  const d = schema.def;
  let v = value === undefined ? undefined : copyJson(value);
  if (d.default !== undefined && (v === undefined || (v === null && !d.nullable))) v = copyJson(d.default);
  fill(d, v);
  return v as InferDefaulted<S>;
}

function fill(d: SchemaDef, v: unknown): void {
  if (d.kind === 'array') {
    if (Array.isArray(v)) for (const item of v) fill(d.items.def, item);
    return;
  }
  if (!isObject(v)) return;
  if (d.kind === 'object') {
    for (const [key, prop] of Object.entries(d.properties)) {
      const pd = prop.def;
      const absent = v[key] === undefined || (v[key] === null && !pd.nullable);
      if (!absent) continue;
      if (pd.default !== undefined) v[key] = copyJson(pd.default);
      else if (key in v) delete v[key];
    }
    for (const [key, item] of Object.entries(v)) {
      const prop = d.properties[key];
      if (prop) fill(prop.def, item);
    }
  } else if (d.kind === 'record') {
    for (const [key, item] of Object.entries(v)) {
      if (item === null && !d.values.def.nullable) {
        if (d.values.def.default !== undefined) v[key] = copyJson(d.values.def.default);
        else delete v[key];
      }
      fill(d.values.def, v[key]);
    }
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const child = (path: string, key: string) => (path ? `${path}.${key}` : key);

/** Go's %v of a value in a field error. */
function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** The JSON type name kube-openapi reports for a value. */
function jsonType(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function report(ctx: Ctx, type: FieldErrorType, path: string, message: string, value?: unknown): void {
  const e: FieldError = { type, path, message };
  if (value !== undefined) e.value = value;
  ctx.errors.push(e);
}

const name = (path: string) => path || '<root>';

function invalid(ctx: Ctx, path: string, value: unknown, detail: string): void {
  report(ctx, 'Invalid', path, `Invalid value: ${show(value)}: ${name(path)} in body ${detail}`, value);
}

function typeInvalid(ctx: Ctx, path: string, value: unknown, expected: string): void {
  const t = JSON.stringify(jsonType(value));
  report(
    ctx,
    'TypeInvalid',
    path,
    `Invalid value: ${t}: ${name(path)} in body must be of type ${expected}: ${t}`,
    value,
  );
}

function walk(d: SchemaDef, v: unknown, path: string, ctx: Ctx): void {
  // (In objects, non-nullable nulls never get here: the API server drops or defaults them first.)
  if (v === null && (d.nullable || (d.kind === 'unknown' && !d.object))) return;
  switch (d.kind) {
    case 'string':
      validateString(d, v, path, ctx);
      break;
    case 'integer':
    case 'number':
      validateNumber(d, v, path, ctx);
      break;
    case 'boolean':
      if (typeof v !== 'boolean') typeInvalid(ctx, path, v, 'boolean');
      break;
    case 'int-or-string':
      if (typeof v === 'string') {
        if (d.pattern !== undefined && !regex(d.pattern).test(v))
          invalid(ctx, path, v, `should match '${d.pattern}'`);
      } else if (!(typeof v === 'number' && Number.isInteger(v))) {
        // Reported twice upstream: by the x-kubernetes-int-or-string type check and by the anyOf branch.
        typeInvalid(ctx, path, v, 'integer,string');
        typeInvalid(ctx, path, v, 'integer');
      }
      break;
    case 'array':
      validateArray(d, v, path, ctx);
      break;
    case 'object':
    case 'record':
      validateObject(d, v, path, ctx);
      break;
    case 'unknown':
      if (d.object && !isObject(v)) typeInvalid(ctx, path, v, 'object');
      else if (d.embeddedResource && isObject(v)) {
        for (const key of ['apiVersion', 'kind']) {
          if (typeof v[key] !== 'string' || v[key] === '')
            report(ctx, 'Required', child(path, key), 'Required value');
        }
      }
      break;
  }
}

function checkEnum(values: readonly unknown[] | undefined, v: unknown, path: string, ctx: Ctx): void {
  if (!values || values.includes(v)) return;
  // Supported values are always quoted, numbers too ('"1", "2"'), as the API server writes them.
  const supported = values
    .map((x) => JSON.stringify(typeof x === 'string' ? x : JSON.stringify(x)))
    .join(', ');
  report(ctx, 'NotSupported', path, `Unsupported value: ${show(v)}: supported values: ${supported}`, v);
}

function validateString(d: Extract<SchemaDef, { kind: 'string' }>, v: unknown, path: string, ctx: Ctx): void {
  if (typeof v !== 'string') {
    typeInvalid(ctx, path, v, 'string');
    checkEnum(d.enum, v, path, ctx);
    return;
  }
  checkEnum(d.enum, v, path, ctx);
  // Like kube-openapi's string validator: maxLength, minLength, pattern, and only the first that fails.
  const length = [...v].length;
  if (d.maxLength !== undefined && length > d.maxLength) {
    report(ctx, 'TooLong', path, `Too long: may not be more than ${d.maxLength} bytes`, v);
  } else if (d.minLength !== undefined && length < d.minLength) {
    invalid(ctx, path, v, `should be at least ${d.minLength} chars long`);
  } else if (d.pattern !== undefined && !regex(d.pattern).test(v)) {
    invalid(ctx, path, v, `should match '${d.pattern}'`);
  }
  if (d.format !== undefined) {
    const check = FORMATS[d.format];
    if (check && !check(v)) {
      report(
        ctx,
        'TypeInvalid',
        path,
        `Invalid value: ${show(v)}: ${name(path)} in body must be of type ${d.format}: ${show(v)}`,
        v,
      );
    }
  }
}

function validateNumber(
  d: Extract<SchemaDef, { kind: 'integer' | 'number' }>,
  v: unknown,
  path: string,
  ctx: Ctx,
): void {
  const ok = typeof v === 'number' && Number.isFinite(v) && (d.kind === 'number' || Number.isInteger(v));
  if (!ok) {
    typeInvalid(ctx, path, v, d.kind);
    checkEnum(d.enum, v, path, ctx);
    return;
  }
  checkEnum(d.enum, v, path, ctx);
  if (d.multipleOf !== undefined && d.multipleOf > 0) {
    const q = v / d.multipleOf;
    if (v === 0 && d.multipleOf < 1) {
      // kube-openapi's answer for 0 with a fractional factor, kept verbatim so that errors match.
      report(
        ctx,
        'Invalid',
        path,
        `Invalid value: 0: factor MultipleOf declared for ${name(path)} must be positive: 0`,
        v,
      );
    } else if (Math.abs(q - Math.round(q)) > 1e-9) {
      invalid(ctx, path, v, `should be a multiple of ${d.multipleOf}`);
    }
  }
  if (d.maximum !== undefined) {
    if (d.exclusiveMaximum ? v >= d.maximum : v > d.maximum) {
      invalid(ctx, path, v, `should be less than ${d.exclusiveMaximum ? '' : 'or equal to '}${d.maximum}`);
    }
  }
  if (d.minimum !== undefined) {
    if (d.exclusiveMinimum ? v <= d.minimum : v < d.minimum) {
      invalid(ctx, path, v, `should be greater than ${d.exclusiveMinimum ? '' : 'or equal to '}${d.minimum}`);
    }
  }
}

/** Canonical JSON (sorted keys) for set and map-key equality. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObject(v)) {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

function validateArray(d: Extract<SchemaDef, { kind: 'array' }>, v: unknown, path: string, ctx: Ctx): void {
  if (!Array.isArray(v)) {
    typeInvalid(ctx, path, v, 'array');
    return;
  }
  if (d.maxItems !== undefined && v.length > d.maxItems) {
    report(ctx, 'TooMany', path, `Too many: ${v.length}: must have at most ${d.maxItems} items`, v.length);
  }
  if (d.minItems !== undefined && v.length < d.minItems) {
    invalid(ctx, path, v.length, `should have at least ${d.minItems} items`);
  }
  v.forEach((item, i) => {
    walk(d.items.def, item, `${path}[${i}]`, ctx);
  });
  if (d.listType === 'set') {
    const seen = new Set<string>();
    v.forEach((item, i) => {
      const key = canonical(item);
      if (seen.has(key)) report(ctx, 'Duplicate', `${path}[${i}]`, `Duplicate value: ${show(item)}`, item);
      seen.add(key);
    });
  } else if (d.listType === 'map' && d.listMapKeys?.length) {
    const keys = [...d.listMapKeys].sort();
    const seen = new Set<string>();
    v.forEach((item, i) => {
      if (!isObject(item)) return;
      const id: Record<string, unknown> = {};
      for (const k of keys) if (item[k] !== undefined) id[k] = item[k];
      const key = canonical(id);
      if (seen.has(key)) report(ctx, 'Duplicate', `${path}[${i}]`, `Duplicate value: ${canonical(id)}`, id);
      seen.add(key);
    });
  }
}

function validateObject(
  d: Extract<SchemaDef, { kind: 'object' | 'record' }>,
  v: unknown,
  path: string,
  ctx: Ctx,
): void {
  if (!isObject(v)) {
    typeInvalid(ctx, path, v, 'object');
    return;
  }
  const count = Object.keys(v).length;
  if (d.maxProperties !== undefined && count > d.maxProperties) {
    report(ctx, 'TooMany', path, `Too many: ${count}: must have at most ${d.maxProperties} items`, count);
  }
  if (d.minProperties !== undefined && count < d.minProperties) {
    invalid(ctx, path, count, `should have at least ${d.minProperties} properties`);
  }
  if (d.kind === 'record') {
    for (const [key, item] of Object.entries(v)) {
      if (item !== null || d.values.def.nullable) walk(d.values.def, item, child(path, key), ctx);
    }
    return;
  }
  if (d.objectMeta) return;
  for (const [key, prop] of Object.entries(d.properties)) {
    const value = v[key];
    // A non-nullable null is dropped (or defaulted) by the API server before validation.
    if (value === undefined || (value === null && !prop.def.nullable)) {
      if (prop.presence === 'required') report(ctx, 'Required', child(path, key), 'Required value');
      continue;
    }
    walk(prop.def, value, child(path, key), ctx);
  }
  if ((d.rejectUnknownFields || ctx.rejectUnknown) && !d.preserveUnknownFields) {
    for (const key of Object.keys(v)) {
      if (!(key in d.properties) && v[key] !== undefined) {
        report(ctx, 'Forbidden', child(path, key), 'Forbidden: field not declared in schema', v[key]);
      }
    }
  }
}

const regexCache = new Map<string, RegExp>();

/** OpenAPI patterns are ECMA 262 (the API server runs them as RE2): compile once, with 'u' when it parses. */
function regex(pattern: string): RegExp {
  let re = regexCache.get(pattern);
  if (!re) {
    try {
      re = new RegExp(pattern, 'u');
    } catch {
      re = new RegExp(pattern);
    }
    regexCache.set(pattern, re);
  }
  return re;
}

const DATE = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/;
const DATE_TIME =
  /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt ]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):?[0-5]\d)$/;
const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\.?$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const MAC = /^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$/;
// \u00b5 and \u03bc: the micro signs Go accepts ("µs"), escaped so that the bundle stays ASCII (V8 then holds
// its source in one byte per character; esbuild escapes strings but not regular expressions).
const DURATION =
  /^[-+]?(\d+(\.\d*)?|\.\d+)\s*[a-z\u00b5\u03bc]+(\s*(\d+(\.\d*)?|\.\d+)\s*[a-z\u00b5\u03bc]+)*$/i;
const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** The string formats the API server checks (kube-openapi's strfmt registry); others are not checked. */
const FORMATS: Record<string, (v: string) => boolean> = {
  date: (v) => DATE.test(v),
  'date-time': (v) => DATE_TIME.test(v),
  datetime: (v) => DATE_TIME.test(v),
  uuid: (v) => UUID.test(v),
  ipv4: (v) => isIPv4(v),
  ipv6: (v) => isIPv6(v),
  cidr: (v) => {
    const [ip, bits, extra] = v.split('/');
    if (ip === undefined || bits === undefined || extra !== undefined || !/^\d{1,3}$/.test(bits))
      return false;
    const n = Number(bits);
    return (isIPv4(ip) && n <= 32) || (isIPv6(ip) && n <= 128);
  },
  hostname: (v) => HOSTNAME.test(v),
  byte: (v) => BASE64.test(v),
  mac: (v) => MAC.test(v),
  duration: (v) => DURATION.test(v),
  email: (v) => EMAIL.test(v),
  uri: (v) => URL.canParse(v),
};

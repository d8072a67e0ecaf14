/**
 * toOpenAPI: a schema as an apiextensions.k8s.io/v1 structural openAPIV3Schema. Every node has a `type`
 * (except int-or-string and preserve-unknown-fields nodes, where Kubernetes forbids or waives it);
 * required lists come from the properties' presence. Problems the API server would reject (bad list-map
 * keys, defaults that do not validate) are reported up front as a SchemaError.
 */
import type { AnySchema, JSONSchemaProps, SchemaDef } from './types.ts';
import { formatFieldError, validate } from './validate.ts';

/** The schema cannot become a valid CRD schema; `problems` says why, one line each. */
export class SchemaError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid schema:\n  ${problems.join('\n  ')}`);
    this.name = 'SchemaError';
    this.problems = problems;
  }
}

export interface ToOpenAPIOptions {
  /** Path used in SchemaError messages (default: empty, the root). */
  path?: string;
}

/** The structural openAPIV3Schema of a schema. Throws SchemaError when Kubernetes would reject it. */
export function toOpenAPI(schema: AnySchema, opts: ToOpenAPIOptions = {}): JSONSchemaProps {
  const problems: string[] = [];
  const out = emit(schema, opts.path ?? '', problems);
  if (problems.length > 0) throw new SchemaError(problems);
  return out;
}

/** Problems Kubernetes would reject the schema for; empty when it is fine. */
export function checkSchema(schema: AnySchema): string[] {
  const problems: string[] = [];
  emit(schema, '', problems);
  return problems;
}

const at = (path: string) => path || '<root>';
const child = (path: string, key: string) => (path ? `${path}.${key}` : key);

function emit(schema: AnySchema, path: string, problems: string[]): JSONSchemaProps {
  const d = schema.def;
  const out: JSONSchemaProps = body(d, path, problems);
  if (d.description !== undefined) out.description = d.description;
  if (d.title !== undefined) out.title = d.title;
  if (d.nullable) out.nullable = true;
  if (d.example !== undefined) out.example = structuredClone(d.example);
  if (d.default !== undefined) {
    out.default = structuredClone(d.default);
    // Kubernetes validates defaults (and requires them pruned): check here, against the schema itself.
    const errors = validate(schema, d.default, {
      path: `${child(path, 'default')}`,
      unknownFields: 'reject',
    });
    for (const e of errors) problems.push(`${at(path)}: default is invalid: ${formatFieldError(e)}`);
  }
  if (d.validations?.length) out['x-kubernetes-validations'] = d.validations.map((r) => ({ ...r }));
  return out;
}

function body(d: SchemaDef, path: string, problems: string[]): JSONSchemaProps {
  switch (d.kind) {
    case 'string': {
      const out: JSONSchemaProps = { type: 'string' };
      if (d.format !== undefined) out.format = d.format;
      if (d.enum) out.enum = [...d.enum];
      if (d.minLength !== undefined) out.minLength = d.minLength;
      if (d.maxLength !== undefined) out.maxLength = d.maxLength;
      if (d.pattern !== undefined) {
        out.pattern = d.pattern;
        checkPattern(d.pattern, path, problems);
      }
      return out;
    }
    case 'integer':
    case 'number': {
      const out: JSONSchemaProps = { type: d.kind };
      if (d.format !== undefined) out.format = d.format;
      if (d.enum) out.enum = [...d.enum];
      if (d.minimum !== undefined) out.minimum = d.minimum;
      if (d.exclusiveMinimum) out.exclusiveMinimum = true;
      if (d.maximum !== undefined) out.maximum = d.maximum;
      if (d.exclusiveMaximum) out.exclusiveMaximum = true;
      if (d.multipleOf !== undefined) out.multipleOf = d.multipleOf;
      if (d.kind === 'integer') {
        for (const k of ['minimum', 'maximum', 'multipleOf'] as const) {
          const n = d[k];
          if (n !== undefined && !Number.isInteger(n))
            problems.push(`${at(path)}: ${k} ${n} is not an integer`);
        }
      }
      if (d.multipleOf !== undefined && d.multipleOf <= 0)
        problems.push(`${at(path)}: multipleOf must be > 0`);
      return out;
    }
    case 'boolean':
      return { type: 'boolean' };
    case 'int-or-string': {
      const out: JSONSchemaProps = { anyOf: [{ type: 'integer' }, { type: 'string' }] };
      if (d.pattern !== undefined) {
        out.pattern = d.pattern;
        checkPattern(d.pattern, path, problems);
      }
      out['x-kubernetes-int-or-string'] = true;
      return out;
    }
    case 'array': {
      const out: JSONSchemaProps = { type: 'array', items: emit(d.items, `${path}[*]`, problems) };
      if (d.minItems !== undefined) out.minItems = d.minItems;
      if (d.maxItems !== undefined) out.maxItems = d.maxItems;
      if (d.listType !== undefined) out['x-kubernetes-list-type'] = d.listType;
      if (d.listMapKeys?.length) out['x-kubernetes-list-map-keys'] = [...d.listMapKeys];
      checkList(d, path, problems);
      return out;
    }
    case 'object': {
      const out: JSONSchemaProps = { type: 'object' };
      const entries = Object.entries(d.properties);
      if (entries.length > 0) {
        out.properties = {};
        for (const [key, prop] of entries) out.properties[key] = emit(prop, child(path, key), problems);
        const required = entries.filter(([, p]) => p.presence === 'required').map(([k]) => k);
        if (required.length > 0) out.required = required;
      }
      if (d.minProperties !== undefined) out.minProperties = d.minProperties;
      if (d.maxProperties !== undefined) out.maxProperties = d.maxProperties;
      if (d.preserveUnknownFields) out['x-kubernetes-preserve-unknown-fields'] = true;
      if (d.mapType !== undefined) out['x-kubernetes-map-type'] = d.mapType;
      return out;
    }
    case 'record': {
      const out: JSONSchemaProps = {
        type: 'object',
        additionalProperties: emit(d.values, `${path}.*`, problems),
      };
      if (d.minProperties !== undefined) out.minProperties = d.minProperties;
      if (d.maxProperties !== undefined) out.maxProperties = d.maxProperties;
      if (d.mapType !== undefined) out['x-kubernetes-map-type'] = d.mapType;
      return out;
    }
    case 'unknown': {
      const out: JSONSchemaProps = {};
      if (d.object) out.type = 'object';
      if (d.embeddedResource) out['x-kubernetes-embedded-resource'] = true;
      out['x-kubernetes-preserve-unknown-fields'] = true;
      return out;
    }
  }
}

function checkPattern(pattern: string, path: string, problems: string[]): void {
  try {
    new RegExp(pattern);
  } catch (err) {
    problems.push(
      `${at(path)}: pattern ${JSON.stringify(pattern)} does not compile: ${(err as Error).message}`,
    );
  }
}

const SCALARS = new Set(['string', 'integer', 'number', 'boolean', 'int-or-string']);

/** The rules apiextensions applies to x-kubernetes-list-type and x-kubernetes-list-map-keys. */
function checkList(d: Extract<SchemaDef, { kind: 'array' }>, path: string, problems: string[]): void {
  const item = d.items.def;
  if (d.listMapKeys?.length && d.listType !== 'map') {
    problems.push(`${at(path)}: listMapKeys need listType 'map'`);
  }
  if (d.listType === 'set') {
    const atomic =
      SCALARS.has(item.kind) ||
      ((item.kind === 'object' || item.kind === 'record') && item.mapType === 'atomic');
    if (!atomic)
      problems.push(`${at(path)}: listType 'set' needs scalar items or items with mapType 'atomic'`);
  }
  if (d.listType === 'map') {
    if (item.kind !== 'object') {
      problems.push(`${at(path)}: listType 'map' needs object items`);
      return;
    }
    if (!d.listMapKeys?.length) {
      problems.push(`${at(path)}: listType 'map' needs listMapKeys`);
      return;
    }
    for (const key of d.listMapKeys) {
      const prop = item.properties[key];
      if (!prop) {
        problems.push(`${at(path)}: list map key ${JSON.stringify(key)} is not a property of the items`);
      } else if (!SCALARS.has(prop.def.kind)) {
        problems.push(`${at(path)}: list map key ${JSON.stringify(key)} must be a scalar`);
      } else if (prop.presence === 'optional') {
        problems.push(`${at(path)}: list map key ${JSON.stringify(key)} must be required or have a default`);
      }
    }
  }
}

/**
 * Patch algorithms for the fake client: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a
 * simplified strategic merge patch. All functions are pure: they return new values and never mutate inputs.
 */
import { isDeepStrictEqual } from 'node:util';
import type { JsonPatchOperation } from '../client/types.ts';

/** A patch that cannot be applied. `malformed` patches are 400s; patches that fail to apply are 422s. */
export class PatchError extends Error {
  readonly malformed: boolean;
  constructor(message: string, malformed: boolean) {
    super(message);
    this.name = 'PatchError';
    this.malformed = malformed;
  }
}

export type JsonObject = Record<string, unknown>;

export function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A JSON round trip: what a value looks like after crossing the wire (undefined fields vanish). */
export function jsonClone<V>(value: V): V {
  if (value === undefined) return value;
  return JSON.parse(JSON.stringify(value)) as V;
}

/** RFC 7386: objects merge recursively, `null` deletes a key, anything else (arrays included) replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return jsonClone(patch);
  const out: JsonObject = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

function isNamedList(list: unknown[]): list is JsonObject[] {
  return list.length > 0 && list.every((item) => isPlainObject(item) && typeof item.name === 'string');
}

/**
 * A simplified strategic merge patch: a JSON merge patch, except that a list of objects that all carry a
 * string `name` is merged with the existing list by `name` (matching items merge recursively, new items
 * are appended, unmentioned items stay). Directives: `$patch: delete` on a list item removes the matching
 * item, `$patch: replace` / `$patch: delete` on an object replaces / removes it; other `$`-keys
 * (`$setElementOrder`, `$retainKeys`, `$deleteFromPrimitiveList`) are ignored. The real API server uses
 * per-field merge keys from the OpenAPI schema (e.g. `containerPort` for ports, `mountPath` for
 * volumeMounts) and merges primitive lists such as `finalizers`; this fake does not.
 * Returns undefined when the patch deletes the value.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return jsonClone(patch);
  if (patch.$patch === 'delete') return undefined;
  if (patch.$patch === 'replace') return strategicMergePatch(undefined, { ...patch, $patch: undefined });
  const out: JsonObject = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$') || value === undefined) continue;
    if (value === null) {
      delete out[key];
    } else if (Array.isArray(value) && isNamedList(value)) {
      const existing = out[key];
      const merged = mergeNamedLists(Array.isArray(existing) ? existing : [], value);
      // A list that only held delete directives for items that were not there stays absent.
      if (Array.isArray(existing) || merged.length > 0) out[key] = merged;
    } else {
      const merged = strategicMergePatch(out[key], value);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    }
  }
  return out;
}

function mergeNamedLists(existing: unknown[], patch: JsonObject[]): unknown[] {
  const result = [...existing];
  for (const item of patch) {
    const index = result.findIndex((e) => isPlainObject(e) && e.name === item.name);
    if (item.$patch === 'delete') {
      if (index >= 0) result.splice(index, 1);
      continue;
    }
    const merged = strategicMergePatch(index >= 0 ? result[index] : undefined, item);
    if (merged === undefined) continue;
    if (index >= 0) result[index] = merged;
    else result.push(merged);
  }
  return result;
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new PatchError(`invalid JSON pointer "${pointer}"`, true);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}

type Container = JsonObject | unknown[];

function arrayIndex(list: unknown[], token: string, allowEnd: boolean, pointer: string): number {
  if (allowEnd && token === '-') return list.length;
  if (!/^(0|[1-9][0-9]*)$/.test(token))
    throw new PatchError(`invalid array index "${token}" in "${pointer}"`, false);
  const index = Number(token);
  if (index > list.length || (!allowEnd && index === list.length)) {
    throw new PatchError(`array index ${index} out of bounds in "${pointer}"`, false);
  }
  return index;
}

/** Walks to the container holding the last token. The document sits under the key 'root' of a wrapper. */
function locate(wrapper: JsonObject, pointer: string): { parent: Container; token: string } {
  const tokens = ['root', ...parsePointer(pointer)];
  let current: unknown = wrapper;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(current)) current = current[arrayIndex(current, token, false, pointer)];
    else if (isPlainObject(current) && Object.hasOwn(current, token)) current = current[token];
    else throw new PatchError(`path "${pointer}" does not exist`, false);
    if (!Array.isArray(current) && !isPlainObject(current)) {
      throw new PatchError(`path "${pointer}" does not exist`, false);
    }
  }
  return { parent: current as Container, token: tokens[tokens.length - 1] ?? 'root' };
}

function read(wrapper: JsonObject, pointer: string): unknown {
  const { parent, token } = locate(wrapper, pointer);
  if (Array.isArray(parent)) return parent[arrayIndex(parent, token, false, pointer)];
  if (!Object.hasOwn(parent, token)) throw new PatchError(`path "${pointer}" does not exist`, false);
  return parent[token];
}

function add(wrapper: JsonObject, pointer: string, value: unknown): void {
  const { parent, token } = locate(wrapper, pointer);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, token, true, pointer), 0, value);
  else parent[token] = value;
}

function remove(wrapper: JsonObject, pointer: string): void {
  const { parent, token } = locate(wrapper, pointer);
  if (Array.isArray(parent)) {
    parent.splice(arrayIndex(parent, token, false, pointer), 1);
  } else {
    if (!Object.hasOwn(parent, token)) throw new PatchError(`path "${pointer}" does not exist`, false);
    delete parent[token];
  }
}

function replace(wrapper: JsonObject, pointer: string, value: unknown): void {
  const { parent, token } = locate(wrapper, pointer);
  if (Array.isArray(parent)) parent[arrayIndex(parent, token, false, pointer)] = value;
  else if (Object.hasOwn(parent, token)) parent[token] = value;
  else throw new PatchError(`path "${pointer}" does not exist`, false);
}

/** RFC 6902: add, remove, replace, move, copy, test. Atomic: the input is never modified. */
export function applyJsonPatch(doc: unknown, operations: JsonPatchOperation[]): unknown {
  if (!Array.isArray(operations)) throw new PatchError('a JSON patch must be an array of operations', true);
  const wrapper: JsonObject = { root: jsonClone(doc) };
  for (const op of operations) {
    if (!isPlainObject(op) || typeof op.path !== 'string') {
      throw new PatchError(`invalid JSON patch operation ${JSON.stringify(op)}`, true);
    }
    const needsValue = op.op === 'add' || op.op === 'replace' || op.op === 'test';
    if (needsValue && !Object.hasOwn(op, 'value')) {
      throw new PatchError(`JSON patch operation "${op.op}" at "${op.path}" has no value`, true);
    }
    const needsFrom = op.op === 'move' || op.op === 'copy';
    if (needsFrom && typeof op.from !== 'string') {
      throw new PatchError(`JSON patch operation "${op.op}" at "${op.path}" has no from`, true);
    }
    switch (op.op) {
      case 'add':
        add(wrapper, op.path, jsonClone(op.value));
        break;
      case 'remove':
        remove(wrapper, op.path);
        break;
      case 'replace':
        replace(wrapper, op.path, jsonClone(op.value));
        break;
      case 'move': {
        const from = op.from ?? '';
        if (op.path !== from && op.path.startsWith(`${from}/`)) {
          throw new PatchError(`cannot move "${from}" into its own child "${op.path}"`, false);
        }
        const value = read(wrapper, from);
        remove(wrapper, from);
        add(wrapper, op.path, value);
        break;
      }
      case 'copy':
        add(wrapper, op.path, jsonClone(read(wrapper, op.from ?? '')));
        break;
      case 'test':
        if (!isDeepStrictEqual(read(wrapper, op.path), jsonClone(op.value))) {
          throw new PatchError(`testing value at "${op.path}" failed`, false);
        }
        break;
      default:
        throw new PatchError(`unknown JSON patch operation "${String((op as { op: unknown }).op)}"`, true);
    }
  }
  return wrapper.root;
}

/**
 * Field sets for the fake client's managed fields: which paths of an object a field manager owns, in the
 * API server's FieldsV1 encoding (`{"f:data": {".": {}, "f:key": {}}}`). Pure functions.
 *
 * A path is a list of FieldsV1 elements ("f:data", "f:key"); objects are walked by their JSON keys, and
 * every list is atomic (one leaf), where the API server keys some built-in lists by their merge key
 * (`k:{"name":"app"}`) and sets (`v:"x"`). Elements of those kinds read from seeded managedFields are kept
 * as they are, so they round-trip.
 */
import { isDeepStrictEqual } from 'node:util';
import { isPlainObject, type JsonObject } from './patch.ts';

export type Path = readonly string[];
/** Paths encoded as JSON arrays, so they compare as strings. */
export type FieldSet = Set<string>;

/** Never owned: the identity and server-written metadata (the API server's stripped fields). */
const STRIPPED: ReadonlySet<string> = new Set(
  [
    ['f:apiVersion'],
    ['f:kind'],
    ['f:metadata'],
    ...[
      'name',
      'namespace',
      'generateName',
      'uid',
      'resourceVersion',
      'generation',
      'creationTimestamp',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'selfLink',
      'managedFields',
    ].map((f) => ['f:metadata', `f:${f}`]),
  ].map((p) => JSON.stringify(p)),
);

export const pathKey = (path: Path): string => JSON.stringify(path);
export const parsePath = (key: string): Path => JSON.parse(key) as string[];

/** `.spec.replicas`: how the API server names a path in conflicts. */
export function pathString(path: Path): string {
  return path.map((el) => (el.startsWith('f:') ? `.${el.slice(2)}` : `[${el.slice(2)}]`)).join('');
}

function stripped(path: Path): boolean {
  return STRIPPED.has(pathKey(path));
}

/** Whether `path` is in `scope` ('main': everything but status; 'status': only status). */
export type Scope = 'all' | 'main' | 'status';
function inScope(path: Path, scope: Scope): boolean {
  if (scope === 'all' || path.length === 0) return true;
  return (path[0] === 'f:status') === (scope === 'status');
}

/**
 * The set an applied configuration claims: its leaves (scalars, lists, empty objects), not the objects
 * that hold them.
 */
export function appliedSet(config: JsonObject, scope: Scope): FieldSet {
  const set: FieldSet = new Set();
  const walk = (value: unknown, path: string[]): void => {
    if (path.length > 0 && !inScope(path, scope)) return;
    const identity = path.length === 1 && path[0] === 'f:metadata';
    if (!identity && stripped(path)) return;
    if (isPlainObject(value) && (Object.keys(value).length > 0 || path.length === 0 || identity)) {
      for (const [key, child] of Object.entries(value)) {
        if (child !== undefined) walk(child, [...path, `f:${key}`]);
      }
    } else {
      set.add(pathKey(path));
    }
  };
  walk(config, []);
  return set;
}

/** Every path of an object, the objects that hold fields included. */
function allPaths(value: unknown, path: string[], out: Map<string, unknown>): void {
  if (path.length > 0) {
    if (stripped(path)) {
      if (path.length > 1 || path[0] !== 'f:metadata') return; // metadata's own fields still count
    } else {
      out.set(pathKey(path), value);
    }
  }
  if (isPlainObject(value)) {
    for (const [key, child] of Object.entries(value)) {
      if (child !== undefined) allPaths(child, [...path, `f:${key}`], out);
    }
  }
}

export interface Changes {
  /** Paths present only in the new object (objects that hold fields included). */
  added: FieldSet;
  /** Leaves present in both whose values differ. */
  modified: FieldSet;
  /** Paths present only in the old object. */
  removed: FieldSet;
}

/** What a write changed, path by path. */
export function changes(before: JsonObject | undefined, after: JsonObject): Changes {
  const old = new Map<string, unknown>();
  const now = new Map<string, unknown>();
  if (before) allPaths(before, [], old);
  allPaths(after, [], now);
  const result: Changes = { added: new Set(), modified: new Set(), removed: new Set() };
  for (const [key, value] of now) {
    if (!old.has(key)) result.added.add(key);
    else if (!isPlainObject(value) || !isPlainObject(old.get(key))) {
      if (!isDeepStrictEqual(value, old.get(key))) result.modified.add(key);
    }
  }
  for (const key of old.keys()) if (!now.has(key)) result.removed.add(key);
  return result;
}

/** FieldsV1 -> set. `.` marks an object that is itself a member. */
export function decodeFields(fields: unknown): FieldSet {
  const set: FieldSet = new Set();
  const walk = (node: unknown, path: string[]): void => {
    if (!isPlainObject(node)) return;
    const keys = Object.keys(node);
    if (keys.length === 0 && path.length > 0) set.add(pathKey(path));
    for (const key of keys) {
      if (key === '.') set.add(pathKey(path));
      else walk(node[key], [...path, key]);
    }
  };
  walk(fields, []);
  return set;
}

/** Set -> FieldsV1. */
export function encodeFields(set: FieldSet): JsonObject {
  const root: JsonObject = {};
  const nodeOf = (path: Path): JsonObject => {
    let node = root;
    for (const el of path) {
      const child = node[el];
      if (isPlainObject(child)) node = child;
      else {
        const created: JsonObject = {};
        node[el] = created;
        node = created;
      }
    }
    return node;
  };
  const members = [...set].map(parsePath);
  for (const path of members) nodeOf(path);
  // A member that has members below it says so with ".".
  for (const path of members) {
    const node = nodeOf(path);
    if (Object.keys(node).some((k) => k !== '.')) node['.'] = {};
  }
  return root;
}

/** The value at `path` of an object, or undefined. */
export function valueAt(obj: unknown, path: Path): unknown {
  let node = obj;
  for (const el of path) {
    if (!isPlainObject(node) || !el.startsWith('f:')) return undefined;
    node = node[el.slice(2)];
  }
  return node;
}

/**
 * Removes the value at `path` (from a private copy: mutated), and then the objects above it that became
 * empty, unless `keep` says someone owns them.
 */
export function removeAt(obj: JsonObject, path: Path, keep: (path: Path) => boolean): void {
  const walk = (node: unknown, depth: number): void => {
    const el = path[depth];
    if (!isPlainObject(node) || !el?.startsWith('f:')) return;
    const key = el.slice(2);
    if (depth === path.length - 1) {
      delete node[key];
      return;
    }
    const child = node[key];
    walk(child, depth + 1);
    if (isPlainObject(child) && Object.keys(child).length === 0 && !keep(path.slice(0, depth + 1))) {
      delete node[key];
    }
  };
  walk(obj, 0);
}

/** Server-side apply's merge: objects merge key by key, everything else (lists included) is replaced. */
export function applyMerge(live: unknown, config: unknown): unknown {
  if (!isPlainObject(config) || !isPlainObject(live)) return config;
  const out: JsonObject = { ...live };
  for (const [key, value] of Object.entries(config)) {
    if (value === undefined) continue;
    out[key] = applyMerge(live[key], value);
  }
  return out;
}

/**
 * Field managers for the fake client, as the API server keeps them in metadata.managedFields: every write
 * gives its manager the fields it changed (operation Update, taken from the others), and server-side
 * apply claims the fields of the applied configuration (operation Apply), refusing with a 409 to change
 * a field another manager owns unless forced, and removing the fields its manager stopped applying when
 * no one else owns them. Pure functions over JSON objects; field sets are in fake-fields.ts.
 */

import { isDeepStrictEqual } from 'node:util';
import type { KubeObject, ManagedFieldsEntry } from '../api/object.ts';
import type { StatusCause } from '../client/errors.ts';
import { ConflictError } from '../client/errors.ts';
import {
  appliedSet,
  applyMerge,
  changes,
  decodeFields,
  encodeFields,
  type FieldSet,
  type Path,
  parsePath,
  pathKey,
  pathString,
  removeAt,
  type Scope,
  valueAt,
} from './fake-fields.ts';
import { isPlainObject, type JsonObject, jsonClone } from './patch.ts';

type Obj = KubeObject & Record<string, unknown>;

/** Who writes, through which endpoint. */
export interface Writer {
  manager: string;
  apiVersion: string;
  /** 'status' for updateStatus/patchStatus. */
  subresource?: 'status';
  /** RFC 3339, seconds. */
  now: string;
}

interface Manager {
  manager: string;
  operation: string;
  apiVersion: string;
  subresource?: string;
  time?: string;
  set: FieldSet;
}

/** The manager an object without managedFields (seeded, or from before server-side apply) belongs to. */
const BEFORE_FIRST_APPLY = 'before-first-apply';

function decodeManagers(entries: readonly ManagedFieldsEntry[] | undefined): Manager[] {
  return (entries ?? []).map((e) => ({
    manager: e.manager ?? '',
    operation: e.operation ?? 'Update',
    apiVersion: e.apiVersion ?? '',
    ...(e.subresource ? { subresource: e.subresource } : {}),
    ...(e.time ? { time: e.time } : {}),
    set: decodeFields(e.fieldsV1),
  }));
}

/** The API server's manager identifier: appliers are one manager whatever apiVersion they apply. */
function managerId(m: Pick<Manager, 'manager' | 'operation' | 'apiVersion' | 'subresource'>): string {
  return JSON.stringify({
    manager: m.manager,
    operation: m.operation,
    ...(m.operation === 'Apply' ? {} : { apiVersion: m.apiVersion }),
    ...(m.subresource ? { subresource: m.subresource } : {}),
  });
}

/** Entries with fields, in the API server's order (operation, time, manager, apiVersion, subresource). */
function encodeManagers(managers: Manager[]): ManagedFieldsEntry[] | undefined {
  const seconds = (t: string | undefined): number => (t ? Date.parse(t) / 1000 : 0);
  const entries = managers
    .filter((m) => m.set.size > 0)
    .sort(
      (a, b) =>
        a.operation.localeCompare(b.operation) ||
        seconds(a.time) - seconds(b.time) ||
        a.manager.localeCompare(b.manager) ||
        a.apiVersion.localeCompare(b.apiVersion) ||
        (a.subresource ?? '').localeCompare(b.subresource ?? ''),
    )
    .map(
      (m): ManagedFieldsEntry => ({
        manager: m.manager,
        operation: m.operation,
        apiVersion: m.apiVersion,
        ...(m.time ? { time: m.time } : {}),
        fieldsType: 'FieldsV1',
        fieldsV1: encodeFields(m.set),
        ...(m.subresource ? { subresource: m.subresource } : {}),
      }),
    );
  return entries.length > 0 ? entries : undefined;
}

function entryOf(managers: Manager[], writer: Writer, operation: 'Apply' | 'Update'): Manager {
  const wanted = managerId({ ...writer, operation });
  const found = managers.find((m) => managerId(m) === wanted);
  if (found) return found;
  const created: Manager = {
    manager: writer.manager,
    operation,
    apiVersion: writer.apiVersion,
    ...(writer.subresource ? { subresource: writer.subresource } : {}),
    set: new Set(),
  };
  managers.push(created);
  return created;
}

const sameSet = (a: FieldSet, b: FieldSet): boolean => a.size === b.size && [...a].every((k) => b.has(k));

/**
 * metadata.managedFields after a create, update or (non-apply) patch from `before` (absent for a create)
 * to `after`: the writer's Update entry gains what changed, the other managers lose it.
 */
export function managedAfterWrite(
  before: Obj | undefined,
  after: Obj,
  writer: Writer,
): ManagedFieldsEntry[] | undefined {
  const managers = decodeManagers(before?.metadata.managedFields);
  const { added, modified, removed } = changes(before, after);
  if (added.size + modified.size + removed.size === 0) return before?.metadata.managedFields;
  const mine = entryOf(managers, writer, 'Update');
  for (const m of managers) {
    for (const key of [...modified, ...removed]) m.set.delete(key);
  }
  for (const key of [...added, ...modified]) mine.set.add(key);
  mine.time = writer.now;
  return encodeManagers(managers);
}

export interface ApplyRequest {
  writer: Writer;
  force: boolean;
  /** 'main' when the kind has a status subresource and this is the main resource. */
  scope: Scope;
}

export interface ApplyResult {
  /** The live object with the configuration applied (metadata.managedFields not yet set). */
  object: Obj;
  managedFields: ManagedFieldsEntry[] | undefined;
}

/** The part of a configuration an endpoint takes: the main resource ignores status, /status all else. */
function scoped(config: Obj, scope: Scope): Obj {
  if (scope === 'main') {
    const { status: _status, ...rest } = config;
    return rest as Obj;
  }
  if (scope === 'status') {
    const { apiVersion, kind, metadata, status } = config;
    return { apiVersion, kind, metadata, ...(status === undefined ? {} : { status }) } as Obj;
  }
  return config;
}

/** Server-side apply of `config` onto `live` (absent: the object is created); throws the 409 on conflicts. */
export function serverSideApply(live: Obj | undefined, config: Obj, request: ApplyRequest): ApplyResult {
  const { writer, force, scope } = request;
  const managers = decodeManagers(live?.metadata.managedFields);
  if (live && managers.length === 0) {
    managers.push({
      manager: BEFORE_FIRST_APPLY,
      operation: 'Update',
      apiVersion: writer.apiVersion,
      set: changes(undefined, live).added, // all of it, as if it had just been created
    });
  }
  const applied = jsonClone(scoped(config, scope));
  const claimed = appliedSet(applied, scope);
  const mine = entryOf(managers, writer, 'Apply');
  const previous = new Set(mine.set);
  const others = managers.filter((m) => m !== mine);

  const conflicts: Array<{ manager: Manager; path: Path }> = [];
  if (live) {
    for (const key of claimed) {
      const path = parsePath(key);
      if (isDeepStrictEqual(valueAt(applied, path), valueAt(live, path))) continue;
      for (const m of others) if (m.set.has(key)) conflicts.push({ manager: m, path });
    }
  }
  if (conflicts.length > 0 && !force) throw applyConflictError(conflicts);
  for (const { manager, path } of conflicts) manager.set.delete(pathKey(path));

  const merged = applyMerge(live ? jsonClone(live) : {}, applied) as Obj;
  const ownedByOthers = new Set(others.flatMap((m) => [...m.set]));
  const keep = (path: Path): boolean => claimed.has(pathKey(path)) || ownedByOthers.has(pathKey(path));
  for (const key of previous) {
    if (!claimed.has(key) && !ownedByOthers.has(key)) removeAt(merged, parsePath(key), keep);
  }
  const { removed } = changes(live, merged);
  for (const m of others) for (const key of removed) m.set.delete(key);
  mine.set = claimed;
  const objectChanged = !live || !isDeepStrictEqual(withoutManaged(live), withoutManaged(merged));
  if (objectChanged || !sameSet(previous, claimed) || conflicts.length > 0) mine.time = writer.now;
  return { object: merged, managedFields: encodeManagers(managers) };
}

function withoutManaged(obj: Obj): JsonObject {
  const { metadata, ...rest } = obj;
  if (!isPlainObject(metadata)) return rest;
  const { managedFields: _managedFields, ...meta } = metadata;
  return { ...rest, metadata: meta };
}

/** `"mgr"`, `"mgr" using v1`, `"mgr" with subresource "status" using v1`: as the API server prints one. */
function printManager(m: Manager): string {
  let out = JSON.stringify(m.manager);
  if (m.subresource) out += ` with subresource ${JSON.stringify(m.subresource)}`;
  if (m.operation === 'Update') out += ` using ${m.apiVersion}`;
  return out;
}

/** The 409 of a conflicting apply: one cause per manager and field, the message grouped by manager. */
export function applyConflictError(conflicts: Array<{ manager: Manager; path: Path }>): ConflictError {
  const sorted = [...conflicts].sort(
    (a, b) =>
      pathString(a.path).localeCompare(pathString(b.path)) ||
      managerId(a.manager).localeCompare(managerId(b.manager)),
  );
  const causes: StatusCause[] = sorted.map((c) => ({
    reason: 'FieldManagerConflict',
    message: `conflict with ${printManager(c.manager)}`,
    field: pathString(c.path),
  }));
  let message: string;
  const [only] = sorted;
  if (sorted.length === 1 && only) {
    message = `Apply failed with 1 conflict: conflict with ${printManager(only.manager)}: ${pathString(only.path)}`;
  } else {
    const byManager = new Map<string, { manager: Manager; paths: string[] }>();
    for (const c of sorted) {
      const id = managerId(c.manager);
      const group = byManager.get(id) ?? { manager: c.manager, paths: [] };
      group.paths.push(pathString(c.path));
      byManager.set(id, group);
    }
    const lines = [...byManager.keys()].sort().flatMap((id) => {
      const group = byManager.get(id);
      return group
        ? [`conflicts with ${printManager(group.manager)}:`, ...group.paths.map((p) => `- ${p}`)]
        : [];
    });
    message = `Apply failed with ${sorted.length} conflicts: ${lines.join('\n')}`;
  }
  return new ConflictError({
    kind: 'Status',
    status: 'Failure',
    message,
    reason: 'Conflict',
    details: { causes },
    code: 409,
  });
}

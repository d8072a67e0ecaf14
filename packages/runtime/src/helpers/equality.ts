/**
 * Equality helpers for JSON-shaped API objects: `deepEqual`, `deepCopy` and the `isSubset` rule that
 * createOrUpdate and apply use to decide whether a write is needed.
 *
 * All of them treat a key whose value is `undefined` as absent, as JSON serialisation does.
 */
import { copyJson } from '../util/copy.ts';

/** A plain JSON object (not an array, not null, not a Date or other class instance). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * A deep copy, so the copy can be mutated without touching the original or a cache (even a frozen one):
 * JSON-shaped values copied directly (util/copy.ts, an order of magnitude faster than structuredClone),
 * anything else by structuredClone.
 */
export function deepCopy<T>(value: T): T {
  return copyJson(value);
}

/**
 * Structural equality of JSON values: primitives by value (NaN equals NaN), arrays element by element
 * in order, objects key by key. Keys whose value is `undefined` count as absent, so `{ a: undefined }`
 * equals `{}`. Dates compare by time; other class instances only by identity.
 */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (a instanceof Date || b instanceof Date) {
    return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  }
  if (!isPlainObject(a) || !isPlainObject(b)) return false;
  const keysA = definedKeys(a);
  const keysB = definedKeys(b);
  if (keysA.length !== keysB.length) return false;
  for (const key of keysA) {
    if (!Object.hasOwn(b, key) || !deepEqual(a[key], b[key])) return false;
  }
  return true;
}

/** An own property's value; inherited names such as `constructor` read as absent. */
function own(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function definedKeys(obj: Record<string, unknown>): string[] {
  return Object.keys(obj).filter((key) => obj[key] !== undefined);
}

/**
 * The "desired is a subset" rule: true when every field present in `desired` has the same value in
 * `live`. Fields the server (or another controller) added to `live` and that `desired` does not
 * mention, such as defaulted `spec.template.spec.dnsPolicy`, status, uid or resourceVersion, are
 * ignored, so comparing what a controller wants with what the API returned does not report a
 * difference that a write could never remove.
 *
 * Recursively:
 * - `undefined` in desired (a missing key) matches anything.
 * - `null` in desired matches only `null` or a missing field (JSON merge patch's "remove").
 * - Objects: every key of desired must be a subset of the same key in live; extra keys in live are fine.
 *   An object in desired never matches a missing field, even `{}` (`emptyDir: {}` means something).
 * - Arrays: the controller owns the whole list. Live must have the same length, and each element of
 *   desired must be a subset of the element at the same index (so server-defaulted fields inside list
 *   items, e.g. a container's `terminationMessagePath`, are ignored). An empty array matches a missing
 *   field, since Go drops empty lists.
 * - Primitives compare strictly, with no normalisation: `1` does not match `'1'`, and quantity
 *   strings are compared as written (`'1000m'` does not match `'1'`, `'1024Mi'` does not match
 *   `'1Gi'`). Write quantities the way the server canonicalises them. Likewise a zero value (`false`,
 *   `0`, `''`) does not match a missing field: leave out fields you only want at their default, or the
 *   server will drop them and every comparison will report a difference.
 */
export function isSubset(desired: unknown, live: unknown): boolean {
  if (desired === undefined) return true;
  if (desired === null) return live === null || live === undefined;
  if (Array.isArray(desired)) {
    if (live === undefined || live === null) return desired.length === 0;
    if (!Array.isArray(live) || live.length !== desired.length) return false;
    for (let i = 0; i < desired.length; i++) if (!isSubset(desired[i], live[i])) return false;
    return true;
  }
  if (isPlainObject(desired)) {
    if (!isPlainObject(live)) return false;
    for (const key of Object.keys(desired)) {
      if (!isSubset(desired[key], own(live, key))) return false;
    }
    return true;
  }
  return deepEqual(desired, live);
}

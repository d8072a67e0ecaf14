/**
 * Deep copies of JSON-shaped values (API objects): plain objects and arrays copied recursively, Dates as
 * new Dates, primitives as they are; any other object (a Map, a typed array, a class instance) through
 * structuredClone. About 13x faster than structuredClone on API objects (a 9 KB StatefulSet: 37 µs
 * against 490 µs, Node 24), which matters on the reconcile's hot path: every createOrUpdate copies the
 * cached object it mutates, every applyDefaults the object it defaults. Values must not be cyclic (API
 * objects never are).
 */
export function copyJson<T>(value: T): T {
  return copy(value) as T;
}

function copy(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = copy(value[i]);
    return out;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return value instanceof Date ? new Date(value.getTime()) : structuredClone(value);
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = copy((value as Record<string, unknown>)[key]);
  return out;
}

/** Deep freezing, for objects shared read-only (cached objects, schema manifests). */

/**
 * Freezes `value` and everything reachable from it (own properties, symbol keys included; accessors are not
 * called), in place, and returns it. An object already frozen is taken to be deeply frozen already: that is
 * what makes freezing an object that shares parts with frozen ones cheap.
 */
export function deepFreeze<T>(value: T): T {
  freezeInPlace(value);
  return value;
}

function freezeInPlace(value: unknown): void {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return;
  if (Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const key of Reflect.ownKeys(value)) {
    const desc = Object.getOwnPropertyDescriptor(value, key);
    if (desc && 'value' in desc) freezeInPlace(desc.value);
  }
}

/** Hands back a shared copy of a string (the cache's StringPool); strings shorter than minLength are left alone. */
export interface StringInterner {
  readonly minLength: number;
  intern(s: string): string;
}

/** Objects delivered deep-frozen, as deepFreezeJson(value, strings) makes them (WatchOptions.deepFreeze). */
export interface DeepFreezeOptions {
  /** Long string values go through it (deepFreezeJson's `strings`). */
  strings?: StringInterner;
}

/**
 * {@link deepFreeze} for JSON data (what JSON.parse returns, and what keeps that shape: plain objects, arrays,
 * primitives), with the same result for such values, several times faster: it walks array indices and
 * Object.keys instead of every property's descriptor (one allocated per property). A cached object of a few
 * KB: ~2.5 µs instead of ~16 µs (Node 24), which at start-up with 11 000 objects is most of the freezing's
 * 0.3-0.5 s. A non-plain object inside (a prototype other than Object.prototype, Array.prototype or null: a
 * Date, a Map, a class instance) is frozen by deepFreeze. For values that are not JSON data, use deepFreeze:
 * a plain object's getters would be called here, and its symbol keys and non-enumerable properties skipped.
 *
 * With `strings`, each string value of a plain object or array (not keys) at least `strings.minLength`
 * long is replaced by `strings.intern(value)` (an equal string, possibly another copy) just before its
 * holder is frozen. The cache's reflectors use this to share equal long texts between cached objects.
 * Objects are frozen before their children are walked, as without `strings`: an object already frozen is
 * taken to be deeply frozen, so shared parts are walked once and a cycle ends.
 */
export function deepFreezeJson<T>(value: T, strings?: StringInterner): T {
  freezeJsonInPlace(value, strings);
  return value;
}

function freezeJsonInPlace(value: unknown, strings: StringInterner | undefined): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Array.prototype) {
    const array = value as unknown[];
    if (strings !== undefined) for (let i = 0; i < array.length; i++) internAt(array, i, strings);
    Object.freeze(value);
    for (let i = 0; i < array.length; i++) freezeJsonInPlace(array[i], strings);
    return;
  }
  if (proto !== Object.prototype && proto !== null) {
    freezeInPlace(value);
    return;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (strings !== undefined) for (let i = 0; i < keys.length; i++) internAt(record, keys[i]!, strings);
  Object.freeze(value);
  for (let i = 0; i < keys.length; i++) freezeJsonInPlace(record[keys[i]!], strings);
}

/**
 * Replaces holder[key] by the interner's copy when it is a long enough string. Always assigned: equal strings
 * are === in JavaScript, so whether the copy is another one cannot be asked.
 */
function internAt<K extends string | number>(
  holder: Record<K, unknown>,
  key: K,
  strings: StringInterner,
): void {
  const item = holder[key];
  if (typeof item !== 'string' || item.length < strings.minLength) return;
  holder[key] = strings.intern(item);
}

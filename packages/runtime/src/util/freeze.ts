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

/** apiVersion and kind for objects that lack them (list items and cached objects do). */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';

/**
 * `obj` with apiVersion and kind set from `res` where missing or empty. Never mutates `obj` (it may be a frozen
 * cached object): returns it as is when both are set, else a shallow copy.
 */
export function withTypeMeta<T extends KubeObject>(res: Pick<Resource<T>, 'apiVersion' | 'kind'>, obj: T): T {
  if (obj.apiVersion && obj.kind) return obj;
  return { ...obj, apiVersion: obj.apiVersion || res.apiVersion, kind: obj.kind || res.kind };
}

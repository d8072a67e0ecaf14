import type { KubeObject } from './object.ts';

/**
 * Describes where a kind lives in the API. The type parameter is a phantom: it carries the object
 * type so that `client.get(ConfigMaps, key)` returns a ConfigMap without casts.
 */
export interface Resource<T extends KubeObject = KubeObject> {
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** Lower-case plural used in URLs, e.g. 'statefulsets'. */
  readonly plural: string;
  readonly namespaced: boolean;
  /** 'v1' or 'apps/v1'. */
  readonly apiVersion: string;
  /** Never set: only there so TypeScript keeps T. */
  readonly __type?: T;
}

export interface ResourceInit {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export function defineResource<T extends KubeObject>(init: ResourceInit): Resource<T> {
  return Object.freeze({ ...init, apiVersion: init.group ? `${init.group}/${init.version}` : init.version });
}

/** 'apps/v1/statefulsets': a stable name for caches, metrics and logs. */
export function resourceId(res: Resource): string {
  return `${res.group || 'core'}/${res.version}/${res.plural}`;
}

export interface ResourcePathOptions {
  namespace?: string;
  name?: string;
  subresource?: 'status' | 'scale';
}

/** The REST path of a collection or of one object. */
export function resourcePath(res: Resource, opts: ResourcePathOptions = {}): string {
  const base = res.group ? `/apis/${res.group}/${res.version}` : `/api/${res.version}`;
  let path = base;
  if (res.namespaced && opts.namespace) path += `/namespaces/${encodeURIComponent(opts.namespace)}`;
  path += `/${res.plural}`;
  if (opts.name !== undefined) path += `/${encodeURIComponent(opts.name)}`;
  if (opts.subresource) path += `/${opts.subresource}`;
  return path;
}

/** The public types of the fake client: requests, recorded actions, hooks and options. */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { DeleteOptions, ListOptions, Patch, WatchOptions, WriteOptions } from '../client/types.ts';
import type { FakeEventDelivery } from './fake-delivery.ts';

/** The Client method a request came through. */
export type FakeVerb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'updateStatus'
  | 'patch'
  | 'patchStatus'
  | 'delete';

export const READ_VERBS: readonly FakeVerb[] = ['get', 'list', 'watch'];

/** One recorded call. Optional fields are present only when they apply (so `deepEqual` stays simple). */
export interface FakeAction {
  verb: FakeVerb;
  resource: Resource;
  /** The request's namespace; absent for cluster-scoped kinds and all-namespace list/watch. */
  namespace?: string;
  /** Absent for list/watch and for a create that uses generateName. */
  name?: string;
  /** Only for patch/patchStatus. */
  patchType?: Patch['type'];
}

/** What an `onRequest` hook sees: the action plus a deep copy of what was sent. */
export interface FakeRequest extends FakeAction {
  object?: KubeObject;
  patch?: Patch;
  options?: ListOptions | WatchOptions | WriteOptions | DeleteOptions;
}

/** Runs before a request is served; throw to fail it. May be async. */
export type RequestHook = (request: FakeRequest) => void | Promise<void>;

export interface FakeActionFilter {
  verb?: FakeVerb | readonly FakeVerb[];
  resource?: Resource;
  namespace?: string;
  name?: string;
}

/** A seed object. The index signature lets object literals carry kind fields (spec, data, ...). */
export interface FakeObject {
  resource: Resource;
  object: KubeObject | (KubeObject & Record<string, unknown>);
}

export interface FakeClientOptions {
  /** Objects stored before the first request, as they are (status kept); they get resourceVersions. */
  objects?: FakeObject[];
  /** Default 'opkit', as the real client's. */
  fieldManager?: string;
  /**
   * Kinds with a status subresource, in addition to the built-ins that have one (Pods, Services,
   * PersistentVolumeClaims, PersistentVolumes, Namespaces, Nodes, StatefulSets, Deployments,
   * PodDisruptionBudgets, CustomResourceDefinitions). Default: the kinds of the seed objects that have a
   * status. More can be added with `withStatusSubresource`.
   */
  statusSubresource?: Resource[];
  /** Clock for creationTimestamp/deletionTimestamp. Default: the system clock. */
  now?: () => Date;
  /**
   * Delivers each watch stream's events late, by its own delay (in order within a stream), so that two
   * informers see a change at different moments, as on a real cluster. Default: every stream at once.
   * `randomDelays({ maxMs, seed })` gives reproducible random delays.
   */
  eventDelivery?: FakeEventDelivery;
}

export function actionOf(request: FakeRequest): FakeAction {
  const action: FakeAction = { verb: request.verb, resource: request.resource };
  if (request.namespace !== undefined) action.namespace = request.namespace;
  if (request.name !== undefined) action.name = request.name;
  if (request.patchType !== undefined) action.patchType = request.patchType;
  return action;
}

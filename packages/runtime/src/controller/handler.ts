/**
 * Event handlers, like controller-runtime's pkg/handler: they turn an event about an object into the
 * requests (keys) to reconcile. Handlers run synchronously in the informer's event loop; they only
 * compute keys, the controller's queue de-duplicates them.
 */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { EventObject } from './predicate.ts';
import type { Request } from './reconcile.ts';

/** Where a handler puts the requests it computes (the controller's queue). */
export interface RequestSink {
  add(req: Request): void;
}

export interface EventHandler<T extends KubeObject = KubeObject> {
  create(obj: EventObject<T>, sink: RequestSink): void;
  update(oldObj: EventObject<T>, newObj: EventObject<T>, sink: RequestSink): void;
  delete(obj: EventObject<T>, sink: RequestSink): void;
  generic(obj: EventObject<T>, sink: RequestSink): void;
}

function requestFor(obj: EventObject): Request {
  const { namespace, name } = obj.metadata;
  return namespace ? { namespace, name: name ?? '' } : { name: name ?? '' };
}

/** Builds a handler from one mapping applied to every object of every event (both objects on update). */
function fromMap<T extends KubeObject>(map: (obj: EventObject<T>) => readonly Request[]): EventHandler<T> {
  const each = (obj: EventObject<T>, sink: RequestSink): void => {
    for (const req of map(obj)) sink.add(req);
  };
  return {
    create: each,
    update: (oldObj, newObj, sink) => {
      each(oldObj, sink);
      each(newObj, sink);
    },
    delete: each,
    generic: each,
  };
}

/** Reconciles the object the event is about (the primary resource's handler). */
export function enqueueForObject<T extends KubeObject = KubeObject>(): EventHandler<T> {
  return {
    create: (obj, sink) => sink.add(requestFor(obj)),
    update: (oldObj, newObj, sink) => {
      sink.add(requestFor(newObj));
      // Keys never change for an object; only if a source hands over two different objects.
      const o = oldObj.metadata;
      const n = newObj.metadata;
      if (o.name !== n.name || o.namespace !== n.namespace) sink.add(requestFor(oldObj));
    },
    delete: (obj, sink) => sink.add(requestFor(obj)),
    generic: (obj, sink) => sink.add(requestFor(obj)),
  };
}

export interface EnqueueForOwnerOptions {
  /** Only follow the owner reference with `controller: true`. Default true. */
  onlyController?: boolean;
}

/** The API group of an apiVersion: '' for 'v1', 'apps' for 'apps/v1'. */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/**
 * The owners of `obj` of the `owner` kind, as requests: owner references whose apiVersion's group and
 * kind match `owner` (the version is ignored, like controller-runtime, so owners written with another
 * served version still match). A namespaced owner lives in the object's namespace; a cluster-scoped
 * owner has no namespace.
 */
export function ownerRequests(
  obj: EventObject,
  owner: Resource,
  options: EnqueueForOwnerOptions = {},
): Request[] {
  const onlyController = options.onlyController ?? true;
  const out: Request[] = [];
  for (const ref of obj.metadata.ownerReferences ?? []) {
    if (onlyController && ref.controller !== true) continue;
    if (ref.kind !== owner.kind || groupOf(ref.apiVersion) !== owner.group) continue;
    if (!ref.name) continue;
    if (owner.namespaced) {
      // A namespaced owner of a cluster-scoped object is invalid; there is no namespace to look in.
      if (!obj.metadata.namespace) continue;
      out.push({ namespace: obj.metadata.namespace, name: ref.name });
    } else out.push({ name: ref.name });
  }
  return out;
}

/**
 * Reconciles the owner of the object the event is about (a child's changes wake its parent). With
 * `onlyController` (the default) only the controller reference counts; otherwise every owner of that
 * kind is enqueued. On update both the old and the new owners are enqueued (an owner that lost the
 * child is told too).
 */
export function enqueueForOwner<T extends KubeObject = KubeObject>(
  owner: Resource,
  options: EnqueueForOwnerOptions = {},
): EventHandler<T> {
  return fromMap<T>((obj) => ownerRequests(obj as EventObject, owner, options));
}

/**
 * Reconciles whatever `map` returns for the object (both the old and the new object on update). For
 * watches of related objects that are not owned: "every Database that references this Secret".
 */
export function enqueueMapped<T extends KubeObject = KubeObject>(
  map: (obj: EventObject<T>) => readonly Request[],
): EventHandler<T> {
  return fromMap(map);
}

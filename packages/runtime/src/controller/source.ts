/**
 * What a controller needs from the cache (the real Cache / SharedInformer satisfy it), and the adapter
 * that turns an event handler plus predicates into informer callbacks (controller-runtime's
 * source.Kind and its event-handler wrapper).
 */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { EventHandler, RequestSink } from './handler.ts';
import { type EventObject, type Predicate, passesCreate, passesDelete, passesUpdate } from './predicate.ts';

/** The informer event callbacks (cache/reflector.ts ResourceEventHandler). */
export interface SourceEventHandler<T extends KubeObject> {
  onAdd?(obj: EventObject<T>, isInInitialList: boolean): void;
  onUpdate?(oldObj: EventObject<T>, newObj: EventObject<T>): void;
  onDelete?(obj: EventObject<T>): void;
}

export interface SourceRegistration {
  remove(): void;
}

/** An informer-like event source (cache/informer.ts SharedInformer). */
export interface InformerSource<T extends KubeObject> {
  /** May return a registration with `remove()`; the controller removes its handlers when it stops. */
  addEventHandler(handler: SourceEventHandler<T>): unknown;
  hasSynced(): boolean;
  /** Resolves true once synced, false if `signal` aborts first. Without it `hasSynced` is polled. */
  waitForSync?(signal?: AbortSignal): Promise<boolean>;
}

/**
 * Restricts a watch's informer (cache/cache.ts InformerSelector): the watch gets its own informer for
 * exactly this namespace and these selectors. Read what it delivers with the same selectors
 * (`cache.list(res, { namespace, labelSelector, fieldSelector })`, `cache.get(res, key, { labelSelector })`):
 * the cache answers such reads from that informer, which has seen every event the watch delivered.
 */
export interface WatchSelector {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** Hands out shared informers (cache/cache.ts Cache). */
export interface InformerProvider {
  getInformer<T extends KubeObject>(resource: Resource<T>, selector?: WatchSelector): InformerSource<T>;
}

export function isRegistration(value: unknown): value is SourceRegistration {
  return (
    typeof value === 'object' && value !== null && typeof (value as SourceRegistration).remove === 'function'
  );
}

/**
 * Informer callbacks that run each event through `predicates` and, when it passes, `handler` into
 * `sink`. A predicate or handler that throws is passed to `onError` with the event's name ('create',
 * 'update', 'delete'); the event is dropped and the informer goes on.
 */
export function sourceEventHandler<S extends KubeObject>(
  handler: EventHandler<S>,
  predicates: readonly Predicate<S>[],
  sink: RequestSink,
  onError: (err: unknown, event: string) => void,
): SourceEventHandler<S> {
  const guard = (event: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      onError(err, event);
    }
  };
  return {
    onAdd: (obj) =>
      guard('create', () => {
        if (passesCreate(predicates, obj)) handler.create(obj, sink);
      }),
    onUpdate: (oldObj, newObj) =>
      guard('update', () => {
        if (passesUpdate(predicates, oldObj, newObj)) handler.update(oldObj, newObj, sink);
      }),
    onDelete: (obj) =>
      guard('delete', () => {
        if (passesDelete(predicates, obj)) handler.delete(obj, sink);
      }),
  };
}

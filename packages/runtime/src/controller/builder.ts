/**
 * The controller builder, like controller-runtime's pkg/builder:
 *
 *   controllerFor(mgr, Databases)
 *     .owns(StatefulSets)
 *     .owns(Services)
 *     .watches(Secrets, (secret) => databasesUsing(secret))
 *     .withPredicates(generationChanged())
 *     .withOptions({ maxConcurrentReconciles: 4 })
 *     .complete(reconcile);
 *
 * `complete` builds the controller, registers its watches and, when the context has `add` (a manager),
 * adds the controller to it. `build` does the same without adding.
 */
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { Controller } from './controller.ts';
import { type EventHandler, enqueueForObject, enqueueForOwner, enqueueMapped } from './handler.ts';
import type { ControllerContext, ControllerOptions } from './options.ts';
import type { EventObject, Predicate } from './predicate.ts';
import type { Reconciler, Request } from './reconcile.ts';
import type { WatchSelector } from './source.ts';

export interface ForOptions<T extends KubeObject> {
  /** Predicates for the primary resource's events only. */
  predicates?: readonly Predicate<T>[];
}

export interface OwnsOptions<C extends KubeObject> {
  predicates?: readonly Predicate<C>[];
  /** Only follow the controller owner reference (default true). */
  onlyController?: boolean;
  /** Which informer to watch the child kind through (default: the cache's options for it); see WatchSelector. */
  selector?: WatchSelector;
}

export interface WatchesOptions<S extends KubeObject> {
  predicates?: readonly Predicate<S>[];
  /** Which informer to watch through (default: the cache's options for the kind); see WatchSelector. */
  selector?: WatchSelector;
}

interface PendingWatch {
  resource: Resource;
  handler: EventHandler<KubeObject>;
  predicates: readonly Predicate<KubeObject>[];
  selector: WatchSelector | undefined;
}

export class ControllerBuilder<T extends KubeObject> {
  readonly #ctx: ControllerContext;
  readonly #primary: Resource<T>;
  #name: string | undefined;
  #primaryPredicates: Predicate<T>[];
  #globalPredicates: Predicate<KubeObject>[] = [];
  #watches: PendingWatch[] = [];
  #options: ControllerOptions = {};
  #built = false;

  constructor(ctx: ControllerContext, primary: Resource<T>, options: ForOptions<T> = {}) {
    this.#ctx = ctx;
    this.#primary = primary;
    this.#primaryPredicates = [...(options.predicates ?? [])];
  }

  /** The controller's name (metrics label, log field). Default: the primary kind in lower case. */
  named(name: string): this {
    this.#name = name;
    return this;
  }

  /**
   * Reconcile the owner when a `child` it controls changes: events of `child` objects map through
   * their controller owner reference of the primary kind.
   */
  owns<C extends KubeObject>(child: Resource<C>, options: OwnsOptions<C> = {}): this {
    const handler = enqueueForOwner<C>(this.#primary, { onlyController: options.onlyController ?? true });
    this.#addWatch(child, handler, options.predicates ?? [], options.selector);
    return this;
  }

  /**
   * Reconcile whatever `map` (or a full EventHandler) returns for events of `resource`.
   */
  watches<S extends KubeObject>(
    resource: Resource<S>,
    map: ((obj: EventObject<S>) => readonly Request[]) | EventHandler<S>,
    options: WatchesOptions<S> = {},
  ): this {
    const handler = typeof map === 'function' ? enqueueMapped<S>(map) : map;
    this.#addWatch(resource, handler, options.predicates ?? [], options.selector);
    return this;
  }

  /** Predicates for the primary resource's events (controller-runtime's For(..., WithPredicates)). */
  withPredicates(...predicates: Predicate<T>[]): this {
    this.#primaryPredicates.push(...predicates);
    return this;
  }

  /** Predicates for the events of every watch, primary, owned and mapped (WithEventFilter). */
  withEventFilter(...predicates: Predicate<KubeObject>[]): this {
    this.#globalPredicates.push(...predicates);
    return this;
  }

  withOptions(options: ControllerOptions): this {
    this.#options = { ...this.#options, ...options };
    return this;
  }

  /** Builds the controller and registers its watches, without adding it to the context. */
  build(reconciler: Reconciler<T>): Controller<T> {
    if (this.#built) throw new Error('this builder was already used to build a controller');
    this.#built = true;
    const name = this.#name ?? this.#primary.kind.toLowerCase();
    const controller = new Controller<T>(this.#ctx, name, reconciler, this.#options);
    const global = this.#globalPredicates as unknown as Predicate<T>[];
    controller.watch(this.#primary, enqueueForObject<T>(), {
      predicates: [...global, ...this.#primaryPredicates],
      ...(this.#options.cacheOptions ? { selector: this.#options.cacheOptions } : {}),
    });
    for (const w of this.#watches) {
      controller.watch(w.resource, w.handler, {
        predicates: [...this.#globalPredicates, ...w.predicates],
        ...(w.selector ? { selector: w.selector } : {}),
      });
    }
    return controller;
  }

  /** Builds the controller and adds it to the context (the manager) when it has `add`. */
  complete(reconciler: Reconciler<T>): Controller<T> {
    const controller = this.build(reconciler);
    this.#ctx.add?.(controller);
    return controller;
  }

  #addWatch<S extends KubeObject>(
    resource: Resource<S>,
    handler: EventHandler<S>,
    predicates: readonly Predicate<S>[],
    selector: WatchSelector | undefined,
  ): void {
    this.#watches.push({
      resource: resource as unknown as Resource,
      handler: handler as unknown as EventHandler<KubeObject>,
      predicates: predicates as unknown as readonly Predicate<KubeObject>[],
      selector,
    });
  }
}

/** Starts building a controller for `primary` (its events reconcile the object itself). */
export function controllerFor<T extends KubeObject>(
  ctx: ControllerContext,
  primary: Resource<T>,
  options: ForOptions<T> = {},
): ControllerBuilder<T> {
  return new ControllerBuilder(ctx, primary, options);
}

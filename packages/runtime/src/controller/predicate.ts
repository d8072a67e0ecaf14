/**
 * Event filters, like controller-runtime's pkg/predicate. A predicate decides, per event, whether the
 * event is worth a reconcile. A missing method lets its events through. Predicates run synchronously
 * in the informer's event loop: keep them cheap and side-effect free.
 */
import { isDeepStrictEqual } from 'node:util';
import type { KubeObject } from '../api/object.ts';
import { labelKeyError, labelMatcher, labelValueError } from '../cache/selector.ts';
import type { DeepReadonly } from '../cache/store.ts';

/** Objects handed to predicates and handlers: from the cache, frozen. */
export type EventObject<T extends KubeObject = KubeObject> = DeepReadonly<T>;

export interface Predicate<T extends KubeObject = KubeObject> {
  create?(obj: EventObject<T>): boolean;
  update?(oldObj: EventObject<T>, newObj: EventObject<T>): boolean;
  delete?(obj: EventObject<T>): boolean;
  /** Events that are not create/update/delete (e.g. `Controller.enqueue` from an external trigger). */
  generic?(obj: EventObject<T>): boolean;
}

/** metav1.LabelSelector (schema/s.ts LabelSelector is assignable to it). */
export interface LabelSelectorInput {
  matchLabels?: Readonly<Record<string, string>>;
  matchExpressions?: readonly {
    key: string;
    operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    values?: readonly string[];
  }[];
}

// --- evaluation (used by the controller) ---

export function passesCreate<T extends KubeObject>(
  preds: readonly Predicate<T>[],
  obj: EventObject<T>,
): boolean {
  for (const p of preds) if (p.create && !p.create(obj)) return false;
  return true;
}

export function passesUpdate<T extends KubeObject>(
  preds: readonly Predicate<T>[],
  oldObj: EventObject<T>,
  newObj: EventObject<T>,
): boolean {
  for (const p of preds) if (p.update && !p.update(oldObj, newObj)) return false;
  return true;
}

export function passesDelete<T extends KubeObject>(
  preds: readonly Predicate<T>[],
  obj: EventObject<T>,
): boolean {
  for (const p of preds) if (p.delete && !p.delete(obj)) return false;
  return true;
}

export function passesGeneric<T extends KubeObject>(
  preds: readonly Predicate<T>[],
  obj: EventObject<T>,
): boolean {
  for (const p of preds) if (p.generic && !p.generic(obj)) return false;
  return true;
}

// --- built-ins ---

/** One filter for every event kind (on update it looks at the new object). */
export function predicateFuncs<T extends KubeObject = KubeObject>(
  filter: (obj: EventObject<T>) => boolean,
): Predicate<T> {
  return {
    create: (obj) => filter(obj),
    update: (_old, obj) => filter(obj),
    delete: (obj) => filter(obj),
    generic: (obj) => filter(obj),
  };
}

/**
 * Updates pass only when metadata.generation changed, i.e. the spec changed: drops status-only and
 * metadata-only updates (and resyncs). Create, delete and generic pass. For kinds whose generation
 * does not track the spec (ConfigMaps, ...) do not use it.
 */
export function generationChanged<T extends KubeObject = KubeObject>(): Predicate<T> {
  return { update: (o, n) => o.metadata.generation !== n.metadata.generation };
}

/** Updates pass only when metadata.labels changed (missing and empty are the same). */
export function labelChanged<T extends KubeObject = KubeObject>(): Predicate<T> {
  return { update: (o, n) => !isDeepStrictEqual(o.metadata.labels ?? {}, n.metadata.labels ?? {}) };
}

/** Updates pass only when metadata.annotations changed (missing and empty are the same). */
export function annotationChanged<T extends KubeObject = KubeObject>(): Predicate<T> {
  return { update: (o, n) => !isDeepStrictEqual(o.metadata.annotations ?? {}, n.metadata.annotations ?? {}) };
}

/** Updates pass only when metadata.resourceVersion changed: drops periodic resyncs. */
export function resourceVersionChanged<T extends KubeObject = KubeObject>(): Predicate<T> {
  return { update: (o, n) => o.metadata.resourceVersion !== n.metadata.resourceVersion };
}

/**
 * Events pass only for objects whose labels match `selector` (on update: the new object's labels).
 * `selector` is a metav1.LabelSelector or a selector string like `app=db,tier in (a,b)`.
 * Throws on an invalid selector.
 */
export function labelSelectorPredicate<T extends KubeObject = KubeObject>(
  selector: LabelSelectorInput | string,
): Predicate<T> {
  const matches = typeof selector === 'string' ? labelMatcher(selector) : labelSelectorMatcher(selector);
  return predicateFuncs<T>((obj) => matches(obj.metadata.labels));
}

/** Every predicate passes (an empty `and()` passes everything). */
export function and<T extends KubeObject = KubeObject>(...preds: Predicate<T>[]): Predicate<T> {
  return {
    create: (obj) => preds.every((p) => p.create?.(obj) ?? true),
    update: (o, n) => preds.every((p) => p.update?.(o, n) ?? true),
    delete: (obj) => preds.every((p) => p.delete?.(obj) ?? true),
    generic: (obj) => preds.every((p) => p.generic?.(obj) ?? true),
  };
}

/** At least one predicate passes (an empty `or()` passes nothing). */
export function or<T extends KubeObject = KubeObject>(...preds: Predicate<T>[]): Predicate<T> {
  return {
    create: (obj) => preds.some((p) => p.create?.(obj) ?? true),
    update: (o, n) => preds.some((p) => p.update?.(o, n) ?? true),
    delete: (obj) => preds.some((p) => p.delete?.(obj) ?? true),
    generic: (obj) => preds.some((p) => p.generic?.(obj) ?? true),
  };
}

/** The opposite of `pred` (a method `pred` lacks passes there, so `not` of it passes nothing). */
export function not<T extends KubeObject = KubeObject>(pred: Predicate<T>): Predicate<T> {
  return {
    create: (obj) => !(pred.create?.(obj) ?? true),
    update: (o, n) => !(pred.update?.(o, n) ?? true),
    delete: (obj) => !(pred.delete?.(obj) ?? true),
    generic: (obj) => !(pred.generic?.(obj) ?? true),
  };
}

/**
 * Matches labels against a metav1.LabelSelector (an empty selector matches everything). Throws on a
 * selector the API server rejects (keys and values validated as labels.Parse does).
 */
export function labelSelectorMatcher(
  selector: LabelSelectorInput,
): (labels: Readonly<Record<string, string>> | undefined) => boolean {
  const matchLabels = Object.entries(selector.matchLabels ?? {});
  const exprs = selector.matchExpressions ?? [];
  const check = (why: string | undefined): void => {
    if (why) throw new Error(`label selector: ${why}`);
  };
  for (const [k, v] of matchLabels) {
    check(labelKeyError(k));
    check(labelValueError(v));
  }
  for (const e of exprs) {
    check(labelKeyError(e.key));
    for (const v of e.values ?? []) check(labelValueError(v));
    if ((e.operator === 'In' || e.operator === 'NotIn') && !(e.values && e.values.length > 0)) {
      throw new Error(`label selector: operator ${e.operator} on "${e.key}" needs values`);
    }
    if ((e.operator === 'Exists' || e.operator === 'DoesNotExist') && e.values && e.values.length > 0) {
      throw new Error(`label selector: operator ${e.operator} on "${e.key}" takes no values`);
    }
    if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(e.operator)) {
      throw new Error(`label selector: unknown operator ${String(e.operator)}`);
    }
  }
  return (labels) => {
    const l = labels ?? {};
    for (const [k, v] of matchLabels) if (l[k] !== v) return false;
    for (const e of exprs) {
      const has = Object.hasOwn(l, e.key);
      switch (e.operator) {
        case 'In':
          if (!has || !e.values!.includes(l[e.key]!)) return false;
          break;
        case 'NotIn':
          if (has && e.values!.includes(l[e.key]!)) return false;
          break;
        case 'Exists':
          if (!has) return false;
          break;
        case 'DoesNotExist':
          if (has) return false;
          break;
      }
    }
    return true;
  };
}

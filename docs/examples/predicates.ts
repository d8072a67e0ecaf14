/** Predicates and event handlers (docs/runtime.md, "Predicates and event handlers"). */
import {
  and,
  annotationChanged,
  type ConfigMap,
  ConfigMaps,
  controllerFor,
  type EventObject,
  enqueueMapped,
  generationChanged,
  labelChanged,
  labelSelectorPredicate,
  type Manager,
  not,
  or,
  type Predicate,
  type Request,
  type Secret,
  Secrets,
  StatefulSets,
} from '@opkit/runtime';
import { type Greeting, Greetings, greetingReconciler } from './quickstart.ts';

// #region predicates
// Reconcile on spec changes, or when the labels or annotations change; never for objects marked paused.
export const interesting: Predicate<Greeting> = and(
  or(generationChanged(), labelChanged(), annotationChanged()),
  not(labelSelectorPredicate('demo.opkit.dev/paused=true')),
);

// A predicate is four optional functions; a missing one lets its events through.
export const onlyDeletes: Predicate<ConfigMap> = {
  create: () => false,
  update: () => false,
};
// #endregion predicates

// #region handlers
// Which Greeting does a Secret name in its annotation? A map function runs in the informer's event
// loop: keep it cheap, and never call the API from it.
export function greetingsUsing(secret: EventObject<Secret>): Request[] {
  const name = secret.metadata.annotations?.['demo.opkit.dev/greeting'];
  return name ? [{ namespace: secret.metadata.namespace, name }] : [];
}

export function setup(mgr: Manager) {
  return (
    controllerFor(mgr, Greetings.resource, { predicates: [interesting] })
      // Children: events map to the owner through the controller ownerReference.
      .owns(ConfigMaps, { predicates: [onlyDeletes] })
      .owns(StatefulSets)
      // Related objects: events map through a function (or a full EventHandler, e.g. enqueueMapped(fn)).
      .watches(Secrets, greetingsUsing, { selector: { labelSelector: 'demo.opkit.dev/watched=true' } })
      .watches(
        ConfigMaps,
        enqueueMapped<ConfigMap>(() => [{ namespace: 'default', name: 'hello' }]),
        {
          selector: { namespace: 'default', fieldSelector: 'metadata.name=global-settings' },
        },
      )
      .named('greeting-with-secrets')
      .complete(greetingReconciler(mgr))
  );
}
// #endregion handlers

/**
 * Quick start: a Greeting custom resource, and a controller that keeps a ConfigMap holding its
 * message, owned by the Greeting, with a Ready condition in the Greeting's status.
 *
 * Quoted in docs/runtime.md; type-checked by `npx tsc -p tsconfig.json`; run against the FakeClient by
 * packages/runtime/test/unit/example-docs.test.ts and against a real API server by
 * packages/runtime/test/integration/example-docs.test.ts.
 */
// #region imports
import {
  type Cache,
  type Client,
  type ConfigMap,
  ConfigMaps,
  controllerFor,
  createManager,
  createOrUpdate,
  defineCustomResource,
  generationChanged,
  type Manager,
  patchStatus,
  type Reconciler,
  s,
  setCondition,
  setControllerReference,
  type TypeOf,
} from '@opkit/runtime';
// #endregion imports

// #region resource
export const Greetings = defineCustomResource({
  group: 'demo.opkit.dev',
  version: 'v1alpha1',
  kind: 'Greeting',
  plural: 'greetings',
  scope: 'Namespaced',
  spec: s.object({
    message: s.string({ minLength: 1, description: 'What to say.' }),
    shout: s.boolean({ default: false }),
  }),
  status: s.object({
    observedGeneration: s.integer().optional(),
    conditions: s.conditions().optional(),
  }),
  printerColumns: [{ name: 'Message', jsonPath: '.spec.message' }],
});
/** { apiVersion?, kind?, metadata, spec: { message: string; shout?: boolean }, status?: {...} } */
export type Greeting = TypeOf<typeof Greetings>;
// #endregion resource

// #region reconciler
export function greetingReconciler(deps: {
  client: Client;
  cache: Pick<Cache, 'get'>;
}): Reconciler<Greeting> {
  const { client, cache } = deps;
  return async (req, { signal, log }) => {
    // Read from the informer cache (frozen); copy before handing it to helpers that take a T.
    const cached = await cache.get(Greetings.resource, req, { signal });
    if (!cached) return; // deleted: the garbage collector removes the ConfigMap it owned
    const greeting = structuredClone(cached) as Greeting;

    const message = greeting.spec.shout ? greeting.spec.message.toUpperCase() : greeting.spec.message;
    const desired: ConfigMap = {
      metadata: { namespace: req.namespace, name: `${req.name}-greeting` },
      data: { message },
    };
    setControllerReference(greeting, desired, Greetings.resource);
    const { operation } = await createOrUpdate(client, ConfigMaps, desired, { signal });
    if (operation !== 'unchanged') log.info({ operation }, 'greeting ConfigMap written');

    // Written only when it changes; lastTransitionTime moves only when the status flips.
    await patchStatus(
      client,
      Greetings.resource,
      greeting,
      (status) => ({
        ...status,
        conditions: setCondition(status.conditions, {
          type: 'Ready',
          status: 'True',
          reason: 'ConfigMapWritten',
          message: `ConfigMap ${desired.metadata.name} holds the message`,
          observedGeneration: greeting.metadata.generation,
        }),
      }),
      { observedGeneration: true, signal },
    );
  };
}
// #endregion reconciler

// #region setup
export function setupGreetingController(mgr: Manager) {
  return controllerFor(mgr, Greetings.resource)
    .owns(ConfigMaps) // a change to an owned ConfigMap reconciles its Greeting
    .withPredicates(generationChanged()) // ignore the Greeting's own status-only updates
    .complete(greetingReconciler(mgr));
}

export async function main(): Promise<void> {
  const mgr = await createManager({
    healthProbeBindAddress: ':8081', // /healthz, /readyz
    metricsBindAddress: ':8080', // /metrics
    leaderElection: { id: 'greetings.demo.opkit.dev' },
  });
  setupGreetingController(mgr);
  await mgr.start(); // until SIGTERM: then a graceful shutdown
}
// #endregion setup

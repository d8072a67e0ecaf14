/** Reconcile helpers (docs/runtime.md, "Helpers"). */
import {
  apply,
  type Client,
  type ConfigMap,
  ConfigMaps,
  createOrUpdate,
  type Deployment,
  Deployments,
  type EventRecorder,
  isConditionTrue,
  type ObjectReader,
  patchStatus,
  runFinalizer,
  setCondition,
} from '@opkit/runtime';
import { type Greeting, Greetings } from './quickstart.ts';

// #region finalizer
const FINALIZER = 'demo.opkit.dev/announcement';

/** Keeps an announcement in a shared namespace (which no owner reference can clean up). */
export async function reconcileAnnouncement(client: Client, greeting: Greeting, events: EventRecorder) {
  const key = {
    namespace: 'announcements',
    name: `${greeting.metadata.namespace}.${greeting.metadata.name}`,
  };
  // Adds the finalizer if missing; once the Greeting is being deleted, runs the cleanup and removes the
  // finalizer (both with optimistic concurrency). Cleanup that throws keeps the finalizer: retried.
  const outcome = await runFinalizer(client, Greetings.resource, greeting, FINALIZER, async () => {
    await client.delete(ConfigMaps, key).catch(() => undefined);
    events.normal(greeting, 'AnnouncementRemoved', 'Cleanup', `removed ${key.namespace}/${key.name}`);
  });
  if (outcome.deleted) return; // being deleted: nothing else to do

  const { operation } = await createOrUpdate(client, ConfigMaps, {
    metadata: key,
    data: { message: greeting.spec.message },
  });
  if (operation !== 'unchanged')
    events.normal(greeting, 'Announced', 'Announce', `announcement ${operation}`);
}
// #endregion finalizer

// #region status
export async function markReady(client: Client, greeting: Greeting, ready: boolean, message: string) {
  const { changed } = await patchStatus(
    client,
    Greetings.resource,
    greeting,
    (status) => ({
      ...status,
      conditions: setCondition(status.conditions, {
        type: 'Ready',
        status: ready ? 'True' : 'False',
        reason: ready ? 'Available' : 'Pending',
        message,
        observedGeneration: greeting.metadata.generation,
      }),
    }),
    { observedGeneration: true }, // also sets status.observedGeneration = metadata.generation
  );
  // changed: false means the status already said exactly this: no request was made.
  return { changed, ready: isConditionTrue(greeting.status?.conditions, 'Ready') };
}
// #endregion status

// #region write
export async function writeChildren(client: Client, cache: ObjectReader) {
  // createOrUpdate: only the fields given are compared ("desired is a subset of live"), so server
  // defaults and others' fields are no differences, and an up-to-date object costs no write.
  const desired: Deployment = {
    metadata: { namespace: 'demo', name: 'web', labels: { app: 'web' } },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] },
      },
    },
  };
  await createOrUpdate(client, Deployments, desired, {
    reader: cache, // read the live object from the cache (e.g. mgr.cache) instead of a GET
    // Keep what an autoscaler set: mutate decides the object to write from the live one.
    mutate: (live, want) => ({
      ...live,
      spec: { ...want.spec!, replicas: live.spec?.replicas ?? want.spec?.replicas },
    }),
  });

  // Server-side apply, skipped when the live object already matches.
  const cm: ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { namespace: 'demo', name: 'web-config' },
    data: { a: '1' },
  };
  return apply(client, ConfigMaps, cm, { fieldManager: 'greeting-operator', force: true });
}
// #endregion write

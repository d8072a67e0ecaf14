/** Watch and cache: informers, stores, the Cache (docs/runtime.md, "Watch and cache"). */
import {
  Cache,
  type Client,
  CONTROLLER_UID_INDEX,
  ConfigMaps,
  forResource,
  type Pod,
  Pods,
  SharedInformer,
  stripManagedFields,
} from '@opkit/runtime';

// #region informer
export async function watchConfigMaps(client: Client, signal: AbortSignal): Promise<string[]> {
  // One list+watch (and one store) shared by any number of handlers.
  const informer = new SharedInformer(client, ConfigMaps, {
    namespace: 'default',
    labelSelector: 'app=demo',
  });
  informer.addEventHandler({
    onAdd: (cm, isInInitialList) => console.log('add', cm.metadata.name, isInInitialList),
    onUpdate: (oldCm, cm) => console.log('update', cm.metadata.name, oldCm.metadata.resourceVersion),
    onDelete: (cm) => console.log('delete', cm.metadata.name),
  });
  void informer.start(signal); // runs until `signal` aborts; never rejects
  await informer.waitForSync(signal); // the first list is in the store
  return informer.store.keys(); // "namespace/name"
}
// #endregion informer

// #region cache
export function podCache(client: Client): Cache {
  return new Cache(client, {
    namespace: 'default', // namespaced kinds: only this namespace, unless configured otherwise below
    byResource: [
      forResource(Pods, {
        labelSelector: 'app=web', // sent to the API server: only these are listed, watched and held
        indexers: { node: (pod) => (pod.spec?.nodeName ? [pod.spec.nodeName] : []) },
        transform: (pod) => stripManagedFields(pod), // the default; return a smaller object to save memory
      }),
    ],
  });
}

export async function readFromCache(cache: Cache, signal: AbortSignal): Promise<Pod | undefined> {
  void cache.start(signal); // informers start on first use and are shared by every reader
  const onNode = await cache.list(Pods, { index: { name: 'node', value: 'node-1' } });
  const settings = await cache.get(ConfigMaps, { namespace: 'default', name: 'settings' });
  const owned = await cache.list(ConfigMaps, {
    index: { name: CONTROLLER_UID_INDEX, value: 'some-owner-uid' },
  });
  console.log(onNode.length, settings?.data, owned.length);

  // Cached objects are deep-frozen (DeepReadonly<T>): mutating one throws. Copy to modify.
  const pod = await cache.get(Pods, { namespace: 'default', name: 'web-0' });
  if (!pod) return undefined;
  const copy = structuredClone(pod) as Pod;
  copy.metadata.labels = { ...copy.metadata.labels, seen: 'true' };
  return copy;
}
// #endregion cache

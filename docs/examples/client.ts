/** The client: configuration, typed verbs, patches, errors and watches (docs/runtime.md, "Client"). */
import {
  type Client,
  type ConfigMap,
  ConfigMaps,
  createClient,
  defineResource,
  InvalidError,
  isConflict,
  isNotFound,
  type KubeObject,
  loadConfig,
  type RestClient,
  TooManyRequestsError,
} from '@opkit/runtime';

// #region connect
export function connect(kubeconfig?: string): RestClient {
  // An explicit kubeconfig, else $KUBECONFIG, else the in-cluster service account, else ~/.kube/config.
  // Tokens, token files and client certificates are read by opkit; exec plugins go through client-node.
  const config = loadConfig({ kubeconfig });
  return createClient(config, { fieldManager: 'my-operator' }); // close() it when done
}
// #endregion connect

// #region resource
// A kind the runtime has no descriptor for: the type parameter types every call made with it.
export type Widget = KubeObject & { spec: { size: number } };
export const Widgets = defineResource<Widget>({
  group: 'example.com',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});
// #endregion resource

// #region crud
export async function crud(client: Client): Promise<ConfigMap[]> {
  const key = { namespace: 'default', name: 'settings' };
  await client.create(ConfigMaps, { metadata: { ...key, labels: { app: 'demo' } }, data: { color: 'blue' } });

  const cm = await client.get(ConfigMaps, key); // a ConfigMap, no cast
  cm.data = { ...cm.data, size: 'large' };
  await client.update(ConfigMaps, cm); // carries resourceVersion: a concurrent write is a ConflictError

  // Follows `continue` until the end; `limit` is the page size.
  const { items } = await client.list(ConfigMaps, {
    namespace: 'default',
    labelSelector: 'app=demo',
    limit: 100,
  });
  await client.delete(ConfigMaps, key, { propagationPolicy: 'Background' });
  return items;
}
// #endregion crud

// #region patch
export async function patches(client: Client): Promise<ConfigMap> {
  const key = { namespace: 'default', name: 'patched' };
  // Server-side apply: creates or updates the fields this field manager owns.
  const applied: ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: key, data: { a: '1' } };
  await client.patch(
    ConfigMaps,
    key,
    { type: 'apply', body: applied, force: true },
    { fieldManager: 'my-operator' },
  );
  // JSON merge patch (null deletes a key).
  const merged = await client.patch(ConfigMaps, key, { type: 'merge', body: { data: { b: '2' } } });
  // JSON patch, guarded by a resourceVersion test.
  return client.patch(ConfigMaps, key, {
    type: 'json',
    body: [
      { op: 'test', path: '/metadata/resourceVersion', value: merged.metadata.resourceVersion },
      { op: 'replace', path: '/data/a', value: '3' },
    ],
  });
  // { type: 'strategic', body } is there too, for built-in kinds.
}
// #endregion patch

// #region errors
export async function getOrExplain(client: Client, name: string): Promise<ConfigMap | undefined> {
  try {
    return await client.get(ConfigMaps, { namespace: 'default', name });
  } catch (err) {
    if (isNotFound(err)) return undefined; // err instanceof NotFoundError; also isAlreadyExists, isGone, ...
    if (isConflict(err)) throw new Error('someone else wrote it first: read again and retry');
    if (err instanceof InvalidError) {
      for (const cause of err.causes) console.error(`${cause.field}: ${cause.message}`);
    }
    if (err instanceof TooManyRequestsError) console.error(`retry after ${err.retryAfterSeconds}s`);
    throw err; // ForbiddenError, UnauthorizedError, ServerError, ConnectionError, ...
  }
}
// #endregion errors

// #region watch
export async function firstEvents(client: Client, count: number): Promise<string[]> {
  // One raw watch stream. Controllers never use this directly: informers do (list, watch, relist on
  // 410 Gone, reconnect with backoff, bookmarks, silence detection).
  const seen: string[] = [];
  const stop = new AbortController();
  const { metadata } = await client.list(ConfigMaps, { namespace: 'default' });
  const events = client.watch(ConfigMaps, {
    namespace: 'default',
    resourceVersion: metadata.resourceVersion,
    signal: stop.signal,
  });
  for await (const event of events) {
    seen.push(`${event.type} ${event.object.metadata.name}`);
    if (seen.length === count) stop.abort();
  }
  return seen;
}
// #endregion watch

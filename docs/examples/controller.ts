/** Controllers: the builder, reconcile results and errors (docs/runtime.md, "Controllers"). */
import {
  type Client,
  type ConfigMap,
  ConfigMaps,
  controllerFor,
  isNotFound,
  type Manager,
  type Reconciler,
  requeueAfter,
  TerminalError,
} from '@opkit/runtime';

// #region results
export function ttlReconciler(client: Client): Reconciler<ConfigMap> {
  return async (req, { signal, log }) => {
    // `req` is only a key: read the current state (here from the API; usually from the cache).
    const cm = await client.get(ConfigMaps, req, { signal }).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err; // any error: logged, counted, retried with per-key exponential backoff
    });
    if (!cm) return; // nothing (or {}): done, and the key's backoff is reset

    const ttl = Number(cm.metadata.annotations?.['example.com/ttl-seconds']);
    if (!Number.isInteger(ttl) || ttl <= 0) {
      // Retrying cannot fix this: logged and counted, not retried until the object changes again.
      throw new TerminalError('annotation example.com/ttl-seconds must be a positive integer');
    }
    log.info({ ttl }, 'checked'); // the logger carries controller, key and reconcileID
    return requeueAfter(ttl * 1000); // = { requeueAfter: ms }; { requeue: true } retries with backoff
  };
}
// #endregion results

// #region builder
export function setup(mgr: Manager) {
  return controllerFor(mgr, ConfigMaps)
    .named('ttl-checker') // the metrics label and log field; default: the kind in lower case
    .withOptions({
      maxConcurrentReconciles: 4, // different keys in parallel; one key is never reconciled twice at once
      reconcileTimeoutMs: 30_000, // then its signal aborts and the key is retried (default 60 s)
      cacheOptions: { namespace: 'default', labelSelector: 'example.com/ttl-seconds' }, // primary informer
    })
    .complete(ttlReconciler(mgr.client)); // builds it, registers its watches, adds it to the manager
}
// #endregion builder

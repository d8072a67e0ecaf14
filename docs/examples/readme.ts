/** The snippet of packages/runtime/README.md: a whole (if pointless) operator. Runs when executed. */
// #region readme
import { ConfigMaps, controllerFor, createManager } from '@opkit/runtime';

const mgr = await createManager({ healthProbeBindAddress: ':8081', metricsBindAddress: ':8080' });
controllerFor(mgr, ConfigMaps).complete(async (req, { log, signal }) => {
  const cm = await mgr.cache.get(ConfigMaps, req, { signal }); // from the informer cache
  log.info({ keys: Object.keys(cm?.data ?? {}) }, 'reconciled');
});
await mgr.start(); // until SIGTERM, then a graceful shutdown
// #endregion readme

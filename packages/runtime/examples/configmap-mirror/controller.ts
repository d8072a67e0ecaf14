/**
 * Wiring: the mirror controller on a manager, and the manager the binary (main.ts) runs.
 *
 *   source namespace, label opkit.dev/mirror=true ──(primary: the object itself)──┐
 *                                                                                  ├─> queue ─> reconcile
 *   target namespace, label managed-by=opkit-configmap-mirror ──(watches: sourceOf)┘
 */
import {
  type ConfigMap,
  ConfigMaps,
  type Controller,
  controllerFor,
  createManager,
  type LeaderElectionOptions,
  type Logger,
  type Manager,
  type ObjectKey,
} from '@opkit/runtime';
import {
  COPY_SELECTOR,
  createMirrorReconciler,
  type MirrorConfig,
  SOURCE_SELECTOR,
  sourceOf,
} from './mirror.ts';

/** The controller's name: the `controller` label of its metrics and the field of its logs. */
export const CONTROLLER_NAME = 'configmap-mirror';

export interface MirrorControllerOptions extends MirrorConfig {
  /** Keys reconciled in parallel (default 1). */
  maxConcurrentReconciles?: number;
}

/**
 * Adds the mirror controller to `mgr`. Both watches go through label- and namespace-scoped informers:
 * the API server sends only labelled sources and our own copies, and only those are held in memory.
 * A source that loses its label leaves its informer (a delete event), which the reconciler handles
 * exactly like a deleted source.
 */
export function setupMirrorController(mgr: Manager, opts: MirrorControllerOptions): Controller<ConfigMap> {
  const { sourceNamespace, targetNamespace } = opts;
  if (!sourceNamespace || !targetNamespace || sourceNamespace === targetNamespace) {
    throw new Error('the source and target namespaces must be given and differ');
  }
  const sources = { namespace: sourceNamespace, labelSelector: SOURCE_SELECTOR };
  const copies = { namespace: targetNamespace, labelSelector: COPY_SELECTOR };

  // The same shared informers the watches below use, so the reconciler reads exactly what the events
  // came from. The controller starts its workers only after both have synced.
  const sourceStore = mgr.cache.getInformer(ConfigMaps, sources).store;
  const copyStore = mgr.cache.getInformer(ConfigMaps, copies).store;
  const read = (key: ObjectKey) => {
    if (key.namespace === sourceNamespace) return sourceStore.get(key);
    if (key.namespace === targetNamespace) return copyStore.get(key);
    return undefined;
  };

  return controllerFor(mgr, ConfigMaps)
    .named(CONTROLLER_NAME)
    .withOptions({ cacheOptions: sources, maxConcurrentReconciles: opts.maxConcurrentReconciles ?? 1 })
    .watches(ConfigMaps, (copy) => sourceOf(copy, sourceNamespace), { selector: copies })
    .complete(
      createMirrorReconciler({
        sourceNamespace,
        targetNamespace,
        client: mgr.client,
        read,
        recorder: mgr.getEventRecorder(CONTROLLER_NAME),
      }),
    );
}

export interface MirrorManagerOptions extends MirrorControllerOptions {
  /** Path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config). */
  kubeconfig?: string;
  context?: string;
  /** e.g. ':8081'; '' or '0' disables. */
  healthProbeBindAddress?: string;
  /** e.g. ':8080'; '' or '0' disables. */
  metricsBindAddress?: string;
  leaderElection?: LeaderElectionOptions;
  logger?: Logger;
}

/** The manager with the mirror controller added: what main.ts runs (and the tests). */
export async function createMirrorManager(opts: MirrorManagerOptions): Promise<Manager> {
  const mgr = await createManager({
    ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
    ...(opts.context ? { context: opts.context } : {}),
    ...(opts.healthProbeBindAddress !== undefined
      ? { healthProbeBindAddress: opts.healthProbeBindAddress }
      : {}),
    ...(opts.metricsBindAddress !== undefined ? { metricsBindAddress: opts.metricsBindAddress } : {}),
    ...(opts.leaderElection ? { leaderElection: opts.leaderElection } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
    fieldManager: CONTROLLER_NAME,
  });
  setupMirrorController(mgr, opts);
  return mgr;
}

/**
 * The ConfigMap mirror's logic, free of any wiring: what a copy looks like, how a copy maps back to its
 * source, and the reconciler. `controller.ts` wires it into a manager; unit tests drive it with the
 * FakeClient.
 *
 * A ConfigMap in the source namespace labelled `opkit.dev/mirror=true` is copied, under the same name,
 * into the target namespace. The copy carries
 *   - the annotation `opkit.dev/mirror-source: <source namespace>/<name>` (the back-pointer),
 *   - the label `app.kubernetes.io/managed-by: opkit-configmap-mirror` (so the controller caches and
 *     watches only its own copies),
 *   - the source's data, binaryData and labels (without the mirror label).
 * The copy follows every change of the source, is put back if someone edits or deletes it, and is
 * deleted when the source is deleted or loses its label.
 *
 * Cleanup without finalizers or owner references: a namespaced owner can only own objects in its own
 * namespace, so the garbage collector cannot remove cross-namespace copies. Instead of a finalizer on
 * the source, the controller watches its copies and maps each one back to its source through the
 * annotation. A source that is gone (or no longer labelled) is reconciled like any other key: its copy
 * is deleted. This is level-based: even a source deleted while the controller was down is cleaned up,
 * because after a restart the copies informer lists every copy and each one wakes its (missing) source.
 * A finalizer would add nothing but risk: the user's ConfigMaps could not be deleted while the
 * controller is down or uninstalled, and every source would need an extra write.
 */
import {
  type Client,
  type ConfigMap,
  ConfigMaps,
  createOrUpdate,
  type DeepReadonly,
  type EventObject,
  type EventRecorder,
  isNotFound,
  type KubeObject,
  keyOf,
  type ObjectKey,
  parseKey,
  type Reconciler,
  type Request,
  TerminalError,
} from '@opkit/runtime';

/** Sources carry this label with the value 'true'. */
export const MIRROR_LABEL = 'opkit.dev/mirror';
/** On copies: "<source namespace>/<name>" of the source. */
export const SOURCE_ANNOTATION = 'opkit.dev/mirror-source';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'opkit-configmap-mirror';
/** Label selectors of the two informers: labelled sources, and the controller's own copies. */
export const SOURCE_SELECTOR = `${MIRROR_LABEL}=true`;
export const COPY_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

export interface MirrorConfig {
  sourceNamespace: string;
  targetNamespace: string;
}

/**
 * Reads a ConfigMap's current state, or undefined when there is none: the informer caches in
 * production (see controller.ts), `fake.getStored(ConfigMaps, key)` in unit tests.
 */
export type ConfigMapReader = (key: ObjectKey) => DeepReadonly<ConfigMap> | undefined;

export interface MirrorDeps extends MirrorConfig {
  /** Writes go to the API. */
  client: Client;
  read: ConfigMapReader;
  /** Optional: records a Normal event on the source for every write of its copy. */
  recorder?: EventRecorder;
}

/** True when `cm` asks to be mirrored and is not being deleted. */
export function wantsMirror(cm: DeepReadonly<ConfigMap>): boolean {
  return cm.metadata.labels?.[MIRROR_LABEL] === 'true' && !cm.metadata.deletionTimestamp;
}

/**
 * The map function of the copies watch: a copy's events reconcile its source, named by the annotation.
 * Anything that does not point back at a same-named ConfigMap of the source namespace is ignored.
 */
export function sourceOf(copy: EventObject<ConfigMap>, sourceNamespace: string): Request[] {
  const ref = copy.metadata.annotations?.[SOURCE_ANNOTATION];
  if (!ref) return [];
  const source = parseKey(ref);
  if (source.namespace !== sourceNamespace || source.name !== copy.metadata.name) return [];
  return [{ namespace: source.namespace, name: source.name }];
}

/** The copy of `source` as the controller wants it in `targetNamespace`. */
export function desiredCopy(source: DeepReadonly<ConfigMap>, targetNamespace: string): ConfigMap {
  const name = source.metadata.name ?? '';
  const labels: Record<string, string> = { ...source.metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY };
  delete labels[MIRROR_LABEL];
  const copy: ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      namespace: targetNamespace,
      name,
      labels,
      annotations: { [SOURCE_ANNOTATION]: `${source.metadata.namespace}/${name}` },
    },
  };
  if (source.data) copy.data = { ...source.data };
  if (source.binaryData) copy.binaryData = { ...source.binaryData };
  return copy;
}

/**
 * createOrUpdate's `mutate`: the live copy takes the desired labels, data and binaryData (keys removed
 * from the source are removed from the copy, which the default "desired is a subset" merge would keep),
 * and keeps annotations others added. A ConfigMap of that name that is not our copy is never
 * overwritten: that is a TerminalError, since retrying cannot fix it.
 */
function updateOwnCopy(sourceKey: string) {
  return (live: ConfigMap, desired: ConfigMap): ConfigMap => {
    if (live.metadata.annotations?.[SOURCE_ANNOTATION] !== sourceKey) {
      throw new TerminalError(
        `ConfigMap ${keyOf(live)} exists and is not a mirror of ${sourceKey}; not overwriting it`,
      );
    }
    return {
      ...live,
      metadata: {
        ...live.metadata,
        labels: desired.metadata.labels,
        annotations: { ...live.metadata.annotations, ...desired.metadata.annotations },
      },
      data: desired.data,
      binaryData: desired.binaryData,
    };
  };
}

/** A reference to a ConfigMap for the event recorder. */
function ref(cm: DeepReadonly<ConfigMap>): KubeObject {
  const { namespace, name, uid } = cm.metadata;
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace, name, uid } };
}

/**
 * The reconciler. Requests are keys of the source namespace (primary events and copies mapped back).
 * It reads the current state, never trusts the event, and is idempotent: a second call with nothing
 * changed makes no write.
 */
export function createMirrorReconciler(deps: MirrorDeps): Reconciler<ConfigMap> {
  const { client, read, recorder, sourceNamespace, targetNamespace } = deps;
  return async (req, { signal, log }) => {
    if (req.namespace !== sourceNamespace) return; // only source keys are ever enqueued
    const sourceKey = keyOf(req);
    const copyKey = { namespace: targetNamespace, name: req.name };
    const source = read(req);

    if (!source || !wantsMirror(source)) {
      // The source is gone, unlabelled or being deleted: remove our copy, if there is one.
      const copy = read(copyKey);
      if (!copy || copy.metadata.annotations?.[SOURCE_ANNOTATION] !== sourceKey) return;
      try {
        // The uid precondition makes sure we delete the copy we looked at, not a newer object.
        await client.delete(ConfigMaps, copyKey, { preconditions: { uid: copy.metadata.uid }, signal });
        log.info({ copy: keyOf(copyKey) }, 'deleted the copy of a source that is gone');
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      return;
    }

    const { operation } = await createOrUpdate(client, ConfigMaps, desiredCopy(source, targetNamespace), {
      // Read the live copy from the cache too (saves a GET per reconcile); after a conflict
      // createOrUpdate re-reads it from the API.
      reader: { get: (_res, key) => read(key) },
      mutate: updateOwnCopy(sourceKey),
      signal,
    });
    if (operation !== 'unchanged') {
      log.info({ copy: keyOf(copyKey), operation }, 'mirrored');
      recorder?.normal(
        ref(source),
        'Mirrored',
        'Mirror',
        `copy ${operation} in namespace ${targetNamespace}`,
      );
    }
  };
}

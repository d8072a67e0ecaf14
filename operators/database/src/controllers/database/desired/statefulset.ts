/**
 * The StatefulSet `<name>`: one pod per instance, `<name>-0` first (OrderedReady: a replica only starts
 * once the pods before it, the primary first, are Ready; Parallel for the engines that fail over, whose
 * replicas wait for the primary by themselves, so that a lost pod 0 never blocks replacing the others.
 * podManagementPolicy is immutable: the reconcile keeps the live StatefulSet's), rolling updates from the
 * highest ordinal down (mysql), or by the operator, replicas first and the primary last (postgres: OnDelete,
 * rollout.ts). Each pod gets a PVC `data-<name>-N` of spec.storage; the PVCs are kept
 * on scale-down and deletion (persistentVolumeClaimRetentionPolicy Retain/Retain): removing data is only
 * ever an explicit decision (deletionPolicy Delete, carried out by the reconciler).
 *
 * Pods run restricted: non-root as the image's uid/gid 999, RuntimeDefault seccomp, no privilege
 * escalation, all capabilities dropped, no service account token. Preferred anti-affinity spreads them
 * over nodes. The config hash annotation rolls them when the rendered configuration changes.
 */
import { deepCopy, type StatefulSet } from '@opkit/runtime';
import { ANNOTATION_CONFIG_HASH, type Database, type DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import type { ResourceRequirements, SecurityContext } from '../engines/types.ts';
import { withDefaults } from './defaults.ts';
import { commonLabels, podTemplateLabels, selectorLabels } from './labels.ts';
import { childNames, VOLUMES } from './names.ts';
import { REMOVED } from './removed.ts';

export interface StatefulSetOptions {
  /** configHash(configMap(db)): put on the pod template so a config change rolls the pods. */
  configHash: string;
}

/** Requests when spec.resources is unset: without any, the pods would be first in line for eviction. */
export const DEFAULT_RESOURCES: ResourceRequirements = { requests: { cpu: '100m', memory: '256Mi' } };

/** spec.resources as the core type (quantities as strings), or the defaults. */
export function containerResources(d: DefaultedDatabase): ResourceRequirements {
  const r = d.spec.resources;
  if (!r) return deepCopy(DEFAULT_RESOURCES);
  const strings = (m: Record<string, string | number> | undefined) =>
    m ? Object.fromEntries(Object.entries(m).map(([k, v]) => [k, String(v)])) : undefined;
  const out: ResourceRequirements = {};
  const limits = strings(r.limits);
  const requests = strings(r.requests);
  if (limits) out.limits = limits;
  if (requests) out.requests = requests;
  if (r.claims) out.claims = r.claims.map((c) => ({ ...c }));
  return out;
}

/** The restricted container security context (Pod Security Standards "restricted"). */
export function containerSecurityContext(uid: number, gid: number): SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: gid,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

export function statefulSet(db: Database | DefaultedDatabase, opts: StatefulSetOptions): StatefulSet {
  const d = withDefaults(db);
  const names = childNames(d);
  const engine = engineFor(d.spec.engine);
  const image = d.spec.image ?? engine.image(d.spec.version);
  const pod = engine.pod(d, {
    image,
    resources: containerResources(d),
    securityContext: containerSecurityContext(engine.uid, engine.gid),
  });
  const annotations: Record<string, string> = { ...(d.spec.podAnnotations ?? {}) };
  annotations[ANNOTATION_CONFIG_HASH] = opts.configHash;
  const claimSpec: NonNullable<NonNullable<StatefulSet['spec']>['volumeClaimTemplates']>[number]['spec'] = {
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: String(d.spec.storage) } },
  };
  if (d.spec.storageClassName) claimSpec.storageClassName = d.spec.storageClassName;
  const podSpec: NonNullable<NonNullable<StatefulSet['spec']>['template']['spec']> = {
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: engine.uid,
      runAsGroup: engine.gid,
      fsGroup: engine.gid,
      fsGroupChangePolicy: 'OnRootMismatch',
      seccompProfile: { type: 'RuntimeDefault' },
    },
    affinity: {
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            podAffinityTerm: {
              topologyKey: 'kubernetes.io/hostname',
              labelSelector: { matchLabels: selectorLabels(d) },
            },
          },
        ],
      },
    },
    terminationGracePeriodSeconds: pod.terminationGracePeriodSeconds,
    ...(pod.shareProcessNamespace ? { shareProcessNamespace: true } : {}),
    initContainers: pod.initContainers,
    containers: pod.containers,
    volumes: pod.volumes,
  };
  if (pod.shareProcessNamespace) podSpec.shareProcessNamespace = true;
  if (d.spec.nodeSelector) podSpec.nodeSelector = { ...d.spec.nodeSelector };
  if (d.spec.tolerations) podSpec.tolerations = d.spec.tolerations.map((t) => ({ ...t }));
  if (pod.serviceAccountName) podSpec.serviceAccountName = pod.serviceAccountName;
  if (d.spec.priorityClassName) podSpec.priorityClassName = d.spec.priorityClassName;
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name: names.statefulSet,
      namespace: d.metadata.namespace,
      labels: commonLabels(d, 'database'),
    },
    spec: {
      replicas: d.spec.replicas,
      serviceName: names.headless,
      podManagementPolicy: engine.failover ? 'Parallel' : 'OrderedReady',
      // postgres: the operator rolls the pods (rollout.ts); null removes a rollingUpdate left from before.
      updateStrategy: engine.operatorRollout
        ? { type: 'OnDelete', rollingUpdate: REMOVED }
        : { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
      persistentVolumeClaimRetentionPolicy: { whenScaled: 'Retain', whenDeleted: 'Retain' },
      selector: { matchLabels: selectorLabels(d) },
      template: {
        metadata: { labels: podTemplateLabels(d), annotations },
        spec: podSpec,
      },
      volumeClaimTemplates: [
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: VOLUMES.data, labels: selectorLabels(d) },
          spec: claimSpec,
        },
      ],
    },
  };
}

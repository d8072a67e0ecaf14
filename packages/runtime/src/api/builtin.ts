/**
 * Descriptors and types for the built-in kinds opkit's controllers use. Spec and status types come from
 * @kubernetes/client-node's generated models; metadata is opkit's own (timestamps stay strings).
 */
import type {
  CoreV1EventSeries,
  RbacV1Subject,
  V1ConfigMap,
  V1CustomResourceDefinitionSpec,
  V1CustomResourceDefinitionStatus,
  V1DeploymentSpec,
  V1DeploymentStatus,
  V1LeaseSpec,
  V1NamespaceSpec,
  V1NamespaceStatus,
  V1NodeSpec,
  V1NodeStatus,
  V1ObjectReference,
  V1PersistentVolumeClaimSpec,
  V1PersistentVolumeClaimStatus,
  V1PersistentVolumeSpec,
  V1PersistentVolumeStatus,
  V1PodDisruptionBudgetSpec,
  V1PodDisruptionBudgetStatus,
  V1PodSpec,
  V1PodStatus,
  V1PolicyRule,
  V1RoleRef,
  V1ServiceSpec,
  V1ServiceStatus,
  V1StatefulSetSpec,
  V1StatefulSetStatus,
} from '@kubernetes/client-node';
import type { KubeObject } from './object.ts';
import { defineResource } from './resource.ts';

type WithSpec<S, St = never> = KubeObject & { spec?: S; status?: St };

export type ConfigMap = KubeObject & Pick<V1ConfigMap, 'data' | 'binaryData' | 'immutable'>;
export type Secret = KubeObject & {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  immutable?: boolean;
};
export type Service = WithSpec<V1ServiceSpec, V1ServiceStatus>;
export type Pod = WithSpec<V1PodSpec, V1PodStatus>;
export type PersistentVolumeClaim = WithSpec<V1PersistentVolumeClaimSpec, V1PersistentVolumeClaimStatus>;
export type PersistentVolume = WithSpec<V1PersistentVolumeSpec, V1PersistentVolumeStatus>;
export type Namespace = WithSpec<V1NamespaceSpec, V1NamespaceStatus>;
export type Node = WithSpec<V1NodeSpec, V1NodeStatus>;
export type ServiceAccount = KubeObject;
export type StatefulSet = WithSpec<V1StatefulSetSpec, V1StatefulSetStatus>;
export type Deployment = WithSpec<V1DeploymentSpec, V1DeploymentStatus>;
export type PodDisruptionBudget = WithSpec<V1PodDisruptionBudgetSpec, V1PodDisruptionBudgetStatus>;
export type Lease = WithSpec<V1LeaseSpec>;
export type CustomResourceDefinition = WithSpec<
  V1CustomResourceDefinitionSpec,
  V1CustomResourceDefinitionStatus
>;
export type Role = KubeObject & { rules?: V1PolicyRule[] };
export type ClusterRole = Role;
export type RoleBinding = KubeObject & { roleRef: V1RoleRef; subjects?: RbacV1Subject[] };
export type ClusterRoleBinding = RoleBinding;
export type StorageClass = KubeObject & {
  provisioner: string;
  reclaimPolicy?: string;
  allowVolumeExpansion?: boolean;
  volumeBindingMode?: string;
  parameters?: Record<string, string>;
};
/** events.k8s.io/v1 Event */
export type Event = KubeObject & {
  eventTime?: string;
  series?: CoreV1EventSeries | { count: number; lastObservedTime: string };
  reportingController?: string;
  reportingInstance?: string;
  action?: string;
  reason?: string;
  regarding?: V1ObjectReference;
  related?: V1ObjectReference;
  note?: string;
  type?: string;
  deprecatedCount?: number;
  deprecatedFirstTimestamp?: string;
  deprecatedLastTimestamp?: string;
};

const core = (kind: string, plural: string, namespaced = true) => ({
  group: '',
  version: 'v1',
  kind,
  plural,
  namespaced,
});

export const ConfigMaps = defineResource<ConfigMap>(core('ConfigMap', 'configmaps'));
export const Secrets = defineResource<Secret>(core('Secret', 'secrets'));
export const Services = defineResource<Service>(core('Service', 'services'));
export const Pods = defineResource<Pod>(core('Pod', 'pods'));
export const PersistentVolumeClaims = defineResource<PersistentVolumeClaim>(
  core('PersistentVolumeClaim', 'persistentvolumeclaims'),
);
export const PersistentVolumes = defineResource<PersistentVolume>(
  core('PersistentVolume', 'persistentvolumes', false),
);
export const Namespaces = defineResource<Namespace>(core('Namespace', 'namespaces', false));
export const Nodes = defineResource<Node>(core('Node', 'nodes', false));
export const ServiceAccounts = defineResource<ServiceAccount>(core('ServiceAccount', 'serviceaccounts'));
export const StatefulSets = defineResource<StatefulSet>({
  group: 'apps',
  version: 'v1',
  kind: 'StatefulSet',
  plural: 'statefulsets',
  namespaced: true,
});
export const Deployments = defineResource<Deployment>({
  group: 'apps',
  version: 'v1',
  kind: 'Deployment',
  plural: 'deployments',
  namespaced: true,
});
export const PodDisruptionBudgets = defineResource<PodDisruptionBudget>({
  group: 'policy',
  version: 'v1',
  kind: 'PodDisruptionBudget',
  plural: 'poddisruptionbudgets',
  namespaced: true,
});
export const Leases = defineResource<Lease>({
  group: 'coordination.k8s.io',
  version: 'v1',
  kind: 'Lease',
  plural: 'leases',
  namespaced: true,
});
export const Events = defineResource<Event>({
  group: 'events.k8s.io',
  version: 'v1',
  kind: 'Event',
  plural: 'events',
  namespaced: true,
});
export const CustomResourceDefinitions = defineResource<CustomResourceDefinition>({
  group: 'apiextensions.k8s.io',
  version: 'v1',
  kind: 'CustomResourceDefinition',
  plural: 'customresourcedefinitions',
  namespaced: false,
});
export const StorageClasses = defineResource<StorageClass>({
  group: 'storage.k8s.io',
  version: 'v1',
  kind: 'StorageClass',
  plural: 'storageclasses',
  namespaced: false,
});
const rbac = (kind: string, plural: string, namespaced: boolean) => ({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  kind,
  plural,
  namespaced,
});
export const Roles = defineResource<Role>(rbac('Role', 'roles', true));
export const ClusterRoles = defineResource<ClusterRole>(rbac('ClusterRole', 'clusterroles', false));
export const RoleBindings = defineResource<RoleBinding>(rbac('RoleBinding', 'rolebindings', true));
export const ClusterRoleBindings = defineResource<ClusterRoleBinding>(
  rbac('ClusterRoleBinding', 'clusterrolebindings', false),
);

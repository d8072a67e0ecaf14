/** Wire types shared by every part of the runtime. Timestamps stay RFC 3339 strings, as the API sends them. */

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: unknown;
  subresource?: string;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: ManagedFieldsEntry[];
}

/** Any Kubernetes object. Kind-specific types extend it with spec/status/data. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

export interface ObjectList<T extends KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata: ListMeta;
  items: T[];
}

/** Identifies one object: the unit the work queue holds. */
export interface ObjectKey {
  namespace?: string;
  name: string;
}

/** metav1.Condition */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

export interface WatchEvent<T extends KubeObject> {
  type: WatchEventType;
  object: T;
}

/** "namespace/name", or "name" for cluster-scoped objects: client-go's MetaNamespaceKeyFunc. */
export function keyOf(obj: KubeObject | ObjectKey): string {
  const key: ObjectKey =
    'metadata' in obj ? { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' } : obj;
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

export function parseKey(key: string): ObjectKey {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export function objectKey(obj: KubeObject): ObjectKey {
  return obj.metadata.namespace
    ? { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '' }
    : { name: obj.metadata.name ?? '' };
}

/** The kinds the benchmark deals with and their REST collection paths. */
export const CHILD_KINDS = [
  'Secret',
  'ConfigMap',
  'Service',
  'StatefulSet',
  'PodDisruptionBudget',
  // postgres: the primary lease (its instances' ServiceAccount, their Role and RoleBinding, the Lease).
  'ServiceAccount',
  'Role',
  'RoleBinding',
  'Lease',
] as const;
export type ChildKind = (typeof CHILD_KINDS)[number];

export const DB_GROUP = 'myapp.example.com';
export const DB_VERSION = 'v1';

const PATHS: Record<ChildKind | 'Database', (ns: string) => string> = {
  Database: (ns) => `/apis/${DB_GROUP}/${DB_VERSION}/namespaces/${ns}/databases`,
  Secret: (ns) => `/api/v1/namespaces/${ns}/secrets`,
  ConfigMap: (ns) => `/api/v1/namespaces/${ns}/configmaps`,
  Service: (ns) => `/api/v1/namespaces/${ns}/services`,
  StatefulSet: (ns) => `/apis/apps/v1/namespaces/${ns}/statefulsets`,
  PodDisruptionBudget: (ns) => `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`,
  ServiceAccount: (ns) => `/api/v1/namespaces/${ns}/serviceaccounts`,
  Role: (ns) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`,
  RoleBinding: (ns) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
  Lease: (ns) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
};

export function kindPath(kind: ChildKind | 'Database', namespace: string): string {
  return PATHS[kind](namespace);
}

export function isChildKind(kind: string | undefined): kind is ChildKind {
  return (CHILD_KINDS as readonly string[]).includes(kind ?? '');
}

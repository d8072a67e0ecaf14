/**
 * What a controller declares it reads and writes: `export const rbac: RbacRule[] = [...]` in
 * src/controllers/<kind>/controller.ts. `opkit generate` merges the declarations of every controller into
 * config/rbac/role.yaml. Wildcards ('*') are refused: least privilege means naming each verb and resource.
 *
 *   import type { RbacRule } from '@opkit/cli/rbac';
 *   export const rbac: RbacRule[] = [
 *     { resource: Databases.resource, verbs: ['get', 'list', 'watch'] },
 *     { resource: Databases.resource, subresource: 'status', verbs: ['get', 'patch', 'update'] },
 *     { resource: StatefulSets, verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
 *     { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] },
 *   ];
 */
export type RbacVerb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'patch'
  | 'delete'
  | 'deletecollection'
  | 'bind'
  | 'escalate'
  | 'impersonate'
  | 'use'
  | 'approve'
  | 'sign';

/** A rule about a kind through its Resource descriptor (group and plural are taken from it). */
export interface ResourceRbacRule {
  resource: { readonly group: string; readonly plural: string };
  /** e.g. 'status', 'scale', 'finalizers': the rule is then about `<plural>/<subresource>`. */
  subresource?: string;
  verbs: readonly RbacVerb[];
  resourceNames?: readonly string[];
}

/** A rule as Kubernetes writes it. */
export interface PlainRbacRule {
  apiGroups: readonly string[];
  resources: readonly string[];
  verbs: readonly RbacVerb[];
  resourceNames?: readonly string[];
}

export type RbacRule = ResourceRbacRule | PlainRbacRule;

/** A rbacv1.PolicyRule as written to role.yaml. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/**
 * The primary lease's objects (postgres, engines that fail over): the instances' ServiceAccount
 * `<name>-instance`, a Role that lets it get and patch the one Lease `<name>-primary` and nothing else,
 * their RoleBinding, and the Lease. The operator sets the Lease's holderIdentity to the designated
 * primary ('' while it fences in a failover, failover/lease.ts); the primary's sidecar renews it
 * (engines/postgres/lease.ts) and fences itself when it cannot. The Lease built here is what a new
 * Database starts with (the holder is the first primary; no renewTime: nobody renewed it yet); afterwards
 * the operator only writes its holder.
 */
import type { Lease, Role, RoleBinding, ServiceAccount } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { LEASE_OFF_ANNOTATION } from '../engines/postgres/lease.ts';
import { primaryLeaseSeconds, withDefaults } from './defaults.ts';
import { commonLabels } from './labels.ts';
import { childNames, initialPrimaryPod } from './names.ts';

/** Whether the Database's engine uses the primary lease (the engines that fail over). */
export function usesPrimaryLease(db: Database | DefaultedDatabase): boolean {
  const d = withDefaults(db);
  return engineFor(d.spec.engine).failover === true;
}

function meta(d: DefaultedDatabase, name: string) {
  return { name, namespace: d.metadata.namespace, labels: commonLabels(d, 'database') };
}

export function instanceServiceAccount(db: Database | DefaultedDatabase): ServiceAccount {
  const d = withDefaults(db);
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(d, childNames(d).instanceAccount),
    // The token is mounted by hand, in the sidecar only (engines/postgres.ts).
    automountServiceAccountToken: false,
  } as ServiceAccount;
}

/** Least privilege: get and patch the one Lease (patch: renewTime, the fenced acknowledgement). */
export function instanceRole(db: Database | DefaultedDatabase): Role {
  const d = withDefaults(db);
  const names = childNames(d);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta(d, names.instanceAccount),
    rules: [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [names.lease],
        verbs: ['get', 'patch'],
      },
    ],
  };
}

export function instanceRoleBinding(db: Database | DefaultedDatabase): RoleBinding {
  const d = withDefaults(db);
  const names = childNames(d);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta(d, names.instanceAccount),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: names.instanceAccount },
    subjects: [{ kind: 'ServiceAccount', name: names.instanceAccount, namespace: d.metadata.namespace }],
  };
}

/**
 * The Lease as created: held by the first primary, never renewed. With one instance (nothing to fail
 * over to) it carries the off annotation: the sidecar neither renews nor fences (failover/lease.ts).
 */
export function primaryLease(db: Database | DefaultedDatabase, holder?: string): Lease {
  const d = withDefaults(db);
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      ...meta(d, childNames(d).lease),
      ...(d.spec.replicas < 2 ? { annotations: { [LEASE_OFF_ANNOTATION]: 'true' } } : {}),
    },
    spec: {
      holderIdentity: holder ?? initialPrimaryPod(d),
      leaseDurationSeconds: primaryLeaseSeconds(d),
    },
  };
}

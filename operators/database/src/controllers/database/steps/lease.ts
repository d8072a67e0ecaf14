/**
 * The primary lease's objects (postgres): the instances' ServiceAccount, Role and RoleBinding (before the
 * StatefulSet: its pods run as that ServiceAccount), and the Lease `<name>-primary`, created naming the
 * designated primary, then kept naming it ('' while a failover fences; the failover procedure writes it
 * at the moments that matter, before a promotion above all, failover/procedure.ts).
 */
import { AlreadyExistsError, Leases, RoleBindings, Roles, ServiceAccounts } from '@opkit/runtime';
import {
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  primaryLease,
  usesPrimaryLease,
} from '../desired/index.ts';
import { childNames } from '../desired/names.ts';
import { PrimaryLeaseAccess } from '../failover/lease-io.ts';
import { allInOrder, type Run } from '../run.ts';

/** Who the Lease should name now: the designated primary, or nobody while a failover fences. */
function desiredHolder(run: Run): string | undefined {
  const record = run.cluster?.record;
  if (!record) return undefined;
  return record.fenced ? '' : record.primary;
}

export async function ensurePrimaryLease(run: Run): Promise<void> {
  if (!usesPrimaryLease(run.spec)) return;
  await allInOrder([
    run.ensure(ServiceAccounts, instanceServiceAccount(run.spec)),
    run.ensure(Roles, instanceRole(run.spec)),
    run.ensure(RoleBindings, instanceRoleBinding(run.spec)),
  ]);
  const holder = desiredHolder(run);
  if (holder === undefined) return;
  const name = childNames(run.db).lease;
  await run.step('Lease', name, async () => {
    const access = new PrimaryLeaseAccess(run.client, run.db, leaseMemory(run), run.signal);
    const guarded = run.spec.spec.replicas > 1;
    if (await access.setHolder(holder, guarded)) return;
    try {
      const lease = run.own(primaryLease(run.spec, holder));
      await run.client.create(Leases, lease, { signal: run.signal });
      run.normal('Created', 'Create', `Created Lease ${name}`, lease);
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
  });
}

/** The process's memory of the Leases, or one for this reconcile (then nothing counts on it yet). */
export function leaseMemory(run: Run) {
  run.deps.leases ??= { observations: new Map(), monotonic: () => performance.now() };
  return run.deps.leases;
}

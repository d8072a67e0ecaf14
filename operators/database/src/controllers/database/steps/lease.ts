/**
 * The primary lease's objects (postgres): the instances' ServiceAccount, Role and RoleBinding (before the
 * StatefulSet: its pods run as that ServiceAccount), and the Lease `<name>-primary`, created naming the
 * designated primary, then kept naming it ('' while a failover fences; the failover procedure writes it
 * at the moments that matter, before a promotion above all, failover/procedure.ts).
 */
import {
  AlreadyExistsError,
  Leases,
  NotFoundError,
  RoleBindings,
  Roles,
  ServiceAccounts,
} from '@opkit/runtime';
import {
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  primaryLease,
  usesPrimaryLease,
} from '../desired/index.ts';
import { childNames } from '../desired/names.ts';
import { ChildError } from '../errors.ts';
import { newLeaseMemory, PrimaryLeaseAccess } from '../failover/lease-io.ts';
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
    ensureRoleBinding(run),
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

/** How soon a RoleBinding refused for a Role the API server has not seen yet is created again. */
export const ROLE_NOT_SEEN_RETRY_MS = 1_000;

/**
 * The instances' RoleBinding. Its create is refused with NotFound while the API server's RBAC cache has
 * not seen the Role made just before it (the escalation check resolves the Role from that cache): under
 * load or right after an outage, for a moment. Expected and soon over: created again in a second, said at
 * info level, instead of failing the reconcile.
 */
async function ensureRoleBinding(run: Run): Promise<void> {
  const binding = instanceRoleBinding(run.spec);
  try {
    await run.ensure(RoleBindings, binding);
  } catch (err) {
    if (!(err instanceof ChildError) || !(err.cause instanceof NotFoundError)) throw err;
    run.log?.info(
      { roleBinding: binding.metadata.name },
      "the API server has not seen the instances' Role yet: creating their RoleBinding again in a second",
    );
    run.retrySoonMs = ROLE_NOT_SEEN_RETRY_MS;
  }
}

/** The process's memory of the Leases, or one for this reconcile (then nothing counts on it yet). */
export function leaseMemory(run: Run) {
  run.deps.leases ??= newLeaseMemory();
  return run.deps.leases;
}

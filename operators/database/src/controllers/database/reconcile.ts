/**
 * The Database reconcile: idempotent, and no API write when nothing changed.
 *
 * Every read comes from the informer cache (the `Reader`); every write goes through createOrUpdate,
 * which compares the desired object with the live one by the subset rule and skips the write when the
 * desired fields are already there. Status is written with patchStatus, which skips an unchanged status.
 *
 * Order:
 *   1. finalizer: deletionPolicy Delete keeps `myapp.example.com/finalizer` on the Database; at deletion it
 *      deletes the StatefulSet and the data PVCs, then removes itself. Retain needs no finalizer (and one
 *      left from an earlier Delete policy is removed). Deletion never waits on children.
 *   2. credentials Secret: created once with random passwords; afterwards only missing keys are added,
 *      present ones are never touched. Values never reach logs, events or status. It lives as long as the
 *      data: under Retain nothing that goes with the Database owns it (it stays with the PVCs and a new
 *      Database of the same name adopts it by its labels); under Delete the Database is its controller.
 *      Missing while the data PVCs exist, it is never generated again (new passwords would lock every
 *      client out of the initialized data): status Failed, CredentialsMissing, until it is restored.
 *   3. ConfigMap, 4. Services (headless, read-write; read-only only with replicas > 1),
 *   5. StatefulSet (spec changes applied; volumeClaimTemplates are immutable: a storage increase patches
 *      each PVC and then recreates the StatefulSet with orphan deletion, so pods and PVCs stay),
 *   6. PodDisruptionBudget (replicas > 1 only), 7. role labels on the pods (the designated primary:
 *      status.targetPrimary for postgres, recorded with the system identifier from the pods' reports),
 *   8. status, from the real StatefulSet and pods.
 * Ownership (ownership.ts): every write is decided on the object as the API returns it. The cache only
 * shows objects labelled managed-by, so when it has nothing under a child's name the object is read from
 * the API before anything is created; an object another controller owns, or one without a controller
 * and without our labels, is never taken over.
 * Errors: the API refusing a child (422 Invalid), an object under a child's name that is not ours and a
 * missing Secret for existing data are terminal: a Warning event (naming the object), status Failed with
 * the message, and a TerminalError (no retry until something changes). Other errors are retried with
 * backoff (and a Warning event).
 * Layout: this file orders the steps and writes the status; run.ts is the context every step shares
 * (writing a child, events), steps/ has the steps by concept (secrets, config, services, disruption,
 * statefulset, storage, cluster, roles, rollout); the decisions they take are pure functions next to
 * this file (rollout.ts, roles.ts, storage.ts, status.ts).
 */
import {
  addFinalizer,
  ConflictError,
  deepCopy,
  hasFinalizer,
  isBeingDeleted,
  isControlledBy,
  isUnreachable,
  type Logger,
  NotFoundError,
  type ObjectKey,
  patchStatus,
  type ReconcileContext,
  type Reconciler,
  type Result,
  removeFinalizer,
  requeueAfter,
  StatefulSets,
  TerminalError,
  withTypeMeta,
} from '@opkit/runtime';
import {
  type Database,
  type DatabaseStatus,
  Databases,
  type DefaultedDatabase,
} from '../../api/v1/database.ts';
import { deleteData, FINALIZER, wantsFinalizer } from './deletion.ts';
import type { ReconcilerDeps } from './deps.ts';
import { configHash, endpoints } from './desired/index.ts';
import { selectorString } from './desired/labels.ts';
import { ChildError } from './errors.ts';
import { instanceEvents, instanceStatuses } from './instances.ts';
import { pollReplication } from './replication-poll.ts';
import { newerResourceVersion } from './resource-version.ts';
import { RoleLabelMemory } from './roles.ts';
import { allInOrder, Run } from './run.ts';
import { computeStatus, type Failure, type Observed } from './status.ts';
import { observeAfterFailure, observeCluster } from './steps/cluster.ts';
import { ensureConfig } from './steps/config.ts';
import { ensureDisruptionBudgets } from './steps/disruption.ts';
import { ensurePrimaryLease } from './steps/lease.ts';
import { labelRoles } from './steps/roles.ts';
import { rollPods } from './steps/rollout.ts';
import { ensureApplicationSecret, ensureCredentials, ensureTlsSecrets } from './steps/secrets.ts';
import { ensureServices } from './steps/services.ts';
import { ensureStatefulSet } from './steps/statefulset.ts';
import { expandStorage, listClaims } from './steps/storage.ts';

export {
  cacheReader,
  clientReader,
  MANAGED_SELECTOR,
  type Reader,
  type ReconcilerDeps,
  type Recorder,
} from './deps.ts';
export { CredentialsMissingError, ImageVersionError } from './errors.ts';

/** Keeps the last status this process wrote, so a lagging cache does not cause a second identical write. */
interface Written {
  resourceVersion: string;
  status: DatabaseStatus | undefined;
}

/** Builds the reconciler for the controller. */
export function databaseReconciler(deps: ReconcilerDeps): Reconciler<Database> {
  const written = new Map<string, Written>();
  const roleLabels = new RoleLabelMemory();
  return (req, ctx) => reconcileDatabase(deps, req, ctx, written, roleLabels);
}

/** Reconciles one Database. Exported for unit tests (with a FakeClient and clientReader). */
export async function reconcileDatabase(
  deps: ReconcilerDeps,
  req: ObjectKey,
  ctx: Pick<ReconcileContext, 'signal'> & { log?: Logger },
  written: Map<string, Written> = new Map(),
  roleLabels: RoleLabelMemory = new RoleLabelMemory(),
): Promise<Result> {
  const key = `${req.namespace ?? ''}/${req.name}`;
  const found = await deps.reader.get(Databases.resource, req);
  if (!found) {
    written.delete(key);
    roleLabels.forget(key);
    await deps.replication?.forget(req.namespace ?? '', req.name);
    return;
  }
  let db = withTypeMeta(Databases.resource, deepCopy(found) as Database);
  const memo = written.get(key);
  if (memo && newerResourceVersion(memo.resourceVersion, db.metadata.resourceVersion)) {
    db = { ...db, status: deepCopy(memo.status) } as Database;
  }
  const { client } = deps;
  const signal = ctx.signal;

  const writeStatus = async (run: Run, observed: Observed): Promise<void> => {
    const result = await patchStatus(
      client,
      Databases.resource,
      run.db,
      (prev) => computeStatus(run.db, prev as DatabaseStatus, observed, deps.now) as typeof prev,
      { signal },
    );
    if (result.changed) {
      written.set(key, {
        resourceVersion: result.object.metadata.resourceVersion ?? '',
        status: (result.object as Database).status,
      });
    }
  };

  // 1. Finalizer and deletion.
  if (isBeingDeleted(db)) {
    await deps.replication?.forget(req.namespace ?? '', req.name);
    const run = new Run(deps, db, signal, ctx.log);
    // Phase Deleting while something (our finalizer, foreground deletion) holds the object; best effort.
    try {
      await writeStatus(run, { statefulSet: undefined, pods: [], statefulSetName: db.metadata.name ?? '' });
    } catch (err) {
      if (!(err instanceof NotFoundError) && !(err instanceof ConflictError)) throw err;
    }
    if (!hasFinalizer(db, FINALIZER)) return;
    if (run.spec.spec.deletionPolicy === 'Delete') {
      const stsName = db.metadata.name ?? '';
      const sts = await deps.reader.get(StatefulSets, { namespace: run.ns, name: stsName });
      const claims = await listClaims(run, stsName);
      const done = await deleteData(client, sts && isControlledBy(sts, db) ? sts : undefined, claims, signal);
      run.normal(
        'DeletingData',
        'Delete',
        `deletionPolicy Delete: deleted ${done.deletedStatefulSet ? `StatefulSet ${stsName} and ` : ''}` +
          `${done.deletedClaims.length} PersistentVolumeClaim(s)${done.deletedClaims.length ? `: ${done.deletedClaims.join(', ')}` : ''}`,
      );
    } else {
      run.normal('RetainingData', 'Delete', 'deletionPolicy Retain: the PersistentVolumeClaims are kept');
    }
    await removeFinalizer(client, Databases.resource, db, FINALIZER, { signal });
    written.delete(key);
    return;
  }
  const policy = (Databases.applyDefaults(db) as DefaultedDatabase).spec.deletionPolicy;
  if (wantsFinalizer(policy) && !hasFinalizer(db, FINALIZER)) {
    db = withTypeMeta(
      Databases.resource,
      await addFinalizer(client, Databases.resource, db, FINALIZER, { signal }),
    );
  } else if (!wantsFinalizer(policy) && hasFinalizer(db, FINALIZER)) {
    const after = await removeFinalizer(client, Databases.resource, db, FINALIZER, { signal });
    if (!after) return;
    db = withTypeMeta(Databases.resource, after);
  }

  const run = new Run(deps, db, signal, ctx.log);
  const stsName = db.metadata.name ?? '';
  let failure: Failure | undefined;
  let retry: unknown;
  try {
    // The children that do not depend on one another are written at once (a reconcile of a new
    // Database takes three round trips instead of eight); the StatefulSet only once the Secret and the
    // ConfigMap its pods mount exist, and never when either step failed.
    await observeCluster(run);
    const [, , hash] = await allInOrder([
      ensureCredentials(run),
      ensureTlsSecrets(run),
      ensureConfig(run),
      ensureServices(run),
      ensureDisruptionBudgets(run),
      ensurePrimaryLease(run),
    ] as const);
    await ensureApplicationSecret(run);
    await ensureStatefulSet(run, hash);
    if (!run.recreating && run.storage.expanded.length === 0 && run.storage.failed.length === 0) {
      // Claims created from an older (smaller) template, or expansion still in progress.
      await expandStorage(run, stsName, false);
    }
    await labelRoles(run, stsName, roleLabels);
    await rollPods(run);
  } catch (err) {
    if (err instanceof ChildError && err.terminal) {
      failure = { reason: err.reason, message: err.message };
      run.warning(err.reason, 'Reconcile', err.message, err.related);
    } else {
      retry = err;
      const message = err instanceof Error ? err.message : String(err);
      // An unreachable API server fails every reconcile alike until it is back: the controller logs that
      // once; a Warning Event per reconcile could not be written anyway.
      if (!signal?.aborted) {
        if (isUnreachable(err)) run.log?.debug({ err }, 'API server unreachable, retrying');
        else run.warning('ReconcileError', 'Reconcile', message);
      }
    }
  }

  // A step failed before the spec was applied (the cluster's own failures come after applying it).
  const stepFailed = failure ?? retry;
  const failingOver = run.db.status?.failover !== undefined || run.failoverRequeueMs !== undefined;
  if (!failure && retry === undefined && run.cluster?.failure && !failingOver) {
    failure = run.cluster.failure;
    run.warning(failure.reason, 'Reconcile', failure.message);
  }
  if (failure || retry !== undefined) await observeAfterFailure(run, stsName);
  const observed: Observed = {
    statefulSet: run.sts,
    pods: run.pods,
    statefulSetName: stsName,
    recreating: run.recreating,
    ...(run.secretName ? { secretName: run.secretName } : {}),
    endpoints: endpoints(run.spec),
    selector: selectorString(run.spec),
    storage: run.storage,
    applied: stepFailed === undefined,
    ...(run.cluster ? { cluster: run.cluster } : {}),
    ...(failure ? { failure } : {}),
  };
  const polled = pollReplication(deps.replication, run, stsName);
  const instances = run.cluster
    ? polled.apply(
        instanceStatuses(
          stsName,
          run.spec.spec.replicas,
          run.cluster.record.primary,
          run.pods,
          run.cluster.reports,
        ),
      )
    : undefined;
  if (instances) observed.instances = instances;
  try {
    await writeStatus(run, observed);
    // Said once the status that records it is written (the next reconcile compares with it).
    if (instances && run.cluster) {
      const prevInstances = run.db.status?.instances;
      for (const e of instanceEvents(
        prevInstances,
        instances,
        run.cluster.record.primary,
        run.cluster.reports,
      )) {
        if (e.type === 'Warning') run.warning(e.reason, 'Observe', e.note);
        else run.normal(e.reason, 'Observe', e.note);
      }
    }
  } catch (err) {
    if (err instanceof NotFoundError) return;
    if (retry === undefined && failure === undefined) throw err;
  }
  // The failover procedure's own status writes count too: a cache that has not seen them yet must not
  // hand the pods the record from before them (that would undo a fencing).
  const rv = run.db.metadata.resourceVersion;
  const seen = written.get(key);
  if (rv && (!seen || newerResourceVersion(rv, seen.resourceVersion)))
    written.set(key, { resourceVersion: rv, status: run.db.status });
  if (failure) throw new TerminalError(failure.message);
  if (retry !== undefined) throw retry;
  // The StatefulSet is being deleted (orphan) to be recreated: its deletion event wakes us, but check
  // again in a while in case the garbage collector is slow.
  if (run.recreating) return requeueAfter(5_000);
  if (run.retrySoonMs !== undefined) return requeueAfter(run.retrySoonMs);
  // The server certificate's renewal, when it falls before the next periodic resync could come.
  const renewIn =
    (run.tlsState?.renewAt?.getTime() ?? Number.POSITIVE_INFINITY) - (deps.now?.() ?? new Date()).getTime();
  const renewWait = Math.max(renewIn, 1_000);
  // A failover in progress looks again soon (and never later than a due renewal).
  if (run.failoverRequeueMs !== undefined) {
    return requeueAfter(Math.min(Math.max(200, run.failoverRequeueMs), renewWait));
  }
  // The primary Lease's expiry is checked by looking again (the operator does not watch the Lease).
  const leaseWait = run.leaseRecheckMs !== undefined ? Math.max(1_000, run.leaseRecheckMs) : undefined;
  const soonest = (ms: number) => (leaseWait !== undefined ? Math.min(ms, leaseWait) : ms);
  if (renewIn < RENEWAL_LOOKAHEAD_MS)
    return requeueAfter(soonest(Math.min(renewWait, polled.nextMs ?? renewWait)));
  // The next replication poll.
  if (polled.nextMs !== undefined) return requeueAfter(soonest(Math.max(1_000, polled.nextMs)));
  if (leaseWait !== undefined) return requeueAfter(leaseWait);
  return;
}

/** A reconcile returns a requeue for a server certificate renewal due within this time. */
const RENEWAL_LOOKAHEAD_MS = 24 * 60 * 60 * 1000;

/** The config hash the reconcile puts on the pod template (the builders' configHash). */
export { configHash };

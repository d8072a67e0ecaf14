/** The Database controller: setup, the reconcile, status computation and their helpers. */
export {
  CONTROLLER_NAME,
  claimPredicate,
  type DatabaseControllerOptions,
  databaseOf,
  databasePredicate,
  EVENT_SOURCE,
  MANAGED_KINDS,
  podPredicate,
  rbac,
  setupDatabaseController,
} from './controller.ts';
export { type CleanupResult, deleteData, FINALIZER, wantsFinalizer } from './deletion.ts';
export {
  cacheReader,
  clientReader,
  databaseReconciler,
  MANAGED_SELECTOR,
  type Reader,
  type ReconcilerDeps,
  type Recorder,
  reconcileDatabase,
} from './reconcile.ts';
export { podOrdinal, roleChanges, roleOf, syncRoleLabels } from './roles.ts';
export { computeStatus, describeStatus, type Failure, isPodReady, type Observed } from './status.ts';
export { claimOrdinal, claimsOf, expandClaims, type StorageReport } from './storage.ts';

/** The context of one reconcile and how its steps write children (ownership checked, events, errors). */
import {
  AlreadyExistsError,
  type Client,
  ConflictError,
  type CreateOrUpdateResult,
  createOrUpdate,
  DEFAULT_WRITE_ATTEMPTS,
  deepCopy,
  isBeingDeleted,
  isControlledBy,
  type KubeObject,
  type Logger,
  NotFoundError,
  type Pod,
  type Resource,
  type StatefulSet,
  setControllerReference,
  withTypeMeta,
} from '@opkit/runtime';
import { type Database, Databases, type DefaultedDatabase } from '../../api/v1/database.ts';
import type { ReconcilerDeps } from './deps.ts';
import { withDefaults } from './desired/defaults.ts';
import type { ClusterObservation } from './engines/types.ts';
import { ChildError } from './errors.ts';
import { checkOwnership } from './ownership.ts';
import { emptyStorageReport, type StorageReport } from './storage.ts';
import type { TlsState } from './tls/step.ts';

/**
 * Waits for every step, then fails with the first failure in the order given (not the first to
 * happen), so that a reconcile reports the same error whichever request returned first.
 */
export async function allInOrder<const T extends readonly Promise<unknown>[]>(
  steps: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(steps);
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/**
 * One reconcile of one Database: the Database, the deps and the findings the steps (steps/) share, and
 * the ways every step writes a child (step, own, fresh, ensure, remove) and says what it did (events).
 */
export class Run {
  readonly deps: ReconcilerDeps;
  readonly signal: AbortSignal | undefined;
  readonly log: Logger | undefined;
  db: Database;
  readonly spec: DefaultedDatabase;
  readonly ns: string;
  /** spec.storage as a string quantity. */
  readonly storageSize: string;
  // Findings for the status.
  secretName: string | undefined;
  sts: StatefulSet | undefined;
  recreating = false;
  pods: Pod[] = [];
  storage: StorageReport = emptyStorageReport();
  /** The engine's cluster record and its instances' reports (postgres). */
  cluster: ClusterObservation | undefined;
  /** The credentials Secret's plain values once the Secret step ran (for `<name>-app`). */
  credentials: Record<string, string> | undefined;
  /** The CA and the server certificate's renewal time once the TLS step ran. */
  tlsState: TlsState | undefined;
  /** The failover procedure asks to look again in this many ms. */
  failoverRequeueMs: number | undefined;
  /** The primary Lease is to be looked at again in this many ms (whether it expired). */
  leaseRecheckMs: number | undefined;
  /** A step that waits on the API server (not an error) asks to run again in this many ms. */
  retrySoonMs: number | undefined;

  constructor(deps: ReconcilerDeps, db: Database, signal?: AbortSignal, log?: Logger) {
    this.deps = deps;
    this.db = db;
    this.spec = withDefaults(db);
    this.ns = db.metadata.namespace ?? 'default';
    this.storageSize = String(this.spec.spec.storage);
    this.signal = signal;
    this.log = log;
  }

  get client(): Client {
    return this.deps.client;
  }

  normal(reason: string, action: string, note: string, related?: KubeObject): void {
    this.deps.recorder.normal(this.db, reason, action, note, related);
    this.log?.info({ reason, related: related?.metadata.name }, note);
  }

  warning(reason: string, action: string, note: string, related?: KubeObject): void {
    this.deps.recorder.warning(this.db, reason, action, note, related);
    this.log?.warn({ reason, related: related?.metadata.name }, note);
  }

  /** Runs one child step, turning API refusals into ChildErrors that name the child. */
  async step<T>(kind: string, name: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ChildError) throw err;
      throw new ChildError(kind, name, err);
    }
  }

  own<T extends KubeObject>(child: T): T {
    child.metadata.namespace ??= this.ns;
    return setControllerReference(this.db, child, Databases.resource);
  }

  /** The object from the API (not the cache), or undefined when there is none. */
  async fresh<T extends KubeObject>(res: Resource<T>, name: string): Promise<T | undefined> {
    try {
      return withTypeMeta(
        res,
        await this.client.get(res, { namespace: this.ns, name }, { signal: this.signal }),
      );
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /**
   * createOrUpdate, deciding on an object whose ownership was checked: the cached one; when the cache has
   * none, a create is tried, and if the API says it exists (the cache hides objects without our label)
   * the API's object is read and checked before anything is written to it. Never
   * takes over an object that is not ours (checkOwnership); adopts one without a controller that carries
   * our labels, keeping the ownerReferences others put on it. An event when something was written.
   */
  async ensure<T extends KubeObject>(res: Resource<T>, desired: T): Promise<CreateOrUpdateResult<T>> {
    const name = desired.metadata.name ?? '';
    return this.step(res.kind, name, async () => {
      const cached = await this.deps.reader.get(res, { namespace: this.ns, name });
      let live = cached ? withTypeMeta(res, cached) : undefined;
      for (let attempt = 1; ; attempt++) {
        // Only want's metadata changes below (namespace, owner references: setControllerReference
        // replaces the array), so a new metadata object keeps desired intact for another attempt.
        const want = { ...desired, metadata: { ...desired.metadata } };
        want.metadata.namespace ??= this.ns;
        if (live) {
          checkOwnership(res.kind, live, this.db);
          want.metadata.ownerReferences = deepCopy(live.metadata.ownerReferences ?? []);
        }
        setControllerReference(this.db, want, Databases.resource);
        const current = live;
        let result: CreateOrUpdateResult<T>;
        try {
          result = await createOrUpdate(this.client, res, want, {
            reader: { get: () => current },
            attempts: 1,
            signal: this.signal,
          });
        } catch (err) {
          const stale =
            err instanceof AlreadyExistsError || err instanceof ConflictError || err instanceof NotFoundError;
          if (!stale || attempt >= DEFAULT_WRITE_ATTEMPTS) throw err;
          // Not in the cache (hidden by its label filter, or not there yet) or behind it: ask the API.
          live = await this.fresh(res, name);
          continue;
        }
        const obj = withTypeMeta(res, result.object);
        if (result.operation === 'created')
          this.normal('Created', 'Create', `Created ${res.kind} ${name}`, obj);
        else if (result.operation === 'updated')
          this.normal('Updated', 'Update', `Updated ${res.kind} ${name}`, obj);
        return result;
      }
    });
  }

  /** Deletes an optional child that should not exist (only when this Database controls it). */
  async remove<T extends KubeObject>(res: Resource<T>, name: string): Promise<void> {
    const live = await this.deps.reader.get(res, { namespace: this.ns, name });
    if (!live || isBeingDeleted(live) || !isControlledBy(live, this.db)) return;
    await this.step(res.kind, name, async () => {
      try {
        await this.client.delete(
          res,
          { namespace: this.ns, name },
          { preconditions: { uid: live.metadata.uid ?? '' }, signal: this.signal },
        );
        this.normal(
          'Deleted',
          'Delete',
          `Deleted ${res.kind} ${name}: not needed with 1 replica`,
          withTypeMeta(res, live),
        );
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    });
  }
}

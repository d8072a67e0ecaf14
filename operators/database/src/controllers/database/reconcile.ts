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
 */
import {
  AlreadyExistsError,
  AlreadyOwnedError,
  addFinalizer,
  BadRequestError,
  type Client,
  ConfigMaps,
  ConflictError,
  type CreateOrUpdateResult,
  createOrUpdate,
  DEFAULT_WRITE_ATTEMPTS,
  hasFinalizer,
  hasOwnerReference,
  InvalidError,
  InvalidOwnerError,
  isBeingDeleted,
  isControlledBy,
  isUnreachable,
  type KubeObject,
  type Logger,
  NotFoundError,
  type Now,
  type ObjectKey,
  type OwnerReference,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
  type Pod,
  PodDisruptionBudgets,
  type PodExecutor,
  Pods,
  patchStatus,
  type ReconcileContext,
  type Reconciler,
  type Resource,
  type Result,
  removeFinalizer,
  requeueAfter,
  type Secret,
  Secrets,
  Services,
  type StatefulSet,
  StatefulSets,
  setControllerReference,
  TerminalError,
  withTypeMeta,
} from '@opkit/runtime';
import {
  ANNOTATION_SWITCHOVER_TO,
  type Database,
  type DatabaseStatus,
  Databases,
  type DefaultedDatabase,
  LABEL_MANAGED_BY,
  MANAGED_BY,
  ROLE_LABEL,
} from '../../api/v1/database.ts';
import { deleteData, FINALIZER, wantsFinalizer } from './deletion.ts';
import {
  configHash,
  configMap,
  credentialsSecret,
  endpoints,
  headlessService,
  podDisruptionBudget,
  primaryDisruptionBudget,
  readOnlyService,
  readWriteService,
  statefulSet,
} from './desired/index.ts';
import { selectorString } from './desired/labels.ts';
import { childNames, DERIVED_SECRET_KEYS, initialPrimaryPod } from './desired/names.ts';
import { engineFor } from './engines/index.ts';
import type { ClusterObservation } from './engines/types.ts';
import type { FailoverMetrics } from './failover/metrics.ts';
import { liveConfigData, runFailover } from './failover/procedure.ts';
import { instanceEvents, instanceStatuses } from './instances.ts';
import { adoptionLabels, checkOwnership, ObjectConflictError } from './ownership.ts';
import { pollReplication, type ReplicationPoller } from './replication-poll.ts';
import { syncRoleLabels } from './roles.ts';
import { nextRoll, REVISION_LABEL } from './rollout.ts';
import { computeStatus, type Failure, type Observed } from './status.ts';
import { claimsOf, compareSizes, emptyStorageReport, expandClaims, type StorageReport } from './storage.ts';
import {
  ensureAppSecret,
  ensureTls,
  type SecretOwnership,
  type SecretStore,
  type TlsState,
} from './tls/step.ts';

const DERIVED: ReadonlySet<string> = new Set(Object.values(DERIVED_SECRET_KEYS));

/** The label every object the operator manages carries: what the informers are restricted to. */
export const MANAGED_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;

/** Where the reconcile reads from: the manager's cache in production, the client in unit tests. */
export interface Reader {
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey): Promise<T | undefined>;
  list<T extends KubeObject>(
    res: Resource<T>,
    opts: { namespace: string; labelSelector?: string },
  ): Promise<T[]>;
}

/** The subset of EventRecorder the reconcile uses. */
export interface Recorder {
  normal(regarding: KubeObject, reason: string, action: string, note: string, related?: KubeObject): void;
  warning(regarding: KubeObject, reason: string, action: string, note: string, related?: KubeObject): void;
}

export interface ReconcilerDeps {
  client: Client;
  reader: Reader;
  recorder: Recorder;
  /** Time for condition transitions (tests). */
  now?: Now;
  /** pods/exec: how the operator fails over (postgres). Without it, no automatic failover. */
  exec?: PodExecutor;
  failoverMetrics?: FailoverMetrics;
  /** The clock of failover decisions, ms (tests). */
  clock?: () => number;
  /** postgres: asks the primary about its replicas (status.instances lag, the lag gauges). */
  replication?: ReplicationPoller;
}

/** A Reader over the informer cache (objects are frozen: never mutate them, copy first). */
export function cacheReader(cache: {
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey): Promise<unknown>;
  list<T extends KubeObject>(
    res: Resource<T>,
    opts: { namespace?: string; labelSelector?: string },
  ): Promise<unknown[]>;
}): Reader {
  return {
    get: async <T extends KubeObject>(res: Resource<T>, key: ObjectKey) =>
      (await cache.get(res, key)) as T | undefined,
    list: async <T extends KubeObject>(
      res: Resource<T>,
      opts: { namespace: string; labelSelector?: string },
    ) => (await cache.list(res, opts)) as T[],
  };
}

/** A Reader straight from the API (uncached): unit tests with the FakeClient, tools. */
export function clientReader(client: Client): Reader {
  return {
    async get<T extends KubeObject>(res: Resource<T>, key: ObjectKey): Promise<T | undefined> {
      try {
        return await client.get(res, key);
      } catch (err) {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      }
    },
    async list<T extends KubeObject>(res: Resource<T>, opts: { namespace: string; labelSelector?: string }) {
      return (await client.list(res, opts)).items;
    },
  };
}

/**
 * The credentials Secret is missing while the Database's data volumes exist: their data was initialized
 * with the passwords it held, so generating new ones would lock every client out.
 */
export class CredentialsMissingError extends Error {
  readonly claims: PersistentVolumeClaim[];
  constructor(secret: string, namespace: string, db: Database, claims: PersistentVolumeClaim[]) {
    const names = claims.map((c) => c.metadata.name ?? '').join(', ');
    super(
      `Secret ${namespace}/${secret} is missing, but the data volumes of this Database exist (${names}). ` +
        'Their data was initialized with the passwords in that Secret, so the operator does not generate ' +
        `new ones (they would lock every client out). Restore Secret ${secret} from a backup, with its ` +
        `labels (${adoptionLabels(db)}); or, to start over with empty data, delete the ` +
        `PersistentVolumeClaims ${names}.`,
    );
    this.name = 'CredentialsMissingError';
    this.claims = claims;
  }
}

/** spec.image cannot run spec.version: nothing is rolled out until the spec is fixed. */
export class ImageVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageVersionError';
  }
}

/** A child write the API refused; `terminal` when retrying cannot help. */
class ChildError extends Error {
  readonly kind: string;
  readonly childName: string;
  readonly terminal: boolean;
  readonly reason: string;
  /** The object the failure is about, for the Warning event's `related` (a conflicting object). */
  readonly related: KubeObject | undefined;
  constructor(kind: string, childName: string, cause: unknown) {
    const message = cause instanceof Error ? cause.message : String(cause);
    // These name the object themselves.
    const named =
      cause instanceof ObjectConflictError ||
      cause instanceof CredentialsMissingError ||
      cause instanceof ImageVersionError;
    super(named ? message : `${kind} ${childName}: ${message}`, { cause });
    this.name = 'ChildError';
    this.kind = kind;
    this.childName = childName;
    this.terminal =
      cause instanceof InvalidError ||
      cause instanceof BadRequestError ||
      cause instanceof AlreadyOwnedError ||
      cause instanceof InvalidOwnerError ||
      cause instanceof ObjectConflictError ||
      cause instanceof CredentialsMissingError ||
      cause instanceof ImageVersionError;
    this.reason =
      cause instanceof CredentialsMissingError
        ? 'CredentialsMissing'
        : cause instanceof ImageVersionError
          ? 'ImageVersionMismatch'
          : cause instanceof AlreadyOwnedError ||
              cause instanceof InvalidOwnerError ||
              cause instanceof ObjectConflictError
            ? `${kind}NotOwned`
            : cause instanceof InvalidError || cause instanceof BadRequestError
              ? `Invalid${kind}`
              : `${kind}Failed`;
    this.related =
      cause instanceof ObjectConflictError
        ? cause.object
        : cause instanceof CredentialsMissingError
          ? cause.claims[0]
          : undefined;
  }
}

/**
 * Waits for every step, then fails with the first failure in the order given (not the first to
 * happen), so that a reconcile reports the same error whichever request returned first.
 */
async function allInOrder<const T extends readonly Promise<unknown>[]>(
  steps: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(steps);
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

function mainImage(sts: StatefulSet | undefined): string | undefined {
  return sts?.spec?.template?.spec?.containers?.[0]?.image;
}

/** The volumeClaimTemplates of `desired` whose storage request is bigger than the live ones'. */
function grownTemplates(live: StatefulSet, desired: StatefulSet): string[] {
  const grown: string[] = [];
  for (const want of desired.spec?.volumeClaimTemplates ?? []) {
    const name = want.metadata?.name;
    const have = live.spec?.volumeClaimTemplates?.find((t) => t.metadata?.name === name);
    const size = (s: typeof want | undefined) => s?.spec?.resources?.requests?.storage as string | undefined;
    if (have && compareSizes(size(have), size(want)) === -1) grown.push(name ?? '');
  }
  return grown;
}

/** One reconcile of one Database; a class so the steps share the Database, the deps and the findings. */
class Run {
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

  constructor(deps: ReconcilerDeps, db: Database, signal?: AbortSignal, log?: Logger) {
    this.deps = deps;
    this.db = db;
    this.spec = Databases.applyDefaults(db) as DefaultedDatabase;
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
          want.metadata.ownerReferences = structuredClone(live.metadata.ownerReferences ?? []);
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

  // --- the steps ---

  /**
   * The data claims of this Database that exist (not being deleted): the labelled ones from the cache,
   * and the first one read from the API (a claim the cache cannot see still holds data a pod would mount).
   */
  async dataClaims(): Promise<PersistentVolumeClaim[]> {
    const stsName = this.db.metadata.name ?? '';
    const found = new Map<string, PersistentVolumeClaim>();
    for (const c of await this.claims(stsName))
      found.set(c.metadata.name ?? '', withTypeMeta(PersistentVolumeClaims, c));
    const templates = statefulSet(this.spec, { configHash: '' }).spec?.volumeClaimTemplates ?? [];
    for (const t of templates) {
      const first = `${t.metadata?.name ?? 'data'}-${stsName}-0`;
      if (found.has(first)) continue;
      const claim = await this.fresh(PersistentVolumeClaims, first);
      if (claim) found.set(first, claim);
    }
    return [...found.values()]
      .filter((c) => !isBeingDeleted(c))
      .sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  }

  /**
   * The ownerReferences the Secret should have, or undefined when it has them: under Delete this Database
   * is its controller (it goes with the Database and the data); under Retain nothing that is deleted with
   * the Database references it (it stays with the PVCs). `null` removes them all.
   */
  secretOwners(
    existing: Secret,
    controlled = this.spec.spec.deletionPolicy === 'Delete',
  ): OwnerReference[] | null | undefined {
    const refs = existing.metadata.ownerReferences ?? [];
    if (controlled) {
      if (isControlledBy(existing, this.db)) return undefined;
      const copy = { metadata: { namespace: this.ns, ownerReferences: structuredClone(refs) } } as Secret;
      return setControllerReference(this.db, copy, Databases.resource).metadata.ownerReferences ?? [];
    }
    if (!hasOwnerReference(existing, this.db)) return undefined;
    const kept = refs.filter((r) => r.uid !== this.db.metadata.uid);
    return kept.length > 0 ? kept : null;
  }

  async secret(): Promise<void> {
    const full = credentialsSecret(this.spec) as Secret;
    const name = full.metadata.name ?? '';
    const key = { namespace: this.ns, name };
    await this.step('Secret', name, async () => {
      // The cache only shows labelled Secrets (and may lag): a create that finds one already there
      // reads it from the API and checks it before touching it.
      const cached = await this.deps.reader.get(Secrets, key);
      let existing = cached ? withTypeMeta(Secrets, cached) : undefined;
      if (!existing) {
        // Never new passwords for data initialized with the old ones.
        const claims = await this.dataClaims();
        if (claims.length > 0) throw new CredentialsMissingError(name, this.ns, this.db, claims);
        const desired = this.spec.spec.deletionPolicy === 'Delete' ? this.own(full) : full;
        try {
          const created = await this.client.create(Secrets, desired, { signal: this.signal });
          this.normal('Created', 'Create', `Created Secret ${name}`, withTypeMeta(Secrets, created));
          this.secretName = name;
          this.credentials = decodeAll(full);
          return;
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
          existing = withTypeMeta(Secrets, await this.client.get(Secrets, key, { signal: this.signal }));
        }
      }
      checkOwnership('Secret', existing, this.db);
      this.secretName = name;
      const owners = this.secretOwners(existing);
      const missing = credentialsSecret(this.spec, existing);
      const add = { ...(missing?.data ?? {}) };
      const addString = { ...(missing?.stringData ?? {}) };
      for (const k of Object.keys(existing.data ?? {})) {
        if (DERIVED.has(k)) continue;
        delete add[k];
        delete addString[k];
      }
      const keys = [...new Set([...Object.keys(add), ...Object.keys(addString)])].sort();
      this.credentials = {
        ...decodeAll(existing),
        ...decodeAll({ data: add, stringData: addString } as Secret),
      };
      if (keys.length === 0 && owners === undefined) return;
      await this.client.patch(
        Secrets,
        key,
        {
          type: 'merge',
          body: {
            metadata: {
              uid: existing.metadata.uid,
              // The list is replaced whole: only on top of the version it was computed from.
              ...(owners !== undefined
                ? { resourceVersion: existing.metadata.resourceVersion, ownerReferences: owners }
                : {}),
            },
            ...(Object.keys(add).length ? { data: add } : {}),
            ...(Object.keys(addString).length ? { stringData: addString } : {}),
          },
        },
        { signal: this.signal },
      );
      const related = withTypeMeta(Secrets, existing);
      // Key names only: never a value.
      const added = keys.filter((k) => !DERIVED.has(k) || !existing.data?.[k]);
      const refreshed = keys.filter((k) => DERIVED.has(k) && existing.data?.[k]);
      if (added.length > 0)
        this.normal(
          'Updated',
          'Update',
          `Added missing keys to Secret ${name}: ${added.join(', ')}`,
          related,
        );
      if (refreshed.length > 0)
        this.normal(
          'CredentialsChanged',
          'Update',
          `A password changed in Secret ${name}: updated ${refreshed.join(', ')}; the primary applies it`,
          related,
        );
      if (owners !== undefined) {
        this.normal(
          'Updated',
          'Update',
          this.spec.spec.deletionPolicy === 'Delete'
            ? `Secret ${name} is now controlled by the Database: deletionPolicy Delete deletes it with the data`
            : `Secret ${name} is no longer owned by the Database: deletionPolicy Retain keeps it with the data`,
          related,
        );
      }
    });
  }

  /** The SecretStore of the TLS step: ownership checked, created or merge-patched (RBAC: no update). */
  secretStore(): SecretStore {
    return {
      live: async (name) => {
        const cached = await this.deps.reader.get(Secrets, { namespace: this.ns, name });
        // The cache hides unlabelled Secrets: the API decides whether there is one before a create.
        const live = cached ? withTypeMeta(Secrets, cached) : await this.fresh(Secrets, name);
        if (live) checkOwnership('Secret', live, this.db);
        return live;
      },
      put: (desired, existing, ownership) => this.putSecret(desired, existing, ownership),
      normal: (reason, note, related) => this.normal(reason, 'Update', note, related),
      warning: (reason, note, related) => this.warning(reason, 'Update', note, related),
    };
  }

  /** Creates a Secret, or patches the keys whose value differs and the ownerReferences. Key names only in events. */
  async putSecret(
    desired: Secret,
    existing: Secret | undefined,
    ownership: SecretOwnership,
  ): Promise<string[]> {
    const name = desired.metadata.name ?? '';
    const controlled = ownership === 'controller' || this.spec.spec.deletionPolicy === 'Delete';
    if (!existing) {
      const created = await this.client.create(Secrets, controlled ? this.own(desired) : desired, {
        signal: this.signal,
      });
      this.normal('Created', 'Create', `Created Secret ${name}`, withTypeMeta(Secrets, created));
      return Object.keys(desired.data ?? {});
    }
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(desired.data ?? {})) if (existing.data?.[k] !== v) data[k] = v;
    const owners = this.secretOwners(existing, controlled);
    const keys = Object.keys(data).sort();
    if (keys.length === 0 && owners === undefined) return [];
    await this.client.patch(
      Secrets,
      { namespace: this.ns, name },
      {
        type: 'merge',
        body: {
          // On top of the version the decision was made on: a concurrent change is a conflict (retried).
          metadata: {
            uid: existing.metadata.uid,
            resourceVersion: existing.metadata.resourceVersion,
            ...(owners !== undefined ? { ownerReferences: owners } : {}),
          },
          ...(keys.length ? { data } : {}),
        },
      },
      { signal: this.signal },
    );
    if (keys.length > 0)
      this.normal(
        'Updated',
        'Update',
        `Updated Secret ${name}: ${keys.join(', ')}`,
        withTypeMeta(Secrets, existing),
      );
    return keys;
  }

  /** postgres: the CA, the server certificate (tls/step.ts). */
  async tls(): Promise<void> {
    if (!engineFor(this.spec.spec.engine).tls) return;
    const name = childNames(this.spec).serverSecret;
    this.tlsState = await this.step('Secret', name, () =>
      ensureTls(this.secretStore(), this.spec, this.deps.now?.() ?? new Date()),
    );
  }

  /** postgres: `<name>-app`, once the credentials and the CA are known. */
  async appSecret(): Promise<void> {
    if (!this.tlsState || !this.credentials) return;
    const { credentials, tlsState } = this;
    await this.step('Secret', childNames(this.spec).appSecret, () =>
      ensureAppSecret(this.secretStore(), this.spec, credentials, tlsState.caCertPem),
    );
  }

  /**
   * The cluster record (designated primary, system identifier) from the recorded status and the pods'
   * reports: it goes into the ConfigMap the pods read, the role labels and the status.
   */
  async observeCluster(): Promise<void> {
    const engine = engineFor(this.spec.spec.engine);
    if (!engine.observe) return;
    this.pods = await this.deps.reader.list(Pods, {
      namespace: this.ns,
      labelSelector: selectorString(this.spec),
    });
    this.cluster = engine.observe(this.spec, this.db.status, this.pods);
    const exec = this.deps.exec;
    if (!engine.failover || !exec || this.spec.spec.replicas < 2) return;
    const outcome = await this.step('Pod', this.db.metadata.name ?? '', async () =>
      runFailover({
        client: this.client,
        exec,
        db: this.db,
        spec: this.spec,
        pods: this.pods,
        configData: await liveConfigData(this.deps.reader, this.db),
        now: this.deps.clock ?? Date.now,
        signal: this.signal,
        log: this.log,
        normal: (reason, action, note) => this.normal(reason, action, note),
        warning: (reason, action, note) => this.warning(reason, action, note),
        metrics: this.deps.failoverMetrics,
      }),
    );
    this.db = outcome.db;
    this.failoverRequeueMs = outcome.requeueMs;
    this.cluster = engine.observe(this.spec, this.db.status, this.pods);
    if (outcome.fenced) this.cluster.record.fenced = true;
  }

  async config(): Promise<string> {
    const desired = configMap(this.spec, this.cluster?.record);
    await this.ensure(ConfigMaps, desired);
    return configHash(desired);
  }

  async services(): Promise<void> {
    const ro = readOnlyService(this.spec);
    await allInOrder([
      this.ensure(Services, headlessService(this.spec)),
      this.ensure(Services, readWriteService(this.spec)),
      ro ? this.ensure(Services, ro) : this.remove(Services, `${this.db.metadata.name}-ro`),
    ]);
  }

  async statefulSetStep(hash: string): Promise<void> {
    const desired = this.own(statefulSet(this.spec, { configHash: hash }));
    const name = desired.metadata.name ?? '';
    const imageProblem = engineFor(this.spec.spec.engine).imageProblem?.(this.spec);
    if (imageProblem) {
      await this.step('StatefulSet', name, () => Promise.reject(new ImageVersionError(imageProblem)));
    }
    const live = await this.deps.reader.get(StatefulSets, { namespace: this.ns, name });
    if (live && isBeingDeleted(live)) {
      // Being deleted (orphan deletion while recreating it): it is recreated once it is gone.
      this.recreating = true;
      this.sts = live;
      return;
    }
    if (!live) {
      const result = await this.ensure(StatefulSets, desired);
      this.sts = result.object;
      return;
    }
    // volumeClaimTemplates are immutable: compare and update everything else.
    const grown = grownTemplates(live, desired);
    if (desired.spec && live.spec) {
      desired.spec.volumeClaimTemplates = structuredClone(live.spec.volumeClaimTemplates);
      // Immutable too: a StatefulSet created OrderedReady by an earlier operator version keeps it.
      if (live.spec.podManagementPolicy) desired.spec.podManagementPolicy = live.spec.podManagementPolicy;
    }
    const fromReplicas = live.spec?.replicas ?? 1;
    const toReplicas = desired.spec?.replicas ?? 1;
    const fromImage = mainImage(live);
    const toImage = mainImage(desired);
    const result = await this.ensure(StatefulSets, desired);
    this.sts = result.object;
    if (result.operation === 'updated') {
      const sts = withTypeMeta(StatefulSets, result.object);
      if (fromReplicas !== toReplicas) {
        this.normal(
          'Scaled',
          'Scale',
          `Scaled StatefulSet ${name} from ${fromReplicas} to ${toReplicas} replicas`,
          sts,
        );
      }
      if (fromImage !== toImage) {
        this.normal(
          'VersionChanged',
          'Update',
          `Rolling out ${toImage} (was ${fromImage ?? 'unknown'})`,
          sts,
        );
      }
    }
    if (grown.length > 0) await this.expandStorage(name, true);
  }

  /** Patches the claims to spec.storage; `recreate`: then recreate the StatefulSet (orphan deletion). */
  async expandStorage(stsName: string, recreate: boolean): Promise<void> {
    const claims = await this.claims(stsName);
    this.storage = await this.step('PersistentVolumeClaim', `data-${stsName}`, () =>
      expandClaims(this.client, claims, this.storageSize, this.signal),
    );
    const { expanded, failed } = this.storage;
    if (expanded.length > 0) {
      this.normal('StorageExpanding', 'Expand', `Expanding ${expanded.join(', ')} to ${this.storageSize}`);
    }
    if (failed.length > 0) {
      this.warning(
        'StorageExpansionFailed',
        'Expand',
        `Cannot expand ${failed.map((f) => f.claim).join(', ')} to ${this.storageSize}: ${failed[0]?.message ?? ''}`,
      );
      return;
    }
    const live = this.sts;
    if (!recreate || !live?.metadata.uid) return;
    // The template still asks for the old size: recreate the StatefulSet so new pods get the new size.
    // Orphan deletion keeps the pods and the PVCs; the new StatefulSet adopts them.
    await this.step('StatefulSet', stsName, async () => {
      try {
        await this.client.delete(
          StatefulSets,
          { namespace: this.ns, name: stsName },
          {
            propagationPolicy: 'Orphan',
            preconditions: { uid: live.metadata.uid ?? '' },
            signal: this.signal,
          },
        );
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    });
    this.recreating = true;
    this.normal(
      'StatefulSetRecreating',
      'Recreate',
      `Recreating StatefulSet ${stsName} with ${this.storageSize} volumes (pods and volumes are kept)`,
      withTypeMeta(StatefulSets, live),
    );
  }

  async claims(stsName: string): Promise<PersistentVolumeClaim[]> {
    const pvcs = await this.deps.reader.list(PersistentVolumeClaims, {
      namespace: this.ns,
      labelSelector: selectorString(this.spec),
    });
    const templates = statefulSet(this.spec, { configHash: '' }).spec?.volumeClaimTemplates ?? [];
    return templates.flatMap((t) => claimsOf(pvcs, t.metadata?.name ?? 'data', stsName));
  }

  async pdb(): Promise<void> {
    const desired = podDisruptionBudget(this.spec);
    if (desired) await this.ensure(PodDisruptionBudgets, desired);
    else await this.remove(PodDisruptionBudgets, this.db.metadata.name ?? '');
    const primary = primaryDisruptionBudget(this.spec);
    if (primary) await this.ensure(PodDisruptionBudgets, primary);
    else await this.remove(PodDisruptionBudgets, `${this.db.metadata.name ?? ''}-primary`);
  }

  /**
   * After a step failed: the StatefulSet and pods as they are (reads only), so the status keeps telling
   * what runs. Best effort.
   */
  async observe(stsName: string): Promise<void> {
    try {
      if (!this.sts) {
        const live = await this.deps.reader.get(StatefulSets, { namespace: this.ns, name: stsName });
        if (live && isControlledBy(live, this.db)) this.sts = live;
      }
      if (this.sts && this.pods.length === 0) {
        this.pods = await this.deps.reader.list(Pods, {
          namespace: this.ns,
          labelSelector: selectorString(this.spec),
        });
      }
    } catch {
      // The status then shows less; the failure is what it reports.
    }
  }

  /** postgres: deletes the next pod on an old revision, replicas first, the primary last (rollout.ts). */
  async rollout(): Promise<void> {
    if (!engineFor(this.spec.spec.engine).operatorRollout || this.recreating) return;
    const primary = this.cluster?.record.primary ?? initialPrimaryPod(this.spec);
    // Engines that fail over move the primary by a switchover (the procedure the annotation starts).
    const engine = engineFor(this.spec.spec.engine);
    const switchover = Boolean(engine.failover && this.deps.exec && this.spec.spec.replicas >= 2);
    const next = nextRoll(this.sts, this.pods, primary, { switchover });
    if (next.action === 'wait') this.log?.debug({ reason: next.reason }, 'rollout waits');
    if (next.action === 'switchover') return this.rolloutSwitchover(next.from, next.to, next.revision);
    if (next.action !== 'delete') return;
    const deleted = await this.step('Pod', next.pod, async () => {
      // The cache may not show a deletion this process made a moment ago: the API's copy decides.
      const live = await this.fresh(Pods, next.pod);
      const revision = live?.metadata.labels?.[REVISION_LABEL];
      if (!live || live.metadata.deletionTimestamp || revision === next.revision) return false;
      try {
        await this.client.delete(
          Pods,
          { namespace: this.ns, name: next.pod },
          { signal: this.signal, preconditions: { uid: live.metadata.uid } },
        );
        return true;
      } catch (err) {
        if (err instanceof NotFoundError || err instanceof ConflictError) return false;
        throw err;
      }
    });
    if (!deleted) return;
    this.normal(
      'RollingPod',
      'Delete',
      `Restarting ${next.pod} (${next.role}) on revision ${next.revision}: replicas first, the primary last`,
    );
  }

  /** The primary's turn in a rollout: a switchover to an updated replica (once; the procedure runs it). */
  async rolloutSwitchover(from: string, to: string, revision: string): Promise<void> {
    if (this.db.status?.failover || this.cluster?.record.fenced) return;
    if (this.db.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO] !== undefined) return;
    const asked = await this.step('Database', this.db.metadata.name ?? '', async () => {
      await this.client.patch(
        Databases.resource,
        { namespace: this.ns, name: this.db.metadata.name ?? '' },
        { type: 'merge', body: { metadata: { annotations: { [ANNOTATION_SWITCHOVER_TO]: to } } } },
        { signal: this.signal },
      );
      return true;
    });
    if (!asked) return;
    this.normal(
      'RollingSwitchover',
      'Switchover',
      `Switching over from ${from} to ${to} (on revision ${revision}) before ${from} restarts on it: replicas first, the primary last`,
    );
  }

  async roles(stsName: string): Promise<void> {
    this.pods = await this.deps.reader.list(Pods, {
      namespace: this.ns,
      labelSelector: selectorString(this.spec),
    });
    const changes = await this.step('Pod', stsName, () =>
      syncRoleLabels(
        this.client,
        this.ns,
        stsName,
        this.pods,
        this.signal,
        this.cluster?.record.fenced ? null : this.cluster?.record.primary,
      ),
    );
    if (changes.length > 0) {
      const byPod = new Map(changes.map((c) => [c.pod, c.to]));
      // Reflect the labels we just set (the cache catches up with the watch event).
      this.pods = this.pods.map((p) => {
        const role = byPod.get(p.metadata.name ?? '');
        if (!role) return p;
        const copy = structuredClone(p) as Pod;
        const labels = { ...(copy.metadata.labels ?? {}) };
        if (role === 'none') delete labels[ROLE_LABEL];
        else labels[ROLE_LABEL] = role;
        copy.metadata.labels = labels;
        return copy;
      });
      this.normal(
        'RoleAssigned',
        'Label',
        changes.map((c) => `${c.pod} is ${c.to}${c.from ? ` (was ${c.from})` : ''}`).join(', '),
      );
    }
  }
}

/** Keeps the last status this process wrote, so a lagging cache does not cause a second identical write. */
interface Written {
  resourceVersion: string;
  status: DatabaseStatus | undefined;
}

function newer(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

/** Builds the reconciler for the controller. */
export function databaseReconciler(deps: ReconcilerDeps): Reconciler<Database> {
  const written = new Map<string, Written>();
  return (req, ctx) => reconcileDatabase(deps, req, ctx, written);
}

/** Reconciles one Database. Exported for unit tests (with a FakeClient and clientReader). */
export async function reconcileDatabase(
  deps: ReconcilerDeps,
  req: ObjectKey,
  ctx: Pick<ReconcileContext, 'signal'> & { log?: Logger },
  written: Map<string, Written> = new Map(),
): Promise<Result> {
  const key = `${req.namespace ?? ''}/${req.name}`;
  const found = await deps.reader.get(Databases.resource, req);
  if (!found) {
    written.delete(key);
    await deps.replication?.forget(req.namespace ?? '', req.name);
    return;
  }
  let db = withTypeMeta(Databases.resource, structuredClone(found) as Database);
  const memo = written.get(key);
  if (memo && newer(memo.resourceVersion, db.metadata.resourceVersion)) {
    db = { ...db, status: structuredClone(memo.status) } as Database;
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
      const claims = await run.claims(stsName);
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
    await run.observeCluster();
    const [, , hash] = await allInOrder([
      run.secret(),
      run.tls(),
      run.config(),
      run.services(),
      run.pdb(),
    ] as const);
    await run.appSecret();
    await run.statefulSetStep(hash);
    if (!run.recreating && run.storage.expanded.length === 0 && run.storage.failed.length === 0) {
      // Claims created from an older (smaller) template, or expansion still in progress.
      await run.expandStorage(stsName, false);
    }
    await run.roles(stsName);
    await run.rollout();
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
  if (failure || retry !== undefined) await run.observe(stsName);
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
  if (rv && (!seen || newer(rv, seen.resourceVersion)))
    written.set(key, { resourceVersion: rv, status: run.db.status });
  if (failure) throw new TerminalError(failure.message);
  if (retry !== undefined) throw retry;
  // The StatefulSet is being deleted (orphan) to be recreated: its deletion event wakes us, but check
  // again in a while in case the garbage collector is slow.
  if (run.recreating) return requeueAfter(5_000);
  // The server certificate's renewal, when it falls before the next periodic resync could come.
  const renewIn =
    (run.tlsState?.renewAt?.getTime() ?? Number.POSITIVE_INFINITY) - (deps.now?.() ?? new Date()).getTime();
  const renewWait = Math.max(renewIn, 1_000);
  // A failover in progress looks again soon (and never later than a due renewal).
  if (run.failoverRequeueMs !== undefined) {
    return requeueAfter(Math.min(Math.max(200, run.failoverRequeueMs), renewWait));
  }
  if (renewIn < RENEWAL_LOOKAHEAD_MS) return requeueAfter(Math.min(renewWait, polled.nextMs ?? renewWait));
  // The next replication poll.
  if (polled.nextMs !== undefined) return requeueAfter(Math.max(1_000, polled.nextMs));
  return;
}

/** A reconcile returns a requeue for a server certificate renewal due within this time. */
const RENEWAL_LOOKAHEAD_MS = 24 * 60 * 60 * 1000;

/** A Secret's keys, plain (data is base64; stringData plain). */
function decodeAll(secret: Pick<Secret, 'data' | 'stringData'>): Record<string, string> {
  const out: Record<string, string> = { ...(secret.stringData ?? {}) };
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
  return out;
}

/** The config hash the reconcile puts on the pod template (the builders' configHash). */
export { configHash };

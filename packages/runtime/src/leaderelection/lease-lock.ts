/**
 * The lock leader election runs on: a coordination.k8s.io/v1 Lease, like client-go's
 * resourcelock.LeaseLock. The lock only reads and writes the record; all timing decisions are the
 * elector's (see leader-elector.ts).
 *
 * Writes use optimistic concurrency: `update` sends the resourceVersion of the Lease last read or
 * written through this lock, so a concurrent writer makes it fail with a ConflictError.
 */
import { Leases } from '../api/builtin.ts';
import type { KubeObject } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { isNotFound } from '../client/errors.ts';
import type { Client } from '../client/types.ts';

/** What a lock stores: client-go's resourcelock.LeaderElectionRecord. Times are epoch milliseconds. */
export interface LeaderElectionRecord {
  /** '' when nobody holds the lock (released). */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime?: number;
  renewTime?: number;
  leaseTransitions: number;
}

/** A lock leader election can run on (client-go's resourcelock.Interface). */
export interface ResourceLock {
  /** The identity this candidate writes as holderIdentity. */
  readonly identity: string;
  /** e.g. "default/my-operator" (for logs and metrics). */
  describe(): string;
  /** The current record, or `undefined` if the lock object does not exist. Throws on other errors. */
  get(signal?: AbortSignal): Promise<LeaderElectionRecord | undefined>;
  /** Creates the lock object with `record` (AlreadyExistsError if someone else was faster). */
  create(record: LeaderElectionRecord, signal?: AbortSignal): Promise<void>;
  /** Replaces the record, conditional on the last version read or written (ConflictError if stale). */
  update(record: LeaderElectionRecord, signal?: AbortSignal): Promise<void>;
}

/** The Lease as it is on the wire (MicroTime fields are RFC 3339 strings). */
export interface LeaseObject extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
    preferredHolder?: string;
    strategy?: string;
  };
}

/** Leases, typed with the wire form of the spec. */
export const LeaseResource = Leases as unknown as Resource<LeaseObject>;

export interface LeaseLockOptions {
  client: Client;
  namespace: string;
  name: string;
  identity: string;
  /** Labels set on the Lease when this lock creates it. */
  labels?: Record<string, string>;
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
export function toMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

function parseTime(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The record a Lease spec holds (client-go's LeaseSpecToLeaderElectionRecord). */
export function recordFromLease(lease: LeaseObject): LeaderElectionRecord {
  const spec = lease.spec ?? {};
  const record: LeaderElectionRecord = {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
  const acquireTime = parseTime(spec.acquireTime);
  const renewTime = parseTime(spec.renewTime);
  if (acquireTime !== undefined) record.acquireTime = acquireTime;
  if (renewTime !== undefined) record.renewTime = renewTime;
  return record;
}

/** The Lease spec for a record (client-go's LeaderElectionRecordToLeaseSpec). */
export function leaseSpecFromRecord(record: LeaderElectionRecord): NonNullable<LeaseObject['spec']> {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    leaseTransitions: record.leaseTransitions,
    ...(record.acquireTime !== undefined ? { acquireTime: toMicroTime(record.acquireTime) } : {}),
    ...(record.renewTime !== undefined ? { renewTime: toMicroTime(record.renewTime) } : {}),
  };
}

export class LeaseLock implements ResourceLock {
  readonly identity: string;
  readonly namespace: string;
  readonly name: string;
  readonly #client: Client;
  readonly #labels: Record<string, string> | undefined;
  /** The Lease as last read or written: the base (and resourceVersion) of the next update. */
  #lease: LeaseObject | undefined;

  constructor(opts: LeaseLockOptions) {
    if (!opts.name) throw new TypeError('LeaseLock: name is required');
    if (!opts.namespace) throw new TypeError('LeaseLock: namespace is required');
    if (!opts.identity) throw new TypeError('LeaseLock: identity is required');
    this.#client = opts.client;
    this.namespace = opts.namespace;
    this.name = opts.name;
    this.identity = opts.identity;
    this.#labels = opts.labels;
  }

  describe(): string {
    return `${this.namespace}/${this.name}`;
  }

  async get(signal?: AbortSignal): Promise<LeaderElectionRecord | undefined> {
    try {
      this.#lease = await this.#client.get(
        LeaseResource,
        { namespace: this.namespace, name: this.name },
        signal ? { signal } : {},
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    return recordFromLease(this.#lease);
  }

  async create(record: LeaderElectionRecord, signal?: AbortSignal): Promise<void> {
    this.#lease = await this.#client.create(
      LeaseResource,
      {
        apiVersion: LeaseResource.apiVersion,
        kind: LeaseResource.kind,
        metadata: {
          namespace: this.namespace,
          name: this.name,
          ...(this.#labels ? { labels: { ...this.#labels } } : {}),
        },
        spec: leaseSpecFromRecord(record),
      },
      signal ? { signal } : {},
    );
  }

  async update(record: LeaderElectionRecord, signal?: AbortSignal): Promise<void> {
    const current = this.#lease;
    if (!current) throw new Error(`lease ${this.describe()} not initialized: call get or create first`);
    this.#lease = await this.#client.update(
      LeaseResource,
      { ...current, spec: { ...current.spec, ...leaseSpecFromRecord(record) } },
      signal ? { signal } : {},
    );
  }
}

/**
 * The primary Lease's I/O for the operator (the decisions are in lease.ts): read it fresh from the API
 * (never the cache: the sidecar renews it every 2 s, the operator does not watch it), remember when it
 * last changed by the operator's monotonic clock, and write its holder with the resourceVersion it read
 * (a renewal the operator has not seen makes the write fail with a conflict: it reads again).
 */
import { type Client, ConflictError, type Lease, Leases, NotFoundError, withTypeMeta } from '@opkit/runtime';
import type { Database } from '../../../api/v1/database.ts';
import type { LeaseMemory } from '../deps.ts';
import { primaryLeaseSeconds } from '../desired/defaults.ts';
import { childNames } from '../desired/names.ts';
import { checkOwnership } from '../ownership.ts';
import { afterOwnWrite, type LeaseObservation, leaseWithHolder, observeLease } from './lease.ts';

const WRITE_ATTEMPTS = 3;

export interface LeaseView {
  lease: Lease | undefined;
  observation: LeaseObservation | undefined;
  /** The operator's monotonic clock when it was read, ms. */
  now: number;
  /** spec.primaryLeaseSeconds in ms. */
  leaseMs: number;
}

/** Reads and writes one Database's primary Lease. */
export class PrimaryLeaseAccess {
  readonly client: Client;
  readonly db: Database;
  readonly memory: LeaseMemory;
  readonly signal: AbortSignal | undefined;
  readonly key: string;
  readonly name: string;
  readonly ns: string;

  constructor(client: Client, db: Database, memory: LeaseMemory, signal?: AbortSignal) {
    this.client = client;
    this.db = db;
    this.memory = memory;
    this.signal = signal;
    this.ns = db.metadata.namespace ?? 'default';
    this.name = childNames(db).lease;
    this.key = `${this.ns}/${this.name}`;
  }

  get leaseSeconds(): number {
    return primaryLeaseSeconds(this.db);
  }

  async get(): Promise<Lease | undefined> {
    try {
      return withTypeMeta(
        Leases,
        await this.client.get(Leases, { namespace: this.ns, name: this.name }, { signal: this.signal }),
      );
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** The Lease now, and since when (the operator's clock) it has not changed. */
  async read(): Promise<LeaseView> {
    const lease = await this.get();
    const now = this.memory.monotonic();
    const observation = observeLease(this.memory.observations.get(this.key), lease, now);
    if (observation) this.memory.observations.set(this.key, observation);
    else this.memory.observations.delete(this.key);
    return { lease, observation, now, leaseMs: this.leaseSeconds * 1000 };
  }

  /**
   * Names `holder` ('' while fencing) on the Lease, when it does not already; false when there is no
   * Lease (the reconcile's step creates it).
   */
  async setHolder(holder: string, guarded = true): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const { lease } = await this.read();
      if (!lease) return false;
      // Never another's Lease of that name (throws a terminal ChildError naming it).
      checkOwnership('Lease', lease, this.db);
      const next = leaseWithHolder(lease, holder, this.leaseSeconds, guarded);
      if (!next) return true;
      try {
        const written = await this.client.update(Leases, next, { signal: this.signal });
        const now = this.memory.monotonic();
        const observation = afterOwnWrite(this.memory.observations.get(this.key), written, now);
        if (observation) this.memory.observations.set(this.key, observation);
        return true;
      } catch (err) {
        if (!(err instanceof ConflictError) || attempt >= WRITE_ATTEMPTS) throw err;
      }
    }
  }
}

/** A memory for one process (controller.ts makes one; tests may pass theirs). */
export function newLeaseMemory(monotonic: () => number = () => performance.now()): LeaseMemory {
  return { observations: new Map(), monotonic };
}

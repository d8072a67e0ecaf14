/** What the Database reconcile needs from outside: where it reads, where it records events, its clients. */

import {
  type Client,
  type KubeObject,
  NotFoundError,
  type Now,
  type ObjectKey,
  type PodExecutor,
  type Resource,
} from '@opkit/runtime';
import { LABEL_MANAGED_BY, MANAGED_BY } from '../../api/v1/database.ts';
import type { LeaseObservation } from './failover/lease.ts';
import type { FailoverMetrics } from './failover/metrics.ts';
import type { NodeHeartbeatView } from './failover/node-heartbeat-io.ts';
import type { ReplicationPoller } from './replication-poll.ts';

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
  /**
   * postgres: what the operator saw of each Database's primary Lease, and its monotonic clock (ms) to
   * time it (failover/lease.ts). Without them each reconcile starts with no observation (it waits the
   * full lease before counting on it: safe).
   */
  leases?: LeaseMemory;
  /**
   * postgres: which nodes' kubelets stopped renewing their node Lease (failover/node-heartbeat-io.ts, fed
   * by the controller's watch of kube-node-lease). Without it no node counts as silent.
   */
  heartbeats?: NodeHeartbeatView;
}

/** The operator's memory of the primary Leases (one per process; an operator restart starts empty). */
export interface LeaseMemory {
  observations: Map<string, LeaseObservation>;
  /** A monotonic clock in ms (performance.now), never the wall clock. */
  monotonic: () => number;
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

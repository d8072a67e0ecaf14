/**
 * The manager's leader election wiring: its settings resolved from the options, and the LeaderElector
 * on a LeaseLock that runs them.
 */
import type { Logger } from 'pino';
import type { Client } from '../client/types.ts';
import { LeaderElector } from '../leaderelection/leader-elector.ts';
import { LeaseLock } from '../leaderelection/lease-lock.ts';
import type { MetricsRegistry } from '../metrics/registry.ts';
import type { Clock } from '../util/clock.ts';
import type { ManagerInit } from './options.ts';

/** Resolved leader election settings. */
export interface LeaderElectionConfig {
  id: string;
  /** The manager's clock when one was given (tests); otherwise the elector's monotonic clock. */
  clock?: Clock;
  namespace: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  releaseOnCancel: boolean;
  client: Client;
}

/** The settings of `init.leaderElection`, or undefined when leader election is off. */
export function resolveLeaderElection(init: ManagerInit, client: Client): LeaderElectionConfig | undefined {
  const le = init.leaderElection;
  if (!le || le.enabled === false) return undefined;
  if (!le.id) throw new TypeError('leaderElection.id (the Lease name) is required');
  return {
    id: le.id,
    namespace: le.namespace || init.namespace || init.defaultNamespace || 'default',
    releaseOnCancel: le.releaseOnCancel ?? true,
    client: le.client ?? client,
    ...(init.clock ? { clock: init.clock } : {}),
    ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
    ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
    ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
  };
}

export interface ElectorHooks {
  /** This replica's identity (the Lease holderIdentity). */
  identity: string;
  logger: Logger;
  /** The manager's own log. */
  log: Logger;
  metrics: MetricsRegistry;
  /** Became leader; `leading` aborts when leadership ends. */
  onStartedLeading: (leading: AbortSignal) => void;
}

/** The manager's elector: it never releases the Lease itself (the manager does, after its runnables stopped). */
export function createManagerElector(le: LeaderElectionConfig, hooks: ElectorHooks): LeaderElector {
  return new LeaderElector({
    lock: new LeaseLock({
      client: le.client,
      namespace: le.namespace,
      name: le.id,
      identity: hooks.identity,
    }),
    name: le.id,
    ...(le.leaseDurationMs !== undefined ? { leaseDurationMs: le.leaseDurationMs } : {}),
    ...(le.renewDeadlineMs !== undefined ? { renewDeadlineMs: le.renewDeadlineMs } : {}),
    ...(le.retryPeriodMs !== undefined ? { retryPeriodMs: le.retryPeriodMs } : {}),
    // The manager releases the Lease itself, after the runnables have stopped.
    releaseOnCancel: false,
    ...(le.clock ? { clock: le.clock } : {}),
    logger: hooks.logger,
    onLeaderStatus: (name, leading) => hooks.metrics.setLeader(name, leading),
    onStartedLeading: hooks.onStartedLeading,
    onNewLeader: (identity) => {
      if (identity !== hooks.identity) hooks.log.info({ leader: identity }, 'another replica leads');
    },
  });
}

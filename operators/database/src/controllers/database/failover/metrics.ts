/**
 * The failover series on the operator's /metrics (the manager's registry):
 *   database_failovers_total{namespace,database,reason}   counter: failovers started
 *   database_switchovers_total{namespace,database}        counter: switchovers started
 *   database_fencing_total{namespace,database}            counter: former primaries fenced (confirmed)
 *   database_replication_lag_bytes{namespace,database,pod} gauge: WAL the primary wrote that each streaming
 *                                                           replica has not replayed yet (the replication
 *                                                           poll, replication-poll.ts); during a failover,
 *                                                           how far each candidate is behind the most
 *                                                           advanced one
 *   database_replication_lag_seconds{namespace,database,pod} gauge: each streaming replica's replay_lag
 */
import { Counter, Gauge, type Registry } from 'prom-client';

type DbLabels = 'namespace' | 'database';

export class FailoverMetrics {
  readonly failovers: Counter<DbLabels | 'reason'>;
  readonly switchovers: Counter<DbLabels>;
  readonly fencing: Counter<DbLabels>;
  readonly lag: Gauge<DbLabels | 'pod'>;
  readonly lagSeconds: Gauge<DbLabels | 'pod'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.failovers = new Counter({
      name: 'database_failovers_total',
      help: 'Failovers started, by reason (the primary lost).',
      labelNames: ['namespace', 'database', 'reason'],
      registers,
    });
    this.switchovers = new Counter({
      name: 'database_switchovers_total',
      help: 'Planned switchovers started (asked for, or the primary node cordoned).',
      labelNames: ['namespace', 'database'],
      registers,
    });
    this.fencing = new Counter({
      name: 'database_fencing_total',
      help: 'Former primaries fenced (stopped, or confirmed gone) before a promotion.',
      labelNames: ['namespace', 'database'],
      registers,
    });
    this.lag = new Gauge({
      name: 'database_replication_lag_bytes',
      help:
        'Bytes of WAL the primary wrote that a streaming replica has not replayed yet, when last polled ' +
        '(during a failover: behind the most advanced instance).',
      labelNames: ['namespace', 'database', 'pod'],
      registers,
    });
    this.lagSeconds = new Gauge({
      name: 'database_replication_lag_seconds',
      help: "A streaming replica's replay lag (pg_stat_replication replay_lag; 0 once caught up), when last polled.",
      labelNames: ['namespace', 'database', 'pod'],
      registers,
    });
  }
}

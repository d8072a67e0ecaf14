/**
 * The failover series on the operator's /metrics (the manager's registry):
 *   database_failovers_total{namespace,database,reason}   counter: failovers started
 *   database_switchovers_total{namespace,database}        counter: switchovers started
 *   database_fencing_total{namespace,database}            counter: former primaries fenced (confirmed)
 *   database_replication_lag_bytes{namespace,database,pod} gauge: how far each replica's WAL is behind the
 *                                                           most advanced instance, when last queried
 */
import { Counter, Gauge, type Registry } from 'prom-client';

type DbLabels = 'namespace' | 'database';

export class FailoverMetrics {
  readonly failovers: Counter<DbLabels | 'reason'>;
  readonly switchovers: Counter<DbLabels>;
  readonly fencing: Counter<DbLabels>;
  readonly lag: Gauge<DbLabels | 'pod'>;

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
      help: 'Bytes of WAL a replica is behind the primary (or the most advanced instance) when last queried.',
      labelNames: ['namespace', 'database', 'pod'],
      registers,
    });
  }
}

/**
 * The operator's replication poll (postgres, 2+ instances, with pods/exec): at most once per interval
 * (30 s by default) per Database it asks the designated primary, through pods/exec, what
 * pg_stat_replication and its slots say (engines/postgres/replication.ts), and keeps the answer for the
 * reconciles in between: no exec per reconcile. The reconcile puts the answer in status.instances
 * (replication-status.ts) and asks to be woken for the next poll. The per-instance gauges on /metrics:
 *   database_replication_lag_bytes{namespace,database,pod}    WAL not replayed yet, exact, when last polled
 *   database_replication_lag_seconds{namespace,database,pod}  replay_lag, exact, when last polled
 * set for each streaming replica, removed for an instance that does not stream, is gone (scaled down),
 * became the primary, and for every instance of a Database that is deleted.
 * Only a Ready primary that is not fenced is asked, never during a failover. A failed exec (a pod that does
 * not answer) is retried after twice the wait, up to 10 minutes; an answer older than three intervals is
 * dropped (the status then says nothing about streaming and lag, rather than something stale).
 */
import type { Logger, Pod, PodExecutor } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../api/v1/database.ts';
import { maxLagBytes } from './engines/postgres/health.ts';
import { parseReplication, replicationCommand } from './engines/postgres/replication.ts';
import type { ClusterObservation } from './engines/types.ts';
import { SERVER_CONTAINER } from './failover/decide.ts';
import type { FailoverMetrics } from './failover/metrics.ts';
import type { InstanceStatus } from './instances.ts';
import { type PolledReplication, withReplication } from './replication-status.ts';
import { isPodReady } from './status.ts';

export const DEFAULT_REPLICATION_POLL_MS = 30_000;
const EXEC_TIMEOUT_MS = 15_000;
const MAX_BACKOFF_MS = 10 * 60_000;
/** An answer older than this many intervals is dropped. */
const STALE_INTERVALS = 3;

interface Entry {
  polled?: PolledReplication;
  /** When the last exec was tried (ms), and whom it asked. */
  triedAt: number;
  triedPrimary?: string;
  /** Failed execs in a row. */
  failures: number;
}

export interface PollRequest {
  namespace: string;
  name: string;
  /** The designated primary's pod name. */
  primary: string;
  /** The Database's pods (the cache's). */
  pods: readonly Pod[];
  /** spec.replicas. */
  replicas: number;
  /** A failover is in progress or the primary is fenced: nobody is asked. */
  failingOver: boolean;
  signal?: AbortSignal | undefined;
  log?: Logger | undefined;
}

export interface PollAnswer {
  /** The primary's last answer, while fresh. */
  polled?: PolledReplication;
  /** When to reconcile again for the next poll (ms from now); undefined when nobody can be asked now. */
  nextMs?: number;
}

export class ReplicationPoller {
  readonly #exec: PodExecutor;
  readonly #metrics: FailoverMetrics | undefined;
  readonly #intervalMs: number;
  readonly #clock: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(opts: {
    exec: PodExecutor;
    metrics?: FailoverMetrics | undefined;
    intervalMs?: number | undefined;
    clock?: (() => number) | undefined;
  }) {
    this.#exec = opts.exec;
    this.#metrics = opts.metrics;
    this.#intervalMs = opts.intervalMs ?? DEFAULT_REPLICATION_POLL_MS;
    this.#clock = opts.clock ?? Date.now;
  }

  get intervalMs(): number {
    return this.#intervalMs;
  }

  /** The primary's answer for this Database, asking it again when due. */
  async poll(req: PollRequest): Promise<PollAnswer> {
    const key = `${req.namespace}/${req.name}`;
    const now = this.#clock();
    const entry = this.#entries.get(key) ?? { triedAt: Number.NEGATIVE_INFINITY, failures: 0 };
    this.#entries.set(key, entry);
    const pod = req.pods.find((p) => p.metadata.name === req.primary);
    const askable = req.replicas >= 2 && !req.failingOver && pod !== undefined && isPodReady(pod);
    if (!askable) return { ...this.#fresh(entry, req.primary, now) };
    const wait = Math.min(this.#intervalMs * 2 ** entry.failures, MAX_BACKOFF_MS);
    if (entry.triedPrimary === req.primary && now - entry.triedAt < wait) {
      return { ...this.#fresh(entry, req.primary, now), nextMs: entry.triedAt + wait - now };
    }
    if (entry.triedPrimary !== req.primary) entry.failures = 0;
    entry.triedAt = now;
    entry.triedPrimary = req.primary;
    try {
      const r = await this.#exec.exec(
        { namespace: req.namespace, name: req.primary },
        {
          container: SERVER_CONTAINER,
          command: replicationCommand(),
          timeoutMs: EXEC_TIMEOUT_MS,
          ...(req.signal ? { signal: req.signal } : {}),
        },
      );
      const sample = r.exitCode === 0 ? parseReplication(r.stdout) : undefined;
      if (!sample) throw new Error(`exit code ${r.exitCode}: ${r.stderr.trim().slice(0, 200)}`);
      entry.failures = 0;
      entry.polled = { primary: req.primary, at: now, sample };
      await this.#gauges(req, entry.polled);
    } catch (err) {
      if (req.signal?.aborted) throw err;
      entry.failures++;
      req.log?.debug({ err, pod: req.primary }, 'replication poll: the primary did not answer');
    }
    const next = Math.min(this.#intervalMs * 2 ** entry.failures, MAX_BACKOFF_MS);
    return { ...this.#fresh(entry, req.primary, this.#clock()), nextMs: next };
  }

  /** The Database is gone: its memo and its series go. */
  async forget(namespace: string, name: string): Promise<void> {
    this.#entries.delete(`${namespace}/${name}`);
    await this.#removeSeries(namespace, name, new Set());
  }

  #fresh(entry: Entry, primary: string, now: number): { polled?: PolledReplication } {
    const p = entry.polled;
    if (!p || p.primary !== primary || now - p.at >= STALE_INTERVALS * this.#intervalMs) return {};
    return { polled: p };
  }

  async #gauges(req: PollRequest, polled: PolledReplication): Promise<void> {
    const m = this.#metrics;
    if (!m) return;
    const kept = new Set<string>();
    for (let i = 0; i < req.replicas; i++) {
      const pod = `${req.name}-${i}`;
      const s = polled.sample.senders.find((x) => x.name === pod);
      if (pod === polled.primary || s?.state !== 'streaming' || s.lagBytes === undefined) continue;
      const labels = { namespace: req.namespace, database: req.name, pod };
      m.lag.set(labels, s.lagBytes);
      m.lagSeconds.set(labels, s.lagMs / 1000);
      kept.add(pod);
    }
    await this.#removeSeries(req.namespace, req.name, kept);
  }

  async #removeSeries(namespace: string, database: string, keep: ReadonlySet<string>): Promise<void> {
    const m = this.#metrics;
    if (!m) return;
    for (const gauge of [m.lag, m.lagSeconds]) {
      for (const v of (await gauge.get()).values) {
        const l = v.labels;
        if (l.namespace === namespace && l.database === database && !keep.has(String(l.pod))) {
          gauge.remove({ namespace, database, pod: String(l.pod) });
        }
      }
    }
  }
}

/** What a reconcile knows that the poll needs (reconcile.ts' Run). */
export interface PollSubject {
  readonly ns: string;
  readonly db: Database;
  readonly spec: DefaultedDatabase;
  readonly cluster: ClusterObservation | undefined;
  readonly pods: readonly Pod[];
  readonly signal: AbortSignal | undefined;
  readonly log: Logger | undefined;
}

/**
 * The reconcile's side of the poll: the primary's answer (asked when due) as a function that puts it in
 * status.instances, and when to reconcile again for the next poll.
 */
export async function pollReplication(
  poller: ReplicationPoller | undefined,
  run: PollSubject,
  name: string,
): Promise<{ apply(instances: InstanceStatus[]): InstanceStatus[]; nextMs?: number }> {
  const cluster = run.cluster;
  if (!poller || !cluster) return { apply: (i) => i };
  const primary = cluster.record.primary;
  const answer = await poller.poll({
    namespace: run.ns,
    name,
    primary,
    pods: run.pods,
    replicas: run.spec.spec.replicas,
    failingOver: cluster.record.fenced === true || run.db.status?.failover !== undefined,
    signal: run.signal,
    log: run.log,
  });
  return {
    apply: (i) => withReplication(i, answer.polled, primary, maxLagBytes(run.spec)),
    ...(answer.nextMs !== undefined ? { nextMs: answer.nextMs } : {}),
  };
}

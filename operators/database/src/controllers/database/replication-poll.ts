/**
 * The operator's replication poll (postgres, 2+ instances, with pods/exec): at most once per interval
 * (30 s by default) per Database it asks the designated primary, through pods/exec, what
 * pg_stat_replication and its slots say (engines/postgres/replication.ts), and keeps the answer for the
 * reconciles in between: no exec per reconcile. The exec runs in the background: a reconcile never waits
 * for it (a primary whose exec hangs must not hold one of the few workers); an answer that differs from the
 * last one in what the status shows (coarse lag, whole MiB, streaming, timeline, slots) wakes the Database's
 * reconcile, which puts it in status.instances (replication-status.ts) and asks to be woken for the next
 * poll. The per-instance gauges on /metrics:
 *   database_replication_lag_bytes{namespace,database,pod}    WAL not replayed yet, exact, when last polled
 *   database_replication_lag_seconds{namespace,database,pod}  replay_lag, exact, when last polled
 * set for each streaming replica, removed for an instance that does not stream, is gone (scaled down),
 * became the primary, and for every instance of a Database that is deleted.
 * Only a Ready primary that is not fenced is asked, never during a failover. A failed exec (a pod that does
 * not answer) is retried after twice the wait, up to 10 minutes. The last answer is dropped (the status then
 * says nothing about streaming and lag, rather than something stale) once two polls in a row failed, or
 * when it is older than three intervals and an exec timeout (a primary not asked meanwhile); a slow exec in
 * flight does not make it stale (on a loaded node that would rewrite the status for nothing).
 */
import type { Logger, Pod, PodExecutor } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../api/v1/database.ts';
import { MiB } from './desired/quantity.ts';
import { maxLagBytes } from './engines/postgres/health.ts';
import {
  parseReplication,
  type ReplicationSample,
  replicationCommand,
} from './engines/postgres/replication.ts';
import type { ClusterObservation } from './engines/types.ts';
import { SERVER_CONTAINER } from './failover/decide.ts';
import type { FailoverMetrics } from './failover/metrics.ts';
import type { InstanceStatus } from './instances.ts';
import {
  lagBucketBytes,
  lagBucketSeconds,
  type PolledReplication,
  withReplication,
} from './replication-status.ts';
import { isPodReady } from './status.ts';

export const DEFAULT_REPLICATION_POLL_MS = 30_000;
const EXEC_TIMEOUT_MS = 15_000;
const MAX_BACKOFF_MS = 10 * 60_000;
/** An answer older than this many intervals (and an exec's timeout) is dropped. */
const STALE_INTERVALS = 3;
/** An answer is dropped once this many polls in a row failed. */
const STALE_FAILURES = 2;

interface Entry {
  polled?: PolledReplication;
  /** What the status would show of the last answer: a new one wakes the reconcile only when it differs. */
  shown?: string;
  /** When the last exec was started (ms), and whom it asked. */
  triedAt: number;
  triedPrimary?: string;
  /** Failed execs in a row. */
  failures: number;
  /** The exec in flight. */
  inflight?: Promise<void>;
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
  log?: Logger | undefined;
}

export interface PollAnswer {
  /** The primary's last answer, while fresh. */
  polled?: PolledReplication;
  /** When to reconcile again for the next poll (ms from now); undefined when nobody can be asked now. */
  nextMs?: number;
}

/** What the status shows of an answer (plus whole MiB, which the LagOverBound message says). */
function shown(sample: ReplicationSample): string {
  return JSON.stringify([
    sample.inRecovery,
    sample.timeline,
    sample.senders.map((s) => [
      s.name,
      s.state,
      s.lagBytes === undefined ? null : [lagBucketBytes(s.lagBytes), Math.floor(s.lagBytes / MiB)],
      lagBucketSeconds(s.lagMs),
    ]),
    sample.slots,
  ]);
}

export class ReplicationPoller {
  readonly #exec: PodExecutor;
  readonly #metrics: FailoverMetrics | undefined;
  readonly #intervalMs: number;
  readonly #clock: () => number;
  readonly #wake: ((namespace: string, name: string) => void) | undefined;
  readonly #entries = new Map<string, Entry>();

  constructor(opts: {
    exec: PodExecutor;
    metrics?: FailoverMetrics | undefined;
    intervalMs?: number | undefined;
    clock?: (() => number) | undefined;
    /** Reconcile this Database (an answer the status shows differently came in). */
    wake?: ((namespace: string, name: string) => void) | undefined;
  }) {
    this.#exec = opts.exec;
    this.#metrics = opts.metrics;
    this.#intervalMs = opts.intervalMs ?? DEFAULT_REPLICATION_POLL_MS;
    this.#clock = opts.clock ?? Date.now;
    this.#wake = opts.wake;
  }

  get intervalMs(): number {
    return this.#intervalMs;
  }

  /** The primary's last answer for this Database; starts asking it again (in the background) when due. */
  poll(req: PollRequest): PollAnswer {
    const key = `${req.namespace}/${req.name}`;
    const now = this.#clock();
    const entry = this.#entries.get(key) ?? { triedAt: Number.NEGATIVE_INFINITY, failures: 0 };
    this.#entries.set(key, entry);
    const pod = req.pods.find((p) => p.metadata.name === req.primary);
    const askable = req.replicas >= 2 && !req.failingOver && pod !== undefined && isPodReady(pod);
    if (!askable) return this.#fresh(entry, req.primary, now);
    if (entry.triedPrimary !== req.primary) entry.failures = 0;
    const due = entry.triedPrimary !== req.primary || now - entry.triedAt >= this.#wait(entry.failures);
    if (due && !entry.inflight) this.#start(key, entry, req, now);
    return {
      ...this.#fresh(entry, req.primary, now),
      nextMs: Math.max(0, entry.triedAt + this.#wait(entry.failures) - now),
    };
  }

  /** Every exec in flight has ended (tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.#entries.values()].map((e) => e.inflight));
  }

  /** The Database is gone: its memo and its series go. */
  async forget(namespace: string, name: string): Promise<void> {
    this.#entries.delete(`${namespace}/${name}`);
    await this.#removeSeries(namespace, name, new Set());
  }

  #wait(failures: number): number {
    return Math.min(this.#intervalMs * 2 ** failures, MAX_BACKOFF_MS);
  }

  #start(key: string, entry: Entry, req: PollRequest, now: number): void {
    entry.triedAt = now;
    entry.triedPrimary = req.primary;
    const ask = async (): Promise<void> => {
      try {
        const r = await this.#exec.exec(
          { namespace: req.namespace, name: req.primary },
          { container: SERVER_CONTAINER, command: replicationCommand(), timeoutMs: EXEC_TIMEOUT_MS },
        );
        const sample = r.exitCode === 0 ? parseReplication(r.stdout) : undefined;
        if (!sample) throw new Error(`exit code ${r.exitCode}: ${r.stderr.trim().slice(0, 200)}`);
        if (this.#entries.get(key) !== entry) return; // the Database went meanwhile
        entry.failures = 0;
        entry.polled = { primary: req.primary, at: now, sample };
        await this.#gauges(req, entry.polled);
        const view = `${req.primary} ${shown(sample)}`;
        if (view !== entry.shown) {
          entry.shown = view;
          this.#wake?.(req.namespace, req.name);
        }
      } catch (err) {
        entry.failures++;
        req.log?.debug({ err, pod: req.primary }, 'replication poll: the primary did not answer');
      } finally {
        entry.inflight = undefined;
      }
    };
    entry.inflight = ask();
  }

  #fresh(entry: Entry, primary: string, now: number): { polled?: PolledReplication } {
    const p = entry.polled;
    if (!p || p.primary !== primary || entry.failures >= STALE_FAILURES) return {};
    if (now - p.at >= STALE_INTERVALS * this.#intervalMs + EXEC_TIMEOUT_MS) return {};
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
  readonly log: Logger | undefined;
}

/**
 * The reconcile's side of the poll: the primary's answer (asked when due) as a function that puts it in
 * status.instances, and when to reconcile again for the next poll.
 */
export function pollReplication(
  poller: ReplicationPoller | undefined,
  run: PollSubject,
  name: string,
): { apply(instances: InstanceStatus[]): InstanceStatus[]; nextMs?: number } {
  const cluster = run.cluster;
  if (!poller || !cluster) return { apply: (i) => i };
  const primary = cluster.record.primary;
  const answer = poller.poll({
    namespace: run.ns,
    name,
    primary,
    pods: run.pods,
    replicas: run.spec.spec.replicas,
    failingOver: cluster.record.fenced === true || run.db.status?.failover !== undefined,
    log: run.log,
  });
  return {
    apply: (i) => withReplication(i, answer.polled, primary, maxLagBytes(run.spec)),
    ...(answer.nextMs !== undefined ? { nextMs: answer.nextMs } : {}),
  };
}

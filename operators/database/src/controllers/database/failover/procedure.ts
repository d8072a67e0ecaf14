/**
 * The failover procedure, recorded in status.failover before each step so that a restarted operator (or
 * a new leader) resumes it where it was. Each step is idempotent; each phase change is one status write
 * guarded by the resourceVersion the decision was made on (a stale cache never starts a second one).
 *
 *   (start)    decide.ts says the primary is lost (or a switchover is asked for), and a primary that is
 *              only not Ready does not answer as a primary through exec either (a probe that timed out
 *              on a loaded node is no reason to fail over): status.failover =
 *              {phase Fencing, reason, from}, primaryEpoch + 1. The reconcile then hands the pods `none`
 *              as the primary (ConfigMap) and removes the primary's role label (the read-write Service
 *              empties).
 *   Fencing    once the ConfigMap says `none` and no pod carries role=primary: the former primary is
 *              stopped (pods/exec: its designation file says `none`, then `pg_ctl stop -m fast`, which
 *              sends the remaining WAL to the connected standbys). Confirmed when that succeeded, or its
 *              pod is gone, or, its server container not running (the kubelet's answer to the exec, not
 *              the cached status), the same fence succeeded through its sidecar (a server the kubelet
 *              starts again then waits for a designation), or the kubelet says neither container runs
 *              (they start with the ConfigMap's `none`), or, when exec cannot reach it (a dead kubelet;
 *              not even tried on a node whose kubelet is silent, node-heartbeat.ts), its sidecar
 *              acknowledged its fence on the Lease whose holder the start cleared, or that Lease has been
 *              silent for LEASE + MARGIN (lease.ts), or its node has been NotReady for failoverDelay (then it
 *              cannot be reached: the kubelet on that node took it out of the Services, and should it come
 *              back it sees `none` and waits; its liveness fails while it acts as a primary that is not
 *              the designated one). Then each candidate replica is queried (WAL received, replayed,
 *              timeline) and the most advanced is chosen (decide.ts; synchronous mode needs a quorum):
 *              status.targetPrimary = chosen and phase Promoting, in ONE write.
 *   Promoting  `pg_ctl promote -w` on the chosen one (its designation file first names it), then every
 *              reachable pod's designation file names it: phase Rejoining, primaryEpoch + 1, the timeline.
 *              The reconcile hands the pods the new primary and moves the role labels.
 *   Rejoining  once the ConfigMap names the new primary, every other instance that does not stream from
 *              it is restarted (a fast shutdown; the kubelet starts it again and instance.sh follows the
 *              new primary, rewinding or cloning as needed); one that exec cannot reach on a NotReady
 *              node, or on a node whose kubelet is silent, is left to follow when it comes back. Done
 *              when the new primary is Ready: status.lastFailover, Events, status.failover cleared. The
 *              former primary rejoins by itself when it comes back (it may be on a dead node: nothing
 *              waits for it).
 *
 * The start is in start.ts, the fence in fence.ts, the candidates' states in candidates.ts; the
 * decisions themselves (pure) in decide.ts and lease.ts.
 */
import {
  type Client,
  ConfigMaps,
  ConflictError,
  type Logger,
  messageOf,
  type Node,
  Nodes,
  NotFoundError,
  type Pod,
  type PodExecutor,
  patchStatus,
  withTypeMeta,
} from '@opkit/runtime';
import {
  ANNOTATION_SWITCHOVER_TO,
  type Database,
  type DatabaseStatus,
  Databases,
  DEFAULT_FAILOVER_DELAY_SECONDS,
  type DefaultedDatabase,
} from '../../../api/v1/database.ts';
import { CLUSTER_KEYS, childNames } from '../desired/names.ts';
import {
  designateCommand,
  type InstanceState,
  parseInstanceState,
  promoteCommand,
  restartCommand,
  stateCommand,
} from '../engines/postgres/failover.ts';
import { slotName } from '../engines/postgres/instance.ts';
import { isPodReady } from '../status.ts';
import { candidateStates } from './candidates.ts';
import { chooseCandidate, nodeReady, position, SERVER_CONTAINER, serverRunning, timeOf } from './decide.ts';
import { fencedEverywhere, fenceFormerPrimary } from './fence.ts';
import type { LeaseView, PrimaryLeaseAccess } from './lease-io.ts';
import type { FailoverMetrics } from './metrics.ts';
import type { NodeHeartbeatView } from './node-heartbeat-io.ts';
import { maybeStart } from './start.ts';
import { EXEC_TIMEOUT_MS, isoNow, QUERY_TIMEOUT_MS, RETRY_MS, STEP_MS } from './timing.ts';

export type FailoverRecord = NonNullable<DatabaseStatus['failover']>;

/** What the procedure needs from the reconcile. */
export interface FailoverContext {
  client: Client;
  exec: PodExecutor;
  /** The Database as read (its status is the record); replaced by what each status write returns. */
  db: Database;
  spec: DefaultedDatabase;
  /** The Database's pods (from the cache). */
  pods: readonly Pod[];
  /** The live ConfigMap's data (from the cache), to know what the pods were handed. */
  configData: Readonly<Record<string, string>> | undefined;
  now: () => number;
  signal?: AbortSignal | undefined;
  log?: Logger | undefined;
  normal(reason: string, action: string, note: string): void;
  warning(reason: string, action: string, note: string): void;
  metrics?: FailoverMetrics | undefined;
  /** The primary Lease (failover/lease-io.ts); without it the procedure works as before it existed. */
  lease?: PrimaryLeaseAccess | undefined;
  /** The nodes' heartbeats (failover/node-heartbeat-io.ts); without them no node counts as silent. */
  heartbeats?: NodeHeartbeatView | undefined;
}

export interface FailoverOutcome {
  /** The Database after the procedure's status writes. */
  db: Database;
  /** A failover is pending: the pods get `none`, no pod is labelled primary. */
  fenced: boolean;
  /** Look again in this many ms (waiting for failoverDelay, a step to take effect, a retry). */
  requeueMs?: number;
  /** Look at the primary's Lease again in this many ms (whether it expired). */
  leaseRecheckMs?: number;
}

export class Procedure {
  readonly ctx: FailoverContext;
  readonly ns: string;
  readonly name: string;
  readonly headless: string;
  db: Database;

  constructor(ctx: FailoverContext) {
    this.ctx = ctx;
    this.db = ctx.db;
    this.ns = ctx.db.metadata.namespace ?? 'default';
    this.name = ctx.db.metadata.name ?? '';
    this.headless = childNames(ctx.db).headless;
  }

  get status(): DatabaseStatus {
    return (this.db.status ?? {}) as DatabaseStatus;
  }

  get primary(): string {
    return this.status.targetPrimary ?? `${this.name}-0`;
  }

  get epoch(): number {
    return this.status.primaryEpoch ?? 0;
  }

  pod(name: string | undefined): Pod | undefined {
    return this.ctx.pods.find((p) => p.metadata.name === name);
  }

  /** One status write on top of the version read (ConflictError when it changed meanwhile). */
  async write(mutate: (s: DatabaseStatus) => void): Promise<void> {
    const result = await patchStatus(
      this.ctx.client,
      Databases.resource,
      this.db,
      (prev) => {
        const next = structuredClone(prev) as DatabaseStatus;
        mutate(next);
        return next as typeof prev;
      },
      { optimisticLock: true, signal: this.ctx.signal },
    );
    if (result.changed) this.db = withTypeMeta(Databases.resource, result.object as Database);
  }

  async exec(
    pod: string,
    command: readonly string[],
    timeoutMs = EXEC_TIMEOUT_MS,
    container = SERVER_CONTAINER,
  ) {
    return this.ctx.exec.exec(
      { namespace: this.ns, name: pod },
      {
        container,
        command,
        timeoutMs,
        ...(this.ctx.signal ? { signal: this.ctx.signal } : {}),
      },
    );
  }

  async nodes(names: Iterable<string | undefined>): Promise<Map<string, Node>> {
    const out = new Map<string, Node>();
    for (const n of new Set(names)) {
      if (!n) continue;
      try {
        out.set(n, await this.ctx.client.get(Nodes, { name: n }, { signal: this.ctx.signal }));
      } catch (err) {
        // Unknown nodes count as Ready: the pod's own state decides.
        if (!(err instanceof NotFoundError)) this.ctx.log?.debug({ err, node: n }, 'cannot read node');
      }
    }
    return out;
  }

  /** The silent nodes of the Database's pods (memory only: no request). */
  silentNodes(): ReadonlyMap<string, number> {
    return this.ctx.heartbeats?.silent(this.ctx.pods.map((p) => p.spec?.nodeName)) ?? new Map();
  }

  delayMs(): number {
    return (this.ctx.spec.spec.failoverDelay ?? DEFAULT_FAILOVER_DELAY_SECONDS) * 1000;
  }

  /** The procedure's step for this reconcile. */
  async run(): Promise<FailoverOutcome> {
    const f = this.status.failover;
    if (!f) return maybeStart(this);
    switch (f.phase) {
      case 'Fencing':
        return this.fencing(f);
      case 'Promoting':
        return this.promoting(f);
      default:
        return this.rejoining(f);
    }
  }

  done(fenced: boolean, requeueMs?: number): FailoverOutcome {
    return { db: this.db, fenced, ...(requeueMs !== undefined ? { requeueMs } : {}) };
  }

  /** The Lease as read now; undefined when there is no access or the read failed (then it says nothing). */
  async leaseView(): Promise<LeaseView | undefined> {
    try {
      return await this.ctx.lease?.read();
    } catch (err) {
      this.ctx.log?.info({ err: String(err) }, 'reading the primary Lease failed');
      return undefined;
    }
  }

  /**
   * The Lease names nobody: the former primary's sidecar fences it at once if it can read it (and
   * otherwise once it cannot renew). A failure is retried by the reconcile's step, which keeps the holder
   * '' while the pods are handed `none`.
   */
  async clearLeaseHolder(): Promise<void> {
    try {
      await this.ctx.lease?.setHolder('');
    } catch (err) {
      this.ctx.log?.info({ err: String(err) }, 'clearing the primary Lease holder failed; retried');
    }
  }

  async removeAnnotation(): Promise<void> {
    try {
      await this.ctx.client.patch(
        Databases.resource,
        { namespace: this.ns, name: this.name },
        { type: 'merge', body: { metadata: { annotations: { [ANNOTATION_SWITCHOVER_TO]: null } } } },
        { signal: this.ctx.signal },
      );
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  async fencing(f: FailoverRecord): Promise<FailoverOutcome> {
    if (!fencedEverywhere(this)) return this.done(true, STEP_MS);
    const fence = await fenceFormerPrimary(this, f.from);
    if (!fence.fenced) {
      await this.note(f, fence.why);
      return this.done(true, fence.retryMs ?? RETRY_MS);
    }
    this.ctx.metrics?.fencing.inc({ namespace: this.ns, database: this.name });
    const { states } = await candidateStates(this, f.from);
    const choice = chooseCandidate(states, {
      replicas: this.ctx.spec.spec.replicas,
      synchronousReplicas: this.ctx.spec.spec.synchronousReplicas ?? 0,
      systemIdentifier: this.status.systemIdentifier,
      target: f.to,
    });
    let best = 0n;
    for (const s of states) if (position(s) > best) best = position(s);
    for (const s of states) {
      this.ctx.metrics?.lag.set(
        { namespace: this.ns, database: this.name, pod: s.pod },
        Number(best - position(s)),
      );
    }
    if (!choice.ok) {
      await this.note(f, `${fence.why}; ${choice.message}`);
      return this.done(true, RETRY_MS);
    }
    if (choice.note) this.ctx.warning('SwitchoverTargetBehind', 'Switchover', choice.note);
    await this.write((s) => {
      s.targetPrimary = choice.pod;
      s.failover = { ...f, phase: 'Promoting', to: choice.pod };
      delete s.failover.message;
    });
    this.ctx.log?.info({ from: f.from, to: choice.pod, lsn: String(choice.lsn) }, 'fenced; promoting');
    const next = this.status.failover;
    return next ? this.promoting(next) : this.done(true, 0);
  }

  async promoting(f: FailoverRecord): Promise<FailoverOutcome> {
    const to = f.to ?? this.primary;
    const pod = this.pod(to);
    if (!pod || pod.metadata.deletionTimestamp) {
      // The chosen one went away before it was promoted (or right after): choose again, still fenced.
      await this.write((s) => {
        s.failover = {
          ...f,
          phase: 'Fencing',
          message: `${to} went away while being promoted: choosing again`,
        };
        delete s.failover.to;
      });
      return this.done(true, STEP_MS);
    }
    const epoch = this.epoch + 1;
    // The Lease names it before it is promoted: its sidecar would fence a writable primary the Lease
    // does not name (a failure is retried: nothing was promoted yet).
    await this.ctx.lease?.setHolder(to);
    let r: Awaited<ReturnType<Procedure['exec']>>;
    try {
      // The other instances' replication slots, so they follow without a fresh clone.
      const slots = Array.from({ length: this.ctx.spec.spec.replicas }, (_, i) => `${this.name}-${i}`)
        .filter((p) => p !== to)
        .map(slotName);
      r = await this.exec(to, promoteCommand(to, epoch, slots));
    } catch (err) {
      await this.note(f, `cannot reach ${to} to promote it: ${messageOf(err)}`);
      return this.done(true, RETRY_MS);
    }
    if (r.exitCode !== 0) {
      await this.note(f, `promoting ${to} failed (${r.exitCode}): ${r.stderr.trim().slice(-300)}`);
      return this.done(true, RETRY_MS);
    }
    let timeline: number | undefined;
    try {
      const st = await this.exec(to, stateCommand(), QUERY_TIMEOUT_MS);
      timeline = parseInstanceState(st.stdout)?.timeline;
    } catch {
      // The timeline is recorded later then.
    }
    // Every other reachable pod learns the new primary at once (its probes judge against it); exec cannot
    // reach those on a node whose kubelet is silent (they learn it from the ConfigMap when back).
    const silent = this.silentNodes();
    await Promise.all(
      this.ctx.pods
        .filter((p) => p.metadata.name !== to && serverRunning(p) && !silent.has(p.spec?.nodeName ?? ''))
        .map((p) =>
          this.exec(p.metadata.name ?? '', designateCommand(to, epoch), QUERY_TIMEOUT_MS).catch(
            () => undefined,
          ),
        ),
    );
    await this.write((s) => {
      s.failover = { ...f, phase: 'Rejoining', to };
      delete s.failover.message;
      s.primaryEpoch = epoch;
      if (timeline !== undefined) s.timeline = timeline;
    });
    this.ctx.normal(
      'Promoted',
      f.switchover ? 'Switchover' : 'Failover',
      `${to} promoted${timeline !== undefined ? ` (timeline ${timeline})` : ''}: it is the primary now`,
    );
    return this.done(false, STEP_MS);
  }

  async rejoining(f: FailoverRecord): Promise<FailoverOutcome> {
    const to = f.to ?? this.primary;
    if (this.ctx.configData?.[CLUSTER_KEYS.primary] !== to) return this.done(false, STEP_MS);
    const restarted = new Set(f.restarted ?? []);
    const host = `${to}.${this.headless}`;
    const others = this.ctx.pods.filter(
      (p) => p.metadata.name !== to && !p.metadata.deletionTimestamp && serverRunning(p),
    );
    let pending = false;
    const silent = this.silentNodes();
    for (const p of others) {
      const pod = p.metadata.name ?? '';
      if (restarted.has(pod)) continue;
      // Unreachable while its node's kubelet is silent: nothing waits for it, it follows when back.
      if (silent.has(p.spec?.nodeName ?? '')) continue;
      let st: InstanceState | undefined;
      try {
        st = parseInstanceState((await this.exec(pod, stateCommand(), QUERY_TIMEOUT_MS)).stdout);
      } catch {
        st = undefined;
      }
      if (st?.inRecovery && st.streamingFrom === host) continue;
      try {
        const r = await this.exec(pod, restartCommand());
        if (r.exitCode === 0) restarted.add(pod);
        else pending = true;
      } catch {
        // Unreachable on a NotReady node (a dead kubelet): nothing waits for it, it follows when back.
        const nodes = await this.nodes([p.spec?.nodeName]);
        if (nodeReady(nodes.get(p.spec?.nodeName ?? '')).ready) pending = true;
      }
    }
    const primaryPod = this.pod(to);
    if (pending || !primaryPod || !isPodReady(primaryPod)) {
      if (restarted.size !== (f.restarted ?? []).length) {
        await this.write((s) => {
          s.failover = { ...f, restarted: [...restarted].sort() };
        });
      }
      return this.done(false, STEP_MS);
    }
    const completed = isoNow(this.ctx.now());
    const timeline = this.status.timeline;
    await this.write((s) => {
      delete s.failover;
      s.lastFailover = {
        reason: f.reason,
        from: f.from,
        to,
        ...(f.switchover ? { switchover: true } : {}),
        ...(timeline !== undefined ? { timeline } : {}),
        startedAt: f.startedAt,
        completedAt: completed,
      };
    });
    const took = ((timeOf(completed) ?? 0) - (timeOf(f.startedAt) ?? 0)) / 1000;
    this.ctx.normal(
      f.switchover ? 'SwitchoverCompleted' : 'FailoverCompleted',
      f.switchover ? 'Switchover' : 'Failover',
      `${to} is the primary (was ${f.from}; ${f.reason}) after ${took.toFixed(1)}s` +
        (restarted.size ? `; restarted ${[...restarted].sort().join(', ')} to follow it` : ''),
    );
    return this.done(false);
  }

  /** Records what the phase waits for (only when it changed). */
  async note(f: FailoverRecord, message: string): Promise<void> {
    this.ctx.log?.info({ phase: f.phase }, message);
    if (f.message === message) return;
    try {
      await this.write((s) => {
        if (s.failover) s.failover.message = message;
      });
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }
}

/** The ConfigMap's data the pods were handed (from the cache). */
export async function liveConfigData(
  reader: { get: (res: typeof ConfigMaps, key: { namespace: string; name: string }) => Promise<unknown> },
  db: Database,
): Promise<Record<string, string> | undefined> {
  const cm = (await reader.get(ConfigMaps, {
    namespace: db.metadata.namespace ?? 'default',
    name: childNames(db).configMap,
  })) as { data?: Record<string, string> } | undefined;
  return cm?.data;
}

/** Runs the procedure's step for this reconcile (failover/procedure.ts). */
export function runFailover(ctx: FailoverContext): Promise<FailoverOutcome> {
  return new Procedure(ctx).run();
}

/**
 * One fault run: a fresh control plane, the Database CRD, the operator as its own process with exactly
 * config/rbac, talking to the API server through the fault proxy; N Databases created while the fault
 * hits; then the figures: converged x/N and time, Secrets regenerated, orphans, crashes, takeover,
 * reaction to a change after the fault, log lines by level, Events lost. In real-nodes mode the operator is
 * deployed in the cluster instead (in-cluster.ts: its image on a real node, 2 replicas, config/default), and
 * the Databases' pods go to the kwok nodes.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ControlPlane, start } from '@opkit/controlplane';
import type { Database } from '../../../operators/database/src/api/v1/database.ts';
import { onSimulatedNodes } from '../../../operators/database/src/demo/postgres.ts';
import {
  type BenchDatabase,
  derivedSecretNames,
  expectedChildKeys,
  inputs,
  statefulSetName,
} from '../desired.ts';
import { type RunningOperator, startOperator, waitReady } from '../impls.ts';
import { kindPath } from '../kinds.ts';
import { Kube, type KubeObject, runConcurrently } from '../kube.ts';
import { Observer } from '../observer.ts';
import { installCrd, SCALE_FLAGS } from '../scenarios.ts';
import { type FaultMode, type FaultName, type FaultScale, inject, needsLeaderElection } from './faults.ts';
import { installOperatorRbac, waitAuthorized, writeOperatorKubeconfig } from './identity.ts';
import { type InClusterOperator, OPERATOR_NAMESPACE, podOf, startInCluster } from './in-cluster.ts';
import { FaultProxy } from './proxy.ts';
import { startTrace } from './trace.ts';

const LEASE = 'database-operator.myapp.example.com';
/** The ConfigMap kube-controller-manager's root-ca-cert-publisher writes into every namespace. */
const CLUSTER_CA_CONFIGMAP = 'ConfigMap/kube-root-ca.crt';
/** kube-controller-manager's ServiceAccount controller makes `default` in every namespace (cluster mode). */
const DEFAULT_SERVICE_ACCOUNT = 'ServiceAccount/default';

export interface FaultRunOptions {
  fault: FaultName;
  n: number;
  mode: FaultMode;
  workDir: string;
  /** real-nodes mode: the operator image's OCI archive (in-cluster.ts buildOperatorImage). */
  imageArchive?: string;
  scale: FaultScale;
  convergeTimeoutMs: number;
  /** How long a change after the fault may take before it counts as not reconciled. */
  reactionTimeoutMs: number;
  log: (line: string) => void;
  /** Log a timeline every 2 s (trace.ts) and keep the control plane's directory (its logs) in workDir/cp. */
  trace?: boolean;
}

export interface FaultResult {
  fault: FaultName;
  mode: FaultMode;
  n: number;
  converged: number;
  /** First create to the last Database converged (or to the timeout). */
  seconds: number;
  secretsRegenerated: number;
  orphans: number;
  crashes: number;
  takeoverSeconds?: number;
  /** A spec change made once the fault is over: seconds until the StatefulSet followed (undefined: not within the timeout). */
  reactionSeconds?: number;
  logLines: Record<string, number>;
  eventsLost: number;
  notes: string[];
  failed?: string;
}

/** Every Secret's uid and data as first seen; counts those replaced or rewritten later. */
class SecretTracker {
  private readonly first = new Map<string, string>();
  readonly changed = new Set<string>();
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly kube: Kube;
  private readonly ns: string;

  constructor(kube: Kube, ns: string) {
    this.kube = kube;
    this.ns = ns;
  }

  private see(o: KubeObject & { data?: Record<string, string> }): void {
    const id = `${o.metadata.uid}:${createHash('sha256')
      .update(JSON.stringify(o.data ?? {}))
      .digest('hex')}`;
    const was = this.first.get(o.metadata.name);
    if (was === undefined) this.first.set(o.metadata.name, id);
    else if (was !== id) this.changed.add(o.metadata.name);
  }

  start(): void {
    const path = `/api/v1/namespaces/${this.ns}/secrets`;
    this.loop = (async () => {
      for (let attempt = 0; attempt < 1000 && !this.abort.signal.aborted; attempt++) {
        try {
          const list = await this.kube.json<{ items: KubeObject[]; metadata: { resourceVersion: string } }>(
            'GET',
            path,
          );
          for (const o of list.items) this.see(o);
          await this.kube.watch(
            path,
            list.metadata.resourceVersion,
            (type, o) => {
              if (type === 'ADDED' || type === 'MODIFIED') this.see(o);
            },
            { signal: this.abort.signal },
          );
        } catch {
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    })();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }
}

/** pino's numeric levels (the operator's log in a container), as names. */
const LEVELS: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/** Log lines by level of an operator's JSON log, and the Events it could not record. */
export function countLogLines(text: string): {
  byLevel: Record<string, number>;
  eventsLost: number;
  /** The error-level lines themselves (the first few), for the diagnosis of a run that has any. */
  errors: string[];
} {
  const byLevel: Record<string, number> = {};
  const errors: string[] = [];
  let eventsLost = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let level = 'unparsed';
    let msg = '';
    try {
      const o = JSON.parse(line) as { level?: string | number; msg?: string };
      level = typeof o.level === 'number' ? (LEVELS[o.level] ?? String(o.level)) : (o.level ?? 'none');
      msg = o.msg ?? '';
    } catch {}
    byLevel[level] = (byLevel[level] ?? 0) + 1;
    if ((level === 'error' || level === 'fatal') && errors.length < 3) errors.push(line.slice(0, 600));
    if (/failed to record event|event .*(dropped|lost)|dropping event/i.test(msg)) eventsLost++;
  }
  return { byLevel, eventsLost, errors };
}

/** The manager's identity from its 'starting manager' log line. */
function identityOf(op: RunningOperator): string | undefined {
  return /"identity":"([^"]+)"/.exec(readFileSync(op.proc.logFile, 'utf8'))?.[1];
}

interface Operator {
  op: RunningOperator;
  /** Killed by the harness (not a crash). */
  killed: boolean;
}

export async function runFault(o: FaultRunOptions): Promise<FaultResult> {
  const ns = 'faults';
  mkdirSync(o.workDir, { recursive: true });
  const result: FaultResult = {
    fault: o.fault,
    mode: o.mode,
    n: o.n,
    converged: 0,
    seconds: Number.NaN,
    secretsRegenerated: 0,
    orphans: 0,
    crashes: 0,
    logLines: {},
    eventsLost: 0,
    notes: [],
  };
  const real = o.mode === 'real-nodes';
  if (real && !o.imageArchive) throw new Error('real-nodes mode needs imageArchive');
  const cp: ControlPlane = await start({
    mode: o.mode === 'apiserver' ? 'apiserver' : 'cluster',
    nodes: 3,
    // The operator's pods on the real node; the Databases' pods on the kwok nodes.
    ...(real ? { realNodes: 1 } : {}),
    apiServerArgs: SCALE_FLAGS,
    // Traced: the scheduler's informers' list/watch calls in its log (kube-scheduler.log in workDir/cp).
    ...(o.trace ? { dir: join(o.workDir, 'cp'), schedulerArgs: ['--v=3'] } : {}),
  });
  const kube = new Kube(cp.kubeconfig);
  const server = new URL(cp.server);
  const proxy = await FaultProxy.start(server.hostname, Number(server.port));
  const observer = new Observer(kube, {
    namespace: ns,
    expected: expectedChildKeys,
    retryWatches: true,
    ...(o.mode !== 'apiserver' ? { requirePhase: 'Running' } : {}),
  });
  const secrets = new SecretTracker(kube, ns);
  // The load balancer's health check: /readyz every 200 ms (see FaultProxy.upstreamReady).
  let checking = true;
  const health = (async () => {
    while (checking) {
      const code = await kube
        .raw('GET', '/readyz')
        .then((r) => r.code)
        .catch(() => 0);
      proxy.upstreamReady = code === 200;
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  const operators: Operator[] = [];
  let inCluster: InClusterOperator | undefined;
  let inClusterLogs: string[] = [];
  const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
  let trace: { stop(): Promise<void> } | undefined;
  try {
    // real-nodes: `opkit deploy` installs the CRD, the RBAC and the manager (2 replicas, leader election).
    if (real) inCluster = await startInCluster(cp, kube, o.imageArchive!);
    else await installCrd(kube);
    await kube.json('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    });
    let leaseNamespace = OPERATOR_NAMESPACE;
    let launch = async (): Promise<void> => {
      throw new Error(`${o.fault}: no operator process to start in ${o.mode} mode`);
    };
    const le = needsLeaderElection(o.fault);
    if (!real) {
      const id = await installOperatorRbac(kube);
      leaseNamespace = id.namespace;
      const kubeconfigPath = writeOperatorKubeconfig(
        join(o.workDir, 'operator.kubeconfig'),
        cp.kubeconfig,
        `https://127.0.0.1:${proxy.port}`,
        id,
      );
      await waitAuthorized(cp.kubeconfig, cp.server, id);
      launch = async () => {
        const op = await startOperator('opkit', {
          kubeconfigPath,
          logFile: join(o.workDir, `opkit-${operators.length}.log`),
          ...(le ? { extraArgs: ['--leader-elect', '--leader-election-namespace', id.namespace] } : {}),
        });
        operators.push({ op, killed: false });
        await waitReady(op);
      };
      await launch();
      if (le) await launch();
    }
    await observer.start();
    secrets.start();

    const lease = async (): Promise<string | undefined> =>
      (
        await kube
          .get<{ spec?: { holderIdentity?: string } }>(
            `/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases/${LEASE}`,
          )
          .catch(() => undefined)
      )?.spec?.holderIdentity;
    let killedHolder: string | undefined;
    const live = () => operators.filter((x) => !x.killed && x.op.proc.running);
    const ctx = {
      cp,
      proxy,
      sleep,
      note: (line: string) => {
        result.notes.push(line);
        o.log(`    ${line}`);
      },
      converged: () => observer.convergedAt.size,
      async killOperator(signal: 'SIGKILL' | 'SIGTERM') {
        if (inCluster) {
          if (signal !== 'SIGKILL')
            throw new Error('real-nodes mode kills the leader container with SIGKILL');
          const k = await inCluster.killLeader();
          killedHolder = k.holder;
          o.log(`    SIGKILL of ${k.pod}'s container (the Lease holder)`);
          return { killedAt: k.killedAt };
        }
        let target = live()[0];
        if (le) {
          killedHolder = await lease();
          // Each replica logs its identity (the Lease holderIdentity) when its manager starts.
          target = live().find((x) => killedHolder !== undefined && identityOf(x.op) === killedHolder);
          if (!target) throw new Error(`no operator process holds the Lease (holder ${killedHolder})`);
        }
        if (!target) throw new Error('no operator process to kill');
        target.killed = true;
        const killedAt = performance.now();
        target.op.proc.child.kill(signal);
        await target.op.proc.exited;
        return { killedAt };
      },
      async restartOperator() {
        await launch();
      },
      async waitNewLeader(timeoutMs: number) {
        const deadline = performance.now() + timeoutMs;
        while (performance.now() < deadline) {
          const h = await lease();
          if (h && h !== killedHolder) {
            const t = performance.now();
            if (inCluster && killedHolder) {
              const [was, now] = [podOf(killedHolder), podOf(h)];
              result.notes.push(
                `new leader ${now === was ? "the killed pod's restarted container" : 'the standby replica'}`,
              );
            }
            return t;
          }
          await sleep(50);
        }
        throw new Error(`no new leader within ${timeoutMs / 1000} s`);
      },
      async waitOperatorPods(timeoutMs: number) {
        if (!inCluster) throw new Error('no operator pods outside real-nodes mode');
        return inCluster.waitPodsReady(timeoutMs);
      },
    };

    // real-nodes: the Databases' pods on the kwok nodes (nodeSelector and toleration, as the demo does).
    const dbs = inputs(o.n, ns).map((d) =>
      real ? (onSimulatedNodes(d as unknown as Database, true) as unknown as BenchDatabase) : d,
    );
    const names = dbs.map((d) => d.metadata.name);
    if (o.trace)
      trace = startTrace(
        kube,
        ns,
        o.n,
        () => observer.convergedAt.size,
        () => operators.map((x) => x.op.proc.logFile),
        o.log,
      );
    const t0 = performance.now();
    const fault = inject(o.fault, ctx, o.n, o.scale);
    await runConcurrently(dbs, 16, async (db) => {
      for (let i = 0; ; i++) {
        const res = await kube.raw('POST', kindPath('Database', ns), db).catch(() => ({ code: 0, text: '' }));
        if (res.code < 300 || res.code === 409) return;
        if (i >= 120)
          throw new Error(`creating ${db.metadata.name}: HTTP ${res.code} ${res.text.slice(0, 200)}`);
        await sleep(1000); // the API server is restarting
      }
    });
    const { takeoverSeconds } = await fault;
    if (takeoverSeconds !== undefined) result.takeoverSeconds = takeoverSeconds;

    // Reaction: one spec change on a converged Database: once the fault is over and every Database
    // converged (the operator idle: the figure is the operator's reaction, not its queue), except for
    // proxy-half-open, where it is made at once, while the old connections stay half-open.
    const react = async (): Promise<void> => {
      await observer
        .waitFor('a first Database to converge', () => observer.convergedAt.size > 0, o.convergeTimeoutMs)
        .catch(() => {});
      const targetName = observer.convergedAt.keys().next().value;
      const target = targetName === undefined ? undefined : observer.dbs.get(targetName);
      if (target) {
        const sts = statefulSetName(target);
        const want = (target.spec?.replicas ?? 1) === 3 ? 2 : 3;
        const t = performance.now();
        await kube.json(
          'PATCH',
          `${kindPath('Database', ns)}/${target.metadata.name}`,
          { spec: { replicas: want } },
          'application/merge-patch+json',
        );
        await observer
          .waitFor(
            `StatefulSet ${sts} to have ${want} replicas`,
            () => observer.stsReplicas.get(sts) === want,
            o.reactionTimeoutMs,
          )
          .then((tSeen) => {
            result.reactionSeconds = (tSeen - t) / 1000;
          })
          .catch(() => o.log(`    no reaction to a change within ${o.reactionTimeoutMs / 1000} s`));
      }
    };
    if (o.fault === 'proxy-half-open') await react();
    try {
      const tDone = await observer.waitConverged(
        names,
        Math.max(1000, o.convergeTimeoutMs - (performance.now() - t0)),
      );
      result.seconds = (tDone - t0) / 1000;
    } catch (err) {
      result.failed = err instanceof Error ? err.message.slice(0, 300) : String(err);
      result.seconds = (performance.now() - t0) / 1000;
    }
    result.converged = names.filter((n) => observer.convergedAt.has(n)).length;
    if (o.fault !== 'proxy-half-open') await react();

    await sleep(2000);
    const expected = new Set([...observer.dbs.values()].flatMap((db) => expectedChildKeys(db)));
    // kube-controller-manager publishes kube-root-ca.crt and the `default` ServiceAccount into every
    // namespace (cluster mode): not the operator's.
    const orphans = [...observer.children].filter(
      (k) => !expected.has(k) && k !== CLUSTER_CA_CONFIGMAP && k !== DEFAULT_SERVICE_ACCOUNT,
    );
    result.orphans = orphans.length;
    if (orphans.length > 0) result.notes.push(`orphans: ${orphans.slice(0, 5).join(', ')}`);
    // A derived Secret (`-server`, `-app`) may be reissued (the reaction's scale-up adds names to the
    // server certificate): listed in the notes, not counted as regenerated.
    const derived = new Set([...observer.dbs.values()].flatMap((db) => derivedSecretNames(db)));
    const changed = [...secrets.changed];
    result.secretsRegenerated = changed.filter((n) => !derived.has(n)).length;
    const reissued = changed.filter((n) => derived.has(n));
    if (reissued.length > 0) result.notes.push(`derived Secrets reissued: ${reissued.join(', ')}`);
    result.crashes = operators.filter((x) => !x.killed && !x.op.proc.running).length;
    if (inCluster) {
      // The container restarts beyond the kills the fault made, and replicas not Ready at the end.
      const c = await inCluster.collect();
      const kills = o.fault === 'baseline' ? 0 : 1;
      result.crashes = Math.max(0, c.restarts - kills) + c.notReady.length;
      result.notes.push(
        `operator container restarts ${c.restarts}${kills > 0 ? ` (${kills} the SIGKILL)` : ''}`,
      );
      if (c.notReady.length > 0) result.notes.push(`not Ready at the end: ${c.notReady.join(', ')}`);
      inClusterLogs = c.logs;
      // Kept with the run's other files (main.ts prints the work directory).
      for (const [i, text] of c.logs.entries()) writeFileSync(join(o.workDir, `manager-pod-${i}.log`), text);
    }
    return result;
  } catch (err) {
    result.failed = err instanceof Error ? err.message.slice(0, 300) : String(err);
    return result;
  } finally {
    await trace?.stop();
    for (const x of operators) await x.op.proc.stop();
    const logTexts = [...operators.map((x) => readFileSync(x.op.proc.logFile, 'utf8')), ...inClusterLogs];
    for (const text of logTexts) {
      const c = countLogLines(text);
      for (const [lvl, k] of Object.entries(c.byLevel))
        result.logLines[lvl] = (result.logLines[lvl] ?? 0) + k;
      result.eventsLost += c.eventsLost;
      for (const line of c.errors) result.notes.push(`error-level line: ${line}`);
    }
    checking = false;
    await health;
    await secrets.stop();
    await observer.stop();
    await proxy.close();
    kube.close();
    await cp.stop();
  }
}

/**
 * One run = a fresh control plane, the Database CRD, one implementation and a sequence of phases:
 *   convergence -> steady -> latency -> startup
 * (every later phase needs the converged state of the earlier one). The floor runs convergence only:
 * the harness itself creates every Database, its children and its status, with no controller.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  desiredChildren,
  desiredTlsSecrets,
  expectedChildKeys,
  floorStatus,
  inputs,
  statefulSetName,
} from './desired.ts';
import { makes, makesTls, normalize, secretContext } from './equivalence.ts';
import { type OperatorImpl, type RunningOperator, startOperator, waitReady } from './impls.ts';
import { CHILD_KINDS, type ChildKind, isChildKind, kindPath } from './kinds.ts';
import {
  cloneCounts,
  HttpError,
  Kube,
  type KubeObject,
  type RequestCounts,
  runConcurrently,
} from './kube.ts';
import { diffCounts, scrapeHeapBytes, scrapeReconciles, scrapeRequestCounts, summarize } from './metrics.ts';
import { Observer } from './observer.ts';
import type { ImplName } from './report.ts';

export const SCALE_FLAGS = [
  '--max-requests-inflight=0',
  '--max-mutating-requests-inflight=0',
  '--enable-priority-and-fairness=false',
];

/**
 * `populate`: the harness writes the N Databases, children and status itself (the floor's writes) with no
 * operator running, instead of `convergence`; `startup` then starts the operator with them present.
 */
export type Phase = 'convergence' | 'populate' | 'steady' | 'latency' | 'startup' | 'e2e';

export interface RunOptions {
  impl: ImplName;
  n: number;
  phases: Phase[];
  workDir: string;
  namespace?: string;
  writerConcurrency: number;
  steadySeconds: number;
  latencyChanges: number;
  convergeTimeoutMs: number;
  /** node --cpu-prof for the TypeScript implementations (profiles in workDir/prof) */
  cpuProf?: boolean;
  workers?: number;
  /** Node flags for opkit instead of those of its image's ENTRYPOINT. */
  opkitNodeFlags?: string[];
  /** opkit's environment (its image's warmed compile cache). */
  opkitEnv?: NodeJS.ProcessEnv;
  /** The controller-runtime peer talks JSON for built-in kinds too (`--peer-json`). */
  peerJson?: boolean;
  /** More flags for the controller-runtime peer (`--peer-args`). */
  peerArgs?: string[];
  /** The operators' resync period in runs with the steady phase, so that idle includes resyncs. */
  syncPeriod?: string;
  /** Keep the normalized children for the equivalence check. */
  snapshot?: boolean;
  log: (line: string) => void;
  /** cluster mode with kwok nodes (the e2e scenario) */
  cluster?: { nodes: number };
}

export interface RequestSummary {
  byVerb: Record<string, number>;
  writes: number;
  reads: number;
  detail: Record<string, Record<string, number>>;
}

export interface RunResult {
  impl: ImplName;
  n: number;
  kubeVersion: string;
  /** The worker count the operator ran with (`--max-concurrent-reconciles`); absent: its own default. */
  workers?: number;
  convergence?: {
    seconds: number;
    /** The median Database's time, from the first create to its own convergence (older results: absent). */
    medianSeconds?: number;
    createSeconds: number;
    requests: RequestSummary;
    cpuSeconds?: number;
    peakRssMiB?: number;
    /** Reconciles run until converged (controller_runtime_reconcile_total), when the operator serves it. */
    reconciles?: number;
  };
  steady?: {
    seconds: number;
    requests: RequestSummary;
    cpuSeconds?: number;
    rssMiB?: number;
    /** Reconciles run while idle (resyncs), from the operator's controller_runtime_reconcile_total. */
    reconciles?: number;
  };
  latency?: {
    changes: number;
    p50ms: number;
    p99ms: number;
    maxMs: number;
    requests: RequestSummary;
    /** Why the scenario stopped early (a change the StatefulSet never reflected). */
    failed?: string;
  };
  /** Phases that failed for this implementation (the run goes on with the next phase or implementation). */
  failures?: string[];
  startup?: {
    readySeconds: number;
    requests: RequestSummary;
    cpuSeconds?: number;
    peakRssMiB?: number;
    settleSeconds: number;
    /** After it settled (+ 5 s): RSS now, heap in use (its own metrics), objects its caches hold. */
    rssMiB?: number;
    heapMiB?: number;
    cachedObjects?: number;
  };
  e2e?: {
    seconds: number;
    /** The median Database's time, from the first create until it is Running (older results: absent). */
    medianSeconds?: number;
    requests: RequestSummary;
    cpuSeconds?: number;
    peakRssMiB?: number;
    reconciles?: number;
  };
  snapshot?: Record<string, unknown>;
  logFile?: string;
}

const MiB = 2 ** 20;

let crdWarned = false;

export async function installCrd(kube: Kube): Promise<void> {
  const { Databases } = await import('../../operators/database/src/api/v1/database.ts');
  const crd = Databases.crd();
  const res = await kube.raw('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  if (res.code === 422 && res.text.includes('.metadata.')) {
    // Work-around for a CRD the API server refuses because a rule's fieldPath points into metadata
    // (not part of the structural schema): drop those fieldPaths, keep the rules.
    const text = JSON.stringify(crd).replace(/,?"fieldPath":"\.metadata\.[^"]*"/g, '');
    if (!crdWarned) {
      crdWarned = true;
      process.stderr.write(
        `warning: the Database CRD was refused (${res.text.slice(0, 200)}...); retrying without metadata fieldPaths\n`,
      );
    }
    await kube.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', JSON.parse(text));
  } else if (res.code >= 300) throw new HttpError('POST', 'customresourcedefinitions', res.code, res.text);
  const deadline = performance.now() + 30_000;
  for (;;) {
    const crd = await kube.get<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/databases.myapp.example.com',
    );
    const established = crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    if (established && (await kube.raw('GET', kindPath('Database', 'default'))).code === 200) return;
    if (performance.now() > deadline) throw new Error('the Database CRD was not established within 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Scrapes until the counters of the benchmark's resources stop moving (the operator went idle). */
export async function settle(
  kube: Kube,
  quietMs: number,
  maxMs: number,
): Promise<{ counts: RequestCounts; seconds: number }> {
  const t0 = performance.now();
  let last = await scrapeRequestCounts(kube);
  let lastChange = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 250));
    const now = await scrapeRequestCounts(kube);
    const d = summarize(diffCounts(now, last));
    if (d.writes + d.reads > 0) lastChange = performance.now();
    last = now;
    if (performance.now() - lastChange >= quietMs || performance.now() - t0 >= maxMs) {
      return { counts: now, seconds: (lastChange - t0) / 1000 };
    }
  }
}

function operatorDelta(
  after: RequestCounts,
  before: RequestCounts,
  harnessAfter: RequestCounts,
  harnessBefore: RequestCounts,
): RequestSummary {
  return summarize(diffCounts(diffCounts(after, before), diffCounts(harnessAfter, harnessBefore)));
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Creates one object; on AlreadyExists fine (never for the workload itself). */
async function create(kube: Kube, path: string, obj: unknown): Promise<KubeObject> {
  return kube.json<KubeObject>('POST', path, obj);
}

/**
 * The floor: the same writes the operators make (every child, one Event per child created, the status),
 * issued by a tight concurrent writer with no watch, cache or reconcile. The Events go out without being
 * waited for before the next create, as the operators' event recorders send them.
 */
export async function floorWrite(kube: Kube, ns: string, db: KubeObject): Promise<void> {
  const created = await create(kube, kindPath('Database', ns), db);
  const events: Promise<unknown>[] = [];
  const children = desiredChildren(created);
  const credentials = children.find((c) => c.kind === 'Secret');
  // postgres: the CA, the server certificate and `-app` (from the credentials as written), as opkit's TLS step.
  const tls = credentials ? await desiredTlsSecrets(created, credentials) : [];
  for (const child of [...children, ...tls]) {
    const kind = child.kind;
    if (!isChildKind(kind)) throw new Error(`unexpected child kind ${kind}`);
    const made = await create(kube, kindPath(kind, ns), child);
    events.push(create(kube, EVENTS_PATH(ns), floorEvent(created, made)));
    if (made.type === 'kubernetes.io/tls') {
      events.push(create(kube, EVENTS_PATH(ns), floorEvent(created, made, CERTIFICATE_ISSUED)));
    }
  }
  await kube.json(
    'PATCH',
    `${kindPath('Database', ns)}/${created.metadata.name}/status`,
    { status: floorStatus(created, children) },
    'application/merge-patch+json',
  );
  await Promise.all(events);
}

const EVENTS_PATH = (ns: string) => `/apis/events.k8s.io/v1/namespaces/${ns}/events`;
let floorEventSeq = 0;

/** opkit's second Event for a new server certificate (tls/step.ts). */
const CERTIFICATE_ISSUED = {
  reason: 'CertificateIssued',
  action: 'Update',
  note: 'Issued the server certificate',
};

/** The Event the operators record for a child they created (events.k8s.io/v1, regarding the Database). */
function floorEvent(
  db: KubeObject,
  child: KubeObject,
  what?: { reason: string; action: string; note: string },
): unknown {
  const ref = (o: KubeObject) => ({
    apiVersion: o.apiVersion,
    kind: o.kind,
    namespace: o.metadata.namespace,
    name: o.metadata.name,
    uid: o.metadata.uid,
    resourceVersion: o.metadata.resourceVersion,
  });
  const now = new Date();
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: {
      name: `${db.metadata.name}.${(BigInt(now.getTime()) * 1_000_000n + BigInt(floorEventSeq++)).toString(16)}`,
      namespace: db.metadata.namespace,
    },
    eventTime: now.toISOString().replace('Z', '000Z'),
    reportingController: 'myapp.example.com/database-operator',
    reportingInstance: 'bench-floor',
    action: what?.action ?? 'Create',
    reason: what?.reason ?? 'Created',
    regarding: ref(db),
    related: ref(child),
    note: what
      ? `${what.note} in Secret ${child.metadata.name}`
      : `Created ${child.kind} ${child.metadata.name}`,
    type: 'Normal',
  };
}

/** Children as the implementation left them, normalized (server-set and random fields removed). */
async function snapshot(kube: Kube, ns: string): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const kind of CHILD_KINDS) {
    const objects = await kube.list(kindPath(kind, ns));
    // Certificates are compared by meaning, against the CAs of the namespace (certificates.ts).
    const ctx = kind === 'Secret' ? secretContext(objects) : undefined;
    for (const o of objects) {
      if (kind === 'Service' && o.metadata.name === 'kubernetes') continue;
      if (kind === 'ConfigMap' && o.metadata.name === 'kube-root-ca.crt') continue;
      if (kind === 'ServiceAccount' && o.metadata.name === 'default') continue;
      out[`${kind}/${o.metadata.name}`] = normalize(kind, o, ctx);
    }
  }
  for (const o of await kube.list(kindPath('Database', ns))) {
    out[`Database/${o.metadata.name}`] = normalize('Database', o);
  }
  return out;
}

export async function runOnce(opts: RunOptions): Promise<RunResult> {
  const ns = opts.namespace ?? 'default';
  const log = opts.log;
  mkdirSync(opts.workDir, { recursive: true });
  const cp: ControlPlane = await start({
    mode: opts.cluster ? 'cluster' : 'apiserver',
    nodes: opts.cluster?.nodes ?? 3,
    apiServerArgs: SCALE_FLAGS,
  });
  const kube = new Kube(cp.kubeconfig, { maxSockets: Math.max(64, opts.writerConcurrency) });
  const version = await kube.json<{ gitVersion: string }>('GET', '/version');
  const result: RunResult = {
    impl: opts.impl,
    n: opts.n,
    kubeVersion: version.gitVersion,
    ...(opts.workers ? { workers: opts.workers } : {}),
  };
  let op: RunningOperator | undefined;
  const observer = new Observer(kube, {
    namespace: ns,
    // A peer that does not make the TLS Secrets yet converges without them (a known difference).
    expected: (db: KubeObject) =>
      expectedChildKeys(db, { tls: makesTls(opts.impl), primaryPdb: makes(opts.impl, 'primary-pdb') }),
    ...(opts.phases.includes('e2e') ? { requirePhase: 'Running' } : {}),
  });
  const logFile = join(opts.workDir, `${opts.impl}.log`);
  const startImpl = async (suffix = '') => {
    if (opts.impl === 'floor') throw new Error('the floor has no operator');
    const prof = opts.cpuProf ? join(opts.workDir, `prof${suffix}`) : undefined;
    if (prof) mkdirSync(prof, { recursive: true });
    return startOperator(opts.impl as OperatorImpl, {
      kubeconfigPath: cp.kubeconfigPath,
      logFile: join(opts.workDir, `${opts.impl}${suffix}.log`),
      ...(prof ? { cpuProfDir: prof } : {}),
      ...(opts.workers ? { workers: opts.workers } : {}),
      ...(opts.opkitNodeFlags ? { opkitNodeFlags: opts.opkitNodeFlags } : {}),
      ...(opts.opkitEnv ? { opkitEnv: opts.opkitEnv } : {}),
      ...(opts.peerJson ? { peerJson: true } : {}),
      ...(opts.peerArgs ? { peerArgs: opts.peerArgs } : {}),
      ...(opts.syncPeriod && opts.phases.includes('steady') ? { syncPeriod: opts.syncPeriod } : {}),
    });
  };
  try {
    await installCrd(kube);
    await observer.start();
    const dbs = inputs(opts.n, ns);
    const names = dbs.map((d) => d.metadata.name);

    if (opts.impl !== 'floor' && !opts.phases.includes('populate')) {
      op = await startImpl();
      await waitReady(op);
      result.logFile = logFile;
    }

    // ---- populate: the objects written by the harness, no operator running
    if (opts.phases.includes('populate')) {
      const t0 = performance.now();
      await runConcurrently(dbs, opts.writerConcurrency, (db) => floorWrite(kube, ns, db));
      await observer.waitConverged(names, opts.convergeTimeoutMs);
      log(`  populated N=${opts.n} in ${((performance.now() - t0) / 1000).toFixed(1)} s (no operator)`);
    }

    // ---- convergence (also the e2e scenario in cluster mode)
    if (!opts.phases.includes('populate')) {
      const before = await scrapeRequestCounts(kube);
      const hBefore = cloneCounts(kube.counts);
      const cpu0 = op?.proc.sample().cpuSeconds;
      const reconciles0 = op ? await scrapeReconciles(op.metricsPort) : undefined;
      const t0 = performance.now();
      await runConcurrently(dbs, opts.writerConcurrency, async (db) => {
        if (opts.impl === 'floor') await floorWrite(kube, ns, db);
        else await create(kube, kindPath('Database', ns), db);
      });
      const tCreated = performance.now();
      const tDone = await observer.waitConverged(names, opts.convergeTimeoutMs);
      const s = op?.proc.sample();
      const reconciles1 = op ? await scrapeReconciles(op.metricsPort) : undefined;
      const settled = await settle(kube, 2000, 20_000);
      const requests = operatorDelta(settled.counts, before, kube.counts, hBefore);
      if (opts.impl === 'floor') {
        Object.assign(requests, summarize(diffCounts(kube.counts, hBefore)));
      }
      const each = names.map((n) => (observer.convergedAt.get(n) ?? tDone) - t0);
      const fig = {
        seconds: (tDone - t0) / 1000,
        medianSeconds: percentile(each, 50) / 1000,
        createSeconds: (tCreated - t0) / 1000,
        requests,
        ...(s && cpu0 !== undefined ? { cpuSeconds: s.cpuSeconds - cpu0, peakRssMiB: s.hwmBytes / MiB } : {}),
        // None before (client_golang shows the counter only once it has a series): 0 Databases, 0 reconciles.
        ...(reconciles1 !== undefined ? { reconciles: reconciles1 - (reconciles0 ?? 0) } : {}),
      };
      if (opts.phases.includes('e2e')) result.e2e = fig;
      else result.convergence = fig;
      log(
        `  ${opts.impl} N=${opts.n}: converged in ${fig.seconds.toFixed(2)} s, ${requests.writes} writes, ` +
          `${requests.reads} reads${fig.peakRssMiB ? `, peak RSS ${fig.peakRssMiB.toFixed(0)} MiB, CPU ${fig.cpuSeconds?.toFixed(1)} s` : ''}` +
          `${fig.reconciles !== undefined ? `, ${fig.reconciles} reconciles` : ''}`,
      );
    }
    if (opts.snapshot) result.snapshot = await snapshot(kube, ns);

    // ---- steady state
    if (op && opts.phases.includes('steady')) {
      const before = await scrapeRequestCounts(kube);
      const hBefore = cloneCounts(kube.counts);
      const cpu0 = op.proc.sample().cpuSeconds;
      const reconciles0 = await scrapeReconciles(op.metricsPort);
      await new Promise((r) => setTimeout(r, opts.steadySeconds * 1000));
      const after = await scrapeRequestCounts(kube);
      const reconciles1 = await scrapeReconciles(op.metricsPort);
      const s = op.proc.sample();
      const requests = operatorDelta(after, before, kube.counts, hBefore);
      result.steady = {
        seconds: opts.steadySeconds,
        requests,
        cpuSeconds: s.cpuSeconds - cpu0,
        rssMiB: s.rssBytes / MiB,
        // None before (client_golang shows the counter only once it has a series): 0 Databases, 0 reconciles.
        ...(reconciles1 !== undefined ? { reconciles: reconciles1 - (reconciles0 ?? 0) } : {}),
      };
      log(
        `  steady ${opts.steadySeconds} s: ${requests.writes} writes, ${requests.reads} reads` +
          `${result.steady.reconciles !== undefined ? `, ${result.steady.reconciles} reconciles (resyncs)` : ''}`,
      );
    }

    // ---- reaction latency
    if (op && opts.phases.includes('latency')) {
      const target = dbs.find((d) => d.spec.replicas === 2) ?? dbs[0]!;
      const name = target.metadata.name;
      const sts = statefulSetName(target);
      const before = await scrapeRequestCounts(kube);
      const hBefore = cloneCounts(kube.counts);
      const lat: number[] = [];
      let failed: string | undefined;
      let replicas = target.spec.replicas ?? 1;
      // At most the given number of changes and at most 60 s (a storming implementation takes seconds each).
      const budgetEnd = performance.now() + 60_000;
      for (let i = 0; i < opts.latencyChanges && !failed && performance.now() < budgetEnd; i++) {
        replicas = replicas === 2 ? 3 : 2;
        const t = performance.now();
        await kube.json(
          'PATCH',
          `${kindPath('Database', ns)}/${name}`,
          { spec: { replicas } },
          'application/merge-patch+json',
        );
        const want = replicas;
        try {
          const tSeen = await observer.waitFor(
            `StatefulSet ${sts} to have ${want} replicas`,
            () => observer.stsReplicas.get(sts) === want,
            30_000,
          );
          lat.push(tSeen - t);
        } catch (err) {
          failed = `change ${i + 1}: ${err instanceof Error ? err.message : String(err)}`;
          log(`  latency: ${failed}`);
        }
      }
      const settled = await settle(kube, 1000, 10_000);
      const requests = operatorDelta(settled.counts, before, kube.counts, hBefore);
      result.latency = {
        ...(failed ? { failed } : {}),
        changes: lat.length,
        p50ms: percentile(lat, 50),
        p99ms: percentile(lat, 99),
        maxMs: lat.length ? Math.max(...lat) : Number.NaN,
        requests,
      };
      log(
        `  latency over ${lat.length} changes: p50 ${result.latency.p50ms?.toFixed(1)} ms, ` +
          `p99 ${result.latency.p99ms?.toFixed(1)} ms, ${requests.writes} writes`,
      );
      // Converge again so the start-up phase starts from a settled state.
      observer.reset(name);
      await observer.waitConverged([name], 30_000).catch((err: Error) => {
        result.failures = [...(result.failures ?? []), `after latency: ${err.message}`];
      });
    }

    // ---- start-up with N present
    if (opts.impl !== 'floor' && opts.phases.includes('startup')) {
      if (op) await op.proc.stop();
      op = undefined;
      await settle(kube, 1000, 10_000);
      const before = await scrapeRequestCounts(kube);
      const hBefore = cloneCounts(kube.counts);
      op = await startImpl('-restart');
      const tReady = await waitReady(op);
      const readySeconds = (tReady - op.startedAt) / 1000;
      const settled = await settle(kube, 3000, 30_000);
      const s = op.proc.sample();
      const requests = operatorDelta(settled.counts, before, kube.counts, hBefore);
      // What it holds once idle: a few seconds more for the garbage of the start-up reconciles to go.
      await new Promise((r) => setTimeout(r, 5000));
      const idle = op.proc.sample();
      const heap = await scrapeHeapBytes(op.metricsPort);
      result.startup = {
        readySeconds,
        requests,
        cpuSeconds: s.cpuSeconds,
        peakRssMiB: s.hwmBytes / MiB,
        settleSeconds: settled.seconds,
        rssMiB: idle.rssBytes / MiB,
        ...(heap !== undefined ? { heapMiB: heap / MiB } : {}),
        cachedObjects: observer.dbs.size + observer.children.size,
      };
      log(
        `  start-up with ${opts.n} present: ready in ${readySeconds.toFixed(2)} s, ${requests.writes} writes, ` +
          `${requests.reads} reads, settled after ${settled.seconds.toFixed(1)} s`,
      );
    }
    return result;
  } catch (err) {
    if (op) process.stderr.write(`--- last lines of ${op.proc.logFile}:\n${op.proc.logTail(20)}\n`);
    throw err;
  } finally {
    if (op) await op.proc.stop();
    await observer.stop();
    kube.close();
    await cp.stop();
    writeFileSync(join(opts.workDir, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
  }
}

export { type ChildKind, HttpError };

/**
 * Helpers of the PostgreSQL tests on real pods (postgres-pods*.test.ts, postgres-tls-pods.test.ts): their
 * set-up (a cluster with a real node, the namespace, the operator; a Database Running), kubectl against the test's
 * cluster, psql in a pod (the application user over TCP, the superuser over the local socket), what to
 * print when a wait fails, and a sampler of the pods' readiness and restarts.
 *
 * Passwords never go on a command line: psql gets the application password on stdin (a kubectl exec's
 * arguments are in the exec request's URL, which the API server and the kubelet may log), so that the
 * password scan of postgres-pods-credentials.test.ts finds only what the operator put somewhere.
 */
import { spawnSync } from 'node:child_process';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { type Pod, Pods, Secrets } from '@opkit/runtime';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  createNamespace,
  sample,
  startCluster,
  startOperator,
  waitForPhase,
} from './helpers.ts';

export type Kubectl = (
  args: string[],
  opts?: { timeoutMs?: number; input?: string },
) => { code: number; out: string; stdout: string };

export function kubectlFor(cluster: Cluster): Kubectl {
  return (args, opts = {}) => {
    const r = spawnSync('kubectl', ['--kubeconfig', cluster.kubeconfig, ...args], {
      encoding: 'utf8',
      timeout: opts.timeoutMs ?? 60_000,
      ...(opts.input !== undefined ? { input: opts.input } : {}),
    });
    // stdout alone for results: kubectl may warn on stderr (e.g. 'Unknown stream id 1') after an exec.
    return { code: r.status ?? -1, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
  };
}

/** The pods, their description and the last log lines of `pods`: what to print when a wait fails. */
export function diagnose(kubectl: Kubectl, ns: string, pods: string[]): string {
  return [
    kubectl(['get', 'pods,pvc,secrets,svc,endpoints', '-n', ns, '-o', 'wide']).out,
    kubectl(['describe', 'pods', '-n', ns]).out.slice(-6000),
    ...pods.map((p) => kubectl(['logs', '-n', ns, p, '--all-containers', '--tail', '40']).out),
  ].join('\n');
}

/** What a real-pod test runs on: its cluster, kubectl against it, and stop() (the operator, then the cluster). */
export interface PgPods {
  cluster: Cluster;
  kubectl: Kubectl;
  /** The operator's /metrics address, when started with `metrics`. */
  metricsAddress: Promise<string | undefined>;
  stop(): Promise<void>;
}

/**
 * The before hook of every real-pod test: a cluster with a kwok node and a real node (the PostgreSQL image
 * loaded), namespace `ns`, and the operator in this process.
 */
export async function startPgPods(
  ns: string,
  operatorName = 'pg-operator',
  operatorOpts: { replicationPollMs?: number; metrics?: boolean } = {},
): Promise<PgPods> {
  const cluster = await startCluster({ nodes: 1, realNodes: 1, images: [POSTGRES_IMAGE] });
  let operator: ReturnType<typeof startOperator> | undefined;
  try {
    await createNamespace(cluster.client, ns);
    operator = startOperator(cluster, { name: operatorName, ...operatorOpts });
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return {
    cluster,
    kubectl: kubectlFor(cluster),
    metricsAddress: operator.metricsAddress,
    async stop() {
      await operator?.stop();
      await cluster.stop();
    },
  };
}

/**
 * Creates PostgreSQL 15 Database `name` in `ns` on the local image with 1Gi (`spec` on top) and waits until
 * it is Running; when it does not get there, the error carries diagnose() of its pods.
 */
export async function runningPgDatabase(
  pg: PgPods,
  ns: string,
  name: string,
  spec: Partial<Database['spec']> & { replicas: number },
): Promise<Database> {
  await pg.cluster.client.create(
    Databases.resource,
    sample(ns, name, { engine: 'postgres', version: '15', storage: '1Gi', image: POSTGRES_IMAGE, ...spec }),
  );
  try {
    return await waitForPhase(pg.cluster.client, ns, name, 'Running', 600_000);
  } catch (err) {
    const pods = Array.from({ length: spec.replicas }, (_, i) => `${name}-${i}`);
    throw new Error(`${(err as Error).message}\n${diagnose(pg.kubectl, ns, pods)}`);
  }
}

/** A key of the credentials Secret, decoded. */
export async function secretValue(cluster: Cluster, ns: string, db: string, key: string): Promise<string> {
  const secret = await cluster.client.get(Secrets, { namespace: ns, name: `${db}-credentials` });
  return Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
}

/**
 * psql over TCP from pod `from` to `host` (a Service or `<pod>.<headless>`, in `ns`) as the application
 * user with `password` (the Secret's app-password by default), given on stdin; rows unaligned, tuples only.
 */
export async function appPsql(
  cluster: Cluster,
  kubectl: Kubectl,
  ns: string,
  db: string,
  from: string,
  host: string,
  sql: string,
  password?: string,
): Promise<string> {
  const user = await secretValue(cluster, ns, db, 'app-username');
  const pass = password ?? (await secretValue(cluster, ns, db, 'app-password'));
  const r = kubectl(
    [
      'exec',
      '-i',
      '-n',
      ns,
      from,
      '-c',
      'postgres',
      '--',
      'sh',
      '-c',
      'IFS= read -r PGPASSWORD; export PGPASSWORD; exec psql "$@"',
      'sh',
      '-X',
      '-v',
      'ON_ERROR_STOP=1',
      '-At',
      '-h',
      `${host}.${ns}.svc.cluster.local`,
      '-U',
      user,
      '-d',
      'app',
      '-c',
      sql,
    ],
    { input: `${pass}\n` },
  );
  if (r.code !== 0) throw new Error(`psql on ${host} from ${from} failed (${r.code}): ${r.out}`);
  return r.stdout.trim();
}

/** SQL as the superuser through pod's local socket (peer authentication, no password). */
export function superSql(
  kubectl: Kubectl,
  ns: string,
  pod: string,
  sql: string,
  timeoutMs = 120_000,
): string {
  const r = kubectl(
    [
      'exec',
      '-n',
      ns,
      pod,
      '-c',
      'postgres',
      '--',
      'psql',
      '-X',
      '-v',
      'ON_ERROR_STOP=1',
      '-h',
      '/var/run/postgresql',
      '-U',
      'postgres',
      '-d',
      'postgres',
      '-At',
      '-c',
      sql,
    ],
    { timeoutMs },
  );
  if (r.code !== 0) throw new Error(`superuser SQL on ${pod} failed (${r.code}): ${r.out}`);
  return r.stdout.trim();
}

export interface PodSample {
  at: number;
  pod: string;
  uid: string;
  ready: boolean;
  terminating: boolean;
  image: string;
  /** Restarts of every container, init containers included, summed. */
  restarts: number;
}

export function samplePod(p: Pod, at = Date.now()): PodSample {
  const st = p.status;
  const restarts = [...(st?.containerStatuses ?? []), ...(st?.initContainerStatuses ?? [])].reduce(
    (n, c) => n + (c.restartCount ?? 0),
    0,
  );
  return {
    at,
    pod: p.metadata.name ?? '',
    uid: p.metadata.uid ?? '',
    ready: st?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    terminating: Boolean(p.metadata.deletionTimestamp),
    image: p.spec?.containers.find((c) => c.name === 'postgres')?.image ?? '',
    restarts,
  };
}

/** Lists the pods of `ns` every `intervalMs` until stop(); each round is one list (one timestamp). */
export function samplePods(
  cluster: Cluster,
  ns: string,
  intervalMs = 500,
): { rounds: PodSample[][]; stop(): Promise<PodSample[][]> } {
  const rounds: PodSample[][] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const list = await cluster.client.list(Pods, { namespace: ns });
        const at = Date.now();
        rounds.push(list.items.map((p) => samplePod(p, at)));
      } catch {
        // A failed list is a missing sample, not a finding.
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    rounds,
    async stop() {
      stopped = true;
      await loop;
      return rounds;
    },
  };
}

/**
 * From pod samples of a rollout to `image`: when each pod's old incarnation went down (the first round in
 * which it was terminating, missing or on the new image), when its new one was first Ready, and the pods
 * in the order they went down.
 */
export function rolloutOrder(
  rounds: readonly PodSample[][],
  pods: readonly string[],
  image: string,
): { order: string[]; down: Map<string, number>; up: Map<string, number> } {
  const down = new Map<string, number>();
  const up = new Map<string, number>();
  for (const round of rounds) {
    const at = round[0]?.at ?? 0;
    const byPod = new Map(round.map((s) => [s.pod, s]));
    for (const pod of pods) {
      const s = byPod.get(pod);
      const old = s !== undefined && s.image !== image && !s.terminating;
      if (!old && !down.has(pod)) down.set(pod, at);
      if (s && s.image === image && s.ready && !up.has(pod)) up.set(pod, at);
    }
  }
  const order = [...down.entries()].sort((a, b) => a[1] - b[1]).map(([p]) => p);
  return { order, down, up };
}

/**
 * A statement through a Service right after the Database is Running: the Service's endpoints and the
 * node's kube-proxy rules may lag the pods' readiness by a moment (seen in a fresh-clone run: `connection
 * refused` on the read-write Service's ClusterIP). Retried only while the connection is refused, so a
 * statement that reached the server is never run twice.
 */
export async function throughService<T>(run: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await run();
    } catch (err) {
      const refused = /Connection refused/.test(err instanceof Error ? err.message : String(err));
      if (!refused || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

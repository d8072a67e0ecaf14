/**
 * The Database operator deployed in the cluster on a real node, for the real-node faults: its own image
 * built by `opkit build` (once per harness run), imported into the real node, deployed by `opkit deploy`
 * (config/default: 2 replicas with leader election, restricted PSS, exactly the generated RBAC). The
 * Databases' pods go to the kwok nodes (pinned there, tolerating their taint); the operator's pods run on
 * the real node. What a fault needs of it: the leader pod, SIGKILL of its container's process (through the
 * node's containerd), the pods' restarts and logs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '@opkit/controlplane';
import { operatorBuildArgs } from '../../../operators/database/src/demo/in-cluster.ts';
import { REPO_ROOT } from '../impls.ts';
import type { Kube, KubeObject } from '../kube.ts';

export const OPERATOR_DIR = join(REPO_ROOT, 'operators', 'database');
export const IMAGE = 'opkit.local/database-operator:faults';
export const OPERATOR_NAMESPACE = 'database-operator-system';
const LEASE = 'database-operator.myapp.example.com';
const SELECTOR = 'control-plane=controller-manager';
const OPKIT = join(REPO_ROOT, 'packages', 'cli', 'src', 'main.ts');

export class InClusterError extends Error {
  override name = 'InClusterError';
}

export interface ManagerPod extends KubeObject {
  spec?: { nodeName?: string };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; restartCount: number; containerID?: string; ready?: boolean }[];
  };
}

/** Runs the opkit CLI in the operator's directory; resolves with its output, rejects on a failure. */
function opkit(args: string[], timeoutMs: number): Promise<string> {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [OPKIT, ...args], { cwd: OPERATOR_DIR, env, timeout: timeoutMs });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(out)
        : reject(new InClusterError(`opkit ${args[0]} failed (exit ${code}): ${out.slice(-1500)}`)),
    );
  });
}

/**
 * Builds the operator's image into an OCI archive with opkit's own builder (what the in-cluster test does),
 * once per harness run; the npm cache makes it a minute or so when warm.
 */
export async function buildOperatorImage(workDir: string): Promise<string> {
  const archive = join(workDir, 'database-operator.oci.tar');
  if (existsSync(archive)) return archive;
  await opkit(operatorBuildArgs(IMAGE, archive), 900_000);
  return archive;
}

/** Imports the image into the real node and deploys config/default with it; waits until it is Ready. */
export async function deployOperator(cp: ControlPlane, archive: string): Promise<void> {
  await cp.loadImage(archive);
  await opkit(['deploy', '--image', IMAGE, '--kubeconfig', cp.kubeconfigPath, '--timeout', '600'], 700_000);
}

/** The manager pods not being deleted. */
export async function managerPods(kube: Kube): Promise<ManagerPod[]> {
  const list = await kube.json<{ items: ManagerPod[] }>(
    'GET',
    `/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods?labelSelector=${encodeURIComponent(SELECTOR)}`,
  );
  return list.items.filter((p) => !p.metadata.deletionTimestamp);
}

export const podReady = (p: ManagerPod): boolean =>
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

export const restartsOf = (p: ManagerPod): number =>
  (p.status?.containerStatuses ?? []).reduce((k, c) => k + c.restartCount, 0);

/** The Lease holder identity (`<pod>_<uid>`), undefined when unreadable or not held. */
export async function leaseHolder(kube: Kube): Promise<string | undefined> {
  const lease = await kube
    .json<{ spec?: { holderIdentity?: string } }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/${LEASE}`,
    )
    .catch(() => undefined);
  return lease?.spec?.holderIdentity || undefined;
}

/** The pod name of a Lease holder identity. */
export const podOf = (holder: string): string => holder.slice(0, holder.lastIndexOf('_'));

/**
 * SIGKILL of a manager pod's container process, through its node's containerd (`ctr tasks kill`): what an
 * OOM kill or a crash does; the kubelet restarts the container in the same pod.
 */
export function killContainer(cp: ControlPlane, pod: ManagerPod): void {
  const node = pod.spec?.nodeName;
  const id = pod.status?.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, '');
  if (!node || !id) throw new InClusterError(`pod ${pod.metadata.name} has no running container to kill`);
  // The real node's containerd socket (packages/controlplane node/configs.ts nodePaths).
  const sock = join(cp.dir, 'nodes', node, 'containerd.sock');
  if (!existsSync(sock)) throw new InClusterError(`no containerd socket of node ${node} at ${sock}`);
  const r = spawnSync('ctr', ['-a', sock, '-n', 'k8s.io', 'tasks', 'kill', '--signal', 'SIGKILL', id], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0)
    throw new InClusterError(`ctr tasks kill ${id} on ${node} failed: ${(r.stderr || r.stdout).trim()}`);
}

/** The manager container's log of a pod (and of its previous container when it restarted); stdout only. */
export function podLogs(cp: ControlPlane, pod: ManagerPod): string {
  const logs = (previous: boolean) =>
    spawnSync(
      'kubectl',
      [
        '--kubeconfig',
        cp.kubeconfigPath,
        '-n',
        OPERATOR_NAMESPACE,
        'logs',
        pod.metadata.name,
        '-c',
        'manager',
        ...(previous ? ['--previous'] : []),
      ],
      { encoding: 'utf8', timeout: 60_000, maxBuffer: 256 * 1024 * 1024 },
    ).stdout ?? '';
  return `${restartsOf(pod) > 0 ? logs(true) : ''}\n${logs(false)}`;
}

/** The deployed operator as the fault run drives and measures it. */
export interface InClusterOperator {
  /** SIGKILL of the leader pod's container; resolves right after the kill, with the holder killed. */
  killLeader(): Promise<{ killedAt: number; holder: string; pod: string }>;
  /** Resolves when the Lease names a holder other than `holder` (a new process: the identity has a new uid). */
  waitNewLeader(holder: string, timeoutMs: number): Promise<number>;
  /** Resolves when both replicas are Ready (after a kill: with the killed container restarted); returns when. */
  waitPodsReady(timeoutMs: number): Promise<number>;
  /** The manager pods now: their restarts (container restarts summed) and logs (previous containers too). */
  collect(): Promise<{ restarts: number; notReady: string[]; logs: string[] }>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Deploys the operator (deployOperator) and waits for its 2 Ready replicas and a Lease holder. */
export async function startInCluster(
  cp: ControlPlane,
  kube: Kube,
  archive: string,
): Promise<InClusterOperator> {
  await deployOperator(cp, archive);
  // Container restarts summed at the last kill: Ready again after it means a restarted container is Ready.
  let restartsAtKill = -1;
  const op: InClusterOperator = {
    async killLeader() {
      const holder = await leaseHolder(kube);
      if (!holder) throw new InClusterError('the Lease has no holder to kill');
      const name = podOf(holder);
      const pod = (await managerPods(kube)).find((p) => p.metadata.name === name);
      if (!pod) throw new InClusterError(`the Lease holder's pod ${name} is not among the manager pods`);
      restartsAtKill = (await managerPods(kube)).reduce((k, p) => k + restartsOf(p), 0);
      const killedAt = performance.now();
      killContainer(cp, pod);
      return { killedAt, holder, pod: name };
    },
    async waitNewLeader(holder, timeoutMs) {
      const deadline = performance.now() + timeoutMs;
      while (performance.now() < deadline) {
        const h = await leaseHolder(kube);
        if (h && h !== holder) return performance.now();
        await sleep(100);
      }
      throw new InClusterError(`no new Lease holder within ${timeoutMs / 1000} s (was ${holder})`);
    },
    async waitPodsReady(timeoutMs) {
      const deadline = performance.now() + timeoutMs;
      while (performance.now() < deadline) {
        const pods = await managerPods(kube).catch(() => []);
        const restarts = pods.reduce((k, p) => k + restartsOf(p), 0);
        if (pods.length === 2 && pods.every(podReady) && restarts > restartsAtKill) return performance.now();
        await sleep(250);
      }
      throw new InClusterError(`the manager's 2 replicas not Ready again within ${timeoutMs / 1000} s`);
    },
    async collect() {
      const pods = await managerPods(kube);
      return {
        restarts: pods.reduce((k, p) => k + restartsOf(p), 0),
        notReady: pods.filter((p) => !podReady(p)).map((p) => p.metadata.name),
        logs: pods.map((p) => podLogs(cp, p)),
      };
    },
  };
  await op.waitPodsReady(300_000);
  for (let i = 0; i < 600 && !(await leaseHolder(kube)); i++) await sleep(200);
  return op;
}

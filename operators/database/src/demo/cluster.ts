/**
 * The demo's cluster: the configured one when reachable, else opkit's local cluster (with a real node as
 * root when the host has what real nodes need, else simulated nodes only, saying why), and the PostgreSQL
 * image on its real node.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  clusterUp,
  ensureImage,
  NodePrerequisiteError,
  REAL_NODE_LABEL,
  runClusterCommand,
  runningCluster,
} from '@opkit/controlplane';
import { createClient, loadConfig, type Node, Nodes, type RestClient } from '@opkit/runtime';
import { withProgress } from './progress.ts';

export type Say = (line: string) => void;

export interface DemoCluster {
  kubeconfig: string;
  /** opkit's local cluster's name, when the demo uses it (images can then be loaded onto its real node). */
  localName?: string;
  /** Why the cluster has no real node, when the demo knows (printed before the simulated part). */
  noRealNodes?: { why: string; hint: string };
}

/** A kubeconfig that points at a reachable API server, or undefined. */
export async function configuredCluster(explicit: string | undefined, say: Say): Promise<string | undefined> {
  const candidates = explicit
    ? [explicit]
    : process.env.KUBECONFIG
      ? [process.env.KUBECONFIG]
      : [join(homedir(), '.kube', 'config')];
  for (const file of candidates) {
    if (!file.split(':').some((f) => existsSync(f))) {
      if (explicit) throw new Error(`--kubeconfig ${explicit}: no such file`);
      continue;
    }
    try {
      const config = loadConfig({ kubeconfig: file.split(':')[0] ?? file });
      const client = createClient(config, { timeoutMs: 5000 });
      try {
        await client.discover('v1', { signal: AbortSignal.timeout(5000) });
        return file.split(':')[0];
      } finally {
        client.close();
      }
    } catch (err) {
      if (explicit) throw err;
      say(`(the configured cluster in ${file} is not reachable: ${(err as Error).message})`);
    }
  }
  return undefined;
}

/** Why this process cannot start real nodes before even trying, or undefined. */
export function realNodesBlocked(uid = process.getuid?.()): { why: string; hint: string } | undefined {
  if (uid === 0) return undefined;
  return {
    why: 'real nodes need root (containerd, the kubelet, network namespaces, mounts)',
    hint: 'run the demo as root (sudo npm run demo) to see PostgreSQL on real pods',
  };
}

/**
 * opkit's local cluster `name`: the running one, or a new one with 3 simulated nodes and, unless `simulated`,
 * one real node (as root, when the host has containerd, runc, the CNI plugins, ...).
 */
export async function localCluster(name: string, simulated: boolean, say: Say): Promise<DemoCluster> {
  const running = runningCluster(name);
  const log = (l: string) => say(`  ${l}`);
  if (running) {
    say(`Using the running local cluster "${name}" at ${running.server}.`);
    return { kubeconfig: running.kubeconfigPath, localName: name };
  }
  let noRealNodes = simulated
    ? { why: '--simulated', hint: 'run without --simulated for PostgreSQL on real pods' }
    : realNodesBlocked();
  if (!noRealNodes) {
    say(`Starting the local cluster "${name}": 3 simulated (kwok) nodes and 1 real node.`);
    say(
      '  (the first run builds the control plane, kubelet, CoreDNS and the images: see the README for times)',
    );
    try {
      const state = await withProgress('starting the local cluster', say, () =>
        clusterUp({ name, nodes: 3, realNodes: 1, log, timeoutMs: 300_000 }),
      );
      return { kubeconfig: state.kubeconfigPath, localName: name };
    } catch (err) {
      if (!(err instanceof NodePrerequisiteError)) throw err;
      noRealNodes = { why: err.message, hint: err.hint };
    }
  }
  say(`No real node: ${noRealNodes.why}.`);
  say(`  ${noRealNodes.hint}.`);
  say(`Starting the local cluster "${name}" with 3 simulated (kwok) nodes only.`);
  const state = await withProgress('starting the local cluster', say, () =>
    clusterUp({ name, nodes: 3, log, timeoutMs: 300_000 }),
  );
  return { kubeconfig: state.kubeconfigPath, localName: name, noRealNodes };
}

export function isReady(node: Node): boolean {
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/** The cluster's Ready real nodes (opkit's label). */
export async function realNodes(client: RestClient): Promise<Node[]> {
  const list = await client.list(Nodes, { labelSelector: `${REAL_NODE_LABEL}=real` });
  return list.items.filter(isReady);
}

/** Whether the kubelet reports the image on the node (node.status.images). */
export function nodeHasImage(node: Node, image: string): boolean {
  return node.status?.images?.some((i) => i.names?.includes(image)) === true;
}

/**
 * Makes `image` (an opkit.local image) present on the real nodes: built into the cache on first use (minutes,
 * with progress) and imported into the local cluster's nodes. On a cluster that is not opkit's local one,
 * only says how to load it when a node lacks it.
 */
export async function ensureImageOnNodes(
  cluster: DemoCluster,
  nodes: Node[],
  image: string,
  say: Say,
): Promise<void> {
  if (nodes.every((n) => nodeHasImage(n, image))) {
    say(`Image ${image}: on the real node.`);
    return;
  }
  if (!cluster.localName) {
    say(
      `Image ${image}: not reported by ${nodes.map((n) => n.metadata.name).join(', ')}; if the pods stay ` +
        'ErrImageNeverPull, load it: npx opkit-controlplane load-image <archive> (see packages/controlplane/REAL-NODES.md).',
    );
    return;
  }
  const archive = await withProgress(`building ${image}`, say, () =>
    ensureImage(image, (l) => say(`  ${l}`)),
  );
  const code = await runClusterCommand('load-image', { name: cluster.localName }, { args: [archive] });
  if (code !== 0) throw new Error(`loading ${image} into the local cluster "${cluster.localName}" failed`);
  say(`Image ${image}: loaded onto the real node.`);
}

/**
 * The network of a cluster's real nodes. Each node is a network namespace of its own (its iptables,
 * its kubelet port, its pod bridge), joined by a veth to one bridge per cluster on the host:
 *
 *   host: bridge opk-<id>  10.250.K.1/24      (the API server forwarder and CoreDNS listen here)
 *   node i: netns opk-<id>-<i>, eth0 10.250.K.(10+i), pod bridge cni0 with pods in 10.(232+i).K.0/24
 *
 * Nothing routes to the outside: a node namespace knows only its bridge's subnet, the pod subnets of
 * the other nodes and the Service range, so pod traffic stays on loopback-like paths we created.
 * Every step is recorded first (/run/opkit/nodes/<id>.json) so a crashed run is swept by the next start.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withLock } from '../install/lock.ts';
import { inNetns, linkExists, sh } from './sys.ts';

export const MAX_REAL_NODES = 8;
export const SERVICE_ROUTE = '10.96.0.0/16';
/** The kube-dns Service's ClusterIP in SERVICE_ROUTE (the .10 kubeadm and kind use): pods' name server. */
export const CLUSTER_DNS_IP = '10.96.0.10';
export const REAL_POD_CIDR = '10.232.0.0/13';
const RECORDS = '/run/opkit/nodes';

export interface NodeNet {
  name: string;
  netns: string;
  ip: string;
  podSubnet: string;
  podGateway: string;
  hostVeth: string;
}

export interface ClusterNetwork {
  id: string;
  bridge: string;
  hostIp: string;
  nodes: NodeNet[];
}

/** What teardown needs, written before anything is created. */
export interface NetworkRecord {
  ownerPid: number;
  network: ClusterNetwork;
  /** Directories holding node state (containerd, kubelet): processes and mounts under them are ours. */
  dirs: string[];
  /**
   * Directories whose mounts and loop devices go with the nodes (the provisioner's volumes), but whose
   * files stay: a `dir` given to start() keeps its volumes' data.
   */
  mountDirs?: string[];
  /** The control plane's directory: after a crash, its orphaned etcd and API server go too. */
  clusterDir?: string;
}

/** Pure: the addresses and names of a cluster network, given its id and subnet index K. */
export function planNetwork(
  id: string,
  k: number,
  count: number,
  nodeName: (i: number) => string,
): ClusterNetwork {
  if (count > MAX_REAL_NODES) throw new RangeError(`at most ${MAX_REAL_NODES} real nodes per cluster`);
  return {
    id,
    bridge: `opk-${id}`,
    hostIp: `10.250.${k}.1`,
    nodes: Array.from({ length: count }, (_, i) => ({
      name: nodeName(i),
      netns: `opk-${id}-${i}`,
      ip: `10.250.${k}.${10 + i}`,
      podSubnet: `10.${232 + i}.${k}.0/24`,
      podGateway: `10.${232 + i}.${k}.1`,
      hostVeth: `opkv${id}${i}`,
    })),
  };
}

/** Pure: the first subnet index whose 10.250.K.0/24 no host address uses. */
export function freeSubnetIndex(hostAddrs: string[]): number {
  const used = new Set(
    hostAddrs
      .map((a) => /^10\.250\.(\d+)\./.exec(a)?.[1])
      .filter(Boolean)
      .map(Number),
  );
  for (let k = 1; k < 255; k++) if (!used.has(k)) return k;
  throw new Error(
    'no free 10.250.K.0/24 subnet left for a cluster bridge: stop other clusters with real nodes',
  );
}

function hostAddresses(): string[] {
  return sh('ip', ['-o', '-4', 'addr', 'show'])
    .split('\n')
    .map((l) => /inet (\S+)\//.exec(l)?.[1])
    .filter((a): a is string => !!a);
}

export function recordPath(id: string): string {
  return join(RECORDS, `${id}.json`);
}

export function readRecords(): NetworkRecord[] {
  let files: string[] = [];
  try {
    files = readdirSync(RECORDS).filter((f) => f.endsWith('.json'));
  } catch {
    return [];
  }
  const out: NetworkRecord[] = [];
  for (const f of files) {
    try {
      out.push(JSON.parse(readFileSync(join(RECORDS, f), 'utf8')) as NetworkRecord);
    } catch {
      rmSync(join(RECORDS, f), { force: true });
    }
  }
  return out;
}

export function removeRecord(id: string): void {
  rmSync(recordPath(id), { force: true });
}

/** Creates the bridge, the node namespaces and their veths (under a host-wide lock: subnet choice). */
export async function createNetwork(
  count: number,
  dirs: string[],
  clusterDir: string,
  nodeName: (i: number) => string,
  mountDirs: string[] = [],
): Promise<ClusterNetwork> {
  mkdirSync(RECORDS, { recursive: true });
  return withLock(
    join(RECORDS, '..', 'net.lock'),
    () => {},
    async () => {
      const id = randomBytes(3).toString('hex');
      const net = planNetwork(id, freeSubnetIndex(hostAddresses()), count, nodeName);
      const record: NetworkRecord = { ownerPid: process.pid, network: net, dirs, mountDirs, clusterDir };
      writeFileSync(recordPath(id), JSON.stringify(record, null, 2));
      sh('ip', ['link', 'add', net.bridge, 'type', 'bridge']);
      sh('ip', ['addr', 'add', `${net.hostIp}/24`, 'dev', net.bridge]);
      sh('ip', ['link', 'set', net.bridge, 'up']);
      for (const node of net.nodes) {
        const peer = `opkp${id}${node.netns.slice(-1)}`;
        sh('ip', ['netns', 'add', node.netns]);
        sh('ip', ['link', 'add', node.hostVeth, 'type', 'veth', 'peer', 'name', peer]);
        sh('ip', ['link', 'set', peer, 'netns', node.netns]);
        sh('ip', ['link', 'set', node.hostVeth, 'master', net.bridge, 'up']);
        inNetns(node.netns, 'ip', ['link', 'set', peer, 'name', 'eth0']);
        inNetns(node.netns, 'ip', ['addr', 'add', `${node.ip}/24`, 'dev', 'eth0']);
        inNetns(node.netns, 'ip', ['link', 'set', 'eth0', 'up']);
        inNetns(node.netns, 'ip', ['link', 'set', 'lo', 'up']);
        inNetns(node.netns, 'ip', ['route', 'add', SERVICE_ROUTE, 'via', net.hostIp]);
        for (const other of net.nodes)
          if (other !== node) inNetns(node.netns, 'ip', ['route', 'add', other.podSubnet, 'via', other.ip]);
        // kube-proxy needs both (per namespace); nothing is forwarded beyond the routes above.
        inNetns(node.netns, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
        inNetns(node.netns, 'sysctl', ['-qw', 'net.bridge.bridge-nf-call-iptables=1']);
        // Replies from the host (API server, DNS) to pods go back through the pod's node.
        sh('ip', ['route', 'add', node.podSubnet, 'via', node.ip]);
      }
      return net;
    },
  );
}

/** Removes the bridge (its routes go with it) and the node namespaces (their veths and iptables go with them). */
export function deleteNetwork(net: ClusterNetwork): void {
  for (const node of net.nodes) {
    sh('ip', ['netns', 'del', node.netns], { allowFail: true });
    if (linkExists(node.hostVeth)) sh('ip', ['link', 'del', node.hostVeth], { allowFail: true });
  }
  if (linkExists(net.bridge)) sh('ip', ['link', 'del', net.bridge], { allowFail: true });
}

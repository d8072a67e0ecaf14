/**
 * Real nodes joined to a local control plane: per node containerd + kubelet + kube-proxy inside the
 * node's network namespace, and one CoreDNS per cluster on the bridge address. Two phases, because the
 * API server's certificate and flags depend on the network: prepareRealNodes() before the API server,
 * startRealNodes() after it.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../components/etcd.ts';
import { ensureImage } from '../images/build.ts';
import { PAUSE_IMAGE, SHELL_IMAGE } from '../images/recipes.ts';
import type { NodeInstallation } from '../install/install.ts';
import type { KubeClient } from '../kube-client.ts';
import { buildKubeconfig, kubeconfigYaml } from '../kubeconfig.ts';
import { issueCertificate, type KeyPairPem } from '../pki.ts';
import { freePort } from '../ports.ts';
import { ManagedProcess } from '../process.ts';
import {
  cgroupRoot,
  cniConfig,
  containerdConfig,
  corefile,
  kubeDnsObjects,
  kubeletConfig,
  kubeProxyConfig,
  type NodePaths,
  nodePaths,
  REAL_NODE_LABEL,
} from './configs.ts';
import { importArchive, loadImage } from './load-image.ts';
import {
  CLUSTER_DNS_IP,
  type ClusterNetwork,
  createNetwork,
  type NetworkRecord,
  REAL_POD_CIDR,
} from './network.ts';
import { checkNodePrerequisites } from './prereqs.ts';
import { inNetns, netnsPath } from './sys.ts';
import { sweepStale, teardown } from './teardown.ts';

export const realNodeName = (i: number) => `real-node-${i}`;

const FORWARD_SCRIPT = fileURLToPath(new URL('./forward.ts', import.meta.url));

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface PreparedNodes {
  record: NetworkRecord;
  network: ClusterNetwork;
  nodesDir: string;
  /** The provisioner's volumes: unmounted and detached with the nodes (their files stay). */
  volumesDir: string;
}

/** Checks the host, sweeps crashed runs, creates the network. The API server then serves on network.hostIp. */
export async function prepareRealNodes(count: number, clusterDir: string, log: (l: string) => void) {
  checkNodePrerequisites();
  sweepStale(log);
  const nodesDir = join(clusterDir, 'nodes');
  const volumesDir = join(clusterDir, 'volumes');
  mkdirSync(nodesDir, { recursive: true });
  const network = await createNetwork(count, [nodesDir], clusterDir, realNodeName, [volumesDir]);
  const record: NetworkRecord = {
    ownerPid: process.pid,
    network,
    dirs: [nodesDir],
    mountDirs: [volumesDir],
    clusterDir,
  };
  return { record, network, nodesDir, volumesDir } satisfies PreparedNodes;
}

/** The API server flags real nodes need: advertise the bridge address, reach kubelets by InternalIP. */
export function apiServerNodeArgs(network: ClusterNetwork, kubeletClient: { cert: string; key: string }) {
  return [
    `--advertise-address=${network.hostIp}`,
    `--kubelet-client-certificate=${kubeletClient.cert}`,
    `--kubelet-client-key=${kubeletClient.key}`,
    '--kubelet-preferred-address-types=InternalIP,Hostname',
  ];
}

/** The kube-dns Service and its EndpointSlice (CoreDNS on the host), once kube-system exists. */
async function createKubeDns(client: KubeClient, coreDnsIp: string): Promise<void> {
  const { service, endpointSlice } = kubeDnsObjects(CLUSTER_DNS_IP, coreDnsIp);
  const create = async (path: string, body: unknown) => {
    const res = await client.raw('POST', path, body);
    if (res.code !== 201 && res.code !== 409) throw new Error(`POST ${path}: HTTP ${res.code} ${res.text}`);
    return true;
  };
  // The API server creates kube-system shortly after it starts serving.
  await waitFor('the kube-dns Service', undefined, () =>
    create('/api/v1/namespaces/kube-system/services', service),
  );
  await create('/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices', endpointSlice);
}

export interface StartRealNodesOptions {
  prepared: PreparedNodes;
  binaries: NodeInstallation['binaries'];
  ca: KeyPairPem;
  caFile: string;
  apiPort: number;
  client: KubeClient;
  /** Admin kubeconfig (CoreDNS reads the API with it) and its context. */
  kubeconfigPath: string;
  context: string;
  /** Images to import besides pause and shell. */
  images?: string[];
  log: (l: string) => void;
}

export interface RealNodes {
  names: string[];
  network: ClusterNetwork;
  /** Imports an OCI archive (or a directory holding an OCI layout) into every real node's containerd. */
  loadImage(archiveOrDir: string): Promise<void>;
  processes(): ManagedProcess[];
  /** Kills a node's kubelet (SIGKILL); its containers keep running. A fault for failover tests. */
  stopKubelet(name: string): Promise<void>;
  /** Starts a stopped kubelet again (the same flags, the same state directory). */
  startKubelet(name: string): void;
  stop(): Promise<void>;
  /** Synchronous last resort (exit hooks). */
  killNow(): void;
}

function writeFile(path: string, content: string, mode = 0o600) {
  writeFileSync(path, content, { mode });
}

/** cgroupfs: the kubelet expects its cgroup root to exist in every v1 hierarchy. */
function createCgroupRoot(netns: string) {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[f.indexOf('-') + 1] === 'cgroup')
    .map((f) => f[4]!);
  for (const m of mounts) {
    const leaf = join(m, cgroupRoot(netns));
    mkdirSync(leaf, { recursive: true });
    if (existsSync(join(m, 'cpuset.cpus'))) {
      // A new cpuset cgroup starts empty: copy the parent's CPUs and memory nodes down.
      for (const dir of [join(m, 'opkit'), leaf]) {
        for (const f of ['cpuset.cpus', 'cpuset.mems']) {
          const parent = readFileSync(join(dir, '..', f), 'utf8').trim();
          if (!readFileSync(join(dir, f), 'utf8').trim()) writeFileSync(join(dir, f), parent);
        }
      }
    }
  }
}

function inNode(netns: string, name: string, binary: string, args: string[], logFile: string) {
  return new ManagedProcess(name, 'nsenter', [`--net=${netnsPath(netns)}`, '--', binary, ...args], logFile);
}

export async function startRealNodes(o: StartRealNodesOptions): Promise<RealNodes> {
  const { network, nodesDir, record } = o.prepared;
  const processes: ManagedProcess[] = [];
  const paths: NodePaths[] = [];
  /** Each node's kubelet: how to start it (again, startKubelet) and its index in `processes`. */
  const kubeletStarts = new Map<string, { start: () => ManagedProcess; index: number }>();
  const kubeletOf = (name: string) => {
    const k = kubeletStarts.get(name);
    if (!k)
      throw new Error(`no real node ${name} (the real nodes are ${[...kubeletStarts.keys()].join(', ')})`);
    return k;
  };
  let stopped = false;
  const killNow = () => {
    for (const p of processes) p.killNow();
    teardown(record);
  };
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // Kubelets first (no restarts of what we are about to kill), then the rest; teardown kills containers.
    // A short grace: teardown() kills whatever is left, containers included.
    for (const p of [...processes].reverse()) await p.stop(2000);
    teardown(record);
  };
  try {
    const started = Date.now();
    const forwarder = new ManagedProcess(
      'api-forwarder',
      process.execPath,
      // The last argument names the run, so a crashed run's sweep finds this process too.
      [FORWARD_SCRIPT, network.hostIp, String(o.apiPort), String(o.apiPort), nodesDir],
      join(nodesDir, 'api-forwarder.log'),
    );
    processes.push(forwarder);
    await waitFor('the API server forwarder', forwarder, () => canConnect(network.hostIp, o.apiPort));
    const server = `https://${network.hostIp}:${o.apiPort}`;
    const archives = [];
    for (const image of [PAUSE_IMAGE, SHELL_IMAGE, ...(o.images ?? [])])
      archives.push(await ensureImage(image, o.log));

    // CoreDNS on the bridge address: every pod reaches it through its node.
    const dnsDir = join(nodesDir, 'coredns');
    mkdirSync(dnsDir, { recursive: true });
    const readyPort = await freePort();
    writeFile(join(dnsDir, 'Corefile'), corefile(network.hostIp, o.kubeconfigPath, o.context, readyPort));
    const dns = new ManagedProcess(
      'coredns',
      o.binaries.coredns,
      ['-conf', join(dnsDir, 'Corefile')],
      join(dnsDir, 'coredns.log'),
    );
    processes.push(dns);
    await createKubeDns(o.client, network.hostIp);

    const proxyCert = await issueCertificate(o.ca, { subject: 'CN=system:kube-proxy', usage: 'client' });
    for (const node of network.nodes) {
      const p = nodePaths(join(nodesDir, node.name));
      paths.push(p);
      for (const d of [p.dir, p.pki, p.cniConfDir, p.kubeletRoot, p.podLogs])
        mkdirSync(d, { recursive: true });
      createCgroupRoot(node.netns);
      const client = await issueCertificate(o.ca, {
        subject: `CN=system:node:${node.name}, O=system:nodes`,
        usage: 'client',
      });
      const serving = await issueCertificate(o.ca, {
        subject: `CN=${node.name}`,
        usage: 'server',
        hosts: [node.ip, node.name],
      });
      const pem = (n: string, s: string) => {
        writeFile(join(p.pki, n), s);
        return join(p.pki, n);
      };
      copyFileSync(o.caFile, join(p.pki, 'ca.crt'));
      const certFile = pem('kubelet.crt', serving.certPem);
      const keyFile = pem('kubelet.key', serving.keyPem);
      writeFile(
        p.kubeletKubeconfig,
        kubeconfigYaml(buildKubeconfig(node.name, server, o.ca.certPem, client)),
      );
      writeFile(
        p.proxyKubeconfig,
        kubeconfigYaml(buildKubeconfig('kube-proxy', server, o.ca.certPem, proxyCert)),
      );
      writeFile(p.containerdConfig, containerdConfig(p));
      writeFile(join(p.cniConfDir, '10-opkit.conflist'), cniConfig(p, node.podSubnet, node.podGateway));
      // No host search domains or name servers leak into pods: the kubelet adds the cluster's.
      writeFile(p.resolvConf, '', 0o644);
      writeFile(
        p.kubeletConfig,
        kubeletConfig({
          paths: p,
          netns: node.netns,
          dnsIp: CLUSTER_DNS_IP,
          caFile: join(p.pki, 'ca.crt'),
          certFile,
          keyFile,
        }),
      );
      writeFile(p.proxyConfig, kubeProxyConfig(p, node.name, REAL_POD_CIDR));

      const containerd = inNode(
        node.netns,
        'containerd',
        'containerd',
        ['--config', p.containerdConfig],
        join(p.dir, 'containerd.log'),
      );
      processes.push(containerd);
      await waitFor(`containerd of ${node.name}`, containerd, async () => {
        const r = spawnSync('ctr', ['-a', p.containerdSock, 'version'], { timeout: 5000 });
        return r.status === 0;
      });
      for (const a of archives) await importArchive(p.containerdSock, a);
      const kubelet = () =>
        inNode(
          node.netns,
          'kubelet',
          o.binaries.kubelet,
          [
            `--config=${p.kubeletConfig}`,
            `--kubeconfig=${p.kubeletKubeconfig}`,
            `--root-dir=${p.kubeletRoot}`,
            `--cert-dir=${p.pki}`,
            `--hostname-override=${node.name}`,
            `--node-ip=${node.ip}`,
            `--node-labels=${REAL_NODE_LABEL}=real`,
            '--v=1',
          ],
          join(p.dir, 'kubelet.log'),
        );
      kubeletStarts.set(node.name, { start: kubelet, index: processes.length });
      processes.push(kubelet());
      processes.push(
        inNode(
          node.netns,
          'kube-proxy',
          o.binaries['kube-proxy'],
          [`--config=${p.proxyConfig}`, '--v=1'],
          join(p.dir, 'kube-proxy.log'),
        ),
      );
    }
    await waitFor(
      'CoreDNS',
      dns,
      async () => {
        const res = await fetch(`http://127.0.0.1:${readyPort}/ready`, { signal: AbortSignal.timeout(2000) });
        return res.ok;
      },
      120_000,
    );
    const kubelets = processes.filter((p) => p.name === 'kubelet');
    for (const [i, node] of network.nodes.entries()) {
      await waitFor(
        `real node ${node.name} Ready`,
        kubelets[i],
        async () => {
          const res = await o.client.raw('GET', `/api/v1/nodes/${node.name}`);
          if (res.code !== 200) return false;
          const n = JSON.parse(res.text) as {
            status?: { conditions?: Array<{ type: string; status: string }> };
          };
          return !!n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        },
        180_000,
      );
    }
    // Pods resolve names through the kube-dns ClusterIP: a lookup before kube-proxy's first sync would
    // leave a UDP conntrack entry without the DNAT, so start() returns once every node has the rules.
    const proxies = processes.filter((p) => p.name === 'kube-proxy');
    for (const [i, node] of network.nodes.entries()) {
      await waitFor(`kube-proxy of ${node.name} serving the kube-dns Service`, proxies[i], async () =>
        inNetns(node.netns, 'iptables-save', ['-t', 'nat'], { allowFail: true }).includes(
          `${CLUSTER_DNS_IP}/32`,
        ),
      );
    }
    o.log(`${network.nodes.length} real node(s) Ready (${Date.now() - started} ms)`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    names: network.nodes.map((n) => n.name),
    network,
    loadImage: (source: string) =>
      loadImage(
        paths.map((p) => p.containerdSock),
        source,
      ),
    processes: () => processes,
    async stopKubelet(name: string) {
      const k = processes[kubeletOf(name).index] as ManagedProcess;
      // SIGKILL: a kubelet that died. Its containers (containerd's shims) keep running, as on a real node.
      k.killNow();
      await k.exited;
    },
    startKubelet(name: string) {
      const k = kubeletOf(name);
      if (!processes[k.index]?.running) processes[k.index] = k.start();
    },
    stop,
    killNow,
  };
}

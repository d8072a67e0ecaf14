/**
 * start(): a real local Kubernetes control plane on loopback.
 *   mode 'apiserver': etcd + kube-apiserver (what envtest runs): seconds to start, for most tests.
 *   mode 'cluster':   adds kube-controller-manager, kube-scheduler, kwok nodes and a volume provisioner,
 *                     so StatefulSet pods become Running and Ready, PVCs bind, and GC really happens.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApiServer, waitForApiServer } from './components/apiserver.ts';
import { startControllerManager, startScheduler } from './components/controllers.ts';
import { compactEtcd, type EtcdHandle, startEtcd, waitFor } from './components/etcd.ts';
import { fakeNode, readyNodeNames, startKwok } from './components/kwok.ts';
import {
  findInstallation,
  findNodeInstallation,
  type Installation,
  install,
  installNode,
  type NodeInstallation,
} from './install/install.ts';
import { KubeClient } from './kube-client.ts';
import { buildKubeconfig, type Kubeconfig, kubeconfigYaml } from './kubeconfig.ts';
import { REAL_NODE_LABEL, SIMULATED_TAINT } from './node/configs.ts';
import {
  apiServerNodeArgs,
  type PreparedNodes,
  prepareRealNodes,
  type RealNodes,
  startRealNodes,
} from './node/real-nodes.ts';
import { teardown } from './node/teardown.ts';
import { generatePki, issueCertificate } from './pki.ts';
import { freePort } from './ports.ts';
import { type ManagedProcess, onProcessExit } from './process.ts';
import { defaultStorageClass, VolumeProvisioner, xfsStorageClass } from './storage/provisioner.ts';

export type Mode = 'apiserver' | 'cluster';

export interface StartOptions {
  mode?: Mode;
  /** Fake nodes in cluster mode (default 3). */
  nodes?: number;
  /**
   * Real nodes in cluster mode (default 0): kubelet + containerd + kube-proxy running real containers,
   * labelled opkit.dev/node=real; the kwok nodes are then tainted opkit.dev/simulated=true:NoSchedule.
   * Needs root and the Debian packages of scripts/system-packages.sh.
   */
  realNodes?: number;
  /** Images to import into the real nodes besides opkit.local/pause:1 and opkit.local/shell:1. */
  images?: string[];
  /** Context and cluster name in the kubeconfig (default 'opkit'). */
  name?: string;
  /** Working directory (PKI, logs, etcd data). Default: a new temporary directory, removed by stop(). */
  dir?: string;
  /** Extra kube-apiserver flags, e.g. ['--max-requests-inflight=0', '--enable-priority-and-fairness=false']. */
  apiServerArgs?: string[];
  etcdArgs?: string[];
  controllerManagerArgs?: string[];
  /** Extra kube-scheduler flags, e.g. ['--v=3'] (its informers' list and watch calls in its log). */
  schedulerArgs?: string[];
  /** Build the binaries when they are not cached yet (default true). */
  install?: boolean;
  /** Progress lines; silent by default. */
  log?: (line: string) => void;
}

export interface ControlPlane {
  readonly mode: Mode;
  readonly name: string;
  readonly dir: string;
  /** https://127.0.0.1:<port> */
  readonly server: string;
  readonly kubeconfigPath: string;
  readonly kubeconfig: Kubeconfig;
  readonly etcdUrl: string;
  /** PIDs of every child process, for tests that check nothing is left behind. */
  pids(): number[];
  /** Stops kube-apiserver and starts it again on the same port; etcd keeps all data. */
  restartApiServer(opts?: { downtimeMs?: number }): Promise<void>;
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  /** Compacts etcd at its current revision (older resourceVersions then give 410 Gone). */
  compact(): Promise<number>;
  /** Adds fake Ready nodes (cluster mode). */
  addNodes(count: number): Promise<string[]>;
  /** Names of the real nodes (empty without them). */
  readonly realNodes: string[];
  /** Imports an OCI archive or layout directory into every real node (what `kind load` does). */
  loadImage(archiveOrDir: string): Promise<void>;
  /** Kills a real node's kubelet (SIGKILL): its containers keep running; the node goes NotReady later. */
  stopKubelet(node: string): Promise<void>;
  /** Starts a real node's stopped kubelet again. */
  startKubelet(node: string): void;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const SERVICE_CIDR = '10.96.0.0/16';
const SERVICE_IP = '10.96.0.1';
const POD_CIDR = '10.244.0.0/16';

async function resolveInstallation(opts: StartOptions): Promise<Installation> {
  const found = findInstallation();
  if (found) return found;
  if (opts.install === false) {
    throw new Error(
      'the control plane binaries are not built yet: run `npm run setup` (or `opkit cluster install`)',
    );
  }
  return install({ log: opts.log ?? ((l) => process.stderr.write(`${l}\n`)) });
}

async function resolveNodeInstallation(opts: StartOptions): Promise<NodeInstallation> {
  const found = findNodeInstallation();
  if (found) return found;
  if (opts.install === false) {
    throw new Error('the real node binaries are not built yet: run `npm run setup -- --real-nodes`');
  }
  return installNode({ log: opts.log ?? ((l) => process.stderr.write(`${l}\n`)) });
}

export async function start(opts: StartOptions = {}): Promise<ControlPlane> {
  const mode = opts.mode ?? 'apiserver';
  const name = opts.name ?? 'opkit';
  const log = opts.log ?? (() => {});
  const inst = await resolveInstallation(opts);
  const realCount = mode === 'cluster' ? (opts.realNodes ?? 0) : 0;
  const nodeInst = realCount > 0 ? await resolveNodeInstallation(opts) : undefined;
  const ownsDir = !opts.dir;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'opkit-cp-'));
  mkdirSync(dir, { recursive: true });

  const processes: ManagedProcess[] = [];
  let provisioner: VolumeProvisioner | undefined;
  let client: KubeClient | undefined;
  let stopped = false;
  let prepared: PreparedNodes | undefined;
  let realNodes: RealNodes | undefined;
  const unregister = onProcessExit(() => {
    if (realNodes) realNodes.killNow();
    else if (prepared) teardown(prepared.record);
    for (const p of processes) p.killNow();
    if (ownsDir) rmSync(dir, { recursive: true, force: true });
  });

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // The provisioner first: no volume is being made while teardown unmounts them.
    await provisioner?.stop();
    if (realNodes) await realNodes.stop();
    else if (prepared) teardown(prepared.record);
    // Reverse start order: clients of the apiserver first, etcd last.
    for (const p of [...processes].reverse()) await p.stop(3000);
    client?.close();
    if (ownsDir) rmSync(dir, { recursive: true, force: true });
    unregister();
  };

  try {
    const started = Date.now();
    if (realCount > 0) prepared = await prepareRealNodes(realCount, dir, log);
    const pki = await generatePki({
      serviceIP: SERVICE_IP,
      hosts: prepared ? [prepared.network.hostIp] : [],
    });
    const pkiDir = join(dir, 'pki');
    mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
    const file = (n: string, content: string) => {
      const p = join(pkiDir, n);
      writeFileSync(p, content, { mode: 0o600 });
      return p;
    };
    const certs = {
      ca: file('ca.crt', pki.ca.certPem),
      serverCert: file('apiserver.crt', pki.server.certPem),
      serverKey: file('apiserver.key', pki.server.keyPem),
      saPublic: file('sa.pub', pki.serviceAccount.publicKeyPem),
      saPrivate: file('sa.key', pki.serviceAccount.privateKeyPem),
    };
    const nodeArgs: string[] = [];
    if (prepared) {
      // The API server calls kubelets (logs, exec, port-forward) with this client certificate.
      const kc = await issueCertificate(pki.ca, {
        subject: 'CN=kube-apiserver-kubelet-client, O=system:masters',
        usage: 'client',
      });
      const kcFiles = {
        cert: file('apiserver-kubelet-client.crt', kc.certPem),
        key: file('apiserver-kubelet-client.key', kc.keyPem),
      };
      nodeArgs.push(...apiServerNodeArgs(prepared.network, kcFiles));
    }

    const etcd: EtcdHandle = await startEtcd(inst.binaries.etcd, dir, opts.etcdArgs);
    processes.push(etcd.process);
    log(`etcd ready at ${etcd.clientUrl}`);

    const port = await freePort();
    const server = `https://127.0.0.1:${port}`;
    client = new KubeClient({ server, ca: pki.ca.certPem, cert: pki.admin.certPem, key: pki.admin.keyPem });
    const apiConfig = {
      binary: inst.binaries['kube-apiserver'],
      dir,
      port,
      etcdUrl: etcd.clientUrl,
      certs,
      serviceAccountAdmission: mode === 'cluster',
      serviceClusterIpRange: SERVICE_CIDR,
      extraArgs: [...nodeArgs, ...(opts.apiServerArgs ?? [])],
    };
    let apiserver = startApiServer(apiConfig);
    processes.push(apiserver);
    await waitForApiServer(apiserver, client);
    log(`kube-apiserver ready at ${server} (${Date.now() - started} ms)`);

    const kubeconfig = buildKubeconfig(name, server, pki.ca.certPem, pki.admin);
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml(kubeconfig), { mode: 0o600 });

    let nodeCount = 0;
    const addNodes = async (count: number) => {
      const names: string[] = [];
      for (let i = 0; i < count; i++) {
        const nodeName = `kwok-node-${nodeCount++}`;
        await client!.json('POST', '/api/v1/nodes', fakeNode(nodeName, prepared ? [SIMULATED_TAINT] : []));
        names.push(nodeName);
      }
      await waitFor('kwok nodes', undefined, async () => {
        const ready = new Set(await readyNodeNames(client!));
        return names.every((n) => ready.has(n));
      });
      return names;
    };

    if (mode === 'cluster') {
      await client.json('POST', '/apis/storage.k8s.io/v1/storageclasses', defaultStorageClass());
      if (prepared) await client.json('POST', '/apis/storage.k8s.io/v1/storageclasses', xfsStorageClass());
      const common = { dir, kubeconfig: kubeconfigPath };
      // Each process is registered as soon as it is spawned, so a failure later on still stops it.
      processes.push(
        await startControllerManager({
          ...common,
          binary: inst.binaries['kube-controller-manager'],
          caFile: certs.ca,
          saPrivateKey: certs.saPrivate,
          clusterCidr: POD_CIDR,
          extraArgs: opts.controllerManagerArgs,
        }),
      );
      processes.push(
        await startScheduler({
          ...common,
          binary: inst.binaries['kube-scheduler'],
          extraArgs: opts.schedulerArgs,
        }),
      );
      processes.push(
        startKwok({ ...common, binary: inst.binaries.kwok, stages: inst.kwokStages, podCidr: POD_CIDR }),
      );
      provisioner = new VolumeProvisioner(client, {
        volumeRoot: prepared?.volumesDir ?? join(dir, 'volumes'),
        // With real nodes, the local-xfs class gives real filesystems (their size shows, fsGroup applies,
        // they grow); `standard` stays hostPath directories (REAL-NODES.md says why it is not the default).
        loopXfs: prepared ? { nodeLabels: { [REAL_NODE_LABEL]: 'real' } } : undefined,
        log,
      });
      provisioner.start();
      await addNodes(opts.nodes ?? 3);
      // Pods can only be created once the controller-manager made the namespace's default ServiceAccount.
      await waitFor('the default ServiceAccount', processes[2], async () => {
        const res = await client!.raw('GET', '/api/v1/namespaces/default/serviceaccounts/default');
        return res.code === 200;
      });
      if (prepared && nodeInst) {
        realNodes = await startRealNodes({
          prepared,
          binaries: nodeInst.binaries,
          ca: pki.ca,
          caFile: certs.ca,
          apiPort: port,
          client,
          kubeconfigPath,
          context: name,
          images: opts.images,
          log,
        });
      }
      log(`cluster ready with ${nodeCount} kwok and ${realCount} real nodes (${Date.now() - started} ms)`);
    }

    // A short grace: the apiserver otherwise waits for open watches to drain, which tests don't need.
    const stopApiServer = async () => {
      await apiserver.stop(3000);
    };
    const startAgain = async () => {
      if (apiserver.running) return;
      apiserver = startApiServer(apiConfig);
      processes[processes.indexOf(processes.find((p) => p.name === 'kube-apiserver')!)] = apiserver;
      await waitForApiServer(apiserver, client!);
    };

    const cp: ControlPlane = {
      mode,
      name,
      dir,
      server,
      kubeconfigPath,
      kubeconfig,
      etcdUrl: etcd.clientUrl,
      pids: () =>
        [...processes, ...(realNodes?.processes() ?? [])].filter((p) => p.running).map((p) => p.pid!),
      realNodes: realNodes?.names ?? [],
      loadImage: async (source: string) => {
        if (!realNodes) throw new Error('this cluster has no real nodes: start it with realNodes >= 1');
        await realNodes.loadImage(source);
      },
      stopKubelet: async (node: string) => {
        if (!realNodes) throw new Error('this cluster has no real nodes: start it with realNodes >= 1');
        await realNodes.stopKubelet(node);
      },
      startKubelet: (node: string) => {
        if (!realNodes) throw new Error('this cluster has no real nodes: start it with realNodes >= 1');
        realNodes.startKubelet(node);
      },
      stopApiServer,
      startApiServer: startAgain,
      restartApiServer: async (o = {}) => {
        await stopApiServer();
        if (o.downtimeMs) await new Promise((r) => setTimeout(r, o.downtimeMs));
        await startAgain();
      },
      compact: () => compactEtcd(etcd.clientUrl),
      addNodes,
      stop,
      [Symbol.asyncDispose]: stop,
    };
    return cp;
  } catch (err) {
    await stop();
    throw err;
  }
}

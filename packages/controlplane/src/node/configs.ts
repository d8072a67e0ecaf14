/**
 * The configuration files of a real node, as pure functions of its paths and addresses:
 * containerd (CRI), CNI, kubelet, kube-proxy and the cluster's CoreDNS. Facts behind the choices are
 * in docs (packages/controlplane/README.md, "Real nodes").
 */
import { stringify } from 'yaml';
import { PAUSE_IMAGE } from '../images/recipes.ts';
import { CNI_BIN_DIR } from './prereqs.ts';

export const CLUSTER_DOMAIN = 'cluster.local';
export const REAL_NODE_LABEL = 'opkit.dev/node';
export const SIMULATED_TAINT = { key: 'opkit.dev/simulated', value: 'true', effect: 'NoSchedule' } as const;

export interface NodePaths {
  dir: string;
  containerdRoot: string;
  containerdState: string;
  containerdSock: string;
  containerdConfig: string;
  cniConfDir: string;
  cniDataDir: string;
  kubeletRoot: string;
  kubeletConfig: string;
  kubeletKubeconfig: string;
  podLogs: string;
  resolvConf: string;
  proxyConfig: string;
  proxyKubeconfig: string;
  pki: string;
}

export function nodePaths(dir: string): NodePaths {
  return {
    dir,
    containerdRoot: `${dir}/containerd/root`,
    containerdState: `${dir}/containerd/state`,
    containerdSock: `${dir}/containerd.sock`,
    containerdConfig: `${dir}/containerd.toml`,
    cniConfDir: `${dir}/cni/net.d`,
    cniDataDir: `${dir}/cni/ipam`,
    kubeletRoot: `${dir}/kubelet`,
    kubeletConfig: `${dir}/kubelet.yaml`,
    kubeletKubeconfig: `${dir}/kubelet.kubeconfig`,
    podLogs: `${dir}/pod-logs`,
    resolvConf: `${dir}/resolv.conf`,
    proxyConfig: `${dir}/kube-proxy.yaml`,
    proxyKubeconfig: `${dir}/kube-proxy.kubeconfig`,
    pki: `${dir}/pki`,
  };
}

/** The kubelet's pods live under this cgroup (per node: two kubelets never see each other's pods). */
export const cgroupRoot = (netns: string) => `/opkit/${netns}`;

const q = (s: string) => JSON.stringify(s);

/**
 * containerd 1.6 (config version 2) with its own root, state and socket. restrict_oom_score_adj:
 * this sandbox lacks CAP_SYS_RESOURCE, so no container may lower its oom_score_adj below containerd's.
 */
export function containerdConfig(p: NodePaths): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `version = 2
root = ${q(p.containerdRoot)}
state = ${q(p.containerdState)}
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = ${q(p.containerdSock)}

[ttrpc]
  address = ${q(`${p.containerdSock}.ttrpc`)}

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ${q(`${p.dir}/containerd/opt`)}

[${cri}]
  sandbox_image = ${q(PAUSE_IMAGE)}
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true

[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[${cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[${cri}.cni]
  bin_dir = ${q(CNI_BIN_DIR)}
  conf_dir = ${q(p.cniConfDir)}
  max_conf_num = 1
`;
}

/** bridge + host-local + portmap; hairpin so a pod reaches itself through its Service. No masquerade. */
export function cniConfig(p: NodePaths, podSubnet: string, podGateway: string): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'opkit',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: p.cniDataDir,
            ranges: [[{ subnet: podSubnet, gateway: podGateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export interface KubeletSettings {
  paths: NodePaths;
  netns: string;
  dnsIp: string;
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** KubeletConfiguration: cgroupfs (no systemd), cgroup v1 allowed, eviction and GC out of the way. */
export function kubeletConfig(s: KubeletSettings): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: '0.0.0.0',
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: false },
      x509: { clientCAFile: s.caFile },
    },
    // Only holders of a certificate from the cluster CA get here (the API server, admins).
    authorization: { mode: 'AlwaysAllow' },
    tlsCertFile: s.certFile,
    tlsPrivateKeyFile: s.keyFile,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: cgroupRoot(s.netns),
    cgroupsPerQOS: true,
    failSwapOn: false,
    failCgroupV1: false,
    containerRuntimeEndpoint: `unix://${s.paths.containerdSock}`,
    clusterDNS: [s.dnsIp],
    clusterDomain: CLUSTER_DOMAIN,
    resolvConf: s.paths.resolvConf,
    podLogsDir: s.paths.podLogs,
    volumePluginDir: `${s.paths.kubeletRoot}/volume-plugins`,
    // The host's disk is shared with everything else: no evictions, no image GC (images are not pullable).
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    localStorageCapacityIsolation: false,
    enforceNodeAllocatable: [],
    serializeImagePulls: false,
    makeIPTablesUtilChains: true,
    nodeStatusReportFrequency: '10s',
    syncFrequency: '10s',
    fileCheckFrequency: '10s',
    shutdownGracePeriod: '0s',
  });
}

export function kubeProxyConfig(p: NodePaths, nodeName: string, podCidr: string): string {
  return stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: p.proxyKubeconfig },
    mode: 'iptables',
    hostnameOverride: nodeName,
    clusterCIDR: podCidr,
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    // 0: leave the (namespace's) conntrack settings as they are.
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    iptables: { localhostNodePorts: false, masqueradeAll: false },
  });
}

/** The cluster zone only: no forward plugin, so any other name is REFUSED (nothing leaves the host). */
export function corefile(bindIp: string, kubeconfig: string, context: string, readyPort: number): string {
  return `${CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {
    bind ${bindIp}
    errors
    ready 127.0.0.1:${readyPort}
    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {
        kubeconfig ${kubeconfig} ${context}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`;
}

/**
 * The `kube-dns` Service of kube-system (what kubeadm and kind create): a ClusterIP the kubelets give pods
 * as their name server, UDP and TCP 53. Selectorless, with an EndpointSlice naming CoreDNS, which runs on
 * the host at the bridge address: kube-proxy in each node's namespace DNATs the ClusterIP to it.
 */
export function kubeDnsObjects(clusterIp: string, coreDnsIp: string) {
  const ports = [
    { name: 'dns', protocol: 'UDP', port: 53 },
    { name: 'dns-tcp', protocol: 'TCP', port: 53 },
  ];
  const labels = { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' };
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'kube-dns', namespace: 'kube-system', labels },
    spec: { clusterIP: clusterIp, ports: ports.map((p) => ({ ...p, targetPort: 53 })) },
  };
  const endpointSlice = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'kube-dns-coredns',
      namespace: 'kube-system',
      labels: {
        ...labels,
        'kubernetes.io/service-name': 'kube-dns',
        // Not a controller's: neither the EndpointSlice controller nor its mirroring touches it.
        'endpointslice.kubernetes.io/managed-by': 'controlplane.opkit.dev',
      },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [coreDnsIp], conditions: { ready: true, serving: true, terminating: false } }],
    ports,
  };
  return { service, endpointSlice };
}

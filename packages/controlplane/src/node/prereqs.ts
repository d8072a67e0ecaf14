/** What a real node needs from the host, checked up front so a missing piece names its Debian package. */
import { accessSync, constants, existsSync } from 'node:fs';
import { join } from 'node:path';

export class NodePrerequisiteError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'NodePrerequisiteError';
    this.hint = hint;
  }
}

export const CNI_BIN_DIR = '/usr/lib/cni';

/** command (or absolute path) -> the Debian package that provides it. */
export const NODE_PREREQUISITES: Array<{ command: string; pkg: string }> = [
  { command: 'containerd', pkg: 'containerd' },
  { command: 'ctr', pkg: 'containerd' },
  { command: 'runc', pkg: 'runc' },
  { command: `${CNI_BIN_DIR}/bridge`, pkg: 'containernetworking-plugins' },
  { command: `${CNI_BIN_DIR}/host-local`, pkg: 'containernetworking-plugins' },
  { command: `${CNI_BIN_DIR}/loopback`, pkg: 'containernetworking-plugins' },
  { command: `${CNI_BIN_DIR}/portmap`, pkg: 'containernetworking-plugins' },
  { command: 'iptables', pkg: 'iptables' },
  { command: 'ip', pkg: 'iproute2' },
  { command: 'nsenter', pkg: 'util-linux' },
  { command: 'losetup', pkg: 'mount' },
  { command: 'mkfs.xfs', pkg: 'xfsprogs' },
  { command: 'xfs_growfs', pkg: 'xfsprogs' },
  { command: 'mmdebstrap', pkg: 'mmdebstrap' },
  { command: 'gcc', pkg: 'gcc (and libc6-dev)' },
];

const SEARCH_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** The absolute path of a command on PATH (plus the sbin directories), or undefined. */
export function which(command: string): string | undefined {
  const candidates = command.startsWith('/')
    ? [command]
    : [...(process.env.PATH ?? '').split(':').filter(Boolean), ...SEARCH_PATH].map((d) => join(d, command));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // next
    }
  }
  return undefined;
}

/** Throws a NodePrerequisiteError naming every missing piece and the packages to install. */
export function checkNodePrerequisites(): void {
  if (process.getuid?.() !== 0) {
    throw new NodePrerequisiteError(
      'real nodes run containerd, the kubelet and network namespaces, which needs root',
      'run as root (or with sudo), or start the cluster without real nodes',
    );
  }
  const missing = NODE_PREREQUISITES.filter((p) => !which(p.command));
  if (missing.length) {
    const pkgs = [...new Set(missing.map((m) => m.pkg.split(' ')[0]))];
    throw new NodePrerequisiteError(
      `real nodes need ${missing.map((m) => `${m.command} (Debian package ${m.pkg})`).join(', ')}`,
      `install them: scripts/system-packages.sh, or apt-get install ${pkgs.join(' ')}${missing.some((m) => m.command === 'gcc') ? ' libc6-dev' : ''}`,
    );
  }
  if (!existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables')) {
    throw new NodePrerequisiteError(
      'the kernel has no bridge netfilter (br_netfilter): kube-proxy could not serve Services to pods',
      'load it with `modprobe br_netfilter` (or use a kernel with CONFIG_BRIDGE_NETFILTER)',
    );
  }
}

/**
 * The components opkit builds, one Go wrapper module each (packages/controlplane/go/<module>).
 * The pinned versions live in those go.mod files; this file only says how to build and check them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const GO_MODULES_DIR = fileURLToPath(new URL('../../go/', import.meta.url));

export type BinaryName = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'kwok';
/** Built only when a cluster with real nodes is started (kwok-only users never pay for them). */
export type NodeBinaryName = 'kubelet' | 'kube-proxy' | 'coredns';

export interface GoComponent<Name extends string = BinaryName> {
  /** Folder under go/ holding the wrapper go.mod. */
  module: string;
  /** The module whose version is pinned in that go.mod. */
  upstream: string;
  /** Go package path -> binary name. */
  binaries: Array<{ pkg: string; name: Name }>;
  /** -X version ldflags, given the pinned version. */
  ldflags(version: string): string[];
  /** The arguments that make the binary print its version (default `--version`). */
  versionArgs?: string[];
}

function kubeVersionFlags(gitVersion: string): string[] {
  const [major, minor] = gitVersion.replace(/^v/, '').split('.');
  const flags: string[] = [];
  for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version']) {
    flags.push(
      `-X ${pkg}.gitVersion=${gitVersion}`,
      `-X ${pkg}.gitMajor=${major}`,
      `-X ${pkg}.gitMinor=${minor}`,
      `-X ${pkg}.gitTreeState=clean`,
      `-X ${pkg}.buildDate=1970-01-01T00:00:00Z`,
    );
  }
  return flags;
}

export const COMPONENTS: GoComponent[] = [
  {
    module: 'etcd',
    upstream: 'go.etcd.io/etcd/server/v3',
    binaries: [{ pkg: 'go.etcd.io/etcd/server/v3', name: 'etcd' }],
    ldflags: () => [],
  },
  {
    module: 'kubernetes',
    upstream: 'k8s.io/kubernetes',
    binaries: [
      { pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', name: 'kube-apiserver' },
      { pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager', name: 'kube-controller-manager' },
      { pkg: 'k8s.io/kubernetes/cmd/kube-scheduler', name: 'kube-scheduler' },
    ],
    ldflags: kubeVersionFlags,
  },
  {
    module: 'kwok',
    upstream: 'sigs.k8s.io/kwok',
    binaries: [{ pkg: 'sigs.k8s.io/kwok/cmd/kwok', name: 'kwok' }],
    ldflags: () => [],
  },
];

/** The real node's components: kubelet and kube-proxy of the same release, and a CoreDNS build. */
export const NODE_COMPONENTS: GoComponent<NodeBinaryName>[] = [
  {
    module: 'kubernetes',
    upstream: 'k8s.io/kubernetes',
    binaries: [
      { pkg: 'k8s.io/kubernetes/cmd/kubelet', name: 'kubelet' },
      { pkg: 'k8s.io/kubernetes/cmd/kube-proxy', name: 'kube-proxy' },
    ],
    ldflags: kubeVersionFlags,
  },
  {
    module: 'coredns',
    upstream: 'github.com/coredns/coredns',
    // go/coredns/main.go: CoreDNS with the few plugins a cluster zone needs.
    binaries: [{ pkg: '.', name: 'coredns' }],
    ldflags: () => [],
  },
];

/**
 * Tools built only when a command or test needs them (`opkit cluster helm`), each cached under its own
 * fingerprint (paths.ts toolDir), so adding or bumping one never rebuilds the control plane.
 */
export type ToolName = 'helm';
export const HELM: GoComponent<ToolName> = {
  module: 'helm',
  upstream: 'helm.sh/helm/v4',
  binaries: [{ pkg: 'helm.sh/helm/v4/cmd/helm', name: 'helm' }],
  ldflags: (version) => [`-X helm.sh/helm/v4/internal/version.version=${version}`],
  versionArgs: ['version', '--short'],
};

/** Every wrapper module folder of the control plane and the real nodes, once (not the tools'). */
export function allModules(): string[] {
  return [...new Set([...COMPONENTS, ...NODE_COMPONENTS].map((c) => c.module))];
}

/** Reads the pinned version of `upstream` from the wrapper module's go.mod. */
export function pinnedVersion(component: GoComponent<string>): string {
  const gomod = readFileSync(`${GO_MODULES_DIR}${component.module}/go.mod`, 'utf8');
  const escaped = component.upstream.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const match = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+(v\\S+)`, 'm').exec(gomod);
  if (!match?.[1]) throw new Error(`go/${component.module}/go.mod does not pin ${component.upstream}`);
  return match[1];
}

/** The minimum Go version a wrapper module asks for (its `go` line). */
export function requiredGo(component: GoComponent<string>): string {
  const gomod = readFileSync(`${GO_MODULES_DIR}${component.module}/go.mod`, 'utf8');
  return /^go\s+(\S+)/m.exec(gomod)?.[1] ?? '1.24';
}

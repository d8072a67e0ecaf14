/**
 * The manifests of config/rbac, config/manager and the kustomizations, from the PROJECT file and the
 * merged RBAC rules. Names carry the project name as prefix; the namespace is <project>-system.
 */
import type { Project } from '../project.ts';
import { objectNames } from '../project.ts';
import type { PolicyRule } from './rbac-types.ts';

/** The image placeholder of config/manager; `opkit deploy --image` and kustomize `images:` replace it. */
export const IMAGE_PLACEHOLDER = 'controller';
export const IMAGE_PLACEHOLDER_TAG = 'latest';

function labels(p: Project, component?: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': p.projectName,
    'app.kubernetes.io/managed-by': 'opkit',
    ...(component ? { 'app.kubernetes.io/component': component } : {}),
  };
}

export function managerRole(p: Project, rules: PolicyRule[]): object {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: objectNames(p).managerRole, labels: labels(p, 'rbac') },
    rules,
  };
}

export function managerRoleBinding(p: Project): object {
  const n = objectNames(p);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: n.managerRoleBinding, labels: labels(p, 'rbac') },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: n.managerRole },
    subjects: [{ kind: 'ServiceAccount', name: n.serviceAccount, namespace: n.namespace }],
  };
}

/** What leader election needs (the runtime's LeaseLock gets, creates and updates its Lease). */
export function leaderElectionRole(p: Project): object {
  const n = objectNames(p);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: n.leaderElectionRole, namespace: n.namespace, labels: labels(p, 'rbac') },
    rules: [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'get', 'update'] },
    ],
  };
}

export function leaderElectionRoleBinding(p: Project): object {
  const n = objectNames(p);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: n.leaderElectionRoleBinding, namespace: n.namespace, labels: labels(p, 'rbac') },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: n.leaderElectionRole },
    subjects: [{ kind: 'ServiceAccount', name: n.serviceAccount, namespace: n.namespace }],
  };
}

export function serviceAccount(p: Project): object {
  const n = objectNames(p);
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: n.serviceAccount, namespace: n.namespace, labels: labels(p, 'rbac') },
  };
}

/** The manager's namespace; the Deployment meets the "restricted" Pod Security Standard, so it enforces it. */
export function namespace(p: Project): object {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: objectNames(p).namespace,
      labels: {
        ...labels(p),
        'control-plane': 'controller-manager',
        'pod-security.kubernetes.io/enforce': 'restricted',
      },
    },
  };
}

/**
 * The manager's termination grace period: longer than the manager's graceful shutdown (30 s by default:
 * in-flight reconciles finish, events are flushed, the Lease is released), so that SIGKILL does not cut it.
 */
export const TERMINATION_GRACE_PERIOD_SECONDS = 40;
/** The image's user (the Dockerfile's USER), the "nonroot" uid of distroless images. */
export const MANAGER_UID = 65532;

/**
 * The manager Deployment: the flags of src/main.ts (leader election on, probes on :8081, metrics on :8080),
 * non-root with a read-only root filesystem (Node gets a writable /tmp), no capabilities, RuntimeDefault
 * seccomp. In cluster the manager's kubeconfig namespace is the pod's, so the Lease lives next to it.
 */
export function deployment(p: Project): object {
  const n = objectNames(p);
  const selector = { 'app.kubernetes.io/name': p.projectName, 'control-plane': 'controller-manager' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: n.deployment,
      namespace: n.namespace,
      labels: { ...labels(p, 'manager'), ...selector },
    },
    spec: {
      replicas: 1,
      selector: { matchLabels: selector },
      template: {
        metadata: {
          labels: { ...labels(p, 'manager'), ...selector },
          annotations: { 'kubectl.kubernetes.io/default-container': 'manager' },
        },
        spec: {
          serviceAccountName: n.serviceAccount,
          terminationGracePeriodSeconds: TERMINATION_GRACE_PERIOD_SECONDS,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'manager',
              image: `${IMAGE_PLACEHOLDER}:${IMAGE_PLACEHOLDER_TAG}`,
              args: ['--leader-elect', '--health-probe-bind-address=:8081', '--metrics-bind-address=:8080'],
              ports: [
                { name: 'metrics', containerPort: 8080, protocol: 'TCP' },
                { name: 'health', containerPort: 8081, protocol: 'TCP' },
              ],
              livenessProbe: {
                httpGet: { path: '/healthz', port: 'health' },
                initialDelaySeconds: 15,
                periodSeconds: 20,
              },
              readinessProbe: {
                httpGet: { path: '/readyz', port: 'health' },
                initialDelaySeconds: 5,
                periodSeconds: 10,
              },
              // Node's heap and the informer cache: a Go manager's 64Mi is too little. Measured (opkit's
              // bench/, Database operator): ~130 MiB with 100 objects, ~165 MiB converging 1000 and ~245
              // MiB starting up with 1000 present (the burst of initial reconciles); the limit leaves
              // room so that a restart at that size is not OOM-killed.
              resources: {
                limits: { cpu: '500m', memory: '512Mi' },
                requests: { cpu: '50m', memory: '192Mi' },
              },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                runAsUser: MANAGER_UID,
                runAsGroup: MANAGER_UID,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
            },
          ],
          volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }],
        },
      },
    },
  };
}

export function metricsService(p: Project): object {
  const n = objectNames(p);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: n.metricsService, namespace: n.namespace, labels: labels(p, 'metrics') },
    spec: {
      selector: { 'app.kubernetes.io/name': p.projectName, 'control-plane': 'controller-manager' },
      ports: [{ name: 'metrics', port: 8080, targetPort: 'metrics', protocol: 'TCP' }],
    },
  };
}

export function kustomization(resources: readonly string[], extra: Record<string, unknown> = {}): object {
  return {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    ...extra,
    resources: [...resources],
  };
}

/** A kustomize `images:` entry: the image `name` in the manifests becomes newName:newTag (or @digest). */
export interface ImageRule {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

export const DEFAULT_IMAGES: readonly ImageRule[] = [
  { name: IMAGE_PLACEHOLDER, newName: IMAGE_PLACEHOLDER, newTag: IMAGE_PLACEHOLDER_TAG },
];

/**
 * config/manager/kustomization.yaml. `images` are the rules to keep: what `kustomize edit set image
 * controller=<img>` wrote there (the kubebuilder habit) survives `opkit generate`.
 */
export function managerKustomization(images: readonly ImageRule[] = DEFAULT_IMAGES): object {
  return kustomization(['manager.yaml', 'metrics_service.yaml'], {
    images: images.map((i) => ({ ...i })),
  });
}

/** The valid `images:` rules of a parsed kustomization (undefined when it has none). */
export function imageRules(parsed: unknown): ImageRule[] | undefined {
  const images = (parsed as { images?: unknown } | null | undefined)?.images;
  if (!Array.isArray(images)) return undefined;
  const rules: ImageRule[] = [];
  for (const raw of images as unknown[]) {
    if (!raw || typeof raw !== 'object') continue;
    const r = raw as Record<string, unknown>;
    if (typeof r.name !== 'string' || r.name === '') continue;
    const rule: ImageRule = { name: r.name };
    for (const key of ['newName', 'newTag', 'digest'] as const) {
      const v = r[key];
      if (typeof v === 'string' || typeof v === 'number') rule[key] = String(v);
    }
    rules.push(rule);
  }
  return rules.length > 0 ? rules : undefined;
}

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

export function namespace(p: Project): object {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: objectNames(p).namespace,
      labels: { ...labels(p), 'control-plane': 'controller-manager' },
    },
  };
}

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
          terminationGracePeriodSeconds: 10,
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
              resources: {
                limits: { cpu: '500m', memory: '256Mi' },
                requests: { cpu: '10m', memory: '64Mi' },
              },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                runAsUser: 65532,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
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

export function managerKustomization(): object {
  return kustomization(['manager.yaml'], {
    images: [{ name: IMAGE_PLACEHOLDER, newName: IMAGE_PLACEHOLDER, newTag: IMAGE_PLACEHOLDER_TAG }],
  });
}

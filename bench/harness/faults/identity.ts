/**
 * The operator's identity in the fault runs: exactly what config/rbac grants (its ServiceAccount, the
 * manager ClusterRole and the leader-election Role, applied from the generated files), authenticated with
 * a TokenRequest token, in a kubeconfig whose server is the API server or the fault proxy in front of it.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { Kubeconfig } from '@opkit/controlplane';
import { parse } from 'yaml';
import { REPO_ROOT } from '../impls.ts';
import type { Kube, KubeObject } from '../kube.ts';

export const RBAC_DIR = join(REPO_ROOT, 'operators', 'database', 'config', 'rbac');

const PATHS: Record<string, (o: KubeObject) => string> = {
  ServiceAccount: (o) => `/api/v1/namespaces/${o.metadata.namespace}/serviceaccounts`,
  ClusterRole: () => '/apis/rbac.authorization.k8s.io/v1/clusterroles',
  ClusterRoleBinding: () => '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
  Role: (o) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${o.metadata.namespace}/roles`,
  RoleBinding: (o) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${o.metadata.namespace}/rolebindings`,
};

export interface OperatorIdentity {
  namespace: string;
  serviceAccount: string;
  token: string;
}

/** Applies config/rbac (every object but the kustomization) and returns a token of its ServiceAccount. */
export async function installOperatorRbac(kube: Kube): Promise<OperatorIdentity> {
  const objects = readdirSync(RBAC_DIR)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort()
    .map((f) => parse(readFileSync(join(RBAC_DIR, f), 'utf8')) as KubeObject);
  const sa = objects.find((o) => o.kind === 'ServiceAccount');
  if (!sa?.metadata.namespace) throw new Error(`${RBAC_DIR} has no namespaced ServiceAccount`);
  const namespace = sa.metadata.namespace;
  await kube.json('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace },
  });
  for (const o of objects) {
    const path = PATHS[o.kind ?? '']?.(o);
    if (!path) throw new Error(`config/rbac: no path for kind ${o.kind}`);
    await kube.json('POST', path, o);
  }
  const req = await kube.json<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${sa.metadata.name}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 86_400 } },
  );
  return { namespace, serviceAccount: sa.metadata.name, token: req.status.token };
}

/**
 * Waits until the API server authorizes the identity (RBAC bindings take effect a moment after they are
 * created): a list of Databases with its token answers 200. Otherwise the operator's first requests are
 * refused with 403, which is not the fault under test.
 */
export async function waitAuthorized(admin: Kubeconfig, server: string, id: OperatorIdentity): Promise<void> {
  const ca = Buffer.from(admin.clusters[0]?.cluster['certificate-authority-data'] ?? '', 'base64').toString();
  const status = () =>
    new Promise<number>((resolve) => {
      const req = request(
        new URL('/apis/myapp.example.com/v1/databases?limit=1', server),
        { ca, headers: { authorization: `Bearer ${id.token}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', () => resolve(0));
      req.end();
    });
  for (let i = 0; i < 300; i++) {
    if ((await status()) === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the operator's ServiceAccount is not authorized within 30 s (config/rbac applied)`);
}

/** Writes a kubeconfig (JSON, which is YAML) for the identity against `server`; returns its path. */
export function writeOperatorKubeconfig(
  path: string,
  admin: Kubeconfig,
  server: string,
  id: OperatorIdentity,
): string {
  const ca = admin.clusters[0]?.cluster['certificate-authority-data'];
  if (!ca) throw new Error('the control plane kubeconfig has no certificate-authority-data');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'faults', cluster: { server, 'certificate-authority-data': ca } }],
    users: [{ name: id.serviceAccount, user: { token: id.token } }],
    contexts: [
      { name: 'faults', context: { cluster: 'faults', user: id.serviceAccount, namespace: id.namespace } },
    ],
    'current-context': 'faults',
  };
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return path;
}

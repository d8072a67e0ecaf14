import { join } from 'node:path';
import type { KubeClient } from '../kube-client.ts';
import { ManagedProcess } from '../process.ts';
import { waitFor } from './etcd.ts';

export interface ApiServerConfig {
  binary: string;
  dir: string;
  port: number;
  etcdUrl: string;
  certs: { ca: string; serverCert: string; serverKey: string; saPublic: string; saPrivate: string };
  /** Without a controller-manager nobody creates `default` ServiceAccounts, so that admission is off. */
  serviceAccountAdmission: boolean;
  serviceClusterIpRange: string;
  extraArgs: string[];
}

/** envtest's flags plus what kwokctl adds; every flag checked against `kube-apiserver --help` of 1.34. */
export function apiServerArgs(c: ApiServerConfig): string[] {
  const args = [
    `--etcd-servers=${c.etcdUrl}`,
    `--etcd-prefix=/registry`,
    '--bind-address=127.0.0.1',
    `--secure-port=${c.port}`,
    `--advertise-address=127.0.0.1`,
    `--tls-cert-file=${c.certs.serverCert}`,
    `--tls-private-key-file=${c.certs.serverKey}`,
    `--client-ca-file=${c.certs.ca}`,
    '--authorization-mode=Node,RBAC',
    `--service-account-issuer=https://kubernetes.default.svc.cluster.local`,
    `--service-account-key-file=${c.certs.saPublic}`,
    `--service-account-signing-key-file=${c.certs.saPrivate}`,
    `--service-cluster-ip-range=${c.serviceClusterIpRange}`,
    '--allow-privileged=true',
    '--enable-priority-and-fairness=true',
    '--profiling=false',
    '--v=0',
  ];
  if (!c.serviceAccountAdmission) args.push('--disable-admission-plugins=ServiceAccount');
  return [...args, ...c.extraArgs];
}

export function startApiServer(c: ApiServerConfig): ManagedProcess {
  return new ManagedProcess('kube-apiserver', c.binary, apiServerArgs(c), join(c.dir, 'kube-apiserver.log'));
}

/** Waits for /readyz, which includes etcd, RBAC bootstrap and the other post-start hooks. */
export async function waitForApiServer(
  proc: ManagedProcess,
  client: KubeClient,
  timeoutMs = 90_000,
): Promise<void> {
  await waitFor(
    'kube-apiserver',
    proc,
    async () => (await client.raw('GET', '/readyz', undefined, { timeoutMs: 2000 })).code === 200,
    timeoutMs,
  );
}

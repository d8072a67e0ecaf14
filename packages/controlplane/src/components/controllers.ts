import { join } from 'node:path';
import { freePort } from '../ports.ts';
import { ManagedProcess } from '../process.ts';

const ALWAYS_ALLOW = '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics';

export interface ControllerConfig {
  binary: string;
  dir: string;
  kubeconfig: string;
  extraArgs?: string[];
}

/** kube-controller-manager: garbage collection, StatefulSets, PV binding, namespaces, service accounts... */
export async function startControllerManager(
  c: ControllerConfig & { caFile: string; saPrivateKey: string; clusterCidr: string },
): Promise<ManagedProcess> {
  const args = [
    `--kubeconfig=${c.kubeconfig}`,
    `--authentication-kubeconfig=${c.kubeconfig}`,
    `--authorization-kubeconfig=${c.kubeconfig}`,
    ALWAYS_ALLOW,
    '--bind-address=127.0.0.1',
    `--secure-port=${await freePort()}`,
    '--leader-elect=false',
    `--root-ca-file=${c.caFile}`,
    `--service-account-private-key-file=${c.saPrivateKey}`,
    '--use-service-account-credentials=false',
    '--controllers=*',
    `--cluster-cidr=${c.clusterCidr}`,
    '--kube-api-qps=500',
    '--kube-api-burst=1000',
    // Faster reactions than production defaults: this is a test cluster.
    '--concurrent-statefulset-syncs=10',
    '--concurrent-gc-syncs=50',
    '--v=0',
    ...(c.extraArgs ?? []),
  ];
  return new ManagedProcess(
    'kube-controller-manager',
    c.binary,
    args,
    join(c.dir, 'kube-controller-manager.log'),
  );
}

export async function startScheduler(c: ControllerConfig): Promise<ManagedProcess> {
  const args = [
    `--kubeconfig=${c.kubeconfig}`,
    `--authentication-kubeconfig=${c.kubeconfig}`,
    `--authorization-kubeconfig=${c.kubeconfig}`,
    ALWAYS_ALLOW,
    '--bind-address=127.0.0.1',
    `--secure-port=${await freePort()}`,
    '--leader-elect=false',
    '--kube-api-qps=500',
    '--kube-api-burst=1000',
    // A pod the scheduler found unschedulable waits for an event that may make it schedulable (a PVC bound,
    // a node added), and at most this long otherwise (default 5 min). When its PVC informer lags behind the
    // API server, the pod's first attempt fails ("pod has unbound immediate PersistentVolumeClaims. not
    // found") and the wake-up can be missed: a CI run saw a StatefulSet pod Pending for over 90 s with its
    // claim there. 15 s bounds that wait in these local clusters (the scheduler's own retry, every 30 s).
    '--pod-max-in-unschedulable-pods-duration=15s',
    '--v=0',
    ...(c.extraArgs ?? []),
  ];
  return new ManagedProcess('kube-scheduler', c.binary, args, join(c.dir, 'kube-scheduler.log'));
}

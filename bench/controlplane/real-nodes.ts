/**
 * Real-node times (`npm run bench:controlplane -- --real-nodes`): warm start of a mixed cluster
 * (3 kwok + 1 real node), per pod on the real node the time from create to Ready, one after another,
 * the same with a new 1Gi local-xfs claim per pod (a loop-mounted XFS volume), and the claims' expansion to 2Gi.
 */
import { request } from 'node:https';
import { type ControlPlane, start, XFS_STORAGE_CLASS } from '@opkit/controlplane';

function api(
  cp: ControlPlane,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<{ code: number; json: unknown }> {
  const user = cp.kubeconfig.users[0]!.user;
  const pem = (b: string) => Buffer.from(b, 'base64').toString();
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, cp.server),
      {
        method,
        ca: pem(cp.kubeconfig.clusters[0]!.cluster['certificate-authority-data']),
        cert: pem(user['client-certificate-data']),
        key: pem(user['client-key-data']),
        headers: { 'content-type': contentType },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString();
        });
        res.on('end', () =>
          resolve({ code: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined }),
        );
      },
    );
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

type PodStatus = { status?: { conditions?: Array<{ type: string; status: string }> } };

async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 50));
}

/** Per pod, create -> Ready; with `volumes`, each pod mounts a new 1Gi claim (created first, in the time). */
async function podStartTimes(cp: ControlPlane, count: number, volumes = false): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const name = volumes ? `bench-vol-${i}` : `bench-${i}`;
    const t = performance.now();
    if (volumes) {
      await api(cp, 'POST', '/api/v1/namespaces/default/persistentvolumeclaims', {
        metadata: { name },
        spec: {
          storageClassName: XFS_STORAGE_CLASS,
          accessModes: ['ReadWriteOnce'],
          resources: { requests: { storage: '1Gi' } },
        },
      });
    }
    await api(cp, 'POST', '/api/v1/namespaces/default/pods', {
      metadata: { name },
      spec: {
        nodeSelector: { 'opkit.dev/node': 'real' },
        terminationGracePeriodSeconds: 0,
        volumes: volumes ? [{ name: 'data', persistentVolumeClaim: { claimName: name } }] : undefined,
        containers: [
          {
            name: 'main',
            image: 'opkit.local/shell:1',
            imagePullPolicy: 'Never',
            command: ['sleep', '3600'],
            volumeMounts: volumes ? [{ name: 'data', mountPath: '/data' }] : undefined,
          },
        ],
      },
    });
    await until(async () => {
      const { json } = await api(cp, 'GET', `/api/v1/namespaces/default/pods/${name}`);
      return !!(json as PodStatus).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    });
    times.push(performance.now() - t);
  }
  return times;
}

/** Per claim of podStartTimes(volumes): 1Gi -> 2Gi, from the request to the claim's status.capacity. */
async function expansionTimes(cp: ControlPlane, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const path = `/api/v1/namespaces/default/persistentvolumeclaims/bench-vol-${i}`;
    const t = performance.now();
    const res = await api(
      cp,
      'PATCH',
      path,
      { spec: { resources: { requests: { storage: '2Gi' } } } },
      'application/merge-patch+json',
    );
    if (res.code !== 200) throw new Error(`expanding bench-vol-${i}: HTTP ${res.code}`);
    await until(async () => {
      const { json } = await api(cp, 'GET', path);
      return (json as { status?: { capacity?: { storage?: string } } }).status?.capacity?.storage === '2Gi';
    });
    times.push(performance.now() - t);
  }
  return times;
}

export async function realNodeTimes(
  runs: number,
): Promise<{ starts: number[]; pods: number[]; volumePods: number[]; expansions: number[] }> {
  const starts: number[] = [];
  const pods: number[] = [];
  const volumePods: number[] = [];
  const expansions: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const cp = await start({ mode: 'cluster', nodes: 3, realNodes: 1 });
    starts.push(performance.now() - t);
    try {
      pods.push(...(await podStartTimes(cp, 5)));
      volumePods.push(...(await podStartTimes(cp, 3, true)));
      expansions.push(...(await expansionTimes(cp, 3)));
    } finally {
      await cp.stop();
    }
  }
  return { starts, pods, volumePods, expansions };
}

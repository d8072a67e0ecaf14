/**
 * Real-node times (`npm run bench:controlplane -- --real-nodes`): warm start of a mixed cluster
 * (3 kwok + 1 real node), and per pod on the real node the time from create to Ready, one after another.
 */
import { request } from 'node:https';
import { type ControlPlane, start } from '@opkit/controlplane';

function api(
  cp: ControlPlane,
  method: string,
  path: string,
  body?: unknown,
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
        headers: { 'content-type': 'application/json' },
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

async function podStartTimes(cp: ControlPlane, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const name = `bench-${i}`;
    const t = performance.now();
    await api(cp, 'POST', '/api/v1/namespaces/default/pods', {
      metadata: { name },
      spec: {
        nodeSelector: { 'opkit.dev/node': 'real' },
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: 'main',
            image: 'opkit.local/shell:1',
            imagePullPolicy: 'Never',
            command: ['sleep', '3600'],
          },
        ],
      },
    });
    for (;;) {
      const { json } = await api(cp, 'GET', `/api/v1/namespaces/default/pods/${name}`);
      if ((json as PodStatus).status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
        break;
      await new Promise((r) => setTimeout(r, 50));
    }
    times.push(performance.now() - t);
  }
  return times;
}

export async function realNodeTimes(runs: number): Promise<{ starts: number[]; pods: number[] }> {
  const starts: number[] = [];
  const pods: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const cp = await start({ mode: 'cluster', nodes: 3, realNodes: 1 });
    starts.push(performance.now() - t);
    try {
      pods.push(...(await podStartTimes(cp, 5)));
    } finally {
      await cp.stop();
    }
  }
  return { starts, pods };
}

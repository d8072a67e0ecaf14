import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, DEFAULT_STORAGE_CLASS, start } from '../../src/index.ts';
import type { KubeClient } from '../../src/kube-client.ts';
import { adminClient, eventually } from './helpers.ts';

interface Pod {
  metadata: { name: string };
  spec: { nodeName?: string };
  status: { phase?: string; conditions?: Array<{ type: string; status: string }> };
}
interface Pvc {
  metadata: { name: string };
  spec: { volumeName?: string; storageClassName?: string };
  status: { phase?: string; capacity?: { storage?: string } };
}
type List<T> = { items: T[] };

const ready = (p: Pod) =>
  p.status.phase === 'Running' && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

describe('cluster mode', () => {
  let cp: ControlPlane;
  let client: KubeClient;
  before(async () => {
    cp = await start({ mode: 'cluster', nodes: 3 });
    client = adminClient(cp);
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  test('has Ready kwok nodes and a default expandable StorageClass', async () => {
    const nodes = await client.json<
      List<{ status: { conditions: Array<{ type: string; status: string }> } }>
    >('GET', '/api/v1/nodes');
    assert.equal(nodes.items.length, 3);
    for (const n of nodes.items)
      assert.ok(n.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'));
    const sc = await client.json<{
      allowVolumeExpansion: boolean;
      metadata: { annotations: Record<string, string> };
    }>('GET', `/apis/storage.k8s.io/v1/storageclasses/${DEFAULT_STORAGE_CLASS}`);
    assert.equal(sc.allowVolumeExpansion, true);
    assert.equal(sc.metadata.annotations['storageclass.kubernetes.io/is-default-class'], 'true');
  });

  test('a Running pod marked NotReady (as the node controller does after an outage) becomes Ready again', async () => {
    const ns = 'recovery';
    await client.json('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await eventually(
      'default ServiceAccount',
      async () => (await client.raw('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).code === 200,
    );
    const path = `/api/v1/namespaces/${ns}/pods/p`;
    await client.json('POST', `/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'c', image: 'busybox' }] },
    });
    await eventually('the pod to be Ready', async () => ready(await client.json<Pod>('GET', path)), 60_000);
    // What the node lifecycle controller's MarkPodsNotReady writes when a node's Lease runs out.
    await client.json(
      'PATCH',
      `${path}/status`,
      { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'NodeNotReady' }] } },
      'application/strategic-merge-patch+json',
    );
    await eventually(
      'the pod to be Ready again',
      async () => ready(await client.json<Pod>('GET', path)),
      60_000,
    );
  });

  test('a StatefulSet with a volumeClaimTemplate: bound PVCs, Ready pods, expansion, GC, namespace deletion', async () => {
    const ns = 'sts-test';
    await client.json('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await eventually(
      'default ServiceAccount',
      async () => (await client.raw('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).code === 200,
    );
    await client.json('POST', `/apis/apps/v1/namespaces/${ns}/statefulsets`, {
      metadata: { name: 'web' },
      spec: {
        replicas: 3,
        serviceName: 'web',
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            containers: [
              { name: 'c', image: 'example/web:1', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
            ],
          },
        },
        volumeClaimTemplates: [
          {
            metadata: { name: 'data' },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
          },
        ],
      },
    });

    const pvcs = await eventually('3 bound PVCs', async () => {
      const list = await client.json<List<Pvc>>('GET', `/api/v1/namespaces/${ns}/persistentvolumeclaims`);
      return list.items.length === 3 && list.items.every((c) => c.status.phase === 'Bound')
        ? list.items
        : undefined;
    });
    assert.deepEqual(pvcs.map((c) => c.metadata.name).sort(), ['data-web-0', 'data-web-1', 'data-web-2']);
    for (const c of pvcs) {
      assert.equal(c.spec.storageClassName, DEFAULT_STORAGE_CLASS);
      assert.equal(c.status.capacity?.storage, '1Gi');
    }

    const pods = await eventually('3 Running and Ready pods', async () => {
      const list = await client.json<List<Pod>>('GET', `/api/v1/namespaces/${ns}/pods`);
      return list.items.length === 3 && list.items.every(ready) ? list.items : undefined;
    });
    for (const p of pods) assert.match(p.spec.nodeName ?? '', /^kwok-node-/);
    // The StatefulSet controller reports them shortly after the pods turn Ready.
    await eventually('StatefulSet readyReplicas 3', async () => {
      const sts = await client.json<{ status: { readyReplicas?: number } }>(
        'GET',
        `/apis/apps/v1/namespaces/${ns}/statefulsets/web`,
      );
      return sts.status.readyReplicas === 3;
    });

    // Growing a claim's request: status.capacity follows, and so does the PV.
    await client.json(
      'PATCH',
      `/api/v1/namespaces/${ns}/persistentvolumeclaims/data-web-0`,
      { spec: { resources: { requests: { storage: '2Gi' } } } },
      'application/merge-patch+json',
    );
    const grown = await eventually('PVC capacity 2Gi', async () => {
      const c = await client.json<Pvc>('GET', `/api/v1/namespaces/${ns}/persistentvolumeclaims/data-web-0`);
      return c.status.capacity?.storage === '2Gi' ? c : undefined;
    });
    const pv = await client.json<{ spec: { capacity: { storage: string } } }>(
      'GET',
      `/api/v1/persistentvolumes/${grown.spec.volumeName}`,
    );
    assert.equal(pv.spec.capacity.storage, '2Gi');

    // Deleting the StatefulSet: the garbage collector removes its pods.
    await client.json('DELETE', `/apis/apps/v1/namespaces/${ns}/statefulsets/web`, {
      propagationPolicy: 'Background',
    });
    await eventually('pods garbage-collected', async () => {
      const list = await client.json<List<Pod>>('GET', `/api/v1/namespaces/${ns}/pods`);
      return list.items.length === 0;
    });
    // StatefulSet PVCs are not owned by the set: they stay, as users expect of their data.
    const left = await client.json<List<Pvc>>('GET', `/api/v1/namespaces/${ns}/persistentvolumeclaims`);
    assert.equal(left.items.length, 3);

    // Deleting the namespace completes; the Delete reclaim policy then removes the volumes.
    await client.json('DELETE', `/api/v1/namespaces/${ns}`);
    await eventually(
      'namespace gone',
      async () => (await client.raw('GET', `/api/v1/namespaces/${ns}`)).code === 404,
      90_000,
    );
    await eventually('volumes deleted', async () => {
      const list = await client.json<List<{ spec: { claimRef?: { namespace?: string } } }>>(
        'GET',
        '/api/v1/persistentvolumes',
      );
      return list.items.filter((v) => v.spec.claimRef?.namespace === ns).length === 0;
    });
  });
});

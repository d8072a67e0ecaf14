/**
 * Two real nodes (and no kwok node): pods on both reach each other and the API server, a ClusterIP Service
 * spreads across nodes, and both resolve names through the kube-dns Service over UDP and TCP. Kept cheap:
 * only the shell image, four small pods.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SHELL_IMAGE } from '../../src/images/recipes.ts';
import { type ControlPlane, start } from '../../src/index.ts';
import type { KubeClient } from '../../src/kube-client.ts';
import { readRecords } from '../../src/node/network.ts';
import { adminClient, eventually } from './helpers.ts';
import { exec, leftovers } from './real-node-helpers.ts';

interface Pod {
  spec: { nodeName?: string };
  status: { podIP?: string; conditions?: Array<{ type: string; status: string }> };
}

const NS = 'two';
const PORT = 8080;
// A TCP server answering each connection with the pod's name: perl-base (Essential) is in the shell image.
const server = (name: string) =>
  `exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => ${PORT}, Listen => 16, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "${name}\\n"; close $c }'`;
// One line from host:port, by bash's /dev/tcp.
const readLine = (host: string) => `exec 3<>/dev/tcp/${host}/${PORT}; head -1 <&3`;

describe('two real nodes', {
  timeout: 600_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  let cp: ControlPlane;
  let client: KubeClient;
  const pods = ['echo-0', 'echo-1'];
  const sh = (pod: string, script: string) => exec(cp, NS, pod, ['bash', '-c', script]).trim();

  before(async () => {
    cp = await start({ mode: 'cluster', nodes: 0, realNodes: 2 });
    client = adminClient(cp);
    await client.json('POST', '/api/v1/namespaces', { metadata: { name: NS } });
    await eventually(
      'the default ServiceAccount',
      async () => (await client.raw('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`)).code === 200,
    );
    await client.json('POST', `/api/v1/namespaces/${NS}/services`, {
      metadata: { name: 'echo' },
      spec: { selector: { app: 'echo' }, ports: [{ port: PORT, targetPort: PORT }] },
    });
    for (const [i, name] of pods.entries()) {
      await client.json('POST', `/api/v1/namespaces/${NS}/pods`, {
        metadata: { name, labels: { app: 'echo' } },
        spec: {
          nodeSelector: { 'kubernetes.io/hostname': cp.realNodes[i] },
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'main',
              image: SHELL_IMAGE,
              imagePullPolicy: 'Never',
              command: ['bash', '-c', server(name)],
              readinessProbe: { tcpSocket: { port: PORT }, periodSeconds: 1 },
            },
          ],
        },
      });
    }
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  const readyPod = (name: string) =>
    eventually(
      `pod ${name} Ready`,
      async () => {
        const p = await client.json<Pod>('GET', `/api/v1/namespaces/${NS}/pods/${name}`);
        return p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : undefined;
      },
      180_000,
    );

  test('a pod on each node; they reach each other and the API server', async () => {
    assert.deepEqual(cp.realNodes, ['real-node-0', 'real-node-1']);
    const [a, b] = await Promise.all(pods.map(readyPod));
    assert.equal(a!.spec.nodeName, 'real-node-0');
    assert.equal(b!.spec.nodeName, 'real-node-1');
    assert.match(a!.status.podIP ?? '', /^10\.232\./);
    assert.match(b!.status.podIP ?? '', /^10\.233\./);
    assert.equal(sh('echo-0', readLine(b!.status.podIP!)), 'echo-1');
    assert.equal(sh('echo-1', readLine(a!.status.podIP!)), 'echo-0');
    // The API server through the `kubernetes` Service: Go's TLS server answers plain HTTP with a 400.
    for (const pod of pods) {
      const answer = sh(
        pod,
        'exec 3<>/dev/tcp/kubernetes.default.svc.cluster.local/443; printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3',
      );
      assert.match(answer, /Client sent an HTTP request to an HTTPS server/, pod);
    }
  });

  test('a ClusterIP Service reaches its endpoints on both nodes, from both nodes', async () => {
    for (const from of pods) {
      const seen = await eventually(`${from}: both endpoints through the ClusterIP`, async () => {
        const lines = sh(from, `for i in $(seq 30); do (${readLine(`echo.${NS}.svc.cluster.local`)}); done`);
        const names = new Set(lines.split('\n'));
        return names.size === 2 ? names : undefined;
      });
      assert.deepEqual([...seen].sort(), pods);
    }
  });

  test('both nodes resolve through the kube-dns Service, over UDP and TCP', async () => {
    const svc = await client.json<{ spec: { clusterIP: string } }>(
      'GET',
      '/api/v1/namespaces/kube-system/services/kube-dns',
    );
    assert.equal(svc.spec.clusterIP, '10.96.0.10');
    const echo = await client.json<{ spec: { clusterIP: string } }>(
      'GET',
      `/api/v1/namespaces/${NS}/services/echo`,
    );
    const name = `echo.${NS}.svc.cluster.local`;
    for (const pod of pods) {
      assert.match(sh(pod, 'cat /etc/resolv.conf'), /^nameserver 10\.96\.0\.10$/m);
      // UDP (glibc's default), then TCP only (RES_OPTIONS=use-vc), then a plain TCP connect to the ClusterIP.
      assert.equal(sh(pod, `getent hosts ${name}`).split(/\s+/)[0], echo.spec.clusterIP);
      assert.equal(sh(pod, `RES_OPTIONS=use-vc getent hosts ${name}`).split(/\s+/)[0], echo.spec.clusterIP);
      sh(pod, 'exec 3<>/dev/tcp/10.96.0.10/53');
      assert.equal(
        sh(pod, 'getent hosts kube-dns.kube-system.svc.cluster.local').split(/\s+/)[0],
        '10.96.0.10',
      );
    }
  });

  test("a node's kubelet killed: its containers keep serving, exec fails; started again, exec works", async () => {
    const b = await readyPod('echo-1');
    const before = cp.pids().length;
    await cp.stopKubelet('real-node-1');
    assert.equal(cp.pids().length, before - 1, 'the kubelet process is gone');
    // As on a real node whose kubelet died: the container still answers, but nothing reaches it via the kubelet.
    assert.equal(sh('echo-0', readLine(b.status.podIP!)), 'echo-1');
    assert.throws(() => sh('echo-1', 'true'), /failed/);
    await assert.rejects(cp.stopKubelet('real-node-9'), /no real node real-node-9/);
    cp.startKubelet('real-node-1');
    assert.equal(cp.pids().length, before);
    assert.equal(
      await eventually('exec through the kubelet again', async () => sh('echo-1', 'echo back')),
      'back',
    );
    assert.equal(sh('echo-0', readLine(b.status.podIP!)), 'echo-1');
  });

  test('stop leaves nothing of either node behind', async () => {
    const record = readRecords().find((r) => r.dirs.some((d) => d.startsWith(cp.dir)));
    assert.ok(record);
    assert.equal(record.network.nodes.length, 2);
    client.close();
    await cp.stop();
    assert.deepEqual(leftovers(cp.dir, record.network.id), []);
  });
});

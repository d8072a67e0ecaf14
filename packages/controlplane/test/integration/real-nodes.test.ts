/**
 * Real nodes (issue 10): one mixed cluster (a kwok node + a real node) shared by the tests of this file.
 * Pods run real containers from opkit's local images; the last test stops the cluster and checks that
 * nothing is left on the host.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MARIADB_IMAGE, POSTGRES_IMAGE, SHELL_IMAGE } from '../../src/images/recipes.ts';
import { type ControlPlane, start, XFS_STORAGE_CLASS } from '../../src/index.ts';
import type { KubeClient } from '../../src/kube-client.ts';
import { readRecords } from '../../src/node/network.ts';
import { adminClient, eventually } from './helpers.ts';
import { exec, kubectl, leftovers } from './real-node-helpers.ts';

interface Pod {
  metadata: { name: string; uid: string };
  spec: { nodeName?: string };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ restartCount: number; ready: boolean }>;
  };
}

const NS = 'real';
const ON_REAL_NODE = { nodeSelector: { 'opkit.dev/node': 'real' } };
const isReady = (p: Pod) =>
  p.status.phase === 'Running' &&
  !!p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

// Real nodes need root (network namespaces, mounts, cgroups): elsewhere these tests are skipped, saying why.
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('a mixed cluster with a real node', { timeout: 900_000, skip: needsRoot }, () => {
  let cp: ControlPlane;
  let client: KubeClient;
  const getPod = (name: string) => client.json<Pod>('GET', `/api/v1/namespaces/${NS}/pods/${name}`);
  const readyPod = (name: string, timeoutMs = 180_000) =>
    eventually(
      `pod ${name} Ready`,
      async () => {
        const p = await getPod(name);
        return isReady(p) ? p : undefined;
      },
      timeoutMs,
    );

  before(async () => {
    cp = await start({ mode: 'cluster', nodes: 1, realNodes: 1, images: [POSTGRES_IMAGE, MARIADB_IMAGE] });
    client = adminClient(cp);
    await client.json('POST', '/api/v1/namespaces', { metadata: { name: NS } });
    await eventually(
      'the default ServiceAccount',
      async () => (await client.raw('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`)).code === 200,
    );
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  test('a pod on the real node runs its command; kubectl logs and exec reach it', async () => {
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'shell' },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: SHELL_IMAGE,
            imagePullPolicy: 'Never',
            command: ['bash', '-c', 'echo "hello from $(hostname)"; exec sleep 3600'],
          },
        ],
      },
    });
    // Synchronously, as a test using execSync would: the node must not depend on this event loop.
    const wait = kubectl(
      cp,
      ['wait', '-n', NS, '--for=condition=Ready', 'pod/shell', '--timeout=150s'],
      160_000,
    );
    assert.equal(wait.code, 0, wait.out);
    const pod = await readyPod('shell');
    assert.equal(pod.spec.nodeName, cp.realNodes[0]);
    assert.match(pod.status.podIP ?? '', /^10\.232\./);
    await eventually('the log line', async () =>
      kubectl(cp, ['logs', '-n', NS, 'shell']).out.includes('hello from shell'),
    );
    assert.equal(exec(cp, NS, 'shell', ['bash', '-c', 'echo $((6 * 7)) $(id -u)']).trim(), '42 0');
    // Names are resolved through the kube-dns Service (kube-proxy), as in any cluster.
    assert.match(exec(cp, NS, 'shell', ['cat', '/etc/resolv.conf']), /^nameserver 10\.96\.0\.10$/m);
  });

  test('the kwok node is tainted opkit.dev/simulated, the real node is not', async () => {
    const nodes = await client.json<{
      items: Array<{ metadata: { name: string }; spec: { taints?: Array<{ key: string }> } }>;
    }>('GET', '/api/v1/nodes');
    const kwok = nodes.items.filter((n) => n.metadata.name.startsWith('kwok-'));
    assert.equal(kwok.length, 1);
    assert.ok(kwok[0]!.spec.taints?.some((t) => t.key === 'opkit.dev/simulated'));
    const real = nodes.items.find((n) => n.metadata.name === cp.realNodes[0]);
    assert.ok(real && !real.spec.taints?.some((t) => t.key === 'opkit.dev/simulated'));
  });

  test('readiness gates Ready; a failing liveness probe restarts the container', async () => {
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'probed' },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: SHELL_IMAGE,
            imagePullPolicy: 'Never',
            command: ['sleep', '3600'],
            readinessProbe: { exec: { command: ['test', '-f', '/tmp/ready'] }, periodSeconds: 1 },
            livenessProbe: {
              exec: { command: ['test', '!', '-f', '/tmp/die'] },
              periodSeconds: 1,
              failureThreshold: 1,
            },
          },
        ],
      },
    });
    await eventually(
      'the container running',
      async () => (await getPod('probed')).status.phase === 'Running',
    );
    // Not Ready while the probe fails (checked for a few probe periods).
    for (let i = 0; i < 3; i++) {
      assert.equal(isReady(await getPod('probed')), false);
      await new Promise((r) => setTimeout(r, 1000));
    }
    exec(cp, NS, 'probed', ['touch', '/tmp/ready']);
    await readyPod('probed', 60_000);
    exec(cp, NS, 'probed', ['touch', '/tmp/die']);
    await eventually(
      'a liveness restart',
      async () => ((await getPod('probed')).status.containerStatuses?.[0]?.restartCount ?? 0) >= 1,
      120_000,
    );
  });

  test('a StatefulSet of 3 PostgreSQL 15 pods: Ready, DNS names, a ClusterIP, data surviving pod deletion', async () => {
    const labels = { app: 'pg' };
    const port = { name: 'pg', port: 5432, targetPort: 5432 };
    await client.json('POST', `/api/v1/namespaces/${NS}/services`, {
      metadata: { name: 'pg' },
      spec: { clusterIP: 'None', selector: labels, ports: [port] },
    });
    const svc = await client.json<{ spec: { clusterIP: string } }>(
      'POST',
      `/api/v1/namespaces/${NS}/services`,
      {
        metadata: { name: 'pg-rw' },
        spec: { selector: labels, ports: [port] },
      },
    );
    await client.json('POST', `/apis/apps/v1/namespaces/${NS}/statefulsets`, {
      metadata: { name: 'pg' },
      spec: {
        replicas: 3,
        serviceName: 'pg',
        podManagementPolicy: 'Parallel',
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            ...ON_REAL_NODE,
            terminationGracePeriodSeconds: 5,
            containers: [
              {
                name: 'postgres',
                image: POSTGRES_IMAGE,
                imagePullPolicy: 'Never',
                env: [{ name: 'POSTGRES_PASSWORD', value: 'secret' }],
                ports: [{ containerPort: 5432 }],
                readinessProbe: {
                  exec: { command: ['pg_isready', '-U', 'postgres', '-h', '127.0.0.1'] },
                  periodSeconds: 2,
                },
                volumeMounts: [{ name: 'data', mountPath: '/var/lib/postgresql/data' }],
              },
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
    const pods = await Promise.all(['pg-0', 'pg-1', 'pg-2'].map((n) => readyPod(n, 300_000)));

    // DNS: a StatefulSet pod through its headless Service, and a ClusterIP Service, from another pod.
    for (const p of pods) {
      const name = `${p.metadata.name}.pg.${NS}.svc.cluster.local`;
      await eventually(`DNS of ${name}`, async () =>
        exec(cp, NS, 'shell', ['getent', 'hosts', name]).startsWith(`${p.status.podIP} `),
      );
    }
    const rwName = `pg-rw.${NS}.svc.cluster.local`;
    assert.ok(exec(cp, NS, 'shell', ['getent', 'hosts', rwName]).startsWith(`${svc.spec.clusterIP} `));
    // Names outside the cluster zone are not answered (no forwarding beyond the cluster).
    assert.equal(kubectl(cp, ['exec', '-n', NS, 'shell', '--', 'getent', 'hosts', 'deb.debian.org']).code, 2);

    // The ClusterIP reaches the endpoints: SQL through the Service, answered by one of the three pods.
    const psql = (pod: string, host: string, sql: string) =>
      exec(cp, NS, pod, [
        'env',
        'PGPASSWORD=secret',
        'psql',
        '-h',
        host,
        '-U',
        'postgres',
        '-tAc',
        sql,
      ]).trim();
    const ips = new Set(pods.map((p) => p.status.podIP));
    const seen = await eventually('SQL through the ClusterIP', async () =>
      psql('pg-0', 'pg-rw', 'select inet_server_addr()'),
    );
    assert.ok(ips.has(seen), `${seen} is one of ${[...ips].join(', ')}`);
    // And pod to pod by the headless name, from the shell image's bash.
    exec(cp, NS, 'shell', ['bash', '-c', `exec 3<>/dev/tcp/pg-1.pg.${NS}.svc.cluster.local/5432`]);

    // The PVC keeps the data when the pod is deleted and recreated.
    psql('pg-0', '127.0.0.1', 'create table kept (v int); insert into kept values (42)');
    const oldUid = pods[0]!.metadata.uid;
    await client.raw('DELETE', `/api/v1/namespaces/${NS}/pods/pg-0`);
    await eventually(
      'pg-0 recreated and Ready',
      async () => {
        const p = await getPod('pg-0');
        return p.metadata.uid !== oldUid && isReady(p);
      },
      300_000,
    );
    assert.equal(
      await eventually('the kept row', async () => psql('pg-0', '127.0.0.1', 'select v from kept')),
      '42',
    );
  });

  test('a MariaDB 10.11 pod from the local image initialises, gets Ready and answers over its pod IP', async () => {
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'maria' },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 5,
        containers: [
          {
            name: 'mariadb',
            image: MARIADB_IMAGE,
            imagePullPolicy: 'Never',
            env: [
              { name: 'MARIADB_ROOT_PASSWORD', value: 'secret' },
              { name: 'MARIADB_DATABASE', value: 'app' },
            ],
            readinessProbe: {
              exec: { command: ['mariadb-admin', 'ping', '-uroot', '-psecret', '-h127.0.0.1'] },
              periodSeconds: 2,
            },
          },
        ],
      },
    });
    const pod = await readyPod('maria', 300_000);
    const sql = exec(cp, NS, 'maria', [
      'mariadb',
      '-uroot',
      '-psecret',
      `-h${pod.status.podIP}`,
      '-N',
      '-e',
      "select concat(current_user(), ' ', count(*)) from information_schema.schemata where schema_name = 'app'",
    ]);
    assert.equal(sql.trim(), 'root@% 1');
  });

  test('a restricted namespace admits only a compliant pod; runAsUser and fsGroup are applied', async () => {
    const ns = 'restricted';
    await client.json('POST', '/api/v1/namespaces', {
      metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    });
    await eventually(
      'the default ServiceAccount',
      async () => (await client.raw('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).code === 200,
    );
    const container = {
      name: 'main',
      image: SHELL_IMAGE,
      imagePullPolicy: 'Never',
      command: ['sleep', '3600'],
      volumeMounts: [{ name: 'scratch', mountPath: '/data' }],
    };
    const pod = (name: string, compliant: boolean) => ({
      metadata: { name },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 1,
        volumes: [{ name: 'scratch', emptyDir: {} }],
        securityContext: compliant
          ? { runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, seccompProfile: { type: 'RuntimeDefault' } }
          : undefined,
        containers: [
          compliant
            ? {
                ...container,
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
              }
            : container,
        ],
      },
    });
    const rejected = await client.raw('POST', `/api/v1/namespaces/${ns}/pods`, pod('loose', false));
    assert.equal(rejected.code, 403, rejected.text);
    assert.match(rejected.text, /violates PodSecurity/);
    await client.json('POST', `/api/v1/namespaces/${ns}/pods`, pod('strict', true));
    await eventually(
      'the compliant pod Ready',
      async () => {
        const p = await client.json<Pod>('GET', `/api/v1/namespaces/${ns}/pods/strict`);
        return isReady(p);
      },
      180_000,
    );
    const ids = exec(cp, ns, 'strict', ['bash', '-c', 'id -u; id -G; stat -c %g /data']).trim().split('\n');
    assert.equal(ids[0], '1000');
    assert.ok(ids[1]!.split(' ').includes('2000'), `supplementary groups: ${ids[1]}`);
    assert.equal(ids[2], '2000');
  });

  test('a local-xfs PVC is a real filesystem of its size: fsGroup applies, and expanding the claim grows it in the running pod', async () => {
    const claims = `/api/v1/namespaces/${NS}/persistentvolumeclaims`;
    await client.json('POST', claims, {
      metadata: { name: 'grow' },
      spec: {
        storageClassName: XFS_STORAGE_CLASS,
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: '1Gi' } },
      },
    });
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'grower' },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 1,
        securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 },
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'grow' } }],
        containers: [
          {
            name: 'main',
            image: SHELL_IMAGE,
            imagePullPolicy: 'Never',
            command: ['sleep', '3600'],
            volumeMounts: [{ name: 'data', mountPath: '/data' }],
          },
        ],
      },
    });
    await readyPod('grower');
    // df's size in MiB: the filesystem's data blocks (XFS keeps its 64 MiB log out of them).
    const sizeMiB = () =>
      Number(exec(cp, NS, 'grower', ['df', '-B1M', '--output=size', '/data']).trim().split('\n')[1]);
    const before = sizeMiB();
    assert.ok(before > 900 && before <= 1024, `a 1Gi claim shows as ${before} MiB`);
    // fsGroup: the volume's group is 2000 and the pod's non-root user writes to it.
    const [gid, user] = exec(cp, NS, 'grower', ['bash', '-c', 'stat -c %g /data; echo kept > /data/f; id -u'])
      .trim()
      .split('\n');
    assert.equal(gid, '2000');
    assert.equal(user, '1000');
    const claim = await client.json<{ spec: { volumeName: string } }>('GET', `${claims}/grow`);
    const pv = await client.json<{ spec: { local?: { path: string } } }>(
      'GET',
      `/api/v1/persistentvolumes/${claim.spec.volumeName}`,
    );
    assert.ok(pv.spec.local?.path, 'a local PV (the kubelet applies fsGroup to it, not to hostPath)');

    await client.json(
      'PATCH',
      `${claims}/grow`,
      { spec: { resources: { requests: { storage: '2Gi' } } } },
      'application/merge-patch+json',
    );
    const after = await eventually('the pod seeing the grown filesystem', async () => {
      const size = sizeMiB();
      return size > 1900 ? size : undefined;
    });
    assert.ok(after <= 2048, `${after} MiB`);
    await eventually('the claim reporting 2Gi', async () => {
      const c = await client.json<{ status: { capacity?: { storage?: string } } }>('GET', `${claims}/grow`);
      return c.status.capacity?.storage === '2Gi';
    });
    assert.equal(exec(cp, NS, 'grower', ['cat', '/data/f']).trim(), 'kept');
  });

  test('deletion sends SIGTERM and waits terminationGracePeriodSeconds, then kills', async () => {
    // The pods write to a host directory, which outlives them: what the TERM handler managed to do.
    const hostDir = join(cp.dir, 'sigterm');
    mkdirSync(hostDir, { recursive: true });
    const handler = (name: string, handlerSeconds: number, grace: number) => ({
      metadata: { name },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: grace,
        volumes: [{ name: 'out', hostPath: { path: hostDir, type: 'Directory' } }],
        containers: [
          {
            name: 'main',
            image: SHELL_IMAGE,
            imagePullPolicy: 'Never',
            command: [
              'bash',
              '-c',
              `trap 'echo term >> /out/${name}; sleep ${handlerSeconds}; echo done >> /out/${name}; exit 0' TERM; echo up > /out/${name}; while true; do sleep 0.2; done`,
            ],
            volumeMounts: [{ name: 'out', mountPath: '/out' }],
          },
        ],
      },
    });
    // Handler within the grace period: it completes. Handler longer than the grace period: killed in it.
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, handler('graceful', 2, 30));
    await client.json('POST', `/api/v1/namespaces/${NS}/pods`, handler('overdue', 60, 2));
    await Promise.all([readyPod('graceful'), readyPod('overdue')]);
    const file = (n: string) => (existsSync(join(hostDir, n)) ? readFileSync(join(hostDir, n), 'utf8') : '');
    await eventually('both handlers installed', async () => file('graceful') && file('overdue'));
    await client.raw('DELETE', `/api/v1/namespaces/${NS}/pods/graceful`);
    await client.raw('DELETE', `/api/v1/namespaces/${NS}/pods/overdue`);
    const gone = (n: string) => async () =>
      (await client.raw('GET', `/api/v1/namespaces/${NS}/pods/${n}`)).code === 404;
    await Promise.all([
      eventually('graceful gone', gone('graceful'), 120_000),
      eventually('overdue gone', gone('overdue'), 120_000),
    ]);
    assert.equal(file('graceful'), 'up\nterm\ndone\n');
    assert.equal(file('overdue'), 'up\nterm\n');
  });

  test('stop leaves no process, mount, netns, network device, cgroup or iptables chain behind', async () => {
    const record = readRecords().find((r) => r.dirs.some((d) => d.startsWith(cp.dir)));
    assert.ok(record, 'the run recorded its network');
    assert.ok(leftovers(cp.dir, record.network.id).length > 0, 'the check sees a running node');
    client.close();
    await cp.stop();
    assert.deepEqual(leftovers(cp.dir, record.network.id), []);
  });
});

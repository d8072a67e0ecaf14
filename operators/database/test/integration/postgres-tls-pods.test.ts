/**
 * TLS on REAL pods (root only): a PostgreSQL 15 Database on the real node, then an application pod that
 * connects the way operators/database/README.md says: libpq's environment from the `<name>-app` Secret
 * (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE=verify-full) and its ca.crt mounted as
 * PGSSLROOTCERT, through the read-write Service. Also what the kubelet made of the certificate files
 * (the server accepted them: it runs with ssl on) and that a client without TLS is refused.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { type Pod, Pods } from '@opkit/runtime';
import { Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  createNamespace,
  eventually,
  sample,
  startCluster,
  startOperator,
  waitForPhase,
} from './helpers.ts';

const NS = 'pgtls';
const NAME = 'tlsdb';
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('PostgreSQL TLS on real pods', { timeout: 900_000, skip: needsRoot }, () => {
  let cluster: Cluster;
  let operator: { stop(): Promise<void> } | undefined;

  const kubectl = (args: string[], timeoutMs = 60_000) => {
    const r = spawnSync('kubectl', ['--kubeconfig', cluster.kubeconfig, ...args], {
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    return { code: r.status ?? -1, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
  };
  const diagnose = (): string =>
    [
      kubectl(['get', 'pods,secrets,svc,endpoints', '-n', NS, '-o', 'wide']).out,
      kubectl(['describe', 'pods', '-n', NS]).out.slice(-6000),
      kubectl(['logs', '-n', NS, `${NAME}-0`, '--all-containers', '--tail', '60']).out,
    ].join('\n');

  /** An application pod: libpq's env from the app Secret, its ca.crt mounted; prints what psql prints. */
  const appPod = (name: string, sql: string, sslmode?: string): Pod => {
    const fromSecret = (env: string, key: string) => ({
      name: env,
      valueFrom: { secretKeyRef: { name: `${NAME}-app`, key } },
    });
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: NS },
      spec: {
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 999,
          runAsGroup: 999,
          seccompProfile: { type: 'RuntimeDefault' },
        },
        containers: [
          {
            name: 'psql',
            image: POSTGRES_IMAGE,
            command: ['psql', '-X', '-At', '-c', sql],
            env: [
              fromSecret('PGHOST', 'host'),
              fromSecret('PGPORT', 'port'),
              fromSecret('PGDATABASE', 'dbname'),
              fromSecret('PGUSER', 'user'),
              fromSecret('PGPASSWORD', 'password'),
              sslmode ? { name: 'PGSSLMODE', value: sslmode } : fromSecret('PGSSLMODE', 'sslmode'),
              { name: 'PGSSLROOTCERT', value: '/etc/db/ca.crt' },
              { name: 'PGCONNECT_TIMEOUT', value: '10' },
            ],
            volumeMounts: [{ name: 'db', mountPath: '/etc/db', readOnly: true }],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          },
        ],
        volumes: [
          { name: 'db', secret: { secretName: `${NAME}-app`, items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        ],
      },
    } as Pod;
  };
  /** Runs an application pod to completion: its phase and output. */
  const runPod = async (pod: Pod): Promise<{ phase: string; out: string }> => {
    await cluster.client.create(Pods, pod);
    const phase = await eventually(
      `pod ${pod.metadata.name} to finish`,
      async () => {
        const p = await cluster.client.get(Pods, { namespace: NS, name: pod.metadata.name ?? '' });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p.status.phase : undefined;
      },
      180_000,
      1000,
    );
    return { phase, out: kubectl(['logs', '-n', NS, pod.metadata.name ?? '']).out.trim() };
  };

  before(async () => {
    cluster = await startCluster({ nodes: 1, realNodes: 1, images: [POSTGRES_IMAGE] });
    await createNamespace(cluster.client, NS);
    operator = startOperator(cluster, { name: 'pgtls-operator' });
  });
  after(async () => {
    await operator?.stop();
    await cluster?.stop();
  });

  test('an application pod connects with verify-full through the read-write Service using the app Secret', async () => {
    await cluster.client.create(
      Databases.resource,
      sample(NS, NAME, {
        engine: 'postgres',
        version: '15',
        storage: '1Gi',
        replicas: 1,
        image: POSTGRES_IMAGE,
      }),
    );
    try {
      await waitForPhase(cluster.client, NS, NAME, 'Running', 600_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    }
    // The key as the kubelet mounted it (defaultMode 0640, fsGroup 999): root's, the server's group.
    const mode = kubectl([
      'exec',
      '-n',
      NS,
      `${NAME}-0`,
      '-c',
      'postgres',
      '--',
      'stat',
      '-L',
      '-c',
      '%u:%g %a',
      '/etc/opkit-tls/tls.key',
    ]);
    assert.equal(mode.out.trim(), '0:999 640', mode.out);
    const ok = await runPod(
      appPod(
        'app-verify-full',
        'SELECT ssl, current_user, inet_server_port() FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
      ),
    );
    assert.equal(ok.phase, 'Succeeded', `${ok.out}\n${diagnose()}`);
    assert.match(ok.out, /^t\|app\|5432$/m);
    const plain = await runPod(appPod('app-no-tls', 'SELECT 1', 'disable'));
    assert.equal(plain.phase, 'Failed', plain.out);
    assert.match(plain.out, /pg_hba\.conf rejects connection .*no encryption/);
  });
});

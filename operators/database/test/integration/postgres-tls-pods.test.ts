/**
 * TLS on REAL pods (root only): a PostgreSQL 15 Database on the real node, then an application pod that
 * connects the way operators/database/README.md says: libpq's environment from the `<name>-app` Secret
 * (PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE=verify-full) and its ca.crt mounted as
 * PGSSLROOTCERT, through the read-write Service. Also what the kubelet made of the certificate files
 * (the server accepted them: it runs with ssl on) and that a client without TLS is refused. Then a scale-up:
 * the certificate is reissued for the new pod, the running pod reloads it without a restart (its sidecar),
 * and serves it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { type Pod, Pods } from '@opkit/runtime';
import { Databases } from '../../src/api/v1/database.ts';
import { type Cluster, eventually } from './helpers.ts';
import {
  diagnose as diagnosePods,
  type Kubectl,
  type PgPods,
  runningPgDatabase,
  startPgPods,
} from './pg-pods.ts';

const NS = 'pgtls';
const NAME = 'tlsdb';
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('PostgreSQL TLS on real pods', { timeout: 900_000, skip: needsRoot }, () => {
  let pg: PgPods;
  let cluster: Cluster;
  let kubectl: Kubectl;
  const diagnose = (): string => diagnosePods(kubectl, NS, [`${NAME}-0`, `${NAME}-1`]);

  /** An application pod: libpq's env from the app Secret, its ca.crt mounted; prints what psql prints. */
  const appPod = (
    name: string,
    sql: string,
    sslmode?: string,
    extraEnv: { name: string; value: string }[] = [],
  ): Pod => {
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
            ]
              .filter((e) => !extraEnv.some((x) => x.name === e.name))
              .concat(extraEnv),
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
    pg = await startPgPods(NS, 'pgtls-operator');
    ({ cluster, kubectl } = pg);
  });
  after(async () => {
    await pg?.stop();
  });

  test('an application pod connects with verify-full through the read-write Service using the app Secret', async () => {
    await runningPgDatabase(pg, NS, NAME, { replicas: 1 });
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
    assert.equal(mode.stdout.trim(), '0:999 640', mode.out);
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

  test('scaled to 2: the certificate is reissued for the new pod, pod 0 reloads it without a restart and serves it', async () => {
    const db = await cluster.client.get(Databases.resource, { namespace: NS, name: NAME });
    await cluster.client.patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { replicas: 2 } } },
    );
    assert.ok(db.metadata.uid);
    try {
      await eventually(
        'tlsdb-1 streaming, 2/2 Running',
        async () => {
          const d = await cluster.client.get(Databases.resource, { namespace: NS, name: NAME });
          return d.status?.phase === 'Running' && d.status.readyReplicas === 2 ? d : undefined;
        },
        600_000,
        2000,
      );
      // The kubelet updates the Secret volume within its sync period; the sidecar checks every 10 s.
      await eventually(
        "pod 0's sidecar reloading the renewed certificate",
        async () =>
          kubectl(['logs', '-n', NS, `${NAME}-0`, '-c', 'credentials']).out.includes(
            'server certificate changed: configuration reloaded',
          ) || undefined,
        240_000,
        3000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    }
    const pod0 = await cluster.client.get(Pods, { namespace: NS, name: `${NAME}-0` });
    for (const c of pod0.status?.containerStatuses ?? [])
      assert.equal(c.restartCount, 0, `${c.name} restarted`);
    // Pod 0's address, verified under tlsdb-1's name: only the reissued certificate holds it.
    const ip = pod0.status?.podIP ?? '';
    assert.ok(ip);
    const served = await runPod(
      appPod('app-renewed', 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()', undefined, [
        { name: 'PGHOST', value: `${NAME}-1.${NAME}-headless.${NS}.svc.cluster.local` },
        { name: 'PGHOSTADDR', value: ip },
      ]),
    );
    assert.equal(served.phase, 'Succeeded', `${served.out}\n${diagnose()}`);
    assert.match(served.out, /^t$/m);
  });
});

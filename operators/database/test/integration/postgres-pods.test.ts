/**
 * Issue 11 end to end on REAL pods: a mixed cluster (a kwok node, tainted, and a real node running
 * containerd), the operator in-process, a 3-instance PostgreSQL 15 Database on the locally built
 * opkit.local/postgres:15 image. The engines must be up and streaming for Running 3/3; a row written through
 * the read-write Service is read back through the read-only Service (psql in a pod, over the network).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { Secrets } from '@opkit/runtime';
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

const NS = 'pgpods';
const NAME = 'pg';
// Real nodes need root (network namespaces, mounts, cgroups): elsewhere these tests are skipped, saying why.
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('PostgreSQL on real pods', { timeout: 1_200_000, skip: needsRoot }, () => {
  let cluster: Cluster;
  let operator: { stop(): Promise<void> } | undefined;

  const kubectl = (args: string[], timeoutMs = 60_000) => {
    const r = spawnSync('kubectl', ['--kubeconfig', cluster.kubeconfig, ...args], {
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    return { code: r.status ?? -1, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
  };
  /** What to print when a wait fails: the pods, their description and logs. */
  const diagnose = (): string =>
    [
      kubectl(['get', 'pods,pvc,svc,endpoints', '-n', NS, '-o', 'wide']).out,
      kubectl(['describe', 'pods', '-n', NS]).out.slice(-6000),
      ...[0, 1, 2].map(
        (i) => kubectl(['logs', '-n', NS, `${NAME}-${i}`, '--all-containers', '--tail', '40']).out,
      ),
    ].join('\n');
  /** psql over TCP with the application user, from pod `from`; the rows printed unaligned, tuples only. */
  const psql = async (from: string, host: string, sql: string): Promise<string> => {
    const secret = await cluster.client.get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
    const key = (k: string) => Buffer.from(secret.data?.[k] ?? '', 'base64').toString('utf8');
    const r = kubectl([
      'exec',
      '-n',
      NS,
      from,
      '-c',
      'postgres',
      '--',
      'env',
      `PGPASSWORD=${key('app-password')}`,
      'psql',
      '-v',
      'ON_ERROR_STOP=1',
      '-At',
      '-h',
      `${host}.${NS}.svc.cluster.local`,
      '-U',
      key('app-username'),
      '-d',
      'app',
      '-c',
      sql,
    ]);
    if (r.code !== 0) throw new Error(`psql on ${host} from ${from} failed (${r.code}): ${r.out}`);
    return r.out.trim();
  };

  before(async () => {
    cluster = await startCluster({ nodes: 1, realNodes: 1, images: [POSTGRES_IMAGE] });
    await createNamespace(cluster.client, NS);
    operator = startOperator(cluster, { name: 'pg-operator' });
  });
  after(async () => {
    await operator?.stop();
    await cluster?.stop();
  });

  test('a 3-instance PostgreSQL 15 Database runs 3/3 streaming; a row written via rw is read via ro', async () => {
    await cluster.client.create(
      Databases.resource,
      sample(NS, NAME, {
        engine: 'postgres',
        version: '15',
        storage: '1Gi',
        replicas: 3,
        image: POSTGRES_IMAGE,
      }),
    );
    let db: Awaited<ReturnType<typeof waitForPhase>>;
    try {
      db = await waitForPhase(cluster.client, NS, NAME, 'Running', 600_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    }
    assert.equal(db.status?.readyReplicas, 3);
    assert.match(String(db.status?.systemIdentifier ?? ''), /^\d+$/, 'the cluster identity is recorded');

    await psql(`${NAME}-1`, NAME, 'CREATE TABLE t (v text); INSERT INTO t VALUES ($$through-rw$$)');
    const read = await eventually(
      'the row through the read-only Service',
      async () => {
        try {
          return (await psql(`${NAME}-0`, `${NAME}-ro`, 'SELECT v FROM t')) === 'through-rw'
            ? 'ok'
            : undefined;
        } catch {
          return undefined;
        }
      },
      120_000,
      1000,
    );
    assert.equal(read, 'ok');
    assert.equal(
      await psql(`${NAME}-0`, `${NAME}-ro`, 'SELECT pg_is_in_recovery()'),
      't',
      'ro reaches a replica',
    );
  });
});

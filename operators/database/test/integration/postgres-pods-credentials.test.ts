/**
 * Issue 11 on REAL pods, credentials: a 2-instance PostgreSQL 15 Database on opkit.local/postgres:15 (one
 * mixed cluster: a tainted kwok node and a real node), the operator in-process.
 *   - the application password rotated in the Secret: the new one logs in (primary and replica), the old
 *     one does not, no pod restarts, every pod Ready throughout (sampled every 500 ms);
 *   - every password the Secret ever held (the rotated one too) searched in every file of the cluster's
 *     directory (the volumes, the kubelet's pod directories with their emptyDirs, the containers' writable
 *     layers, the pod logs, the node and control plane logs) and in `kubectl logs` of every container:
 *     found only in the Secret's own in-memory volumes and the replication passfile on its in-memory
 *     volume (asserted to be tmpfs), and in etcd's data (the API's storage of the Secret), nowhere else.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Pods, Secrets } from '@opkit/runtime';
import { type Cluster, eventually } from './helpers.ts';
import {
  appPsql,
  diagnose,
  type Kubectl,
  type PgPods,
  runningPgDatabase,
  samplePods,
  secretValue,
  startPgPods,
  throughService,
} from './pg-pods.ts';

const NS = 'pgcreds';
const NAME = 'pg';
const PODS = [`${NAME}-0`, `${NAME}-1`];
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('PostgreSQL on real pods: credentials', { timeout: 1_200_000, skip: needsRoot }, () => {
  let pg: PgPods;
  let cluster: Cluster;
  let kubectl: Kubectl;
  /** Every password value the Secret held during the test. */
  const passwords = new Set<string>();
  const psql = (from: string, host: string, sql: string, password?: string) =>
    appPsql(cluster, kubectl, NS, NAME, from, host, sql, password);

  before(async () => {
    pg = await startPgPods(NS);
    ({ cluster, kubectl } = pg);
    await runningPgDatabase(pg, NS, NAME, { replicas: 2 });
    for (const k of ['admin-password', 'app-password', 'replication-password'])
      passwords.add(await secretValue(cluster, NS, NAME, k));
    await throughService(() =>
      psql(PODS[0]!, NAME, 'CREATE TABLE t (v text); INSERT INTO t VALUES ($$before-rotation$$)'),
    );
  });
  after(async () => {
    await pg?.stop();
  });

  test('the application password rotated in the Secret: new logs in, old does not, no restart, Ready throughout', async (t) => {
    const old = await secretValue(cluster, NS, NAME, 'app-password');
    const fresh = `rotated-${Date.now().toString(36)}-Xq9vTz4LmP2w`;
    passwords.add(fresh);
    const sampler = samplePods(cluster, NS, 500);
    await eventually('a first sample', () => sampler.rounds.length > 0, 30_000);
    const first = new Map(sampler.rounds[0]!.map((s) => [s.pod, s]));
    const started = Date.now();
    await cluster.client.patch(
      Secrets,
      { namespace: NS, name: `${NAME}-credentials` },
      { type: 'merge', body: { data: { 'app-password': Buffer.from(fresh).toString('base64') } } },
    );
    // The kubelet refreshes the Secret volume (up to its sync period, about a minute), then the sidecar
    // applies the new verifier within its 10 s interval: a generous safety bound of 4 minutes.
    let lastError = '';
    try {
      await eventually(
        'the new password to log in through the read-write Service',
        () =>
          psql(PODS[1]!, NAME, 'SELECT 1', fresh).then(
            (r) => r === '1',
            (e: Error) => {
              lastError = e.message;
              return false;
            },
          ),
        240_000,
        2000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; last: ${lastError}\n${diagnose(kubectl, NS, PODS)}`);
    }
    const applied = Date.now() - started;
    // The replica has it through replication: the new password logs in there, the old one nowhere.
    await eventually(
      'the new password on the replica',
      () =>
        psql(PODS[0]!, `${NAME}-ro`, 'SELECT count(*) FROM t', fresh).then(
          (r) => r === '1',
          () => false,
        ),
      60_000,
      1000,
    );
    for (const host of [NAME, `${NAME}-ro`]) {
      await assert.rejects(psql(PODS[0]!, host, 'SELECT 1', old), /password authentication failed/, host);
    }
    // Keep sampling a little after the change: probes every 10 s, so two more rounds of them.
    await new Promise((r) => setTimeout(r, 25_000));
    const rounds = await sampler.stop();
    assert.ok(rounds.length > 20, `enough samples (${rounds.length})`);
    for (const round of rounds) {
      const at = new Date(round[0]?.at ?? 0).toISOString();
      assert.deepEqual(round.map((s) => s.pod).sort(), PODS, `both pods exist at ${at}`);
      for (const s of round) {
        const was = first.get(s.pod);
        assert.ok(s.ready, `${s.pod} Ready at ${at}`);
        assert.equal(s.uid, was?.uid, `${s.pod} is the same pod at ${at}`);
        assert.equal(s.restarts, was?.restarts, `${s.pod}: no container restarted at ${at}`);
      }
    }
    t.diagnostic(
      `new password applied ${(applied / 1000).toFixed(1)} s after the Secret's change; ${rounds.length} samples over ${((Date.now() - started) / 1000).toFixed(0)} s, all Ready, no restart`,
    );
  });

  test('no password of the Secret in any volume, container filesystem or log', async (t) => {
    for (const k of ['admin-password', 'app-password', 'replication-password'])
      passwords.add(await secretValue(cluster, NS, NAME, k));
    const work = mkdtempSync(join(tmpdir(), 'pg-scan-'));
    try {
      const patterns = join(work, 'passwords');
      writeFileSync(patterns, `${[...passwords].join('\n')}\n`, { mode: 0o600 });
      const dir = cluster.cp.dir;
      // etcd's data holds the Secret itself (no encryption at rest in this cluster): not scanned.
      const etcd = readdirSync(dir).filter((d) => d === 'etcd-data');
      assert.deepEqual(etcd, ['etcd-data'], "etcd's data directory is where the scan expects it");
      const r = spawnSync(
        'grep',
        // netns: network namespace handles (nsfs), not files.
        ['-rlaF', '-D', 'skip', '-f', patterns, '--exclude-dir', 'etcd-data', '--exclude-dir', 'netns', dir],
        { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 600_000 },
      );
      // A file removed while grep walks the tree (a container's pid file of an exec that ended) is the one
      // error that is not a failure of the scan: every other error is (seen in a fresh-clone run).
      const errors = (r.stderr ?? '')
        .split('\n')
        .filter((l) => l.trim() !== '' && !l.endsWith(': No such file or directory'));
      assert.ok(
        r.status === 0 || r.status === 1 || (r.status === 2 && errors.length === 0),
        `grep ran (${r.status}): ${r.stderr}`,
      );
      const hits = r.stdout.split('\n').filter(Boolean);
      // Allowed: the Secret's volume (credentials sidecar) and the replication passfile, both in memory.
      const allowed = (f: string) =>
        /\/volumes\/kubernetes\.io~secret\/credentials\//.test(f) ||
        /\/volumes\/kubernetes\.io~empty-dir\/run\/pgpass$/.test(f);
      const unexpected = hits.filter((f) => !allowed(f));
      assert.deepEqual(unexpected, [], `passwords found in files: ${unexpected.join(', ')}`);
      for (const f of hits) {
        const fs = spawnSync('stat', ['-f', '-c', '%T', f], { encoding: 'utf8' }).stdout.trim();
        assert.equal(fs, 'tmpfs', `${f} is in memory`);
      }
      // The volumes the scan covered, so that an empty result means something.
      const scanned = spawnSync('sh', ['-c', `find ${JSON.stringify(dir)} -type f | wc -l`], {
        encoding: 'utf8',
      }).stdout.trim();
      const dataFiles = spawnSync(
        'sh',
        ['-c', `find ${JSON.stringify(join(dir, 'volumes'))} -type f | wc -l`],
        {
          encoding: 'utf8',
        },
      ).stdout.trim();
      assert.ok(Number(dataFiles) > 100, `the data volumes were scanned (${dataFiles} files)`);

      // kubectl logs of every container, the previous instance of each too.
      const pods = await cluster.client.list(Pods, { namespace: NS });
      let logs = 0;
      for (const p of pods.items) {
        const containers = [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].map(
          (c) => c.name,
        );
        for (const c of containers) {
          for (const previous of [false, true]) {
            const out = kubectl([
              'logs',
              '-n',
              NS,
              p.metadata.name ?? '',
              '-c',
              c,
              ...(previous ? ['--previous'] : []),
            ]);
            if (out.code !== 0) continue;
            logs++;
            for (const pw of passwords)
              assert.ok(!out.out.includes(pw), `a password in the log of ${p.metadata.name}/${c}`);
          }
        }
      }
      assert.ok(logs >= 6, `every container's log was read (${logs})`);
      t.diagnostic(
        `${passwords.size} passwords, ${scanned} files under the cluster directory (${dataFiles} on the data volumes), ${logs} container logs: found only in ${hits.length} in-memory files (${hits.map((h) => h.replace(dir, '')).join(', ')})`,
      );
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});

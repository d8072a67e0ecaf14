/**
 * Issue 11 end to end on REAL pods: a mixed cluster (a kwok node, tainted, and a real node running
 * containerd), the operator in-process, a 3-instance PostgreSQL 15 Database on the locally built
 * opkit.local/postgres:15 image. The engines must be up and streaming for Running 3/3; a row written through
 * the read-write Service is read back through the read-only Service (psql in a pod, over the network).
 * Then identity on real pods (pod 0's volume lost, the primary's volume lost) and, with the primary on pg-1,
 * a minor version rollout: replicas first, the primary last. Healing and scaling: postgres-pods-healing;
 * credentials: postgres-pods-credentials.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { type Cluster, eventsFor, eventually, getDb, recordDatabases } from './helpers.ts';
import {
  appPsql,
  diagnose as diagnosePods,
  type Kubectl,
  type PgPods,
  type PodSample,
  rolloutOrder,
  runningPgDatabase,
  samplePods,
  startPgPods,
  throughService,
} from './pg-pods.ts';

const NS = 'pgpods';
const POLL_MS = 3_000;
const NAME = 'pg';
// Real nodes need root (network namespaces, mounts, cgroups): elsewhere these tests are skipped, saying why.
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

describe('PostgreSQL on real pods', { timeout: 1_200_000, skip: needsRoot }, () => {
  let pg: PgPods;
  let cluster: Cluster;
  let kubectl: Kubectl;
  /** What to print when a wait fails: the pods, their description and logs. */
  const diagnose = (): string =>
    diagnosePods(
      kubectl,
      NS,
      [0, 1, 2].map((i) => `${NAME}-${i}`),
    );
  /** psql over TCP with the application user, from pod `from`; the rows printed unaligned, tuples only. */
  const psql = (from: string, host: string, sql: string): Promise<string> =>
    appPsql(cluster, kubectl, NS, NAME, from, host, sql);

  before(async () => {
    // A short replication poll (the default is 30 s), so that the status test sees several polls.
    pg = await startPgPods(NS, 'pg-operator', { replicationPollMs: POLL_MS, metrics: true });
    ({ cluster, kubectl } = pg);
  });
  after(async () => {
    await pg?.stop();
  });

  test('a 3-instance PostgreSQL 15 Database runs 3/3 streaming; a row written via rw is read via ro', async () => {
    const db = await runningPgDatabase(pg, NS, NAME, { replicas: 3 });
    assert.equal(db.status?.readyReplicas, 3);
    assert.match(String(db.status?.systemIdentifier ?? ''), /^\d+$/, 'the cluster identity is recorded');

    await throughService(() =>
      psql(`${NAME}-1`, NAME, 'CREATE TABLE t (v text); INSERT INTO t VALUES ($$through-rw$$)'),
    );
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
  test('status.instances after the writes: replicas streaming, 0 bytes behind, timeline 1; the status then stays put', async (t) => {
    const want = [
      { name: `${NAME}-0`, role: 'primary', ready: true, timeline: 1 },
      {
        name: `${NAME}-1`,
        role: 'replica',
        ready: true,
        streaming: true,
        lagBytes: 0,
        lagSeconds: 0,
        timeline: 1,
      },
      {
        name: `${NAME}-2`,
        role: 'replica',
        ready: true,
        streaming: true,
        lagBytes: 0,
        lagSeconds: 0,
        timeline: 1,
      },
    ];
    const view = (db: Awaited<ReturnType<typeof getDb>>) =>
      (db.status?.instances ?? []).map((i) => ({
        name: i.name,
        role: i.role,
        ready: i.ready,
        ...(i.streaming !== undefined ? { streaming: i.streaming } : {}),
        ...(i.lagBytes !== undefined ? { lagBytes: i.lagBytes } : {}),
        ...(i.lagSeconds !== undefined ? { lagSeconds: i.lagSeconds } : {}),
        ...(i.timeline !== undefined ? { timeline: i.timeline } : {}),
      }));
    let last: unknown;
    // A generous safety bound: a poll every 3 s.
    await eventually(
      'status.instances with the replicas streaming and caught up',
      async () => {
        last = view(await getDb(cluster.client, NS, NAME));
        return JSON.stringify(last) === JSON.stringify(want) ? true : undefined;
      },
      60_000,
      500,
    ).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(last)}`);
    });
    // Quiet now: several polls later, not one status write for the replication. A readiness probe timing
    // out on this loaded node does change the status (an instance not ready for a moment): such writes are
    // told apart, and nothing else may write.
    const rec = recordDatabases(cluster.client, NS);
    const before = await getDb(cluster.client, NS, NAME);
    await new Promise((r) => setTimeout(r, 3 * POLL_MS + 1000));
    const after = await getDb(cluster.client, NS, NAME);
    rec.stop();
    const written = rec.seen.filter(
      (d) =>
        d.metadata.name === NAME &&
        BigInt(d.metadata.resourceVersion ?? '0') > BigInt(before.metadata.resourceVersion ?? '0'),
    );
    const lagView = (d: typeof before) =>
      JSON.stringify(
        (d.status?.instances ?? []).map((i) => [i.name, i.streaming, i.lagBytes, i.lagSeconds, i.timeline]),
      );
    for (const d of written)
      assert.equal(lagView(d), lagView(before), 'the replication fields never changed');
    if (written.length > 0) {
      const flap = written.some(
        (d) =>
          (d.status?.instances ?? []).some((i) => !i.ready) ||
          d.status?.conditions?.some((c) => c.type === 'Ready' && c.status !== 'True'),
      );
      t.diagnostic(
        `${written.length} write(s) in the quiet window: ${written.map((d) => JSON.stringify(d.status?.instances?.map((i) => [i.name, i.ready, i.reason]))).join('; ')}`,
      );
      assert.ok(
        flap,
        `the status was written while nothing changed: ${JSON.stringify(written.map((d) => d.status))}`,
      );
    } else {
      assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
    }
    // The operator's /metrics: the exact lag of each replica.
    const address = await pg.metricsAddress;
    assert.ok(address, 'the operator serves /metrics');
    const metrics = await (await fetch(`http://${address}/metrics`)).text();
    for (const pod of [`${NAME}-1`, `${NAME}-2`]) {
      assert.match(
        metrics,
        new RegExp(
          `^database_replication_lag_bytes\\{namespace="${NS}",database="${NAME}",pod="${pod}"\\} 0$`,
          'm',
        ),
      );
    }
    assert.doesNotMatch(metrics, new RegExp(`database_replication_lag_bytes\\{[^}]*pod="${NAME}-0"`));
    // kubectl get db -o wide: how commits are confirmed, and the Ready message.
    const wide = kubectl(['get', 'db', NAME, '-n', NS, '-o', 'wide']);
    assert.equal(wide.code, 0, wide.out);
    assert.match(wide.stdout, /REPLICATION\s+MESSAGE/);
    assert.match(wide.stdout, new RegExp(`^${NAME}\\s.*Running.*Asynchronous\\s+3/3 replicas ready`, 'm'));
  });

  test('a drain may evict one Ready replica, never the primary (dry-run evictions against the budgets)', async () => {
    /** POST .../pods/<pod>/eviction?dryRun=All: the API server checks the budget, evicts nothing. */
    const evict = (pod: string) =>
      kubectl(['create', '--raw', `/api/v1/namespaces/${NS}/pods/${pod}/eviction?dryRun=All`, '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'policy/v1',
          kind: 'Eviction',
          metadata: { name: pod, namespace: NS },
        }),
      });
    // The disruption controller (kube-controller-manager) computes each budget's status from the pods.
    const replica = await eventually(
      `a dry-run eviction of ${NAME}-1 allowed`,
      async () => {
        const r = evict(`${NAME}-1`);
        return r.code === 0 ? r : undefined;
      },
      60_000,
      1000,
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}: ${evict(`${NAME}-1`).out}\n${kubectl(['get', 'pdb', '-n', NS, '-o', 'yaml']).out}`,
      );
    });
    assert.equal(replica.code, 0, replica.out);
    const primary = evict(`${NAME}-0`);
    assert.notEqual(primary.code, 0, 'the primary is never evicted');
    assert.match(primary.out, /disruption budget/, primary.out);
    const budgets = JSON.parse(kubectl(['get', 'pdb', '-n', NS, '-o', 'json']).stdout) as {
      items: {
        metadata: { name: string };
        status?: { disruptionsAllowed?: number; expectedPods?: number };
      }[];
    };
    const status = Object.fromEntries(budgets.items.map((b) => [b.metadata.name, b.status]));
    assert.deepEqual(
      [status[NAME]?.disruptionsAllowed, status[NAME]?.expectedPods],
      [1, 2],
      'the replicas: one of two may go',
    );
    assert.deepEqual(
      [status[`${NAME}-primary`]?.disruptionsAllowed, status[`${NAME}-primary`]?.expectedPods],
      [0, 1],
    );
    // Nothing was evicted: every pod still Ready.
    assert.equal((await getDb(cluster.client, NS, NAME)).status?.readyReplicas, 3);
  });
  test("pod 0's PVC and pod deleted: it comes back as a replica cloned from the current primary", async () => {
    // A switchover to pg-1 (the annotation the operator consumes), then pg-0 loses its volume.
    const before = await getDb(cluster.client, NS, NAME);
    const identity = before.status?.systemIdentifier;
    await eventually('pg-1 to hold the row', async () => {
      try {
        return (await psql(`${NAME}-1`, `${NAME}-1.${NAME}-headless`, 'SELECT v FROM t')) === 'through-rw';
      } catch {
        return false;
      }
    });
    await cluster.client.patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      {
        type: 'merge',
        body: { metadata: { annotations: { 'myapp.example.com/switchover-to': `${NAME}-1` } } },
      },
    );
    try {
      await eventually(
        'the switchover to pg-1 completed',
        async () => {
          const d = await getDb(cluster.client, NS, NAME);
          return (
            d.status?.lastFailover?.to === `${NAME}-1` &&
            !d.status.failover &&
            d.status.currentPrimary === `${NAME}-1`
          );
        },
        300_000,
        1000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    }
    await psql(`${NAME}-1`, `${NAME}-1.${NAME}-headless`, 'INSERT INTO t VALUES ($$after-switch$$)');

    const READY_UID = `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.metadata.uid}`;
    const oldUid = kubectl(['get', 'pod', '-n', NS, `${NAME}-0`, '-o', 'jsonpath={.metadata.uid}']).out;
    assert.equal(kubectl(['delete', 'pvc', '-n', NS, `data-${NAME}-0`, '--wait=false']).code, 0);
    assert.equal(kubectl(['delete', 'pod', '-n', NS, `${NAME}-0`, '--wait=false']).code, 0);
    let db: Database;
    try {
      db = await eventually(
        'pg-0 back as a replica, 3/3 Running',
        async () => {
          // A pod recreated while its old PVC was still terminating stays Pending: delete it again.
          const pending = kubectl([
            'get',
            'pod',
            '-n',
            NS,
            `${NAME}-0`,
            '-o',
            'jsonpath={.status.phase}',
          ]).out;
          if (pending === 'Pending' && kubectl(['get', 'pvc', '-n', NS, `data-${NAME}-0`]).code !== 0)
            kubectl(['delete', 'pod', '-n', NS, `${NAME}-0`, '--wait=false']);
          const now = kubectl(['get', 'pod', '-n', NS, `${NAME}-0`, '-o', READY_UID]).out;
          if (!now.startsWith('True ') || now === `True ${oldUid}`) return undefined;
          const d = await getDb(cluster.client, NS, NAME);
          return d.status?.phase === 'Running' && d.status.readyReplicas === 3 ? d : undefined;
        },
        600_000,
        2000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    }
    assert.equal(db.status?.systemIdentifier, identity, 'the cluster identity is unchanged');
    assert.equal(db.status?.targetPrimary, `${NAME}-1`);
    const rows = await psql(`${NAME}-0`, `${NAME}-0.${NAME}-headless`, 'SELECT v FROM t ORDER BY v');
    assert.equal(rows, 'after-switch\nthrough-rw', 'no row lost');
    assert.equal(await psql(`${NAME}-0`, `${NAME}-0.${NAME}-headless`, 'SELECT pg_is_in_recovery()'), 't');
    const sysid = await psql(
      `${NAME}-0`,
      `${NAME}-0.${NAME}-headless`,
      'SELECT system_identifier FROM pg_control_system()',
    );
    assert.equal(sysid, identity, 'pg-0 is a clone of the cluster, not a new one');
    // pg-2 follows the new primary too, in the end: it may count as Ready for a while still streaming from
    // nowhere (readiness fails 3 times 10 s apart first) or from pg-0 (its PRIMARY_HOST env is read at
    // container start); liveness restarts it and it then streams from pg-1 and has the row.
    const pg2 = `${NAME}-2.${NAME}-headless`;
    let last = '';
    try {
      await eventually(
        'pg-2 to have the row written on pg-1 after the switch',
        async () => {
          last = await psql(`${NAME}-2`, pg2, 'SELECT v FROM t ORDER BY v').catch((e: Error) => e.message);
          return last === 'after-switch\nthrough-rw';
        },
        300_000,
        2000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; last: ${last}\n${diagnose()}`);
    }
    // pg-1, the new primary, is Ready: the read-write Service reaches it.
    await eventually(
      'a write through the read-write Service after the switch',
      () =>
        psql(`${NAME}-0`, NAME, 'INSERT INTO t VALUES ($$via-rw-after$$)').then(
          () => true,
          () => false,
        ),
      300_000,
      2000,
    );
    await psql(`${NAME}-1`, `${NAME}-1.${NAME}-headless`, 'DELETE FROM t WHERE v = $$via-rw-after$$');
  });
  test('a minor version change with the primary on pg-1: replicas first, then a switchover, the former primary last, each Ready before the next', async (t) => {
    // spec.image to another tag of the same major: the local image tagged again in the node's containerd
    // (the same binaries: what is tested is the order and the readiness of the rollout).
    const primary = (await getDb(cluster.client, NS, NAME)).status?.targetPrimary ?? '';
    assert.equal(primary, `${NAME}-1`, 'the primary is not the lowest ordinal');
    await eventually(
      'the Database Running 3/3 before the change',
      async () => {
        const d = await getDb(cluster.client, NS, NAME);
        return d.status?.phase === 'Running' && d.status.readyReplicas === 3;
      },
      300_000,
      1000,
    );
    const next = `${POSTGRES_IMAGE}-rollout`;
    const sock = join(cluster.cp.dir, 'nodes', cluster.cp.realNodes[0] ?? '', 'containerd.sock');
    const tag = spawnSync('ctr', ['-a', sock, '-n', 'k8s.io', 'images', 'tag', POSTGRES_IMAGE, next], {
      encoding: 'utf8',
    });
    assert.equal(tag.status, 0, `ctr images tag: ${tag.stderr}`);
    const rec = recordDatabases(cluster.client, NS);
    const sampler = samplePods(cluster, NS, 500);
    await eventually('a first sample', () => sampler.rounds.length > 0, 30_000);
    const t0 = Date.now();
    await cluster.client.patch(
      Databases.resource,
      { namespace: NS, name: NAME },
      { type: 'merge', body: { spec: { image: next } } },
    );
    try {
      await eventually(
        'every pod Ready on the new image, the Database Running',
        async () => {
          const d = await getDb(cluster.client, NS, NAME);
          const r = sampler.rounds.at(-1) ?? [];
          const done = r.length === 3 && r.every((s) => s.image === next && s.ready && !s.terminating);
          return d.status?.phase === 'Running' && d.status.readyReplicas === 3 && done;
        },
        900_000,
        1000,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${diagnose()}`);
    } finally {
      await sampler.stop();
      rec.stop();
    }
    const t1 = Date.now();
    const { order, down, up } = rolloutOrder(
      sampler.rounds,
      [0, 1, 2].map((i) => `${NAME}-${i}`),
      next,
    );
    const timeline = order
      .map(
        (p) =>
          `${p} down +${((down.get(p) ?? t0) - t0) / 1000} s, Ready +${((up.get(p) ?? t0) - t0) / 1000} s`,
      )
      .join('; ');
    t.diagnostic(`rolled in ${(t1 - t0) / 1000} s: ${timeline}`);
    assert.deepEqual(
      order,
      [`${NAME}-2`, `${NAME}-0`, `${NAME}-1`],
      `replicas first, the primary last: ${timeline}`,
    );
    for (let i = 1; i < order.length; i++) {
      const [prev, cur] = [order[i - 1] ?? '', order[i] ?? ''];
      assert.ok(
        (up.get(prev) ?? Number.POSITIVE_INFINITY) <= (down.get(cur) ?? 0),
        `${prev} Ready on the new image before ${cur} went down: ${timeline}`,
      );
    }
    // The primary was not touched until its own turn (every replica Ready on the new image): the same pod,
    // no restart. (Its readiness is only reported: on a loaded machine a probe that times out makes any pod
    // NotReady for a while.) Its turn is a switchover first (its server stops cleanly), then its restart.
    const turn = Math.max(...order.filter((p) => p !== primary).map((p) => up.get(p) ?? 0));
    const first = sampler.rounds[0]?.find((s) => s.pod === primary);
    let notReady = 0;
    let samples = 0;
    for (const round of sampler.rounds) {
      const at = round[0]?.at ?? 0;
      if (at >= Math.min(turn, down.get(primary) ?? 0)) break;
      const p: PodSample | undefined = round.find((x) => x.pod === primary);
      assert.equal(p?.uid, first?.uid, `the primary is the same pod at ${new Date(at).toISOString()}`);
      assert.equal(
        p?.restarts,
        first?.restarts,
        `the primary not restarted at ${new Date(at).toISOString()}`,
      );
      samples++;
      if (!p?.ready) notReady++;
    }
    t.diagnostic(`the primary was NotReady in ${notReady} of ${samples} samples before its turn`);
    assert.ok(
      rec.seen.some((d) => d.status?.phase === 'Updating'),
      'the Database said Updating',
    );
    const events = (await eventsFor(cluster.client, NS, NAME)).filter((e) => e.reason === 'RollingPod');
    assert.deepEqual(
      events.map((e) => /Restarting (\S+)/.exec(e.note ?? '')?.[1]),
      order,
      'an Event per pod, in that order',
    );
    // The primary's turn was a switchover to an updated replica, not a restart in place.
    const after = await getDb(cluster.client, NS, NAME);
    assert.notEqual(after.status?.targetPrimary, primary, 'the primary moved by a switchover');
    const reasons = (await eventsFor(cluster.client, NS, NAME)).map((e) => e.reason);
    assert.ok(reasons.includes('RollingSwitchover'), `a RollingSwitchover Event: ${reasons.join(', ')}`);
    assert.ok(reasons.includes('SwitchoverCompleted'), `a SwitchoverCompleted Event: ${reasons.join(', ')}`);
    assert.equal(await psql(`${NAME}-0`, NAME, 'SELECT count(*) FROM t'), '2', 'no row lost; rw works');
  });
  test("the primary's PVC and pod deleted: a replica is promoted (failover), the lost instance is cloned back, no row lost", async () => {
    // Before automatic failover this was Failed PrimaryDataLost until a person promoted a replica; the
    // operator now promotes the most advanced replica (no new empty primary either way).
    const before = await getDb(cluster.client, NS, NAME);
    const identity = before.status?.systemIdentifier;
    // The primary now (the rollout before may have moved it).
    const lost = before.status?.targetPrimary ?? `${NAME}-1`;
    assert.equal(kubectl(['delete', 'pvc', '-n', NS, `data-${lost}`, '--wait=false']).code, 0);
    assert.equal(kubectl(['delete', 'pod', '-n', NS, lost, '--wait=false']).code, 0);
    let db: Database;
    let seen: Database | undefined;
    try {
      db = await eventually(
        `a failover away from ${lost}, then Running 3/3`,
        async () => {
          const pending = kubectl(['get', 'pod', '-n', NS, lost, '-o', 'jsonpath={.status.phase}']).out;
          if (pending === 'Pending' && kubectl(['get', 'pvc', '-n', NS, `data-${lost}`]).code !== 0)
            kubectl(['delete', 'pod', '-n', NS, lost, '--wait=false']);
          const d = await getDb(cluster.client, NS, NAME);
          seen = d;
          return d.status?.lastFailover?.from === lost &&
            d.status.phase === 'Running' &&
            d.status.readyReplicas === 3
            ? d
            : undefined;
        },
        // Well inside the test's own limit (10 minutes), so that a failure prints where it stood.
        480_000,
        2000,
      );
    } catch (err) {
      const events = (await eventsFor(cluster.client, NS, NAME).catch(() => []))
        .map((e) => `${e.type} ${e.reason}: ${e.note}`)
        .join('\n');
      throw new Error(
        `${(err as Error).message}\nstatus: ${JSON.stringify(seen?.status)}\nevents:\n${events}\n${diagnose()}`,
      );
    }
    const primary = db.status?.targetPrimary ?? '';
    assert.notEqual(primary, lost);
    assert.equal(db.status?.lastFailover?.reason, 'PrimaryPodMissing');
    assert.equal(db.status?.systemIdentifier, identity, 'the cluster identity is kept');
    for (const pod of [0, 1, 2].map((i) => `${NAME}-${i}`)) {
      assert.equal(await psql(pod, `${pod}.${NAME}-headless`, 'SELECT count(*) FROM t'), '2', pod);
      assert.equal(
        await psql(pod, `${pod}.${NAME}-headless`, 'SELECT system_identifier FROM pg_control_system()'),
        identity,
      );
    }
  });
});

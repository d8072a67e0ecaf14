/**
 * Issue 11 on REAL pods, replication that heals: a 3-instance PostgreSQL 15 Database on
 * opkit.local/postgres:15 (one mixed cluster: a tainted kwok node and a real node), the operator in-process,
 * with a small WAL bound set the way a user can (spec.parameters: max_slot_wal_keep_size 32MB, wal_keep_size
 * 16MB), so that going past it takes a few seconds of WAL.
 *   - a replica kept from running (its pod deleted while the node is cordoned) while the primary writes WAL
 *     past the bound: its slot is lost; once it can run again it is cloned again, streams and is Ready, and
 *     the Database's status (phase, conditions, status.instances) and Events said so throughout;
 *   - scale 3 -> 1 -> 3 with the volumes retained: the slots of the removed replicas are dropped on the
 *     primary, and the replicas stream again when they come back;
 * (The minor version rollout is in postgres-pods.test.ts, where the primary is not the lowest ordinal.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Event, findCondition } from '@opkit/runtime';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { type Cluster, eventsFor, eventually, getDb, recordDatabases, waitForPhase } from './helpers.ts';
import {
  appPsql,
  diagnose,
  type Kubectl,
  type PgPods,
  runningPgDatabase,
  startPgPods,
  superSql,
  throughService,
} from './pg-pods.ts';

const NS = 'pgheal';
const NAME = 'pg';
const PODS = [0, 1, 2].map((i) => `${NAME}-${i}`);
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

type Instance = NonNullable<NonNullable<Database['status']>['instances']>[number];
const instance = (db: Database | undefined, pod: string): Instance | undefined =>
  db?.status?.instances?.find((i) => i.name === pod);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

describe('PostgreSQL on real pods: replication that heals', { timeout: 1_800_000, skip: needsRoot }, () => {
  let pg: PgPods;
  let cluster: Cluster;
  let kubectl: Kubectl;
  const psql = (from: string, host: string, sql: string) =>
    appPsql(cluster, kubectl, NS, NAME, from, host, sql);
  const headless = (pod: string) => `${pod}.${NAME}-headless`;
  const fail = (err: unknown): never => {
    throw new Error(`${(err as Error).message}\n${diagnose(kubectl, NS, PODS)}`);
  };
  /** The result instance.sh reported in the bootstrap init container of the pod as it is now. */
  const bootstrapResult = (pod: string): string => {
    const msg = kubectl([
      'get',
      'pod',
      '-n',
      NS,
      pod,
      '-o',
      'jsonpath={.status.initContainerStatuses[?(@.name=="bootstrap")].state.terminated.message}',
    ]).stdout;
    return /^result=(.*)$/m.exec(msg)?.[1] ?? `(no report: ${msg})`;
  };
  const replication = (primary: string): string =>
    superSql(
      kubectl,
      NS,
      primary,
      "SELECT string_agg(application_name || ':' || state, ',' ORDER BY application_name) FROM pg_stat_replication",
    );
  const slots = (primary: string): string =>
    superSql(
      kubectl,
      NS,
      primary,
      "SELECT coalesce(string_agg(slot_name || ':' || active || ':' || coalesce(wal_status, '-'), ',' ORDER BY slot_name), '') FROM pg_replication_slots",
    );

  before(async () => {
    pg = await startPgPods(NS);
    ({ cluster, kubectl } = pg);
    const started = Date.now();
    await runningPgDatabase(pg, NS, NAME, {
      replicas: 3,
      parameters: { max_slot_wal_keep_size: '32MB', wal_keep_size: '16MB' },
    });
    process.stderr.write(`# 3 instances Running in ${seconds(Date.now() - started)}\n`);
    await throughService(() =>
      psql(PODS[1]!, NAME, 'CREATE TABLE t (v text); INSERT INTO t VALUES ($$first$$)'),
    );
  });
  after(async () => {
    await pg?.stop();
  });

  test('a replica down while the primary writes WAL past the bound: cloned again, streams, Ready; status and Events say so', async (t) => {
    const rec = recordDatabases(cluster.client, NS);
    const since = new Date().toISOString();
    const node = cluster.cp.realNodes[0]!;
    const db0 = await getDb(cluster.client, NS, NAME);
    const primary = db0.status?.targetPrimary ?? '';
    const victim = `${NAME}-2`;
    assert.equal(primary, `${NAME}-0`);
    assert.equal(instance(db0, victim)?.ready, true, 'pg-2 ready before');
    assert.match(slots(primary), /opkit_pg_2:true:reserved/, 'pg-2 streams through its slot');

    // Down: the node cordoned, the pod deleted (a fast shutdown, preStop): its replacement cannot be scheduled.
    const t0 = Date.now();
    assert.equal(kubectl(['cordon', node]).code, 0);
    try {
      assert.equal(
        kubectl(['delete', 'pod', '-n', NS, victim, '--wait=true'], { timeoutMs: 180_000 }).code,
        0,
      );
      const degraded = await eventually(
        'the Database Degraded, naming pg-2 as not ready',
        async () => {
          const d = await getDb(cluster.client, NS, NAME);
          const i = instance(d, victim);
          return d.status?.phase === 'Degraded' && i && !i.ready && i.reason ? d : undefined;
        },
        120_000,
        500,
      ).catch(fail);
      const ready = findCondition(degraded.status?.conditions, 'Ready');
      assert.match(ready?.message ?? '', /pg-2/, 'the Ready condition names pg-2');
      t.diagnostic(`down: ${instance(degraded, victim)?.reason}: ${instance(degraded, victim)?.message}`);
      assert.match(slots(primary), /opkit_pg_2:false:/, 'its slot is inactive');

      // WAL past the bound: a row for the application, then WAL segments and checkpoints until the slot is lost.
      await psql(PODS[1]!, NAME, 'INSERT INTO t VALUES ($$during-outage$$)');
      const start = superSql(kubectl, NS, primary, 'SELECT pg_current_wal_lsn()');
      superSql(kubectl, NS, primary, 'CREATE TABLE filler (x text)');
      let status = '';
      for (let round = 0; round < 40 && status !== 'lost'; round++) {
        superSql(
          kubectl,
          NS,
          primary,
          "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000); SELECT pg_switch_wal()",
        );
        if (round % 3 === 2) {
          superSql(kubectl, NS, primary, 'CHECKPOINT');
          status = superSql(
            kubectl,
            NS,
            primary,
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'opkit_pg_2'",
          );
        }
      }
      assert.equal(status, 'lost', "pg-2's slot lost its WAL");
      const walMb = superSql(
        kubectl,
        NS,
        primary,
        `SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '${start}') / 1048576)`,
      );
      t.diagnostic(`${walMb} MB of WAL written while pg-2 was down (bound 32MB); slot lost`);
      const stillDown = await getDb(cluster.client, NS, NAME);
      assert.equal(instance(stillDown, victim)?.ready, false, 'still not ready');
    } finally {
      kubectl(['uncordon', node]);
    }

    // Up: it runs again, is cloned again from the primary, streams, is Ready.
    const t1 = Date.now();
    await eventually(
      'pg-2 Ready and the Database Running 3/3',
      async () => {
        const d = await getDb(cluster.client, NS, NAME);
        return d.status?.phase === 'Running' && d.status.readyReplicas === 3 && instance(d, victim)?.ready;
      },
      600_000,
      1000,
    ).catch(fail);
    const t2 = Date.now();
    assert.equal(
      bootstrapResult(victim),
      'recloned',
      'instance.sh cloned it again (its slot had lost its WAL)',
    );
    assert.match(replication(primary), /pg-2:streaming/);
    assert.match(slots(primary), /opkit_pg_2:true:reserved/, 'a new slot, active');
    assert.equal(
      await psql(PODS[0]!, headless(victim), 'SELECT v FROM t ORDER BY v'),
      'during-outage\nfirst',
    );
    assert.equal(
      await psql(PODS[0]!, headless(victim), 'SELECT system_identifier FROM pg_control_system()'),
      db0.status?.systemIdentifier,
    );
    await new Promise((r) => setTimeout(r, 2000));
    rec.stop();

    // The status said so throughout: not ready from the deletion until it was cloned again, never before.
    const seen = rec.seen;
    const down = seen.findIndex((d) => instance(d, victim)?.ready === false);
    assert.ok(down >= 0, 'a status with pg-2 not ready was recorded');
    const backUp = seen.findIndex((d, i) => i > down && instance(d, victim)?.ready === true);
    assert.ok(backUp > down, 'a status with pg-2 ready again was recorded');
    for (const d of seen.slice(down, backUp)) {
      assert.notEqual(d.status?.phase, 'Running', 'never Running while pg-2 was not ready');
    }
    assert.equal(instance(seen[backUp], victim)?.result, 'recloned', 'ready again only once cloned again');
    const reasons = new Set(seen.slice(down, backUp).map((d) => instance(d, victim)?.reason));
    t.diagnostic(`pg-2's reasons while not ready: ${[...reasons].join(', ')}`);
    // And the Events, in order: not ready, repaired (cloned again), ready.
    // An Event said again (same reason and note: pg-2 ready, as after its first clone) is one object with a
    // series: when it was last said is series.lastObservedTime.
    const when = (e: Event) => String(e.series?.lastObservedTime ?? e.eventTime ?? '');
    // Events are written after the status that records them, and a series update may lag: read them until
    // the ready one is there (60 s, a safety bound), then check the order.
    const read = async () =>
      (await eventsFor(cluster.client, NS, NAME))
        .filter((e) => when(e) >= since && (e.note ?? '').includes(victim))
        .sort((a, b) => when(a).localeCompare(when(b)));
    let events = await read();
    await eventually(
      'the InstanceReady Event of pg-2',
      async () => {
        events = await read();
        const repaired = events.findIndex((e) => e.reason === 'InstanceRepaired');
        return repaired >= 0 && events.findLastIndex((e) => e.reason === 'InstanceReady') > repaired;
      },
      60_000,
      1000,
    ).catch(() => undefined);
    const idx = (reason: string) => events.findIndex((e) => e.reason === reason);
    const summary = events.map((e) => `${e.type} ${e.reason}: ${e.note}`).join('\n');
    assert.ok(idx('InstanceNotReady') >= 0, `a Warning InstanceNotReady for pg-2:\n${summary}`);
    assert.equal(events[idx('InstanceNotReady')]?.type, 'Warning');
    assert.ok(idx('InstanceRepaired') > idx('InstanceNotReady'), `InstanceRepaired after it:\n${summary}`);
    assert.match(events[idx('InstanceRepaired')]?.note ?? '', /cloned again/);
    assert.ok(
      events.findLastIndex((e) => e.reason === 'InstanceReady') > idx('InstanceRepaired'),
      `InstanceReady last:\n${summary}`,
    );
    t.diagnostic(
      `down ${seconds(t1 - t0)} (deletion, WAL, checkpoints); back Ready ${seconds(t2 - t1)} after the uncordon\n${summary}`,
    );
  });

  test('scale 3 -> 1 -> 3 with the volumes retained: the removed replicas slots dropped, all stream again', async (t) => {
    const scale = (replicas: number) =>
      cluster.client.patch(
        Databases.resource,
        { namespace: NS, name: NAME },
        { type: 'merge', body: { spec: { replicas } } },
      );
    const primary = (await getDb(cluster.client, NS, NAME)).status?.targetPrimary ?? '';
    assert.equal(primary, `${NAME}-0`);
    const t0 = Date.now();
    await scale(1);
    await eventually(
      'one instance Running, pg-1 and pg-2 gone',
      async () => {
        const d = await getDb(cluster.client, NS, NAME);
        const gone = [1, 2].every((i) => kubectl(['get', 'pod', '-n', NS, `${NAME}-${i}`]).code !== 0);
        return d.status?.phase === 'Running' && d.status.readyReplicas === 1 && gone;
      },
      300_000,
      1000,
    ).catch(fail);
    for (const i of [1, 2]) {
      assert.equal(
        kubectl(['get', 'pvc', '-n', NS, `data-${NAME}-${i}`]).code,
        0,
        `data-${NAME}-${i} retained`,
      );
    }
    const t1 = Date.now();
    // The sidecar drops the slots once the kubelet has updated the mounted ConfigMap (its sync period,
    // about a minute) and its 10 s interval passed: a generous bound of 4 minutes.
    let last = '';
    await eventually(
      'the slots of pg-1 and pg-2 dropped on the primary',
      () => {
        last = slots(primary);
        return last === '';
      },
      240_000,
      2000,
    ).catch((err: Error) => fail(new Error(`${err.message}; slots: ${last}`)));
    const t2 = Date.now();
    await psql(PODS[0]!, NAME, 'INSERT INTO t VALUES ($$while-single$$)');

    await scale(3);
    await waitForPhase(cluster.client, NS, NAME, 'Running', 600_000).catch(fail);
    await eventually(
      'pg-1 and pg-2 streaming',
      () => replication(primary) === 'pg-1:streaming,pg-2:streaming',
      120_000,
      1000,
    ).catch(fail);
    const t3 = Date.now();
    assert.equal((await getDb(cluster.client, NS, NAME)).status?.readyReplicas, 3);
    assert.match(slots(primary), /^opkit_pg_1:true:reserved,opkit_pg_2:true:reserved$/);
    for (const pod of [`${NAME}-1`, `${NAME}-2`]) {
      // Their retained data could not follow (their slots were dropped): cloned again.
      assert.equal(bootstrapResult(pod), 'recloned', pod);
      assert.equal(
        await psql(PODS[0]!, headless(pod), 'SELECT v FROM t ORDER BY v'),
        'during-outage\nfirst\nwhile-single',
        pod,
      );
    }
    // No server crashed on the way (a backend or a reaped orphan dying of a signal restarts every connection).
    for (const pod of PODS) {
      const logs = kubectl(['logs', '-n', NS, pod, '-c', 'postgres']).out;
      assert.doesNotMatch(logs, /terminated by signal/, `${pod}: a server process crashed`);
    }
    t.diagnostic(
      `3 -> 1 Running in ${seconds(t1 - t0)}; slots dropped ${seconds(t2 - t1)} later; 1 -> 3 streaming in ${seconds(t3 - t2)}`,
    );
  });
});

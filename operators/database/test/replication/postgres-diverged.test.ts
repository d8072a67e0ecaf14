/**
 * The re-clone safety net (issue 12), on REAL PostgreSQL (pg-harness.ts). A replica whose WAL diverged
 * from its primary's on the same timeline (a former primary that ran as a primary without a promotion:
 * its standby.signal lost, writes the primary never had) is not repaired by pg_rewind ("no rewind
 * required": same timeline) and never streams: each start requests WAL the primary cannot give it
 * ("incorrect prev-link", "requested starting point ... ahead of the WAL flush position"). Liveness fails,
 * the kubelet restarts it, and before the safety net it started as it was, for ever.
 * With it: health.sh's liveness sees the replay stuck on one position while the primary is up and leaves
 * its verdict on the pod's in-memory volume; the next `instance.sh start` clones the primary again (it is
 * not the designated primary, the primary is up and serves its system identifier), keeps the old data
 * directory aside, and says so in its report.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually } from '@opkit/runtime/testing';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

describe('postgres: a replica whose WAL diverged from its primary is cloned again, its old data kept', {
  skip: skipReason,
}, () => {
  let c: Cluster;
  let a: Instance;
  let b: Instance;
  let d: Instance;
  let record: Record_;
  /** The stuck verdict's bound, short for the test (the default is minutes). */
  const quick = { STUCK_SECONDS: '3' };

  const count = async (inst: Instance) => (await c.asApp(inst, 'SELECT count(*) FROM t')).stdout.trim();
  const since = (inst: Instance, from: number) => readFileSync(inst.log, 'utf8').slice(from);
  /**
   * A replica of A that then ran as a primary on the same timeline (no promotion: its standby.signal
   * gone) and took 7 rows A never gets.
   */
  const diverged = async (pod: string): Promise<Instance> => {
    const inst = await c.instance(pod);
    const clone = await c.bootstrap(inst, record);
    assert.equal(clone.code, 0, clone.stderr);
    await c.start(inst, record);
    await c.streaming(a, inst);
    await eventually(`${pod} replayed the 100 rows`, async () => (await count(inst)) === '100', {
      timeoutMs: 60_000,
    });
    await c.stop(inst);
    rmSync(join(inst.pgdata, 'standby.signal'), { force: true });
    await c.ok('pg_ctl', [
      'start',
      '-D',
      inst.pgdata,
      '-w',
      '-l',
      join(inst.root, 'as-primary.log'),
      '-o',
      `-c config_file=${c.env(inst, record).CONFIG_FILE}`,
    ]);
    assert.equal((await c.asApp(inst, 'INSERT INTO t SELECT g FROM generate_series(1, 7) g')).code, 0);
    await c.ok('pg_ctl', ['stop', '-D', inst.pgdata, '-m', 'fast', '-w']);
    return inst;
  };

  before(
    async () => {
      c = new Cluster(pgDatabase('ledger'));
      a = await c.instance('ledger-0');
      record = { primary: a };
      const init = await c.bootstrap(a, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(a).systemIdentifier;
      await c.start(a, record);
      assert.equal((await c.asApp(a, 'CREATE TABLE t (id int)')).code, 0);
      assert.equal((await c.asApp(a, 'INSERT INTO t SELECT g FROM generate_series(1, 100) g')).code, 0);
      b = await diverged('ledger-1');
      d = await diverged('ledger-2');
      assert.equal((await c.asApp(a, 'INSERT INTO t SELECT g FROM generate_series(1, 50000) g')).code, 0);
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('stuck as it is: liveness fails with its verdict, the restart clones the primary again', {
    timeout: 300_000,
  }, async () => {
    const from = readFileSync(b.log, 'utf8').length;
    // Its first start: pg_rewind finds nothing to do on the same timeline, the standby cannot follow A.
    await c.start(b, record, quick);
    assert.equal(c.report(b).result, 'rewound', since(b, from).slice(-2000));
    let last = '';
    await eventually(
      'liveness fails: replay stuck while the primary is up',
      async () => {
        const r = await c.probe(b, record, 'live', quick);
        last = `${r.code}: ${r.stdout}${r.stderr}`;
        return r.code !== 0 && /stuck/.test(r.stdout);
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nlast probe: ${last}\n${since(b, from).slice(-3000)}`);
    });
    const verdict = join(dirname(c.env(b, record).DESIGNATION_FILE ?? ''), 'diverged');
    assert.ok(existsSync(verdict), 'the verdict for the next start is on the in-memory volume');

    // The kubelet's restart: preStop (fast shutdown), then `instance.sh start`.
    await c.stop(b);
    await c.start(b, record, quick);
    const report = c.report(b);
    assert.equal(report.result, 'recloned', since(b, from).slice(-3000));
    assert.match(report.message ?? '', /diverged.*ledger-0/);
    assert.match(report.message ?? '', /kept in .*pgdata\.diverged-/);
    await c.streaming(a, b);
    await eventually('A’s rows on B, none of its own', async () => (await count(b)) === '50100', {
      timeoutMs: 60_000,
    });
    assert.equal(existsSync(verdict), false, 'the verdict is consumed');
    const probe = await c.probe(b, record, 'live', quick);
    assert.equal(probe.code, 0, probe.stdout);
    // The old directory is there, whole: its own 7 rows are in it for a person to look at.
    const kept = readdirSync(dirname(b.pgdata)).filter((n) => n.startsWith('pgdata.diverged-'));
    assert.equal(kept.length, 1, readdirSync(dirname(b.pgdata)).join(' '));
    assert.ok(existsSync(join(dirname(b.pgdata), kept[0] ?? '', 'global', 'pg_control')));
  });

  test('stuck starting up (not consistent): the startup probe hands over to liveness, which fails; recloned', {
    timeout: 300_000,
  }, async () => {
    // Without hot standby it never accepts connections: "starting up" for ever, which liveness took for alive.
    writeFileSync(join(d.pgdata, 'postgresql.auto.conf'), 'hot_standby = off\n', { flag: 'a' });
    const from = readFileSync(d.log, 'utf8').length;
    await c.start(d, record, quick, 'answering');
    const first = await c.probe(d, record, 'startup', quick);
    assert.notEqual(first.code, 0, 'not accepting connections, not stuck yet: startup goes on');
    let last = '';
    await eventually(
      'the startup probe ends on the stuck replica',
      async () => {
        const r = await c.probe(d, record, 'startup', quick);
        last = `${r.code}: ${r.stdout}${r.stderr}`;
        return r.code === 0 && /stuck/.test(r.stdout);
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nlast probe: ${last}\n${since(d, from).slice(-3000)}`);
    });
    const live = await c.probe(d, record, 'live', quick);
    assert.equal(live.code, 1, live.stdout);
    assert.match(live.stdout, /stuck at 0000000100000000000000\w\w .*starting up/);

    await c.stop(d);
    await c.start(d, record, quick);
    const report = c.report(d);
    assert.equal(report.result, 'recloned', since(d, from).slice(-3000));
    assert.match(
      report.message ?? '',
      /^re-cloned from ledger-0: its WAL had diverged at 0000000100000000000000\w\w/,
    );
    await c.streaming(a, d);
    await eventually('A’s rows on the re-cloned replica', async () => (await count(d)) === '50100', {
      timeoutMs: 60_000,
    });
  });

  test('never the designated primary: a verdict on its own data directory is ignored', {
    timeout: 120_000,
  }, async () => {
    // The verdict left on A's volume (a stale file): A, the designated primary, starts as it is.
    const verdict = join(dirname(c.env(a, record).DESIGNATION_FILE ?? ''), 'diverged');
    writeFileSync(verdict, '0/3000060 stale\n');
    await c.stop(a);
    await c.start(a, record, quick);
    assert.equal(c.report(a).result, 'existing');
    assert.equal(await count(a), '50100');
    const kept = readdirSync(dirname(a.pgdata)).filter((n) => n.startsWith('pgdata.diverged-'));
    assert.deepEqual(kept, []);
  });
});

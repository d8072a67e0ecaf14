/**
 * A former primary interrupted during its rejoin (issue 12), on REAL PostgreSQL (pg-harness.ts). After a
 * switchover the former primary is rewound (pg_rewind) and starts its recovery as a standby of the new
 * primary; killed then (an eviction: `pg_ctl stop -m immediate`), its data directory says "in archive
 * recovery". What was seen on real pods: its next start found no standby.signal, ran pg_rewind again, whose
 * single-user crash recovery ended recovery and wrote WAL the new primary does not have on the same
 * timeline; pg_rewind then found "no rewind required" and the standby looped on "incorrect prev-link".
 * A data directory that was a standby must start as a standby, without any step that ends its recovery.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually } from '@opkit/runtime/testing';
import { fenceCommand, promoteCommand, slotName } from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

describe('postgres: a former primary killed during its post-rewind recovery rejoins as a standby', {
  skip: skipReason,
}, () => {
  let c: Cluster;
  let a: Instance;
  let b: Instance;
  let record: Record_;
  let next: Record_;

  const count = async (inst: Instance) => (await c.asApp(inst, 'SELECT count(*) FROM t')).stdout.trim();
  /** A line of pg_controldata. */
  const control = async (inst: Instance, key: string) =>
    (await c.ok('pg_controldata', [inst.pgdata]))
      .split('\n')
      .find((l) => l.startsWith(`${key}:`))
      ?.slice(key.length + 1)
      .trim();
  /** An eviction in the middle of recovery: no shutdown checkpoint, no restartpoint. */
  const kill = async (inst: Instance) => {
    const child = inst.server;
    await c.ok('pg_ctl', ['stop', '-D', inst.pgdata, '-m', 'immediate', '-w']);
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => child.once('exit', () => resolve()));
    }
    inst.server = undefined;
  };

  before(
    async () => {
      c = new Cluster(pgDatabase('ledger'));
      a = await c.instance('ledger-0');
      b = await c.instance('ledger-1');
      record = { primary: a };
      const init = await c.bootstrap(a, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(a).systemIdentifier;
      await c.start(a, record);
      assert.equal((await c.asApp(a, 'CREATE TABLE t (id int)')).code, 0);
      const clone = await c.bootstrap(b, record);
      assert.equal(clone.code, 0, clone.stderr);
      await c.start(b, record);
      await c.streaming(a, b);
      // A switchover: A fenced (fast shutdown), B promoted with A's slot.
      assert.equal((await c.asApp(a, 'INSERT INTO t SELECT g FROM generate_series(1, 1000) g')).code, 0);
      const fence = await c.exec(a, record, fenceCommand(1));
      assert.equal(fence.code, 0, fence.stderr);
      a.server = undefined;
      const promote = await c.exec(b, record, promoteCommand('ledger-1', 2, [slotName('ledger-0')]));
      assert.equal(promote.code, 0, promote.stderr);
      writeFileSync(c.env(a, record).DESIGNATION_FILE ?? '', 'ledger-1 2\n');
      next = {
        primary: b,
        ...(record.systemIdentifier ? { systemIdentifier: record.systemIdentifier } : {}),
      };
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('rewound, killed at the start of its recovery: it starts again as a standby, no pg_rewind, no clone', {
    timeout: 240_000,
  }, async () => {
    await c.start(a, next);
    assert.equal(c.report(a).result, 'rewound', readFileSync(a.log, 'utf8').slice(-2000));
    // The eviction while A replays: its control file says it was in recovery, its last checkpoint is still
    // the common one on the old timeline (pg_rewind's), before any restartpoint on the new one.
    await kill(a);
    assert.equal(await control(a, 'Database cluster state'), 'in archive recovery');
    assert.equal(await control(a, "Latest checkpoint's TimeLineID"), '1');
    assert.equal((await c.asApp(b, 'INSERT INTO t VALUES (-1)')).code, 0);

    await c.start(a, next);
    assert.equal(c.report(a).result, 'existing', readFileSync(a.log, 'utf8').slice(-3000));
    await c.streaming(b, a);
    await eventually('the row written on B arrives on A', async () => (await count(a)) === '1001', {
      timeoutMs: 60_000,
    });
  });

  test('killed in recovery past a restartpoint, its standby.signal gone: it streams, no WAL of its own', {
    timeout: 240_000,
  }, async () => {
    // A restartpoint on the new timeline: B checkpoints, A replays it and checkpoints.
    assert.equal((await c.asApp(b, 'INSERT INTO t SELECT g FROM generate_series(1, 1000) g')).code, 0);
    await c.sql(b, 'CHECKPOINT');
    const lsn = await c.sql(b, 'SELECT pg_current_wal_lsn()');
    await eventually(
      "A replayed B's checkpoint",
      async () => {
        const r = await c.asAdmin(a, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn`);
        return r.stdout.trim() === 't';
      },
      { timeoutMs: 60_000 },
    );
    await c.sql(a, 'CHECKPOINT');
    assert.equal(await control(a, "Latest checkpoint's TimeLineID"), '2');
    await kill(a);
    assert.equal(await control(a, 'Database cluster state'), 'in archive recovery');
    // The state the pod was found in on real nodes: no standby.signal (pg_rewind drops it, the new primary
    // having none, and an eviction between pg_rewind and instance.sh's touch leaves it so).
    const signal = join(a.pgdata, 'standby.signal');
    rmSync(signal, { force: true });
    assert.equal(existsSync(signal), false);
    assert.equal((await c.asApp(b, 'INSERT INTO t VALUES (-2)')).code, 0);

    const from = readFileSync(a.log, 'utf8').length;
    const since = () => readFileSync(a.log, 'utf8').slice(from);
    await c.start(a, next);
    assert.equal((await c.asApp(b, 'INSERT INTO t VALUES (-3)')).code, 0);
    await c.streaming(b, a).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${since().slice(-3000)}`);
    });
    await eventually('the rows written on B arrive on A', async () => (await count(a)) === '2003', {
      timeoutMs: 60_000,
    });
    assert.equal(await c.sql(a, 'SELECT pg_is_in_recovery()'), 't');
    assert.doesNotMatch(since(), /pg_rewind|incorrect prev-link|single-user/);
    assert.equal(c.report(a).result, 'existing');
  });
});

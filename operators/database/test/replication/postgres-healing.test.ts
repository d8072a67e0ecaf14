/**
 * Replication that heals, with REAL postgres processes (pg-harness.ts): a replica whose slot lost its WAL
 * (max_slot_wal_keep_size) or whose timeline diverged is detected by the probes (health.sh) and repaired
 * by `instance.sh start` (a fresh clone, or pg_rewind), then streams again. The bounds are small here
 * (spec.parameters) so that a few WAL segments are "well past" them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { eventually } from '@opkit/runtime/testing';
import { slotName } from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

/** Writes `segments` WAL segments' worth on the primary and checkpoints (which removes old WAL). */
async function generateWal(c: Cluster, primary: Instance, segments: number): Promise<void> {
  for (let i = 0; i < segments; i++) {
    const r = await c.asApp(
      primary,
      `INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g`,
    );
    assert.equal(r.code, 0, r.stderr);
    await c.sql(primary, 'SELECT pg_switch_wal()');
  }
  await c.sql(primary, 'CHECKPOINT');
}

async function rows(c: Cluster, inst: Instance): Promise<string> {
  return (await c.asApp(inst, 'SELECT count(*) FROM t')).stdout.trim();
}

describe('postgres: a replica that cannot stream is detected and repaired', { skip: skipReason }, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;

  before(
    async () => {
      c = new Cluster(pgDatabase('stock', { max_slot_wal_keep_size: '32MB', wal_keep_size: '0' }));
      primary = await c.instance('stock-0');
      replica = await c.instance('stock-1');
      record = { primary };
      const init = await c.bootstrap(primary, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(primary).systemIdentifier;
      await c.start(primary, record);
      const t = await c.asApp(primary, 'CREATE TABLE t (id int, pad text)');
      assert.equal(t.code, 0, t.stderr);
      const clone = await c.bootstrap(replica, record);
      assert.equal(clone.code, 0, clone.stderr);
      await c.start(replica, record);
      await c.streaming(primary, replica);
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('stopped, WAL past the bound: its slot is lost; at start it is cloned again and streams', {
    timeout: 180_000,
  }, async () => {
    await c.stop(replica);
    await generateWal(c, primary, 4);
    const slot = slotName(replica.pod);
    assert.equal(
      await c.sql(primary, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = '${slot}'`),
      'lost',
    );
    await c.start(replica, record);
    assert.equal(c.report(replica).result, 'recloned');
    assert.equal(c.report(replica).systemIdentifier, record.systemIdentifier);
    await c.streaming(primary, replica);
    const expected = await rows(c, primary);
    await eventually('the replica has every row', async () => (await rows(c, replica)) === expected, {
      timeoutMs: 60_000,
    });
    assert.equal(
      await c.sql(primary, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = '${slot}'`),
      'reserved',
    );
    const ready = await c.probe(replica, record, 'ready');
    assert.equal(ready.code, 0, ready.stdout);
  });

  test('running but cut off past the bound: readiness and liveness fail, the restart repairs it', {
    timeout: 240_000,
  }, async () => {
    // A partition: the replica's WAL receiver stops (SIGSTOP) and its connection is cut (the walsender
    // ended) while the primary writes on, past the bound; the checkpoint then invalidates the slot.
    const receiver = Number(await c.sql(replica, 'SELECT pid FROM pg_stat_wal_receiver'));
    assert.ok(receiver > 0);
    const slot = slotName(replica.pod);
    const walStatus = () =>
      c.sql(primary, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = '${slot}'`);
    process.kill(receiver, 'SIGSTOP');
    try {
      await c.sql(
        primary,
        `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '${slot}'`,
      );
      await eventually(
        'the slot inactive',
        async () =>
          (await c.sql(primary, `SELECT active FROM pg_replication_slots WHERE slot_name = '${slot}'`)) ===
          'f',
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      await generateWal(c, primary, 4);
      await eventually('the slot invalidated', async () => (await walStatus()) === 'lost', {
        timeoutMs: 60_000,
        intervalMs: 500,
      });
    } finally {
      process.kill(receiver, 'SIGCONT');
    }
    // It cannot stream any more: not ready (out of the read-only Service), and not live while the
    // primary is up, so the kubelet restarts the container.
    const notReady = await eventually(
      'readiness failing',
      async () => {
        const r = await c.probe(replica, record, 'ready');
        return r.code !== 0 && r;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.match(notReady.stdout, /not streaming from the primary 127\.0\.0\.1/);
    const dead = await eventually(
      'liveness failing',
      async () => {
        const r = await c.probe(replica, record, 'live');
        return r.code !== 0 && r;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.match(dead.stdout, /not streaming from 127\.0\.0\.1 although it is up/);
    // The container restart: instance.sh start clones it again.
    await c.stop(replica);
    await c.start(replica, record);
    assert.equal(c.report(replica).result, 'recloned');
    await c.streaming(primary, replica);
    await eventually('readiness passing', async () => (await c.probe(replica, record, 'ready')).code === 0, {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    assert.equal((await c.probe(replica, record, 'live')).code, 0);
  });

  test('a diverged timeline (it was promoted and written to) is rewound with pg_rewind and follows again', {
    timeout: 180_000,
  }, async () => {
    // pg_rewind finds the last common checkpoint in the replica's own WAL: a checkpoint it replayed
    // (the primary checkpoints every few minutes; here on demand). Without one it clones again.
    await c.sql(primary, 'CHECKPOINT');
    const lsn = await c.sql(primary, 'SELECT pg_current_wal_lsn()');
    await eventually(
      'the checkpoint replayed',
      async () => (await c.sql(replica, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn`)) === 't',
      { timeoutMs: 60_000 },
    );
    await c.sql(replica, 'CHECKPOINT');
    await c.ok('pg_ctl', ['promote', '-D', replica.pgdata, '-w']);
    const rogue = await c.asApp(replica, "INSERT INTO t VALUES (-1, 'written on the wrong primary')");
    assert.equal(rogue.code, 0, rogue.stderr);
    // The primary writes on too (the same rows must end up on the replica).
    const w = await c.asApp(primary, "INSERT INTO t VALUES (-2, 'on the primary')");
    assert.equal(w.code, 0, w.stderr);
    // A former primary is not ready as a replica.
    const notReady = await c.probe(replica, record, 'ready');
    assert.notEqual(notReady.code, 0);
    assert.match(notReady.stdout, /not in recovery/);
    await c.stop(replica);
    await c.start(replica, record);
    assert.equal(c.report(replica).result, 'rewound', readFileSync(replica.log, 'utf8').slice(-3000));
    await c.streaming(primary, replica);
    assert.equal(await c.sql(replica, 'SELECT pg_is_in_recovery()'), 't');
    await eventually(
      "the primary's row on the replica",
      async () => (await c.asApp(replica, 'SELECT count(*) FROM t WHERE id = -2')).stdout.trim() === '1',
      { timeoutMs: 60_000 },
    );
    assert.equal((await c.asApp(replica, 'SELECT count(*) FROM t WHERE id = -1')).stdout.trim(), '0');
    assert.equal(await rows(c, replica), await rows(c, primary));
    const ready = await eventually(
      'ready',
      async () => (await c.probe(replica, record, 'ready')).code === 0,
      {
        timeoutMs: 60_000,
      },
    );
    assert.ok(ready);
  });
});

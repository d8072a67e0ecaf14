/**
 * Honest health with REAL postgres processes (pg-harness.ts): the readiness probe (health.sh ready)
 * passes on a replica only while it streams from the current primary within the lag bound, and on the
 * primary only out of recovery; it exits non-zero, saying why, otherwise. Liveness (health.sh live)
 * fails only when nothing answers, or when a replica cannot stream from a primary that is up.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freePort } from '@opkit/controlplane';
import { eventually } from '@opkit/runtime/testing';
import { postgresProbeCommands } from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

describe('postgres: readiness is streaming within the lag bound', { skip: skipReason }, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;

  before(
    async () => {
      c = new Cluster(pgDatabase('health'));
      primary = await c.instance('health-0');
      replica = await c.instance('health-1');
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

  test('the StatefulSet probes run health.sh from the ConfigMap mount', () => {
    const probes = postgresProbeCommands();
    assert.deepEqual(probes.startup, ['sh', '/etc/opkit/health.sh', 'startup']);
    assert.deepEqual(probes.readiness, ['sh', '/etc/opkit/health.sh', 'ready']);
    assert.deepEqual(probes.liveness, ['sh', '/etc/opkit/health.sh', 'live']);
  });

  test('both pass while the replica streams', async () => {
    for (const inst of [primary, replica]) {
      for (const mode of ['ready', 'live'] as const) {
        const r = await c.probe(inst, record, mode);
        assert.equal(r.code, 0, `${mode} on ${inst.pod}: ${r.stdout}${r.stderr}`);
      }
    }
  });

  test('a replica whose replay lags past the bound is not ready, and ready again once it caught up', async () => {
    await c.sql(replica, 'SELECT pg_wal_replay_pause()');
    try {
      const w = await c.asApp(
        primary,
        "INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g",
      );
      assert.equal(w.code, 0, w.stderr);
      const bound = { MAX_LAG_BYTES: String(1024 * 1024) };
      const lagging = await eventually(
        'readiness failing on the lag',
        async () => {
          const r = await c.probe(replica, record, 'ready', bound);
          return r.code !== 0 && r;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      assert.match(lagging.stdout, /replay lag \d+ bytes exceeds 1048576/);
      // Still alive: lagging is not a reason to restart.
      assert.equal((await c.probe(replica, record, 'live', bound)).code, 0);
      // The default bound (64 MiB) is not exceeded by a few MB.
      assert.equal((await c.probe(replica, record, 'ready')).code, 0);
    } finally {
      await c.sql(replica, 'SELECT pg_wal_replay_resume()');
    }
    await eventually(
      'ready again',
      async () =>
        (await c.probe(replica, record, 'ready', { MAX_LAG_BYTES: String(1024 * 1024) })).code === 0,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  });

  test('a replica streaming from another server than the current primary is not ready', async () => {
    const r = await c.probe(replica, record, 'ready', { PRIMARY_HOST: 'health-9.health-headless' });
    assert.notEqual(r.code, 0);
    assert.match(
      r.stdout,
      /not streaming from the primary health-9\.health-headless \(WAL receiver: streaming, from 127\.0\.0\.1\)/,
    );
  });

  test('a replica that lost its primary is not ready but stays alive while the primary is down', async () => {
    await c.stop(primary);
    try {
      const r = await eventually(
        'readiness failing',
        async () => {
          const x = await c.probe(replica, record, 'ready');
          return x.code !== 0 && x;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      assert.match(r.stdout, /not streaming from the primary/);
      assert.equal(
        (await c.probe(replica, record, 'live')).code,
        0,
        'the primary being down is no reason to restart',
      );
    } finally {
      await c.start(primary, record);
    }
    await c.streaming(primary, replica);
    await eventually('ready again', async () => (await c.probe(replica, record, 'ready')).code === 0, {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
  });

  test('the designated primary is not ready while in recovery, and a replica not while out of it', async () => {
    // The record says health-1 is the primary, but it is still a standby (not promoted yet).
    const swapped = { ...record, primary: replica };
    const standby = await c.probe(replica, swapped, 'ready');
    assert.notEqual(standby.code, 0);
    assert.match(standby.stdout, /designated primary but is in recovery/);
    const former = await c.probe(primary, swapped, 'ready');
    assert.notEqual(former.code, 0);
    assert.match(former.stdout, /replica but not in recovery/);
  });

  test('no server: readiness and liveness fail', async () => {
    const port = String(await freePort());
    for (const mode of ['ready', 'live'] as const) {
      const r = await c.probe(primary, record, mode, { PGPORT: port });
      assert.notEqual(r.code, 0, mode);
      assert.match(r.stdout, /does not (answer|accept connections)/);
    }
  });
});

/**
 * Cluster identity with REAL postgres processes (pg-harness.ts): once a Database is initialized, an empty
 * data directory is never initialized again as a new, empty primary; it is cloned from the current
 * primary whatever its ordinal; another cluster's data refuses to start.
 */
import assert from 'node:assert/strict';
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

describe('postgres: the cluster identity decides initdb, clone or refusal', { skip: skipReason }, () => {
  let c: Cluster;
  let pod0: Instance;
  let pod1: Instance;
  let record: Record_;

  before(
    async () => {
      c = new Cluster(pgDatabase('ledger'));
      pod0 = await c.instance('ledger-0');
      pod1 = await c.instance('ledger-1');
      record = { primary: pod0 };
      const init = await c.bootstrap(pod0, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(pod0).systemIdentifier;
      await c.start(pod0, record);
      const r = await c.asApp(pod0, 'CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 10)');
      assert.equal(r.code, 0, r.stderr);
      const clone = await c.bootstrap(pod1, record);
      assert.equal(clone.code, 0, clone.stderr);
      await c.start(pod1, record);
      await c.streaming(pod0, pod1);
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('the primary with an empty volume in an initialized cluster refuses to initialize a new, empty primary', async () => {
    await c.stop(pod0);
    renameSync(pod0.pgdata, `${pod0.pgdata}.lost`); // the volume is lost: a new, empty PVC
    for (const attempt of [() => c.bootstrap(pod0, record), () => c.startRefused(pod0, record)]) {
      const r = await attempt();
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /is empty: refusing to initialize a new, empty primary/);
      const report = c.report(pod0);
      assert.equal(report.result, 'empty-primary');
      assert.match(report.message ?? '', new RegExp(`primary of cluster ${record.systemIdentifier}`));
      assert.equal(existsSync(join(pod0.pgdata, 'PG_VERSION')), false);
    }
    // The replica still holds the data.
    assert.equal((await c.asApp(pod1, 'SELECT count(*) FROM t')).stdout.trim(), '10');
  });

  test('an empty data directory is cloned from the current primary, whatever its ordinal', async () => {
    // The operator recorded ledger-1 as the primary (promoted): ledger-0, empty, becomes its replica.
    await c.ok('pg_ctl', ['promote', '-D', pod1.pgdata, '-w']);
    record = { ...record, primary: pod1 };
    const w = await c.asApp(pod1, 'INSERT INTO t VALUES (11)');
    assert.equal(w.code, 0, w.stderr);
    const r = await c.bootstrap(pod0, record);
    assert.equal(r.code, 0, r.stderr);
    const report = c.report(pod0);
    assert.equal(report.result, 'cloned');
    assert.equal(report.systemIdentifier, record.systemIdentifier);
    await c.start(pod0, record);
    await c.streaming(pod1, pod0);
    assert.equal(await c.sql(pod0, 'SELECT pg_is_in_recovery()'), 't');
    assert.equal((await c.asApp(pod0, 'SELECT count(*) FROM t')).stdout.trim(), '11');
    const ready = await c.probe(pod0, record, 'ready');
    assert.equal(ready.code, 0, ready.stdout);
  });

  test('an image without the declared major version refuses to start, naming both versions', async () => {
    const other = String(Number(c.db.spec.version) - 1);
    const r = await c.bootstrap(pod0, record, { PG_MAJOR: other });
    assert.equal(r.code, 1, r.stderr);
    const report = c.report(pod0);
    assert.equal(report.result, 'image-version');
    assert.match(
      report.message ?? '',
      new RegExp(`runs PostgreSQL ${c.db.spec.version}, but spec.version is ${other}`),
    );
    // The data directory is left alone.
    assert.equal(await c.sql(pod1, 'SELECT count(*) FROM pg_stat_replication'), '1');
  });

  test("another cluster's data directory refuses to start, with a message naming both identities", async () => {
    const stray = await c.instance('ledger-2');
    await c.ok('initdb', ['--username=postgres', '--auth=peer', '-D', stray.pgdata]);
    const foreign = (await c.ok('pg_controldata', [stray.pgdata])).match(/system identifier:\s+(\d+)/)?.[1];
    assert.ok(foreign && foreign !== record.systemIdentifier);
    for (const attempt of [() => c.bootstrap(stray, record), () => c.startRefused(stray, record)]) {
      const r = await attempt();
      assert.equal(r.code, 1, r.stderr);
      const report = c.report(stray);
      assert.equal(report.result, 'foreign-data');
      assert.match(
        report.message ?? '',
        new RegExp(`system identifier ${foreign}, this Database's is ${record.systemIdentifier}`),
      );
      assert.equal(report.systemIdentifier, foreign);
    }
    // Left as it was: the data is not this Database's to delete.
    assert.ok(existsSync(join(stray.pgdata, 'PG_VERSION')));
    assert.equal(existsSync(join(stray.pgdata, 'standby.signal')), false);
  });
});

/**
 * The failover commands on real PostgreSQL (the same text the operator runs through pods/exec, with the
 * container's environment): a primary fenced by a fast shutdown hands every acknowledged commit to its
 * standbys (a switchover loses nothing), the state line tells their positions, the chosen one is promoted
 * (idempotently) onto a new timeline, the fenced former primary refuses to start while no primary is
 * named and rewinds to follow the new one when it is, and the other replica follows too. Health: a fenced
 * primary is neither ready nor live, a replica stays ready while the failover is pending.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  designateCommand,
  fenceCommand,
  parseInstanceState,
  promoteCommand,
  restartCommand,
  slotName,
  stateCommand,
} from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, PG_BIN, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

describe('postgres: fence, promote, rejoin (the failover commands on real servers)', {
  skip: skipReason,
}, () => {
  let c: Cluster;
  let p0: Instance;
  let p1: Instance;
  let p2: Instance;
  let record: Record_;

  const state = async (inst: Instance, rec: Record_) => {
    const r = await c.exec(inst, rec, stateCommand());
    assert.equal(r.code, 0, r.stderr);
    const s = parseInstanceState(r.stdout);
    assert.ok(s, r.stdout);
    return s;
  };
  const count = async (inst: Instance) => (await c.asApp(inst, 'SELECT count(*) FROM t')).stdout.trim();

  before(
    async () => {
      c = new Cluster(pgDatabase('pay', undefined, 3));
      p0 = await c.instance('pay-0');
      p1 = await c.instance('pay-1');
      p2 = await c.instance('pay-2');
      record = { primary: p0 };
      const init = await c.bootstrap(p0, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(p0).systemIdentifier;
      await c.start(p0, record);
      assert.equal((await c.asApp(p0, 'CREATE TABLE t (id int)')).code, 0);
      for (const r of [p1, p2]) {
        const clone = await c.bootstrap(r, record);
        assert.equal(clone.code, 0, clone.stderr);
        await c.start(r, record);
        await c.streaming(p0, r);
      }
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('while the failover is pending: the primary is fenced (not ready, not live), replicas stay ready', async () => {
    // The designation the operator writes through exec when it starts fencing (epoch 1).
    for (const inst of [p0, p1]) writeFileSync(c.env(inst, record).DESIGNATION_FILE ?? '', 'none 1\n');
    for (const mode of ['ready', 'live'] as const) {
      const fenced = await c.probe(p0, record, mode);
      assert.notEqual(fenced.code, 0, mode);
      assert.match(fenced.stdout, /pay-0 is fenced: a failover is in progress/);
    }
    const replica = await c.probe(p1, record, 'ready');
    assert.equal(replica.code, 0, replica.stdout);
    // Back to normal for the next test: the designation names pay-0 again (a newer epoch).
    for (const inst of [p0, p1]) writeFileSync(c.env(inst, record).DESIGNATION_FILE ?? '', 'pay-0 2\n');
    assert.equal((await c.probe(p0, record, 'ready')).code, 0);
  });

  test('a fast shutdown hands every committed row to the standbys; the most advanced is promoted once', {
    timeout: 180_000,
  }, async () => {
    // Commits acknowledged up to the last one, then the fence (no time for the standbys to catch up).
    const w = await c.asApp(p0, 'INSERT INTO t SELECT g FROM generate_series(1, 5000) g');
    assert.equal(w.code, 0, w.stderr);
    // A fence that cannot write the designation, or cannot tell whether a server runs, is no fence: the
    // procedure would promote a replica on its word.
    const [shell, ...args] = fenceCommand(3);
    const noFile = await c.run(shell ?? 'sh', args, {
      ...c.env(p0, record),
      DESIGNATION_FILE: '/proc/opkit/primary',
    });
    assert.notEqual(noFile.code, 0);
    assert.doesNotMatch(noFile.stdout, /fenced/);
    assert.match(noFile.stderr, /writing the designation none failed/);
    const noData = await c.run(shell ?? 'sh', args, { ...c.env(p0, record), PGDATA: join(c.tmp, 'none') });
    assert.notEqual(noData.code, 0);
    assert.match(noData.stderr, /pg_ctl status cannot tell whether a server runs/);
    const fence = await c.exec(p0, record, fenceCommand(3));
    assert.equal(fence.code, 0, fence.stderr);
    assert.equal(fence.stdout.trim(), 'fenced');
    assert.match(readFileSync(c.env(p0, record).DESIGNATION_FILE ?? '', 'utf8'), /^none 3$/m);
    const again = await c.exec(p0, record, fenceCommand(3));
    assert.equal(again.code, 0, `idempotent: ${again.stderr}`);
    p0.server = undefined;

    const s1 = await state(p1, record);
    const s2 = await state(p2, record);
    assert.equal(s1.inRecovery, true);
    assert.equal(s1.systemIdentifier, record.systemIdentifier);
    // Both standbys have everything the primary wrote before its shutdown checkpoint.
    assert.ok(s1.receivedLsn && s2.receivedLsn, 'received LSNs');
    assert.equal(s1.receivedLsn, s2.receivedLsn);

    const slots = [slotName('pay-0'), slotName('pay-2')];
    const promote = await c.exec(p1, record, promoteCommand('pay-1', 4, slots));
    assert.equal(promote.code, 0, promote.stderr);
    assert.equal(promote.stdout.trim(), 'promoted');
    // The control file already names the new timeline (a checkpoint): what pg_rewind of the former primary reads.
    assert.equal(await c.sql(p1, 'SELECT timeline_id FROM pg_control_checkpoint()'), '2');
    const twice = await c.exec(p1, record, promoteCommand('pay-1', 4, slots));
    assert.equal(twice.code, 0, `idempotent: ${twice.stderr}`);
    const after = await state(p1, record);
    assert.equal(after.inRecovery, false);
    assert.equal(after.timeline, 2);
    assert.equal(await count(p1), '5000', 'no acknowledged row lost');
    // Its probes judge it as the primary at once (its designation file names it).
    const ready = await c.probe(p1, record, 'ready');
    assert.equal(ready.code, 0, ready.stdout);
  });

  test('the former primary refuses to start while no primary is named, then rewinds and follows the new one', {
    timeout: 180_000,
  }, async () => {
    // The operator fences a primary whose server is down (crashed, in back-off) through its sidecar; the
    // kubelet may be starting the server at that very moment, with the designation that named it. A
    // pg_controldata that writes the fence the first time the script calls it (after its first look at
    // the designation): the script must not start a primary.
    const designation = c.env(p0, record).DESIGNATION_FILE ?? '';
    writeFileSync(designation, 'pay-0 2\n');
    const shim = join(c.tmp, 'fence-while-starting');
    c.mkdirOwned(shim);
    c.writeOwned(
      join(shim, 'pg_controldata'),
      `#!/bin/sh\n[ -e "${shim}/done" ] || { printf 'none 3\\n' >"${designation}"; : >"${shim}/done"; }\nexec "${PG_BIN}/pg_controldata" "$@"\n`,
      0o755,
    );
    await assert.rejects(
      c.start(p0, record, { PATH: `${shim}:${PG_BIN}:/usr/local/bin:/usr/bin:/bin` }),
      /the designation changed to none \(epoch 3\) while pay-0 was starting as the primary/,
    );
    assert.equal(c.report(p0).result, 'fenced');

    const refused = await c.startRefused(p0, record, { PRIMARY_POD: 'none', FENCE_WAIT_SECONDS: '2' });
    assert.notEqual(refused.code, 0);
    assert.equal(c.report(p0).result, 'fenced');
    assert.match(refused.stderr, /a failover is in progress/);
    // Even with its old env naming itself, a designation file naming another primary keeps it from
    // starting as a primary.
    writeFileSync(c.env(p0, record).DESIGNATION_FILE ?? '', 'pay-1 4\n');
    const stale = await c.startRefused(p0, record, { FENCE_WAIT_SECONDS: '2' });
    assert.notEqual(stale.code, 0);
    assert.equal(c.report(p0).result, 'fenced');

    const next: Record_ = {
      primary: p1,
      ...(record.systemIdentifier ? { systemIdentifier: record.systemIdentifier } : {}),
    };
    await c.start(p0, next);
    // pg_rewind (nothing to rewind after a clean shutdown) and its slot on the new primary: no fresh clone.
    assert.equal(c.report(p0).result, 'rewound', readFileSync(p0.log, 'utf8').slice(-2000));
    await c.streaming(p1, p0);

    // The other replica is restarted by the operator (a fast shutdown; the kubelet starts it again).
    for (const inst of [p2]) {
      const r = await c.exec(inst, record, designateCommand('pay-1', 4));
      assert.equal(r.code, 0, r.stderr);
      const stop = await c.exec(inst, record, restartCommand());
      assert.equal(stop.code, 0, stop.stderr);
      inst.server = undefined;
      await c.start(inst, next);
      await c.streaming(p1, inst);
    }
    const w = await c.asApp(p1, 'INSERT INTO t VALUES (-1)');
    assert.equal(w.code, 0, w.stderr);
    for (const inst of [p0, p2]) {
      const s = await state(inst, next);
      assert.equal(s.streamingFrom, '127.0.0.1');
      assert.equal(s.inRecovery, true);
    }
    assert.equal(await count(p1), '5001');
  });
});

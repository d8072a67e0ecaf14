/**
 * A brand-new PostgreSQL Database with REAL postgres processes, run as the operator's pods run them
 * (pg-harness.ts): instance.sh initializes the designated primary and clones the replica through its own
 * replication slot, health.sh is the probes, and the replica streams.
 */
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { freePort } from '@opkit/controlplane';
import {
  configHash,
  configMap,
  SECRET_KEYS,
  statefulSet,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import {
  POSTGRES_FILES,
  parseReplication,
  postgresConf,
  postgresPreStopCommand,
  replicationCommand,
  requiredEnv,
  slotName,
} from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

const db = pgDatabase('orders');

describe('postgres: a new Database bootstrapped by instance.sh, streaming', { skip: skipReason }, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;

  before(
    async () => {
      c = new Cluster(db);
      primary = await c.instance('orders-0');
      replica = await c.instance('orders-1');
      record = { primary };
    },
    { timeout: 60_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('the test runs the rendered files: only the port and paths differ from the pod', () => {
    const pod = c.file(POSTGRES_FILES.conf).split('\n');
    const here = postgresConf(withDefaults(db), primary.paths).split('\n');
    assert.equal(pod.length, here.length);
    const differing = pod.filter((line, i) => line !== here[i]).map((l) => l.split(' = ')[0]);
    assert.deepEqual(differing.sort(), [
      'hba_file',
      'listen_addresses',
      'port',
      'ssl_ca_file',
      'ssl_cert_file',
      'ssl_key_file',
      'unix_socket_directories',
    ]);
  });

  test('the scripts get every variable they require from the StatefulSet', () => {
    const sts = statefulSet(db, { configHash: configHash(configMap(db)) });
    const pod = sts.spec?.template.spec;
    const envOf = (name: string) =>
      [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]
        .find((x) => x.name === name)
        ?.env?.map((e) => e.name) ?? [];
    for (const v of requiredEnv(c.file(POSTGRES_FILES.instance))) {
      assert.ok(envOf('bootstrap').includes(v), `bootstrap lacks ${v}`);
      assert.ok(envOf('postgres').includes(v), `postgres lacks ${v}`);
    }
    for (const v of requiredEnv(c.file(POSTGRES_FILES.health))) assert.ok(envOf('postgres').includes(v), v);
    for (const v of requiredEnv(c.file(POSTGRES_FILES.credentials)))
      assert.ok(envOf('credentials').includes(v), `credentials lacks ${v}`);
    // Timeouts, and paths whose defaults in the scripts are the pod's (the harness has its own).
    const overrides = [
      'WAIT_SECONDS',
      'REPAIR_WAIT_SECONDS',
      'TERMINATION_LOG',
      'DESIGNATION_FILE',
      'PRIMARY_FILE',
      'PRIMARY_EPOCH_FILE',
      'PRIMARY_WITHOUT_TLS_FILE',
    ];
    const harness = Object.keys(c.env(primary, record)).filter((k) => !overrides.includes(k));
    for (const v of harness) assert.ok(envOf('bootstrap').includes(v), `bootstrap lacks ${v}`);
  });

  test('bootstrap of the designated primary of a brand-new Database runs initdb and reports the identity', async () => {
    const r = await c.bootstrap(primary, record);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(existsSync(join(primary.pgdata, 'PG_VERSION')));
    assert.equal(existsSync(`${primary.pgdata}.partial`), false);
    assert.equal(statSync(primary.pgdata).mode & 0o777, 0o700);
    const report = c.report(primary);
    assert.equal(report.result, 'initialized');
    assert.match(report.systemIdentifier ?? '', /^\d{10,}$/);
    assert.equal(report.timeline, 1);
    record.systemIdentifier = report.systemIdentifier;
    await c.start(primary, record);
    assert.equal(
      await c.sql(primary, 'SELECT system_identifier::text FROM pg_control_system()'),
      report.systemIdentifier,
    );
  });

  test('the application and replication users exist; the application user logs in with its password only', async () => {
    const roles = await c.sql(
      primary,
      "SELECT rolname || ':' || rolreplication || ':' || rolsuper FROM pg_roles WHERE rolname IN ('app', 'replicator') ORDER BY 1",
    );
    assert.deepEqual(roles.split('\n'), ['app:false:false', 'replicator:true:false']);
    assert.equal(
      await c.sql(primary, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'app'"),
      'app',
    );
    const created = await c.asApp(primary, 'CREATE TABLE orders (id int PRIMARY KEY, item text)');
    assert.equal(created.code, 0, created.stderr);
    const wrong = await c.asApp(primary, 'SELECT 1', 'wrong');
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /password authentication failed/);
  });

  test('the replica is cloned through its own replication slot and streams', async () => {
    const r = await c.bootstrap(replica, record);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(c.report(replica).result, 'cloned');
    assert.equal(c.report(replica).systemIdentifier, record.systemIdentifier);
    assert.ok(existsSync(join(replica.pgdata, 'standby.signal')));
    assert.equal(existsSync(`${replica.pgdata}.partial`), false);
    await c.start(replica, record);
    await c.streaming(primary, replica);
    const slot = await c.sql(primary, 'SELECT slot_name, slot_type, active FROM pg_replication_slots');
    assert.equal(slot, `${slotName(replica.pod)}|physical|t`);
    assert.equal(await c.sql(replica, 'SHOW primary_slot_name'), slotName(replica.pod));
    assert.equal(await c.sql(replica, 'SELECT status FROM pg_stat_wal_receiver'), 'streaming');
  });

  test('rows written on the primary are read on the replica, which is read-only', async () => {
    const insert = await c.asApp(
      primary,
      "INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 100) g",
    );
    assert.equal(insert.code, 0, insert.stderr);
    await c.streaming(primary, replica);
    for (let i = 0; ; i++) {
      const n = (await c.asApp(replica, 'SELECT count(*) FROM orders')).stdout.trim();
      if (n === '100') break;
      assert.ok(i < 300, `replica has ${n} rows`);
      await new Promise((res) => setTimeout(res, 100));
    }
    const write = await c.asApp(replica, "INSERT INTO orders VALUES (1000, 'nope')");
    assert.notEqual(write.code, 0);
    assert.match(write.stderr, /read-only transaction/);
  });

  test("the operator's replication poll on the primary: the replica streams, 0 bytes behind, timeline 1", async () => {
    const ask = async (inst: Instance) => {
      const r = await c.exec(inst, record, replicationCommand());
      assert.equal(r.code, 0, r.stderr);
      const s = parseReplication(r.stdout);
      assert.ok(s, r.stdout);
      return s;
    };
    let s = await ask(primary);
    for (let i = 0; s.senders[0]?.lagBytes !== 0; i++) {
      assert.ok(i < 100, `still behind: ${JSON.stringify(s.senders)}`);
      await new Promise((res) => setTimeout(res, 100));
      s = await ask(primary);
    }
    assert.equal(s.inRecovery, false);
    assert.equal(s.timeline, 1);
    assert.deepEqual(
      s.senders.map((x) => [x.name, x.state, x.lagBytes]),
      [[replica.pod, 'streaming', 0]],
    );
    assert.ok(s.senders[0] && s.senders[0].lagMs < 1000, `replay_lag ${s.senders[0]?.lagMs} ms`);
    assert.deepEqual(s.slots, { [slotName(replica.pod)]: 'reserved' });
    // Asked on the replica, it says so (the operator then uses nothing of it).
    assert.equal((await ask(replica)).inRecovery, true);
  });

  test('no password on any volume or in any log: not in postgresql.auto.conf, nowhere in the data', async () => {
    const auto = readFileSync(join(replica.pgdata, 'postgresql.auto.conf'), 'utf8');
    assert.doesNotMatch(auto, /primary_conninfo|password/);
    for (const key of [SECRET_KEYS.appPassword, SECRET_KEYS.replicationPassword, SECRET_KEYS.adminPassword]) {
      const password = c.secret[key] ?? '';
      assert.ok(password.length >= 16);
      for (const inst of [primary, replica]) {
        // The data volume (and what the pod logs); the passfile lives on the in-memory volume.
        const r = await c.run('grep', ['-r', '-l', '-a', '-F', password, join(inst.root, 'data'), inst.log]);
        assert.equal(r.code, 1, `${key} found in ${r.stdout}`);
      }
    }
  });

  test('pg_hba: the superuser only by the local socket; each user only where it must go', async () => {
    const tcp = (user: string, dbname: string, password: string) =>
      c.run(
        'psql',
        [
          '-X',
          '-w',
          '-h',
          '127.0.0.1',
          '-p',
          String(primary.port),
          '-U',
          user,
          '-d',
          dbname,
          '-tAc',
          'SELECT 1',
        ],
        { PGPASSWORD: password },
      );
    const admin = await tcp('postgres', 'postgres', c.secret[SECRET_KEYS.adminPassword] ?? '');
    assert.notEqual(admin.code, 0);
    assert.match(admin.stderr, /pg_hba\.conf rejects connection for host "127\.0\.0\.1", user "postgres"/);
    const repl = await tcp('replicator', 'app', c.secret[SECRET_KEYS.replicationPassword] ?? '');
    assert.match(repl.stderr, /pg_hba\.conf rejects connection .* user "replicator", database "app"/);
    const app = await tcp('app', 'postgres', c.secret[SECRET_KEYS.appPassword] ?? '');
    assert.match(app.stderr, /pg_hba\.conf rejects connection .* user "app", database "postgres"/);
    assert.equal((await tcp('app', 'app', c.secret[SECRET_KEYS.appPassword] ?? '')).code, 0);
    // Locally too, the superuser needs no password and the others need theirs.
    assert.equal(await c.sql(primary, 'SELECT current_user'), 'postgres');
  });

  test('a password left in postgresql.auto.conf by an earlier clone (pg_basebackup -R) is removed at start', async () => {
    await c.stop(replica);
    const auto = join(replica.pgdata, 'postgresql.auto.conf');
    const password = c.secret[SECRET_KEYS.replicationPassword] ?? '';
    appendFileSync(auto, `primary_conninfo = 'user=replicator password=${password} host=127.0.0.1'\n`);
    await c.start(replica, record);
    assert.doesNotMatch(readFileSync(auto, 'utf8'), new RegExp(`primary_conninfo|${password}`));
    await c.streaming(primary, replica);
    assert.doesNotMatch(await c.sql(replica, 'SHOW primary_conninfo'), /password/);
  });

  test('the bootstrap leaves an initialized replica alone on restart', async () => {
    await c.stop(replica);
    const before = statSync(join(replica.pgdata, 'PG_VERSION')).mtimeMs;
    const r = await c.bootstrap(replica, record);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(c.report(replica).result, 'existing');
    assert.equal(statSync(join(replica.pgdata, 'PG_VERSION')).mtimeMs, before);
    await c.start(replica, record);
    await c.streaming(primary, replica);
  });

  test('both restart with the preStop fast shutdown and replication resumes', async () => {
    for (const inst of [replica, primary]) {
      const [sh, flag, script] = postgresPreStopCommand();
      const child = inst.server;
      const stopped = await c.run(sh ?? 'sh', [flag ?? '-c', script ?? ''], { PGDATA: inst.pgdata });
      assert.equal(stopped.code, 0, stopped.stderr);
      await c.stop(inst);
      assert.ok(child?.exitCode !== null || child.signalCode !== null);
      await c.start(inst, record);
    }
    const insert = await c.asApp(primary, "INSERT INTO orders VALUES (101, 'after restart')");
    assert.equal(insert.code, 0, insert.stderr);
    await c.streaming(primary, replica);
    assert.equal(await c.sql(replica, 'SELECT pg_is_in_recovery()'), 't');
  });

  test('the clone waits for the primary and gives up after WAIT_SECONDS', async () => {
    const lone = await c.instance('orders-2');
    const r = await c.bootstrap(
      lone,
      { primary: { ...primary, port: await freePort() } },
      { WAIT_SECONDS: '2' },
    );
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not ready after 2s/);
    assert.equal(c.report(lone).result, 'primary-unreachable');
    assert.equal(existsSync(join(lone.pgdata, 'PG_VERSION')), false);
  });
});

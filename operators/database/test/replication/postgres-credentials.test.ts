/**
 * Password rotation with REAL postgres processes (pg-harness.ts): a password changed in the Secret is
 * applied by the credentials sidecar's script (credentials.sh) as the SCRAM verifier the operator
 * computed, with no restart; the plain text never reaches the server, not even its statement log.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eventually } from '@opkit/runtime/testing';
import {
  credentialsSecret,
  DERIVED_SECRET_KEYS,
  SECRET_KEYS,
} from '../../src/controllers/database/desired/index.ts';
import { CREDENTIAL_FILES, POSTGRES_FILES } from '../../src/controllers/database/engines/index.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

const NEW_APP_PASSWORD = 'RotatedAppPassword0123456789abcd';
const NEW_REPLICATION_PASSWORD = 'RotatedReplication0123456789abcd';

describe('postgres: a password changed in the Secret is applied, as a SCRAM verifier', {
  skip: skipReason,
}, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;

  /** The Secret volume of the sidecar: the keys it mounts, as the operator would write them now. */
  function mountSecret(inst: Instance, values: Record<string, string>): string {
    const dir = join(inst.root, 'credentials');
    c.mkdirOwned(dir);
    // What the operator's Secret step writes: the verifiers recomputed from the edited passwords.
    const edited = {
      metadata: { name: 'x' },
      data: Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
      ),
    };
    const patch = credentialsSecret(c.db, edited);
    const all = { ...values };
    for (const [k, v] of Object.entries(patch?.data ?? {})) all[k] = Buffer.from(v, 'base64').toString();
    for (const key of CREDENTIAL_FILES) c.writeOwned(join(dir, key), all[key] ?? '', 0o440);
    return dir;
  }

  const once = (inst: Instance, dir: string, instances?: string) =>
    c.run('sh', ['-c', c.file(POSTGRES_FILES.credentials), 'credentials.sh', 'once'], {
      ...c.env(inst, record),
      CREDENTIALS_DIR: dir,
      ...(instances ? { INSTANCES_FILE: instances } : {}),
    });

  before(
    async () => {
      c = new Cluster(pgDatabase('vault'));
      primary = await c.instance('vault-0');
      replica = await c.instance('vault-1');
      record = { primary };
      const init = await c.bootstrap(primary, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(primary).systemIdentifier;
      await c.start(primary, record);
      const clone = await c.bootstrap(replica, record);
      assert.equal(clone.code, 0, clone.stderr);
      await c.start(replica, record);
      await c.streaming(primary, replica);
      // Every statement in the primary's log: the plain text must not be among them.
      await c.sql(primary, "ALTER SYSTEM SET log_statement = 'all'");
      await c.sql(primary, 'SELECT pg_reload_conf()');
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await c?.close();
  });

  test('the unchanged Secret changes nothing', async () => {
    const dir = mountSecret(primary, c.secret);
    const r = await once(primary, dir);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /applied/);
  });

  test('the new application password logs in, the old one does not, on the primary and the replica', async () => {
    const old = c.secret[SECRET_KEYS.appPassword] ?? '';
    const dir = mountSecret(primary, { ...c.secret, [SECRET_KEYS.appPassword]: NEW_APP_PASSWORD });
    assert.match(
      readFileSync(join(dir, DERIVED_SECRET_KEYS.appPasswordScram), 'utf8'),
      /^SCRAM-SHA-256\$4096:/,
    );
    const r = await once(primary, dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /applied the new password of role app/);
    assert.equal((await c.asApp(primary, 'SELECT 1', NEW_APP_PASSWORD)).code, 0);
    const refused = await c.asApp(primary, 'SELECT 1', old);
    assert.match(refused.stderr, /password authentication failed/);
    await eventually(
      'the new password on the replica',
      async () => (await c.asApp(replica, 'SELECT 1', NEW_APP_PASSWORD)).code === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // Idempotent: a second pass writes nothing.
    const again = await once(primary, dir);
    assert.doesNotMatch(again.stderr, /applied/);
    // The replica applies nothing itself (it is in recovery).
    const onReplica = await once(
      replica,
      mountSecret(replica, { ...c.secret, [SECRET_KEYS.appPassword]: 'x' }),
    );
    assert.equal(onReplica.code, 0, onReplica.stderr);
    assert.doesNotMatch(onReplica.stderr, /applied/);
  });

  test('the replication password: applied on the primary, the passfile follows, the replica streams with it', async () => {
    const values = {
      ...c.secret,
      [SECRET_KEYS.appPassword]: NEW_APP_PASSWORD,
      [SECRET_KEYS.replicationPassword]: NEW_REPLICATION_PASSWORD,
    };
    const r = await once(primary, mountSecret(primary, values));
    assert.match(r.stderr, /applied the new password of role replicator/);
    const onReplica = await once(replica, mountSecret(replica, values));
    assert.match(onReplica.stderr, /replication passfile updated/);
    assert.match(
      readFileSync(join(replica.socketDir, 'pgpass'), 'utf8'),
      new RegExp(`:${NEW_REPLICATION_PASSWORD}\\n$`),
    );
    // The replica reconnects (here: its walsender is ended) with the new password.
    await c.sql(
      primary,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_replication WHERE application_name = 'vault-1'",
    );
    await c.streaming(primary, replica);
    const w = await c.asApp(primary, 'CREATE TABLE after_rotation (id int)', NEW_APP_PASSWORD);
    assert.equal(w.code, 0, w.stderr);
    await eventually(
      'the table on the replica',
      async () =>
        (await c.sql(replica, "SELECT count(*) FROM pg_class WHERE relname = 'after_rotation'", 'app')) ===
        '1',
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });

  test('scaled down: the slot of a removed instance is dropped on the primary, the streaming one kept', async () => {
    // vault-2 was an instance (its slot remains after a scale 3 -> 2); the ConfigMap now lists two.
    await c.sql(primary, "SELECT pg_create_physical_replication_slot('opkit_vault_2', true)");
    const instances = join(primary.root, 'cluster-instances');
    c.writeOwned(instances, c.file('cluster-instances'), 0o444);
    assert.equal(readFileSync(instances, 'utf8'), 'vault-0\nvault-1\n');
    const dir = join(primary.root, 'credentials');
    const r = await once(primary, dir, instances);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /dropped replication slot opkit_vault_2 of a removed instance/);
    assert.equal(
      await c.sql(primary, "SELECT string_agg(slot_name, ',') FROM pg_replication_slots"),
      'opkit_vault_1',
    );
    // The replica never drops anything.
    const onReplica = await once(replica, join(replica.root, 'credentials'), instances);
    assert.equal(onReplica.code, 0, onReplica.stderr);
    assert.doesNotMatch(onReplica.stderr, /dropped/);
  });

  test('no plain-text password in the logs or on the data volumes', async () => {
    for (const password of [NEW_APP_PASSWORD, NEW_REPLICATION_PASSWORD]) {
      for (const inst of [primary, replica]) {
        const r = await c.run('grep', ['-r', '-l', '-a', '-F', password, join(inst.root, 'data'), inst.log]);
        assert.equal(r.code, 1, `found in ${r.stdout}`);
      }
    }
    // The statement log shows the rotation, as a verifier.
    assert.match(readFileSync(primary.log, 'utf8'), /ALTER ROLE app PASSWORD 'SCRAM-SHA-256\$4096:/);
  });
});

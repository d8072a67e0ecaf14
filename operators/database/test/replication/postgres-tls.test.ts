/**
 * TLS on REAL PostgreSQL processes, with the operator's rendered postgresql.conf and pg_hba.conf and the
 * certificates its own code makes (pg-harness.ts; the key files root:postgres 0640 as the kubelet mounts
 * them): an application connects with the `<name>-app` Secret's values, sslmode=verify-full against its
 * ca.crt and the read-write Service's name; without TLS nobody gets in, the superuser not over TCP at
 * all; replication streams over TLS, verified; a renewed certificate is served after the sidecar's
 * reload, without a restart; a primary without TLS (a pod from before TLS) is followed in plain text only
 * when the operator named it (cluster-primary-without-tls).
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SECRET_KEYS, withDefaults } from '../../src/controllers/database/desired/index.ts';
import { appSecret, serverHosts } from '../../src/controllers/database/desired/tls.ts';
import { POSTGRES_FILES } from '../../src/controllers/database/engines/index.ts';
import { generateCa, issueServerCertificate } from '../../src/controllers/database/tls/pki.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

const db = pgDatabase('orders');

describe('postgres: TLS by default, on real servers', { skip: skipReason }, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;
  /** The `<name>-app` Secret's values, as an application mounts them. */
  let app: Record<string, string>;
  let caFile: string;

  before(
    async () => {
      c = new Cluster(db);
      primary = await c.instance('orders-0');
      replica = await c.instance('orders-1');
      record = { primary };
      const init = await c.bootstrap(primary, record);
      assert.equal(init.code, 0, init.stderr);
      record.systemIdentifier = c.report(primary).systemIdentifier;
      await c.start(primary, record);
      const secret = appSecret(withDefaults(db), c.secret, c.tls?.ca.certPem ?? '');
      app = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
      );
      // The application's copy of ca.crt (its Secret volume).
      caFile = join(c.tmp, 'app-ca.crt');
      c.writeOwned(caFile, app['ca.crt'] ?? '', 0o644);
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await c?.close();
  });

  /** The app Secret's uri, pointed at this machine: the name verified is the Service's, the address local. */
  const appUri = (inst: Instance, extra = '') =>
    `${(app.uri ?? '').replace(':5432/', `:${inst.port}/`)}&hostaddr=127.0.0.1&sslrootcert=${caFile}${extra}`;

  test('an application connects with the app Secret: verify-full against its ca.crt and the read-write Service name', async () => {
    assert.equal(app.host, 'orders.shop.svc.cluster.local');
    assert.equal(app.sslmode, 'verify-full');
    const r = await c.connect(
      appUri(primary),
      'SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout.trim(), /^t\|TLSv1\.[23]$/);
    // The same with libpq's keywords from the Secret's other keys (PGHOST, PGPORT, ... style).
    const kw = await c.connect(
      `host=${app.host} hostaddr=127.0.0.1 port=${primary.port} dbname=${app.dbname} user=${app.user} sslmode=${app.sslmode} sslrootcert=${caFile}`,
      'SELECT current_user',
      app.password,
    );
    assert.equal(kw.code, 0, kw.stderr);
    assert.equal(kw.stdout.trim(), app.user);
  });

  test('verify-full refuses a name the certificate does not hold, and a server of another CA', async () => {
    const wrongName = await c.connect(
      `host=orders.elsewhere.svc hostaddr=127.0.0.1 port=${primary.port} dbname=${app.dbname} user=${app.user} sslmode=verify-full sslrootcert=${caFile}`,
      'SELECT 1',
      app.password,
    );
    assert.notEqual(wrongName.code, 0);
    assert.match(wrongName.stderr, /does not match host name/);
    const other = await generateCa('someone else');
    const otherFile = join(c.tmp, 'other-ca.crt');
    c.writeOwned(otherFile, other.certPem, 0o644);
    const wrongCa = await c.connect(appUri(primary).replace(caFile, otherFile), 'SELECT 1');
    assert.notEqual(wrongCa.code, 0);
    assert.match(wrongCa.stderr, /certificate verify failed/);
  });

  test('without TLS nobody gets in: the application user with its password and sslmode=disable is refused by pg_hba', async () => {
    const r = await c.connect(
      `host=127.0.0.1 port=${primary.port} dbname=${app.dbname} user=${app.user} sslmode=disable`,
      'SELECT 1',
      app.password,
    );
    assert.notEqual(r.code, 0);
    assert.match(
      r.stderr,
      /pg_hba\.conf rejects connection for host "127\.0\.0\.1", user "[^"]+", database "[^"]+", no encryption/,
    );
    const repl = await c.connect(
      `host=127.0.0.1 port=${primary.port} dbname=replication replication=true user=${c.secret[SECRET_KEYS.replicationUsername]} sslmode=disable`,
      'IDENTIFY_SYSTEM',
      c.secret[SECRET_KEYS.replicationPassword],
    );
    assert.notEqual(repl.code, 0);
    assert.match(repl.stderr, /no encryption/);
  });

  test('the superuser over TCP is refused, with TLS and its password too; through the local socket it works', async () => {
    const r = await c.connect(
      `host=orders.shop.svc hostaddr=127.0.0.1 port=${primary.port} dbname=postgres user=postgres sslmode=verify-full sslrootcert=${caFile}`,
      'SELECT 1',
      c.secret[SECRET_KEYS.adminPassword],
    );
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /pg_hba\.conf rejects connection for host "127\.0\.0\.1", user "postgres"/);
    assert.equal(await c.sql(primary, 'SELECT 1'), '1');
  });

  test('a replica clones and streams over TLS, the primary verified (sslmode=verify-full)', async () => {
    const clone = await c.bootstrap(replica, record);
    assert.equal(clone.code, 0, clone.stderr);
    await c.start(replica, record);
    await c.streaming(primary, replica);
    const walsender = await c.sql(
      primary,
      `SELECT s.ssl, s.version FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) WHERE r.application_name = '${replica.pod}'`,
    );
    assert.match(walsender, /^t\|TLSv1\.[23]$/);
    const conninfo = await c.sql(replica, 'SELECT conninfo FROM pg_stat_wal_receiver');
    assert.match(conninfo, /sslmode=verify-full/);
    assert.match(conninfo, /sslrootcert=\S+ca\.crt/);
    await c.sql(primary, 'CREATE TABLE t (v int); INSERT INTO t VALUES (42)', 'postgres');
    await c.sql(primary, 'SELECT pg_switch_wal()');
    let seen = '';
    for (let i = 0; i < 100 && seen !== '42'; i++) {
      seen = (await c.asAdmin(replica, 'SELECT v FROM t')).stdout.trim();
      if (seen !== '42') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(seen, '42');
  });

  test('a replica refuses to clone from a server whose certificate is not from the Database CA', async () => {
    // The primary serving a certificate of another CA: the replica's verify-full fails, nothing cloned.
    const other = await generateCa('impostor');
    const impostor = await issueServerCertificate(other, [...serverHosts(withDefaults(db)), '127.0.0.1']);
    const lone = await c.instance('orders-9');
    const origCa = c.tls?.ca;
    assert.ok(origCa);
    await c.writeTls(primary, impostor);
    await c.sql(primary, 'SELECT pg_reload_conf()');
    try {
      const r = await c.bootstrap(lone, record, { WAIT_SECONDS: '2' });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /certificate verify failed/);
    } finally {
      await c.writeTls(primary);
      await c.sql(primary, 'SELECT pg_reload_conf()');
    }
  });

  test('a renewed certificate is served after the sidecar reload, without a restart', async () => {
    const pid = readFileSync(join(primary.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0];
    const ca = c.tls?.ca;
    assert.ok(ca);
    // A renewal that also names renewed.example: only the new certificate lets verify-full through.
    const renewed = await issueServerCertificate(ca, [
      ...serverHosts(withDefaults(db)),
      '127.0.0.1',
      'renewed.example',
    ]);
    const viaNewName = () =>
      c.connect(
        `host=renewed.example hostaddr=127.0.0.1 port=${primary.port} dbname=${app.dbname} user=${app.user} sslmode=verify-full sslrootcert=${caFile}`,
        'SELECT 1',
        app.password,
      );
    const sidecar = () =>
      c.run('sh', ['-c', c.file(POSTGRES_FILES.credentials), 'credentials.sh', 'once'], {
        ...c.env(primary, record),
        CREDENTIALS_DIR: join(primary.root, 'no-credentials'),
        TLS_DIR: primary.paths.tlsDir,
      });
    assert.notEqual((await viaNewName()).code, 0, 'the old certificate does not hold the new name');
    await c.writeTls(primary, renewed);
    assert.notEqual((await viaNewName()).code, 0, 'files changed, not loaded yet');
    const r = await sidecar();
    assert.equal(r.code, 0, r.stderr);
    const ok = await viaNewName();
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(
      readFileSync(join(primary.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0],
      pid,
      'same server',
    );
    await c.streaming(primary, replica);
  });

  test('a primary without TLS (a pod from before TLS): a replica follows it in plain text only when the operator named it', async () => {
    // The primary as the pods before TLS ran it: ssl off, and the pg_hba of then (host, not hostssl).
    const hba = join(primary.paths.configDir, POSTGRES_FILES.hba);
    const today = readFileSync(hba, 'utf8');
    const writeHba = (text: string) => {
      rmSync(hba, { force: true });
      c.writeOwned(hba, text, 0o444);
    };
    // The ConfigMap's cluster-primary-without-tls, as the replica's pod mounts it.
    const withoutTls = join(replica.root, 'cluster-primary-without-tls');
    const designate = (pod: string | undefined) => {
      rmSync(withoutTls, { force: true });
      if (pod !== undefined) c.writeOwned(withoutTls, pod, 0o444);
    };
    await c.stop(replica);
    writeHba(today.replace(/^hostssl/gm, 'host   '));
    await c.sql(primary, 'ALTER SYSTEM SET ssl = off');
    await c.sql(primary, 'SELECT pg_reload_conf()');
    try {
      assert.equal(await c.sql(primary, 'SHOW ssl'), 'off');
      // No key (absent or empty), or a key naming another pod: verify-full, never a downgrade.
      for (const named of [undefined, '', 'orders-2']) {
        designate(named);
        const r = await c.startRefused(replica, record, { REPAIR_WAIT_SECONDS: '5' });
        assert.notEqual(r.code, 0, `no start without a verified primary (key ${JSON.stringify(named)})`);
        assert.equal(c.report(replica).result, 'primary-unreachable', `${r.stdout}${r.stderr}`);
        assert.match(`${r.stdout}${r.stderr}`, /SSL/);
      }
      // The operator saw the primary's pod without TLS and named it: the replica streams in plain text.
      designate(primary.pod);
      await c.start(replica, record);
      await c.streaming(primary, replica);
      assert.match(readFileSync(replica.log, 'utf8'), /runs without TLS .*sslmode=prefer/);
      assert.match(c.report(replica).message ?? '', /sslmode=prefer/);
      assert.match(await c.sql(replica, 'SELECT conninfo FROM pg_stat_wal_receiver'), /sslmode=prefer/);
      const walsender = await c.sql(
        primary,
        `SELECT s.ssl FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) WHERE r.application_name = '${replica.pod}'`,
      );
      assert.equal(walsender, 'f', 'plain text: what the primary without TLS offers');
    } finally {
      writeHba(today);
      await c.sql(primary, 'ALTER SYSTEM RESET ssl');
      await c.sql(primary, 'SELECT pg_reload_conf()');
    }
    // The primary serves TLS again and the key is cleared: the replica's next start verifies it.
    designate('');
    await c.stop(replica);
    await c.start(replica, record);
    await c.streaming(primary, replica);
    assert.match(await c.sql(replica, 'SELECT conninfo FROM pg_stat_wal_receiver'), /sslmode=verify-full/);
  });
});

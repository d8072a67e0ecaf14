/**
 * TLS of PostgreSQL Databases: the CA and server certificate the operator makes (names, signature,
 * validity), the pure decisions to keep, renew or reissue them, the application's connection Secret,
 * the rendered settings and mounts, and the reconcile with the FakeClient: the Secrets, their owners,
 * no write when nothing changed, a valid CA never replaced, a renewal when the time comes.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { before, beforeEach, describe, mock, test } from 'node:test';
import { type Secret, Secrets } from '@opkit/runtime';
import { FakeClient } from '@opkit/runtime/testing';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import {
  configHash,
  configMap,
  statefulSet,
  withDefaults,
} from '../../src/controllers/database/desired/index.ts';
import {
  APP_KEYS,
  appSecret,
  connectionUri,
  serverHosts,
} from '../../src/controllers/database/desired/tls.ts';
import { engineFor, postgresConf } from '../../src/controllers/database/engines/index.ts';
import { type ReconcilerDeps, reconcileDatabase } from '../../src/controllers/database/index.ts';
import {
  type CertificatePem,
  DAY_MS,
  generateCa,
  issueServerCertificate,
  SERVER_VALIDITY_DAYS,
} from '../../src/controllers/database/tls/pki.ts';
import {
  caDecision,
  inspectCertificate,
  serverCertificateDecision,
} from '../../src/controllers/database/tls/plan.ts';
import { database, decoded, FakeRecorder, managedOnlyReader } from './fixtures.ts';

const NOW = new Date('2026-01-01T00:00:00Z');
const days = (n: number) => new Date(NOW.getTime() + n * DAY_MS);

describe('server certificate names', () => {
  test('the Services and every pod under the headless Service, short to fully qualified', () => {
    const hosts = serverHosts(withDefaults(database('postgres', { replicas: 2 })));
    for (const svc of [
      'orders',
      'orders-ro',
      'orders-headless',
      'orders-0.orders-headless',
      'orders-1.orders-headless',
    ]) {
      for (const suffix of ['', '.shop', '.shop.svc', '.shop.svc.cluster.local'])
        assert.ok(hosts.includes(`${svc}${suffix}`), `${svc}${suffix}`);
    }
    assert.equal(hosts[0], 'orders', 'the read-write Service is the common name');
    assert.equal(hosts.filter((h) => h.startsWith('orders-2.')).length, 0, 'no pod beyond spec.replicas');
    assert.equal(new Set(hosts).size, hosts.length);
    assert.ok(
      serverHosts(withDefaults(database('postgres')), 'example.org').includes('orders.shop.svc.example.org'),
    );
  });
});

describe('pki: the CA and the server certificate', () => {
  let ca: CertificatePem;
  let server: CertificatePem;
  const hosts = serverHosts(withDefaults(database('postgres', { replicas: 3 })));
  before(async () => {
    ca = await generateCa('shop/orders', NOW);
    server = await issueServerCertificate(ca, [...hosts, '127.0.0.1'], NOW);
  });

  test('a CA: self-signed, CA:TRUE, ten years, its key', () => {
    const cert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, true);
    assert.ok(cert.checkIssued(cert) && cert.verify(cert.publicKey));
    assert.match(cert.subject, /CN=shop\/orders/);
    const i = inspectCertificate(ca.certPem, ca.keyPem);
    assert.ok('facts' in i && i.facts.keyMatches && i.facts.isCa);
    assert.ok(new Date(cert.validTo).getTime() > days(3649).getTime());
  });

  test('inspected again: the same answer, read once (frozen); checked against another CA or with another key: read anew', async () => {
    const first = inspectCertificate(server.certPem, server.keyPem, ca.certPem);
    assert.equal(inspectCertificate(server.certPem, server.keyPem, ca.certPem), first);
    assert.ok(Object.isFrozen(first));
    assert.ok('facts' in first && Object.isFrozen(first.facts.hosts));
    const other = await generateCa('shop/other', NOW);
    const against = inspectCertificate(server.certPem, server.keyPem, other.certPem);
    assert.ok('facts' in against && against.facts.signedByCa === false);
    const wrongKey = inspectCertificate(server.certPem, other.keyPem, ca.certPem);
    assert.ok('facts' in wrongKey && !wrongKey.facts.keyMatches);
    const noCa = inspectCertificate(server.certPem, server.keyPem);
    assert.ok('facts' in noCa && noCa.facts.signedByCa === undefined);
    assert.equal(inspectCertificate(server.certPem, server.keyPem, ca.certPem), first);
  });

  test('the server certificate: signed by the CA, for serverAuth, every name (and an IP), 90 days', () => {
    const cert = new X509Certificate(server.certPem);
    const caCert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, false);
    assert.ok(cert.checkIssued(caCert) && cert.verify(caCert.publicKey));
    for (const h of hosts) assert.equal(cert.checkHost(h), h, h);
    assert.equal(cert.checkHost('orders.other.svc'), undefined);
    assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
    assert.match(cert.keyUsage?.join(',') ?? '', /1\.3\.6\.1\.5\.5\.7\.3\.1/, 'serverAuth');
    const i = inspectCertificate(server.certPem, server.keyPem, ca.certPem);
    assert.ok('facts' in i);
    assert.equal(i.facts.signedByCa, true);
    assert.equal(i.facts.keyMatches, true);
    assert.deepEqual(i.facts.hosts, [...hosts, '127.0.0.1']);
    assert.equal(Math.round((i.facts.notAfter.getTime() - NOW.getTime()) / DAY_MS), SERVER_VALIDITY_DAYS);
  });

  test('caDecision: a valid CA is kept; missing, unreadable, foreign key or expired: a new one', async () => {
    assert.deepEqual(caDecision(inspectCertificate(ca.certPem, ca.keyPem), days(3000)), { action: 'keep' });
    assert.equal(caDecision(undefined, NOW).action, 'issue');
    const garbled = caDecision(inspectCertificate('not a pem', ca.keyPem), NOW);
    assert.equal(garbled.action, 'issue');
    assert.match('reason' in garbled ? garbled.reason : '', /cannot be read/);
    const other = await generateCa('other', NOW);
    const wrongKey = caDecision(inspectCertificate(ca.certPem, other.keyPem), NOW);
    assert.match('reason' in wrongKey ? wrongKey.reason : '', /key does not match/);
    const expired = caDecision(inspectCertificate(ca.certPem, ca.keyPem), days(3651));
    assert.match('reason' in expired ? expired.reason : '', /expired/);
    const notCa = caDecision(inspectCertificate(server.certPem, server.keyPem), NOW);
    assert.match('reason' in notCa ? notCa.reason : '', /not a CA/);
  });

  test('serverCertificateDecision: kept until a third of its validity remains, then renewed', () => {
    const i = inspectCertificate(server.certPem, server.keyPem, ca.certPem);
    const keep = serverCertificateDecision(i, hosts, days(1));
    assert.equal(keep.action, 'keep');
    const renewAt = 'renewAt' in keep ? keep.renewAt : undefined;
    assert.ok(renewAt);
    // notBefore is backdated an hour: a third of (90 days + 1 hour) before notAfter, about day 60.
    assert.ok(Math.abs(renewAt.getTime() - days(60).getTime()) < 60 * 60 * 1000, renewAt.toISOString());
    assert.equal(serverCertificateDecision(i, hosts, new Date(renewAt.getTime() - 1)).action, 'keep');
    const due = serverCertificateDecision(i, hosts, renewAt);
    assert.equal(due.action, 'issue');
    assert.match('reason' in due ? due.reason : '', /expires on/);
    assert.equal(serverCertificateDecision(i, hosts, days(91)).action, 'issue', 'expired');
  });

  test('serverCertificateDecision: reissued for a new name, another CA, a foreign key; extra names are fine', async () => {
    const i = inspectCertificate(server.certPem, server.keyPem, ca.certPem);
    // Scaled down: the certificate still names orders-2, nothing to do.
    const fewer = serverHosts(withDefaults(database('postgres', { replicas: 1 })));
    assert.equal(serverCertificateDecision(i, fewer, NOW).action, 'keep');
    // Scaled up: orders-3 is not in it.
    const more = serverHosts(withDefaults(database('postgres', { replicas: 4 })));
    const scaled = serverCertificateDecision(i, more, NOW);
    assert.equal(scaled.action, 'issue');
    assert.match('reason' in scaled ? scaled.reason : '', /lacks the names orders-3\.orders-headless,/);
    const other = await generateCa('other', NOW);
    const foreign = serverCertificateDecision(
      inspectCertificate(server.certPem, server.keyPem, other.certPem),
      hosts,
      NOW,
    );
    assert.match('reason' in foreign ? foreign.reason : '', /not signed by the current CA/);
    const wrongKey = serverCertificateDecision(
      inspectCertificate(server.certPem, other.keyPem, ca.certPem),
      hosts,
      NOW,
    );
    assert.match('reason' in wrongKey ? wrongKey.reason : '', /key does not match/);
    assert.equal(serverCertificateDecision(undefined, hosts, NOW).action, 'issue');
    assert.equal(
      serverCertificateDecision(inspectCertificate(server.certPem, undefined), hosts, NOW).action,
      'issue',
    );
  });
});

describe('the application Secret', () => {
  test('host, port, dbname, user, password, sslmode verify-full, uri and the CA', () => {
    const d = withDefaults(database('postgres', { username: 'shop', databaseName: 'orders' }));
    const s = appSecret(
      d,
      { 'app-username': 'shop', 'app-password': 'p@ss:w/rd', database: 'orders' },
      'CA PEM',
    );
    const v = decoded(s);
    assert.deepEqual(Object.keys(v).sort(), Object.values(APP_KEYS).sort());
    assert.equal(v.host, 'orders.shop.svc.cluster.local');
    assert.equal(v.port, '5432');
    assert.equal(v.dbname, 'orders');
    assert.equal(v.user, 'shop');
    assert.equal(v.password, 'p@ss:w/rd');
    assert.equal(v.sslmode, 'verify-full');
    assert.equal(v['ca.crt'], 'CA PEM');
    assert.equal(
      v.uri,
      'postgresql://shop:p%40ss%3Aw%2Frd@orders.shop.svc.cluster.local:5432/orders?sslmode=verify-full',
    );
    const u = new URL(v.uri ?? '');
    assert.equal(decodeURIComponent(u.password), 'p@ss:w/rd');
    assert.equal(s.metadata.name, 'orders-app');
    assert.equal(s.metadata.labels?.['app.kubernetes.io/component'], 'app');
    assert.equal(
      connectionUri({ user: 'a', password: 'b', host: 'h', port: 1, dbname: 'd' }),
      'postgresql://a:b@h:1/d?sslmode=verify-full',
    );
  });
});

describe('rendered TLS settings and mounts', () => {
  test('postgresql.conf: ssl on with the mounted files, TLS 1.2 at least; spec.parameters cannot turn it off', () => {
    const conf = postgresConf(
      withDefaults(
        database('postgres', {
          parameters: { ssl: 'off', ssl_cert_file: '/x', ssl_min_protocol_version: 'TLSv1.3' },
        }),
      ),
    );
    const last = (k: string) =>
      conf
        .split('\n')
        .filter((l) => l.startsWith(`${k} = `))
        .at(-1);
    assert.equal(last('ssl'), "ssl = 'on'");
    assert.equal(last('ssl_cert_file'), "ssl_cert_file = '/etc/opkit-tls/tls.crt'");
    assert.equal(last('ssl_key_file'), "ssl_key_file = '/etc/opkit-tls/tls.key'");
    assert.equal(last('ssl_ca_file'), "ssl_ca_file = '/etc/opkit-tls/ca.crt'");
    assert.equal(last('ssl_min_protocol_version'), "ssl_min_protocol_version = 'TLSv1.3'", 'may be raised');
    assert.match(
      postgresConf(withDefaults(database('postgres'))),
      /^ssl_min_protocol_version = 'TLSv1\.2'$/m,
    );
  });

  test('the server certificate Secret is mounted 0640 (root:fsGroup 999) where the server, init and sidecar containers read it', () => {
    const db = database('postgres');
    const sts = statefulSet(db, { configHash: configHash(configMap(db)) });
    const pod = sts.spec?.template.spec;
    const vol = pod?.volumes?.find((v) => v.name === 'tls');
    assert.deepEqual(vol?.secret, { secretName: 'orders-server', defaultMode: 0o640 });
    assert.equal(pod?.securityContext?.fsGroup, 999);
    for (const c of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) {
      const m = c.volumeMounts?.find((x) => x.name === 'tls');
      assert.deepEqual(m, { name: 'tls', mountPath: '/etc/opkit-tls', readOnly: true }, c.name);
    }
    const env = (name: string) =>
      [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].find((c) => c.name === name)?.env ?? [];
    assert.equal(env('postgres').find((e) => e.name === 'TLS_CA_FILE')?.value, '/etc/opkit-tls/ca.crt');
    assert.equal(env('credentials').find((e) => e.name === 'TLS_DIR')?.value, '/etc/opkit-tls');
  });

  test('MySQL: no TLS objects, no tls volume', () => {
    const db = database('mysql');
    const sts = statefulSet(db, { configHash: 'x' });
    assert.equal(
      sts.spec?.template.spec?.volumes?.some((v) => v.name === 'tls'),
      false,
    );
  });
});

describe('reconcile: the TLS Secrets', () => {
  const NS = 'shop';
  const NAME = 'orders';
  const KEY = { namespace: NS, name: NAME };
  const ctx = { signal: new AbortController().signal };
  let client: FakeClient;
  let recorder: FakeRecorder;
  let now: Date;
  let deps: ReconcilerDeps;
  const get = (name: string) => client.getStored(Secrets, { namespace: NS, name }) as Secret | undefined;
  const reconcile = () => reconcileDatabase(deps, KEY, ctx);
  const create = (spec: Partial<Database['spec']> = {}) =>
    client.create(Databases.resource, {
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: { name: NAME, namespace: NS },
      spec: { engine: 'postgres', version: '16', storage: '1Gi', replicas: 2, ...spec },
    } as Database);

  beforeEach(() => {
    client = new FakeClient({ statusSubresource: [Databases.resource] });
    recorder = new FakeRecorder();
    now = new Date();
    deps = { client, reader: managedOnlyReader(client), recorder, now: () => now };
  });

  test('creates the CA (kept with the data under Retain), the server certificate and the app Secret (controlled)', async () => {
    await create();
    await reconcile();
    const ca = get('orders-ca');
    const server = get('orders-server');
    const app = get('orders-app');
    assert.ok(ca && server && app);
    assert.equal(ca.metadata.ownerReferences, undefined, 'Retain: the CA stays with the data');
    for (const s of [server, app]) assert.equal(s.metadata.ownerReferences?.[0]?.controller, true);
    assert.equal(server.type, 'kubernetes.io/tls');
    const caPem = decoded(ca)['ca.crt'] ?? '';
    const s = decoded(server);
    assert.equal(s['ca.crt'], caPem);
    const i = inspectCertificate(s['tls.crt'], s['tls.key'], caPem);
    assert.ok('facts' in i && i.facts.signedByCa);
    const a = decoded(app);
    const creds = decoded(get('orders-credentials'));
    assert.equal(a.password, creds['app-password']);
    assert.equal(a.user, creds['app-username']);
    assert.equal(a['ca.crt'], caPem);
    assert.equal(a.host, 'orders.shop.svc.cluster.local');
    const events = recorder.events.map((e) => e.note).join('\n');
    assert.match(
      events,
      /Issued the server certificate in Secret orders-server: there is no server certificate yet/,
    );
    assert.ok(!events.includes(creds['app-password'] ?? '-'), 'no secret value in an event');
  });

  test('no write when nothing changed; a valid CA is never replaced; the server certificate renewed a third before expiry', async () => {
    await create();
    await reconcile();
    const ca = get('orders-ca')?.data?.['ca.crt'];
    const cert = get('orders-server')?.data?.['tls.crt'];
    client.clearActions();
    await reconcile();
    assert.deepEqual(client.writes({ resource: Secrets }), []);
    // Day 59: nothing to do (and the renewal is due within a day: the reconcile asks to be requeued).
    now = new Date(now.getTime() + 59.5 * DAY_MS);
    const result = await reconcile();
    assert.deepEqual(client.writes({ resource: Secrets }), []);
    assert.ok(
      result && 'requeueAfter' in result && (result.requeueAfter ?? 0) < DAY_MS,
      JSON.stringify(result),
    );
    // Day 61: renewed, same CA; a patch, never an update (RBAC has none for Secrets).
    now = new Date(now.getTime() + 1.5 * DAY_MS);
    await reconcile();
    assert.equal(get('orders-ca')?.data?.['ca.crt'], ca);
    assert.notEqual(get('orders-server')?.data?.['tls.crt'], cert);
    assert.deepEqual(
      client.writes({ resource: Secrets }).map((w) => `${w.verb} ${w.name}`),
      ['patch orders-server'],
    );
  });

  test('a reconcile that finds the credentials Secret derives its verifiers from the stored passwords only (no new passwords drawn)', async () => {
    await create();
    await reconcile();
    const creds = decoded(get('orders-credentials'));
    const engine = engineFor('postgres') as {
      derivedSecretData: NonNullable<ReturnType<typeof engineFor>['derivedSecretData']>;
    };
    const derive = mock.method(engine, 'derivedSecretData');
    try {
      await reconcile();
      assert.equal(derive.mock.callCount(), 1, 'the missing keys are computed once, from the Secret');
      const plain = derive.mock.calls[0]?.arguments[1] ?? {};
      for (const k of ['admin-password', 'app-password', 'replication-password'])
        assert.equal(plain[k], creds[k], k);
    } finally {
      derive.mock.restore();
    }
  });

  test('a password changed in the credentials Secret reaches the app Secret; keys edited in it are put back', async () => {
    await create();
    await reconcile();
    await client.patch(
      Secrets,
      { namespace: NS, name: 'orders-credentials' },
      {
        type: 'merge',
        body: { data: { 'app-password': Buffer.from('a-new-password').toString('base64') } },
      },
    );
    await client.patch(
      Secrets,
      { namespace: NS, name: 'orders-app' },
      {
        type: 'merge',
        body: { data: { sslmode: Buffer.from('disable').toString('base64') } },
      },
    );
    await reconcile();
    const a = decoded(get('orders-app'));
    assert.equal(a.password, 'a-new-password');
    assert.match(a.uri ?? '', /:a-new-password@/);
    assert.equal(a.sslmode, 'verify-full');
  });

  test('a scale-up reissues the certificate for the new pod; a scale-down does not', async () => {
    await create();
    await reconcile();
    const first = get('orders-server')?.data?.['tls.crt'];
    const db = client.getStored(Databases.resource, KEY) as Database;
    await client.update(Databases.resource, { ...db, spec: { ...db.spec, replicas: 1 } });
    await reconcile();
    assert.equal(get('orders-server')?.data?.['tls.crt'], first);
    const db2 = client.getStored(Databases.resource, KEY) as Database;
    await client.update(Databases.resource, { ...db2, spec: { ...db2.spec, replicas: 3 } });
    await reconcile();
    const pem = decoded(get('orders-server'))['tls.crt'] ?? '';
    assert.equal(
      new X509Certificate(pem).checkHost('orders-2.orders-headless.shop.svc'),
      'orders-2.orders-headless.shop.svc',
    );
    assert.match(recorder.events.map((e) => e.note).join('\n'), /lacks the names orders-2\.orders-headless/);
  });

  test('deletionPolicy Delete: the Database controls the CA too; an unusable CA is replaced with a Warning', async () => {
    await create({ deletionPolicy: 'Delete' });
    await reconcile();
    assert.equal(get('orders-ca')?.metadata.ownerReferences?.[0]?.controller, true);
    await client.patch(
      Secrets,
      { namespace: NS, name: 'orders-ca' },
      {
        type: 'merge',
        body: { data: { 'ca.key': Buffer.from('garbage').toString('base64') } },
      },
    );
    await reconcile();
    const warning = recorder.events.find((e) => e.reason === 'CARegenerated');
    assert.ok(warning);
    assert.match(warning.note, /must take ca\.crt from Secret orders-app again/);
    const caPem = decoded(get('orders-ca'))['ca.crt'];
    assert.equal(decoded(get('orders-app'))['ca.crt'], caPem);
    const s = decoded(get('orders-server'));
    const i = inspectCertificate(s['tls.crt'], s['tls.key'], caPem);
    assert.ok('facts' in i && i.facts.signedByCa, 'the server certificate follows the new CA');
  });

  test('Retain: a new Database of the same name adopts the retained CA unchanged; only the server certificate is new', async () => {
    await create();
    await reconcile();
    const ca = get('orders-ca');
    const oldServer = get('orders-server')?.data?.['tls.crt'];
    // The Database deleted: the garbage collector takes what it controls, the CA stays (no owner).
    await client.delete(Databases.resource, KEY);
    for (const n of ['orders-server', 'orders-app', 'orders-credentials'])
      if (get(n)?.metadata.ownerReferences?.length) await client.delete(Secrets, { namespace: NS, name: n });
    assert.ok(get('orders-ca'));
    await create();
    await reconcile();
    assert.equal(
      get('orders-ca')?.data?.['ca.crt'],
      ca?.data?.['ca.crt'],
      'the same CA: clients keep trusting it',
    );
    assert.equal(
      get('orders-ca')?.metadata.resourceVersion,
      ca?.metadata.resourceVersion,
      'not even rewritten',
    );
    assert.notEqual(get('orders-server')?.data?.['tls.crt'], oldServer);
    const s = decoded(get('orders-server'));
    const i = inspectCertificate(s['tls.crt'], s['tls.key'], decoded(ca)['ca.crt']);
    assert.ok('facts' in i && i.facts.signedByCa);
    assert.ok(!recorder.events.some((e) => e.reason === 'CARegenerated'));
  });

  test('a new Database: its TLS Secrets created without asking the API about each first; one the cache does not show yet is found by the create and adopted, not replaced', async () => {
    await create();
    await reconcile();
    const reads = client
      .actions({ resource: Secrets })
      .filter((a) => a.verb === 'get')
      .map((a) => a.name);
    // The test's reader (the cache) reads through the client too: one read each is the cache's.
    assert.deepEqual(
      reads.filter((n) => ['orders-ca', 'orders-server', 'orders-app'].includes(n ?? '')),
      ['orders-ca', 'orders-server', 'orders-app'],
      'each TLS Secret looked up in the cache only, not read from the API again',
    );
    // The Database deleted and made again while the cache does not show the retained CA yet.
    const ca = get('orders-ca');
    await client.delete(Databases.resource, KEY);
    for (const n of ['orders-server', 'orders-app', 'orders-credentials'])
      if (get(n)?.metadata.ownerReferences?.length) await client.delete(Secrets, { namespace: NS, name: n });
    const inner = managedOnlyReader(client);
    deps = {
      ...deps,
      reader: {
        ...inner,
        get: async (res, key) => (key.name === 'orders-ca' ? undefined : inner.get(res, key)),
      },
    };
    await create();
    await reconcile();
    assert.equal(get('orders-ca')?.metadata.resourceVersion, ca?.metadata.resourceVersion, 'not rewritten');
    const s = decoded(get('orders-server'));
    const i = inspectCertificate(s['tls.crt'], s['tls.key'], decoded(ca)['ca.crt']);
    assert.ok('facts' in i && i.facts.signedByCa, 'the server certificate is signed by the retained CA');
    assert.ok(!recorder.events.some((e) => e.reason === 'CARegenerated'));
  });

  test("a cache behind the API (a Secret written since it last saw it): decided again on the API's version, no Conflict", async () => {
    // After an API server restart the Secrets' watch resumes seconds later; a reconcile meanwhile decided
    // on the old version, its patch (on top of that resourceVersion) got a Conflict each time, and each
    // failed reconcile logged an error (CI, the fault suite's API server restart).
    await create();
    await reconcile();
    const original = structuredClone(get('orders-server')!);
    // Written twice since: one key taken out (the version the cache shows), then put back (the API's).
    await client.patch(
      Secrets,
      { namespace: NS, name: 'orders-server' },
      {
        type: 'merge',
        body: { data: { 'ca.crt': null } },
      },
    );
    const cached = structuredClone(get('orders-server')!);
    await client.patch(
      Secrets,
      { namespace: NS, name: 'orders-server' },
      {
        type: 'merge',
        body: { data: { 'ca.crt': original.data!['ca.crt']! } },
      },
    );
    // The cache shows the version without ca.crt: the step would put it back, on top of that version.
    const inner = managedOnlyReader(client);
    deps = {
      ...deps,
      reader: {
        ...inner,
        get: async (res, key) => (key.name === 'orders-server' ? cached : inner.get(res, key)) as never,
      },
    };
    const before = get('orders-server')!.metadata.resourceVersion;
    client.clearActions();
    await reconcile();
    assert.equal(
      get('orders-server')!.metadata.resourceVersion,
      before,
      'nothing to write: the API has it all',
    );
    assert.deepEqual(
      client
        .actions({ resource: Secrets })
        .filter((a) => a.verb === 'get')
        .map((a) => a.name)
        .filter((n) => n === 'orders-server'),
      ['orders-server'],
      'read from the API once, after the Conflict',
    );
    assert.ok(!recorder.events.some((e) => e.type === 'Warning'), JSON.stringify(recorder.events));
  });

  test('MySQL gets none of them', async () => {
    await create({ engine: 'mysql', version: '8.4' });
    await reconcile();
    for (const n of ['orders-ca', 'orders-server', 'orders-app']) assert.equal(get(n), undefined, n);
  });
});

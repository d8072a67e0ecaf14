/**
 * The operator as it is deployed: `node src/main.ts` as its own process, authenticated as a service
 * account that holds only the RBAC of config/rbac (so the rules are exactly sufficient), with leader
 * election. Killed (SIGKILL) in the middle of creating a Database and started again: nothing is
 * regenerated, the Secret is not even rewritten. SIGTERM shuts it down gracefully and releases the Lease.
 * No password of the Secret ever appears in the operators' logs (debug level), in any Event of the
 * namespace (every field) or in the Database's status.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  Events,
  Leases,
  PersistentVolumeClaims,
  type Secret,
  Secrets,
  Services,
  StatefulSets,
} from '@opkit/runtime';
import { parse, stringify } from 'yaml';
import { Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  createNamespace,
  eventually,
  OPERATOR_DIR,
  sample,
  startCluster,
  waitForPhase,
} from './helpers.ts';

const NS = 'apps';
const OPERATOR_NS = 'database-operator-system';
const NAME = 'restart-db';
const LEASE = 'database-operator.myapp.example.com';
const PASSWORD_KEYS = ['admin-password', 'app-password', 'replication-password'];

interface Proc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

describe('Database operator: a separate process with least-privilege RBAC, killed and restarted', {
  timeout: 600_000,
}, () => {
  let cluster: Cluster;
  let kubeconfig: string;
  const procs: Proc[] = [];
  const client = () => cluster.client;

  /** `node src/main.ts` with the service account's kubeconfig. */
  function operator(...args: string[]): Proc {
    const child = spawn(
      process.execPath,
      [
        join(OPERATOR_DIR, 'src', 'main.ts'),
        '--kubeconfig',
        kubeconfig,
        '--metrics-bind-address',
        ':0',
        '--health-probe-bind-address',
        ':0',
        ...args,
      ],
      // debug: the most the operator ever logs (it has no trace lines), for the secret-value scan.
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'debug' } },
    );
    let out = '';
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
    });
    child.stderr?.on('data', (b: Buffer) => {
      out += b.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const proc = { child, output: () => out, exited };
    procs.push(proc);
    return proc;
  }

  /** Every password value the credentials Secret has held (plain and base64). */
  const passwords = new Set<string>();
  const rememberPasswords = (secret: Secret | undefined) => {
    for (const key of PASSWORD_KEYS) {
      const encoded = secret?.data?.[key];
      if (!encoded) continue;
      passwords.add(encoded);
      passwords.add(Buffer.from(encoded, 'base64').toString('utf8'));
    }
  };

  /**
   * No password in any operator's output, in any Event of the namespace (the whole object: note, series,
   * related, annotations...) or, when it exists, in the Database (status included).
   */
  async function assertNoPasswordsLeaked(): Promise<void> {
    rememberPasswords(
      (await client().list(Secrets, { namespace: NS })).items.find(
        (s) => s.metadata.name === `${NAME}-credentials`,
      ),
    );
    assert.ok(passwords.size >= 2 * PASSWORD_KEYS.length, 'the passwords are known');
    for (const p of passwords) assert.ok(p.length >= 24, 'a real password, not a short common string');
    const output = procs.map((p) => p.output()).join('\n');
    assert.ok(output.length > 0, 'the operators logged');
    const events = (await client().list(Events, { namespace: NS })).items;
    assert.ok(events.length > 0, 'there are events to scan');
    const dbs = (await client().list(Databases.resource, { namespace: NS })).items;
    for (const p of passwords) {
      assert.ok(!output.includes(p), 'a password in the operator log output');
      for (const e of events) {
        assert.ok(!JSON.stringify(e).includes(p), `a password in Event ${e.metadata.name} (${e.reason})`);
      }
      for (const d of dbs) {
        assert.ok(!JSON.stringify(d.status ?? {}).includes(p), 'a password in the status');
        assert.ok(!JSON.stringify(d).includes(p), 'a password in the Database');
      }
    }
  }

  before(async () => {
    cluster = await startCluster();
    await createNamespace(client(), NS);
    // The operator's RBAC, exactly as config/rbac ships it (opkit generate writes it for OPERATOR_NS).
    const rbacFile = (f: string) => readFileSync(join(OPERATOR_DIR, 'config', 'rbac', f), 'utf8');
    const rbac = [
      'service_account.yaml',
      'role.yaml',
      'role_binding.yaml',
      'leader_election_role.yaml',
      'leader_election_role_binding.yaml',
    ]
      .map(rbacFile)
      .join('\n---\n');
    const account = parse(rbacFile('service_account.yaml')) as {
      metadata: { name: string; namespace: string };
    };
    assert.equal(account.metadata.namespace, OPERATOR_NS);
    await createNamespace(client(), OPERATOR_NS);
    execFileSync('kubectl', ['--kubeconfig', cluster.kubeconfig, 'apply', '-f', '-'], {
      input: rbac,
      encoding: 'utf8',
    });
    const token = execFileSync(
      'kubectl',
      [
        '--kubeconfig',
        cluster.kubeconfig,
        'create',
        'token',
        account.metadata.name,
        '-n',
        OPERATOR_NS,
        '--duration',
        '2h',
      ],
      { encoding: 'utf8' },
    ).trim();
    const admin = parse(readFileSync(cluster.kubeconfig, 'utf8')) as {
      users: { name: string; user: Record<string, string> }[];
    };
    for (const u of admin.users) u.user = { token };
    kubeconfig = join(cluster.cp.dir, 'operator-kubeconfig');
    writeFileSync(kubeconfig, stringify(admin), { mode: 0o600 });
    // The service account really is restricted.
    const can = (verb: string, what: string) =>
      spawnSync('kubectl', ['--kubeconfig', kubeconfig, 'auth', 'can-i', verb, what, '-n', NS], {
        encoding: 'utf8',
      }).stdout.trim();
    assert.equal(can('create', 'statefulsets.apps'), 'yes');
    assert.equal(can('patch', 'persistentvolumeclaims'), 'yes');
    assert.equal(can('delete', 'secrets'), 'no');
    assert.equal(can('update', 'secrets'), 'no');
    assert.equal(can('create', 'deployments.apps'), 'no');
    // Pods: deleted one at a time to roll postgres (replicas first, the primary last), never created.
    assert.equal(can('delete', 'pods'), 'yes');
    assert.equal(can('create', 'pods'), 'no');
  });

  after(async () => {
    for (const p of procs)
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await cluster?.stop();
  });

  test('killed mid-reconcile and restarted: the Secret is never regenerated or rewritten', async () => {
    const first = operator();
    await client().create(Databases.resource, sample(NS, NAME));
    // Kill it the moment the Secret exists: the reconcile that created it is still creating the rest.
    let secret: Secret | undefined;
    const ac = new AbortController();
    for await (const ev of client().watch(Secrets, { namespace: NS, signal: ac.signal })) {
      if (ev.object.metadata.name === `${NAME}-credentials`) {
        first.child.kill('SIGKILL');
        secret = ev.object;
        break;
      }
    }
    ac.abort();
    assert.ok(secret);
    rememberPasswords(secret);
    await first.exited;
    const mid = await client().list(StatefulSets, { namespace: NS });
    const atKill = (await client().get(Databases.resource, { namespace: NS, name: NAME })).status?.phase;
    process.stderr.write(
      `# killed with StatefulSet ${mid.items.length ? 'created' : 'not created yet'}, phase ${atKill ?? '(none)'}\n`,
    );

    const second = operator('--leader-elect', '--leader-election-namespace', OPERATOR_NS);
    const running = await waitForPhase(client(), NS, NAME, 'Running', 120_000);
    assert.equal(running.status?.readyReplicas, 3);
    const now = await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
    assert.equal(
      now.metadata.resourceVersion,
      secret.metadata.resourceVersion,
      'the Secret was not written again',
    );
    assert.deepEqual(now.data, secret.data);
    assert.equal(now.metadata.uid, secret.metadata.uid);

    // It leads through the Lease, and never hit a permission it lacks.
    const lease = await client().get(Leases, { namespace: OPERATOR_NS, name: LEASE });
    assert.ok(lease.spec?.holderIdentity, 'a leader');
    assert.doesNotMatch(second.output(), /forbidden/i, 'RBAC denied something');
    await assertNoPasswordsLeaked();

    // SIGTERM: graceful shutdown, exit 0, the Lease released for the next replica.
    second.child.kill('SIGTERM');
    const code = await Promise.race([
      second.exited,
      new Promise<string>((r) => setTimeout(() => r('timeout'), 20_000)),
    ]);
    assert.equal(code, 0, `exit code; output:\n${second.output().slice(-2000)}`);
    const released = await client().get(Leases, { namespace: OPERATOR_NS, name: LEASE });
    assert.ok(
      !released.spec?.holderIdentity,
      `lease released (holder ${released.spec?.holderIdentity ?? ''})`,
    );
  });

  test('a new replica takes over at once and finds nothing to do', async () => {
    const secret = await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
    const sts = await client().get(StatefulSets, { namespace: NS, name: NAME });
    const third = operator('--leader-elect', '--leader-election-namespace', OPERATOR_NS);
    await eventually(
      'leading',
      async () => {
        const lease = await client().get(Leases, { namespace: OPERATOR_NS, name: LEASE });
        return Boolean(lease.spec?.holderIdentity);
      },
      30_000,
    );
    await eventually('workers started', () => /Starting workers/.test(third.output()), 30_000);
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(
      (await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` })).metadata.resourceVersion,
      secret.metadata.resourceVersion,
    );
    assert.equal(
      (await client().get(StatefulSets, { namespace: NS, name: NAME })).metadata.resourceVersion,
      sts.metadata.resourceVersion,
    );
    assert.equal(
      (await client().get(Databases.resource, { namespace: NS, name: NAME })).status?.phase,
      'Running',
    );
    third.child.kill('SIGTERM');
    assert.equal(await third.exited, 0);
  });

  test('the RBAC covers every write: a Secret key added back, scale to 1, grow storage, the Delete policy and deletion; no password anywhere', async () => {
    const proc = operator();
    const key = { namespace: NS, name: NAME };
    // A key deleted by hand is added back (the rule: missing keys are added, present ones kept).
    await client().patch(
      Secrets,
      { namespace: NS, name: `${NAME}-credentials` },
      { type: 'merge', body: { data: { 'app-password': null } } },
    );
    const readded = await eventually(
      'app-password added back',
      async () => {
        const s = await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
        return s.data?.['app-password'] ? s : undefined;
      },
      30_000,
    );
    rememberPasswords(readded);
    await client().patch(Databases.resource, key, {
      type: 'merge',
      body: { spec: { replicas: 1, storage: '20Gi', deletionPolicy: 'Delete' } },
    });
    await eventually(
      'one replica, 20Gi claims, the finalizer',
      async () => {
        const db = await client().get(Databases.resource, key);
        const claim = await client().get(PersistentVolumeClaims, { namespace: NS, name: `data-${NAME}-0` });
        const services = await client().list(Services, {
          namespace: NS,
          labelSelector: `app.kubernetes.io/instance=${NAME}`,
        });
        return (
          db.status?.phase === 'Running' &&
          db.status.observedGeneration === db.metadata.generation &&
          db.metadata.finalizers?.includes('myapp.example.com/finalizer') &&
          claim.status?.capacity?.storage === '20Gi' &&
          services.items.length === 2
        );
      },
      60_000,
    );
    const sts = await client().get(StatefulSets, key);
    assert.equal(
      sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage,
      '20Gi',
      'recreated with the new size',
    );
    // Under Delete the Database controls the Secret (it goes with the data).
    const owned = await client().get(Secrets, { namespace: NS, name: `${NAME}-credentials` });
    assert.equal(owned.metadata.ownerReferences?.[0]?.kind, 'Database');
    assert.deepEqual(owned.data, readded.data, 'the passwords untouched');
    await assertNoPasswordsLeaked();
    await client().delete(Databases.resource, key);
    await eventually(
      'the Database and its claims gone',
      async () => {
        const dbs = await client().list(Databases.resource, { namespace: NS });
        const claims = await client().list(PersistentVolumeClaims, { namespace: NS });
        return dbs.items.length === 0 && claims.items.length === 0;
      },
      60_000,
    );
    assert.doesNotMatch(proc.output(), /forbidden/i, 'RBAC denied something');
    proc.child.kill('SIGTERM');
    assert.equal(await proc.exited, 0);
    await assertNoPasswordsLeaked();
  });

  test('postgres TLS under the same RBAC: the CA, server certificate and app Secret created, the certificate reissued by patch; no password in the logs', async () => {
    const proc = operator();
    const name = 'tls-db';
    const key = { namespace: NS, name };
    const get = (n: string) => client().get(Secrets, { namespace: NS, name: `${name}-${n}` });
    await client().create(
      Databases.resource,
      sample(NS, name, { engine: 'postgres', version: '16', storage: '1Gi', replicas: 1 }),
    );
    const first = await eventually(
      'the TLS Secrets',
      async () => {
        try {
          const [ca, server, app] = [await get('ca'), await get('server'), await get('app')];
          return ca.data?.['ca.crt'] && server.data?.['tls.crt'] && app.data?.uri
            ? { ca, server, app }
            : undefined;
        } catch {
          return undefined;
        }
      },
      60_000,
    );
    assert.equal(first.ca.metadata.ownerReferences, undefined, 'Retain: the CA stays with the data');
    assert.equal(first.server.type, 'kubernetes.io/tls');
    const creds = await get('credentials');
    assert.equal(first.app.data?.password, creds.data?.['app-password']);
    await client().patch(Databases.resource, key, { type: 'merge', body: { spec: { replicas: 2 } } });
    const reissued = await eventually(
      'the server certificate reissued for the new pod',
      async () => {
        const s = await get('server');
        return s.data?.['tls.crt'] !== first.server.data?.['tls.crt'] ? s : undefined;
      },
      60_000,
    );
    assert.equal((await get('ca')).data?.['ca.crt'], first.ca.data?.['ca.crt'], 'the same CA');
    assert.equal(reissued.data?.['ca.crt'], first.ca.data?.['ca.crt']);
    assert.doesNotMatch(proc.output(), /forbidden/i, 'RBAC denied something');
    const output = proc.output();
    for (const k of ['app-password', 'admin-password', 'replication-password']) {
      const plain = Buffer.from(creds.data?.[k] ?? '', 'base64').toString();
      assert.ok(plain.length >= 24);
      assert.ok(!output.includes(plain), `${k} in the operator's output`);
    }
    assert.ok(!output.includes('PRIVATE KEY'), "a private key in the operator's output");
    await client().delete(Databases.resource, key);
    proc.child.kill('SIGTERM');
    assert.equal(await proc.exited, 0);
  });
});

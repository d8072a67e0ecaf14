/**
 * The primary lease's sidecar script (lease.sh) with a REAL postgres primary (pg-harness.ts) and a
 * stand-in for the API server's Lease endpoint (HTTPS with a CA of its own, a bearer token, GET and merge
 * PATCH with the resourceVersion precondition as the API server does them): it renews the Lease naming it;
 * it fences itself (designation `none`, the server stopped, the acknowledgement on the Lease) when the
 * Lease names nobody; and when it cannot renew for LEASE_SECONDS (the API server gone) it fences itself
 * without any answer. A replica never touches the Lease.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LEASE_FENCED_ANNOTATION, POSTGRES_FILES } from '../../src/controllers/database/engines/index.ts';
import { generateCa, issueServerCertificate } from '../../src/controllers/database/tls/pki.ts';
import { Cluster, type Instance, pgDatabase, type Record_, skipReason } from './pg-harness.ts';

const TOKEN = 'test-token-0123456789';
const PATH = '/apis/coordination.k8s.io/v1/namespaces/shop/leases/vault-primary';

interface FakeLease {
  metadata: { name: string; resourceVersion: string; annotations?: Record<string, string> };
  spec: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds: number };
}

/** The Lease endpoint: what the API server would answer, and the requests it got. */
class LeaseApi {
  lease: FakeLease = {
    metadata: { name: 'vault-primary', resourceVersion: '1' },
    spec: { leaseDurationSeconds: 8 },
  };
  requests: string[] = [];
  server: Server | undefined;
  port = 0;

  async start(key: string, cert: string): Promise<void> {
    this.server = createServer({ key, cert }, (req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', () => {
        this.requests.push(`${req.method} ${body}`);
        const send = (code: number, obj: unknown) => {
          // Pretty-printed, as the API server answers a curl user agent.
          res.writeHead(code, { 'Content-Type': 'application/json' }).end(JSON.stringify(obj, null, 2));
        };
        if (req.headers.authorization !== `Bearer ${TOKEN}`) return send(401, { kind: 'Status', code: 401 });
        if (req.url !== PATH) return send(404, { kind: 'Status', code: 404 });
        if (req.method === 'GET') return send(200, this.lease);
        if (req.method !== 'PATCH') return send(405, { kind: 'Status', code: 405 });
        const patch = JSON.parse(body) as {
          metadata?: { resourceVersion?: string; annotations?: Record<string, string> };
          spec?: { renewTime?: string };
        };
        if (
          patch.metadata?.resourceVersion &&
          patch.metadata.resourceVersion !== this.lease.metadata.resourceVersion
        ) {
          return send(409, { kind: 'Status', code: 409, reason: 'Conflict' });
        }
        const rv = String(Number(this.lease.metadata.resourceVersion) + 1);
        this.lease = {
          metadata: {
            ...this.lease.metadata,
            resourceVersion: rv,
            annotations: {
              ...(this.lease.metadata.annotations ?? {}),
              ...(patch.metadata?.annotations ?? {}),
            },
          },
          spec: { ...this.lease.spec, ...(patch.spec ?? {}) },
        };
        return send(200, this.lease);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server?.close(() => resolve());
      this.server?.closeAllConnections();
    });
  }
}

describe('postgres: the primary lease (lease.sh) on a real primary', { skip: skipReason }, () => {
  let c: Cluster;
  let primary: Instance;
  let replica: Instance;
  let record: Record_;
  const api = new LeaseApi();
  let tokenDir = '';
  let certs: { key: string; cert: string };

  /** lease.sh for `seconds` (then killed by timeout), with the sidecar's environment. */
  const runLease = (inst: Instance, seconds: number, leaseSeconds = 8) =>
    c.run('timeout', [String(seconds), 'sh', '-c', c.file(POSTGRES_FILES.lease), 'lease.sh'], {
      ...c.env(inst, record),
      POD_NAMESPACE: 'shop',
      LEASE_NAME: 'vault-primary',
      LEASE_SECONDS: String(leaseSeconds),
      LEASE_TOKEN_DIR: tokenDir,
      LEASE_INTERVAL: '1',
      RENEWED_FILE: join(inst.socketDir, 'lease-renewed'),
      KUBERNETES_SERVICE_HOST: 'localhost',
      KUBERNETES_SERVICE_PORT: String(api.port),
    });
  const running = async (inst: Instance) =>
    (await c.run('pg_ctl', ['status', '-D', inst.pgdata], {})).code === 0;
  const designation = (inst: Instance) => readFileSync(join(inst.socketDir, 'primary'), 'utf8').trim();

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
      const ca = await generateCa('lease-test');
      const server = await issueServerCertificate(ca, ['localhost']);
      certs = { key: server.keyPem, cert: server.certPem };
      tokenDir = join(primary.root, 'lease-token');
      c.mkdirOwned(tokenDir);
      c.writeOwned(join(tokenDir, 'token'), TOKEN, 0o440);
      c.writeOwned(join(tokenDir, 'ca.crt'), ca.certPem, 0o440);
      // The ConfigMap's mounted cluster record: vault-0 designated at epoch 3.
      c.writeOwned(join(primary.root, 'cluster-primary'), 'vault-0\n', 0o644);
      c.writeOwned(join(primary.root, 'cluster-primary-epoch'), '3\n', 0o644);
      await api.start(certs.key, certs.cert);
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await api.stop();
    await c?.close();
  });

  test('the Lease names the primary: it renews it (resourceVersion precondition), the server keeps running', async () => {
    api.lease.spec.holderIdentity = 'vault-0';
    api.requests = [];
    const r = await runLease(primary, 4);
    assert.equal(r.code, 124, r.stderr); // killed by timeout: it loops
    assert.ok(api.lease.spec.renewTime, `renewTime set (${api.requests.join(' | ')})`);
    assert.ok(api.requests.some((q) => q.startsWith('PATCH') && q.includes('"resourceVersion"')));
    assert.ok(await running(primary), 'the primary still runs');
    assert.doesNotMatch(r.stderr, /FENCING/);
    assert.match(readFileSync(join(primary.socketDir, 'lease-renewed'), 'utf8'), /^\d+\n?$/);
  });

  test('a replica (in recovery) never reads or renews the Lease', async () => {
    api.requests = [];
    const r = await runLease(replica, 3);
    assert.equal(r.code, 124, r.stderr);
    assert.deepEqual(api.requests, []);
  });

  test('the API server gone after a renewal: it fences itself within LEASE_SECONDS, with no answer', async () => {
    await api.stop();
    try {
      const r = await runLease(primary, 10, 8);
      const m = /FENCING vault-0: the Lease vault-primary was last renewed (\d+)s ago/.exec(r.stderr);
      assert.ok(m, r.stderr);
      // It starts fencing LEASE_SLACK (4 s) before LEASE_SECONDS run out, by /proc/uptime.
      assert.ok(Number(m[1]) >= 4 && Number(m[1]) <= 8, m[0]);
      assert.equal(await running(primary), false, 'the server is stopped');
      assert.equal(designation(primary), 'none 3', 'the designation that named it (the ConfigMap, epoch 3)');
    } finally {
      await api.start(certs.key, certs.cert);
    }
  });

  test('the Lease names nobody (the operator fences in a failover): it fences at once and acknowledges', async () => {
    // Back as the designated primary (what the operator would do: designate it again).
    c.writeOwned(join(primary.socketDir, 'primary'), 'vault-0 4\n', 0o644);
    await c.start(primary, record);
    assert.ok(await running(primary));
    api.lease.spec.holderIdentity = undefined;
    delete api.lease.spec.holderIdentity;
    const r = await runLease(primary, 6);
    assert.match(r.stderr, /FENCING vault-0: the Lease vault-primary names nobody as the primary/);
    assert.equal(await running(primary), false, 'the server is stopped');
    assert.equal(designation(primary), 'none 4', 'the designation that named it, with its epoch');
    assert.equal(api.lease.metadata.annotations?.[LEASE_FENCED_ANNOTATION], 'vault-0');
  });
});

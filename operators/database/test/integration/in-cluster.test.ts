/**
 * The Database operator in the cluster, as a user deploys it (issue 16): its own Dockerfile built by
 * `opkit build --load` onto a real node, config/default deployed by `opkit deploy` and scaled to 2 replicas
 * with leader election, under the restricted Pod Security Standard with exactly the generated RBAC. The seed's
 * sample is reconciled by the in-cluster leader; deleting the leader pod hands the Lease to the other replica
 * within leaseDuration + retryPeriod; metrics are served through the metrics Service. Root only.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ClusterRoleBindings,
  ClusterRoles,
  ConfigMaps,
  createClient,
  Deployments,
  type KubeObject,
  Leases,
  loadConfig,
  Namespaces,
  Pods,
  type RestClient,
  Secrets,
  Services,
  StatefulSets,
} from '@opkit/runtime';
import { eventually } from '@opkit/runtime/testing';
import { parse } from 'yaml';
import { expectOk, opkitProcess, tempDir, upRealCluster } from '../../../../packages/cli/test/helpers.ts';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { OPERATOR_DIR, SAMPLE_YAML } from './helpers.ts';

const IMAGE = 'opkit.local/database-operator:in-cluster';
const NS = 'database-operator-system';
const MANAGER = 'database-operator-controller-manager';
const SA = 'database-operator-controller-manager';
const LEASE = 'database-operator.myapp.example.com';
const SELECTOR = 'control-plane=controller-manager';
const RETRY_PERIOD_S = 2; // the runtime's default retryPeriod, which the operator uses
const SLACK_S = 30; // a loaded 2-core machine: pod deletion, API latency

describe('the Database operator in the cluster: 2 replicas, leader election, restricted PSS', {
  timeout: 1_200_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  const tmp = tempDir('opkit-db-in-cluster-');
  const cluster = `db-in-cluster-${process.pid}`;
  let kubeconfig = '';
  let realCluster: { kubeconfig: string; down(): Promise<void> } | undefined;
  let client: RestClient | undefined;
  const kubectl = (...args: string[]) =>
    spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', timeout: 120_000 });
  const managerPods = async () =>
    (await client!.list(Pods, { namespace: NS, labelSelector: SELECTOR })).items.filter(
      (p) => !p.metadata.deletionTimestamp,
    );
  const ready = (p: KubeObject & { status?: { conditions?: { type: string; status: string }[] } }) =>
    p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

  before(async () => {
    realCluster = await upRealCluster(OPERATOR_DIR, cluster);
    kubeconfig = realCluster.kubeconfig;
    client = createClient(loadConfig({ kubeconfig }), { fieldManager: 'db-in-cluster-test' });
  });
  after(async () => {
    client?.close();
    await realCluster?.down();
    tmp[Symbol.dispose]();
  });

  test("build --load: the operator's own Dockerfile from the repository root, onto the real node", async () => {
    const r = await opkitProcess(OPERATOR_DIR, [
      'build',
      '--context',
      '../..',
      '--file',
      'Dockerfile',
      '--image',
      IMAGE,
      '--archive',
      join(tmp.dir, 'database-operator.oci.tar'),
      '--skip-unsupported-run',
      '--load',
      '--cluster',
      cluster,
    ]);
    expectOk('build --load', r);
    // The compile-cache warm-up runs node in the image: without an engine, it is skipped and named.
    assert.match(r.stderr, /RUN cd \/app\/operators\/database && node .*: skipped \(--skip-unsupported-run/);
    assert.match(r.stdout, new RegExp(`loaded ${IMAGE.replaceAll('.', '\\.')} into cluster`));
  });

  test('deploy config/default, 2 replicas: both Ready in the restricted namespace, the Lease held by one', async () => {
    const r = await opkitProcess(OPERATOR_DIR, [
      'deploy',
      '--image',
      IMAGE,
      '--kubeconfig',
      kubeconfig,
      '--timeout',
      '600',
    ]);
    expectOk('deploy', r);
    const ns = await client!.get(Namespaces, { name: NS });
    assert.equal(ns.metadata.labels?.['pod-security.kubernetes.io/enforce'], 'restricted');
    const scale = kubectl('-n', NS, 'scale', `deployment/${MANAGER}`, '--replicas=2');
    assert.equal(scale.status, 0, scale.stderr);
    await eventually(
      'two Ready manager pods running the image',
      async () => {
        const pods = await managerPods();
        return pods.length === 2 && pods.every((p) => ready(p) && p.spec!.containers[0]!.image === IMAGE);
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    );
    for (const p of await managerPods()) {
      assert.equal(p.spec!.serviceAccountName, SA);
      assert.equal(
        kubectl('get', 'node', p.spec!.nodeName!, '-o', 'jsonpath={.metadata.labels.opkit\\.dev/node}')
          .stdout,
        'real',
      );
    }
    // The namespace enforces the standard: a pod that does not meet it is refused there.
    const privileged = kubectl(
      '-n',
      NS,
      'run',
      'not-restricted',
      '--image=opkit.local/shell:1',
      '--image-pull-policy=Never',
      '--dry-run=server',
      '--',
      'sleep',
      '1',
    );
    assert.notEqual(privileged.status, 0);
    assert.match(privileged.stderr, /violates PodSecurity "restricted:latest"/);
    const lease = await eventually(
      'the Lease held by a manager pod',
      async () => {
        const l = await client!.get(Leases, { namespace: NS, name: LEASE }).catch(() => undefined);
        return l?.spec?.holderIdentity ? l : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    const names = (await managerPods()).map((p) => p.metadata.name);
    assert.ok(
      names.some((n) => lease.spec!.holderIdentity!.startsWith(`${n}_`)),
      `holder ${lease.spec!.holderIdentity} is one of ${names.join(', ')}`,
    );
  });

  test('exactly the generated RBAC: the ClusterRole is config/rbac/role.yaml, bound to the manager only', async () => {
    const generated = parse(readFileSync(join(OPERATOR_DIR, 'config/rbac/role.yaml'), 'utf8')) as {
      metadata: { name: string };
      rules: unknown[];
    };
    const role = await client!.get(ClusterRoles, { name: generated.metadata.name });
    assert.deepEqual(role.rules, generated.rules);
    const bindings = (await client!.list(ClusterRoleBindings)).items.filter((b) =>
      b.subjects?.some((s) => s.kind === 'ServiceAccount' && s.namespace === NS && s.name === SA),
    );
    assert.deepEqual(
      bindings.map((b) => b.roleRef.name),
      [generated.metadata.name],
    );
    const can = (verb: string, resource: string) =>
      kubectl('auth', 'can-i', verb, resource, '-A', `--as=system:serviceaccount:${NS}:${SA}`).stdout.trim();
    assert.equal(can('patch', 'secrets'), 'yes');
    assert.equal(can('delete', 'secrets'), 'no');
    assert.equal(can('create', 'deployments.apps'), 'no');
  });

  test('the seed sample is reconciled by the in-cluster leader: its children exist, its log shows it', async () => {
    const sample = parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database;
    const name = sample.metadata.name!;
    await client!.create(Databases.resource, {
      ...sample,
      metadata: { ...sample.metadata, namespace: 'default' },
    });
    await eventually(
      "the sample's children",
      async () => {
        const got = await Promise.all([
          client!.get(StatefulSets, { namespace: 'default', name }).catch(() => undefined),
          client!.get(Services, { namespace: 'default', name }).catch(() => undefined),
          client!.get(ConfigMaps, { namespace: 'default', name: `${name}-config` }).catch(() => undefined),
          client!.get(Secrets, { namespace: 'default', name: `${name}-credentials` }).catch(() => undefined),
        ]);
        return got.every((o) => o !== undefined);
      },
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    const sts = await client!.get(StatefulSets, { namespace: 'default', name });
    assert.equal(sts.metadata.ownerReferences?.[0]?.kind, 'Database');
    const holder = (await client!.get(Leases, { namespace: NS, name: LEASE })).spec!.holderIdentity!;
    const leader = holder.slice(0, holder.lastIndexOf('_'));
    await eventually(
      "the leader's log shows the reconcile",
      () => {
        const logs = kubectl('-n', NS, 'logs', leader, '-c', 'manager');
        return logs.status === 0 && logs.stdout.includes(name) && /StatefulSet/.test(logs.stdout);
      },
      { timeoutMs: 60_000, intervalMs: 2000 },
    );
  });

  test('metrics are served through the metrics Service (from a pod, over the Service name)', async () => {
    const run = kubectl(
      '-n',
      'default',
      'run',
      'scraper',
      '--image=opkit.local/shell:1',
      '--image-pull-policy=Never',
      '--restart=Never',
      '--',
      'sleep',
      '3600',
    );
    assert.equal(run.status, 0, run.stderr);
    await eventually(
      'the scraper pod Ready',
      async () => ready(await client!.get(Pods, { namespace: 'default', name: 'scraper' })),
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    const script =
      `exec 3<>/dev/tcp/${MANAGER}-metrics.${NS}.svc.cluster.local/8080 && ` +
      `printf 'GET /metrics HTTP/1.0\\r\\nHost: metrics\\r\\n\\r\\n' >&3 && cat <&3`;
    const body = await eventually(
      'a /metrics answer through the Service',
      () => {
        const r = kubectl('-n', 'default', 'exec', 'scraper', '--', 'bash', '-c', script);
        return r.status === 0 && /^HTTP\/1\.[01] 200/.test(r.stdout) ? r.stdout : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 2000 },
    );
    assert.match(body, /^controller_runtime_reconcile_total\{/m);
    assert.match(body, /^leader_election_master_status\{/m);
  });

  test('deleting the leader pod: the other replica takes the Lease within leaseDuration + retryPeriod', async () => {
    const lease = await client!.get(Leases, { namespace: NS, name: LEASE });
    const holder = lease.spec!.holderIdentity!;
    const leader = holder.slice(0, holder.lastIndexOf('_'));
    const others = (await managerPods()).map((p) => p.metadata.name).filter((n) => n !== leader);
    assert.equal(others.length, 1, 'one standby replica');
    const bound = (lease.spec!.leaseDurationSeconds ?? 15) + RETRY_PERIOD_S + SLACK_S;
    const started = Date.now();
    await client!.delete(Pods, { namespace: NS, name: leader });
    const next = await eventually(
      'a new Lease holder',
      async () => {
        const h = (await client!.get(Leases, { namespace: NS, name: LEASE })).spec?.holderIdentity;
        return h && h !== holder ? h : undefined;
      },
      { timeoutMs: 300_000, intervalMs: 250 },
    );
    const seconds = (Date.now() - started) / 1000;
    assert.ok(next.startsWith(`${others[0]}_`), `the standby ${others[0]} leads, not ${next}`);
    assert.ok(seconds <= bound, `handed over in ${seconds.toFixed(1)} s, bound ${bound} s`);
    console.log(`# leader ${leader} deleted: ${others[0]} took the Lease after ${seconds.toFixed(1)} s`);
    // The Deployment replaces the deleted pod: two Ready replicas again, one leading.
    await eventually(
      'two Ready replicas again',
      async () => {
        const pods = await managerPods();
        return pods.length === 2 && pods.every(ready);
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    );
    const d = await client!.get(Deployments, { namespace: NS, name: MANAGER });
    assert.equal(d.spec?.replicas, 2);
  });
});

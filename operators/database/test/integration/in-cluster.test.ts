/**
 * The Database operator in the cluster, as a user deploys it (issue 16): its own Dockerfile built by
 * `opkit build --load` onto a real node, config/default (2 replicas, leader election) deployed by
 * `opkit deploy`, under the restricted Pod Security Standard with exactly the generated RBAC. The seed's
 * sample is reconciled by the in-cluster leader; a request RBAC forbids is a clear error in the leader's log
 * while the pods keep running; metrics are served through the metrics Service; deleting the leader pod hands
 * the Lease to the other replica within leaseDuration + retryPeriod. Then the same image through the Helm
 * chart (`opkit cluster helm`): installed, 2 replicas leading and reconciling, uninstalled leaving nothing of
 * the chart. One cluster for the whole file (the image build is the expensive part). Root only.
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
  CustomResourceDefinitions,
  createClient,
  Deployments,
  type KubeObject,
  Leases,
  loadConfig,
  Namespaces,
  Pods,
  type RestClient,
  RoleBindings,
  Roles,
  Secrets,
  ServiceAccounts,
  Services,
  StatefulSets,
} from '@opkit/runtime';
import { eventually } from '@opkit/runtime/testing';
import { parse } from 'yaml';
import {
  assertPodReadsCompileCache,
  expectOk,
  opkitProcess,
  tempDir,
  upRealCluster,
} from '../../../../packages/cli/test/helpers.ts';
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
const CRD = 'databases.myapp.example.com';
// The chart's release, in a namespace of its own (config/default's may still be terminating).
const HELM_NS = 'database-operator-helm';
const RELEASE = 'database-operator'; // the chart's fullname is the release name when it contains the chart's
const RELEASE_SELECTOR = `app.kubernetes.io/instance=${RELEASE}`;

type PodLike = KubeObject & {
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { restartCount: number }[];
  };
};
const ready = (p: PodLike) =>
  p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
const restarts = (p: PodLike) => (p.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
/** The pod name of a Lease holder identity (`<pod>_<uid>`). */
const podOf = (holder: string) => holder.slice(0, holder.lastIndexOf('_'));

describe('the Database operator in the cluster: 2 replicas, leader election, restricted PSS', {
  // Generous safety bounds, not timings: the first run on a machine also builds Helm (the last test).
  timeout: 3_000_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  const tmp = tempDir('opkit-db-in-cluster-');
  const cluster = `db-in-cluster-${process.pid}`;
  let kubeconfig = '';
  let realCluster: { kubeconfig: string; down(): Promise<void> } | undefined;
  let client: RestClient | undefined;
  const kubectl = (...args: string[]) =>
    spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', timeout: 120_000 });
  const managerPods = async (namespace = NS, labelSelector = SELECTOR) =>
    (await client!.list(Pods, { namespace, labelSelector })).items.filter(
      (p) => !p.metadata.deletionTimestamp,
    );
  const leaseHolder = async (namespace = NS) =>
    eventually(
      `the Lease in ${namespace} held`,
      async () =>
        (await client!.get(Leases, { namespace, name: LEASE }).catch(() => undefined))?.spec
          ?.holderIdentity || undefined,
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
  /** Creates the seed sample (under `name`) in default and waits for its StatefulSet, Service, ConfigMap, Secret. */
  const createSample = async (name: string) => {
    const sample = parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database;
    await client!.create(Databases.resource, { ...sample, metadata: { name, namespace: 'default' } });
    await eventually(
      `the children of ${name}`,
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
  };
  /** Deletes Databases in default and waits until they are gone (the operator removes its finalizer). */
  const deleteDatabases = async (...names: string[]) => {
    for (const name of names)
      await client!.delete(Databases.resource, { namespace: 'default', name }).catch(() => {});
    await eventually(
      `${names.join(', ')} deleted`,
      async () => {
        const left = await Promise.all(
          names.map((name) =>
            client!.get(Databases.resource, { namespace: 'default', name }).catch(() => undefined),
          ),
        );
        return left.every((d) => d === undefined);
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
  };
  const logsOf = (namespace: string, pod: string) => kubectl('-n', namespace, 'logs', pod, '-c', 'manager');
  /** The ENTRYPOINT's bundle, imported in `pod`'s manager container, reads the image's compile cache. */
  const assertReadsCompileCache = (namespace: string, pod: string) =>
    assertPodReadsCompileCache(
      kubeconfig,
      { namespace, target: pod, container: 'manager' },
      ['--max-semi-space-size=4', '--max-opt=2', '--heap-growing-percent=50'],
      '/app/operators/database/dist/main.js',
      ['file:///app/operators/database/dist/main.js'],
    );

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
      '--load',
      '--cluster',
      cluster,
    ]);
    expectOk('build --load', r);
    // Every step followed, the compile-cache warm-up too (an npm command: on the host, with the image's Node).
    assert.doesNotMatch(r.stderr, /skipped/);
    assert.match(r.stderr, /warmed Node's compile cache for dist\/main\.js: \d+ entries .*\(uid 65532,/);
    assert.match(r.stdout, new RegExp(`loaded ${IMAGE.replaceAll('.', '\\.')} into cluster`));
  });

  test('deploy config/default: its 2 replicas Ready in the restricted namespace, the Lease held by one', async () => {
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
    // 2 replicas come from config/default itself (its kustomize `replicas:`), not from a scale here.
    assert.equal((await client!.get(Deployments, { namespace: NS, name: MANAGER })).spec?.replicas, 2);
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
    const holder = await leaseHolder();
    const names = (await managerPods()).map((p) => p.metadata.name);
    assert.ok(names.includes(podOf(holder)), `holder ${holder} is one of ${names.join(', ')}`);
  });

  test("the manager's container reads the compile cache warmed at build time", async () => {
    assertReadsCompileCache(NS, (await managerPods())[0]!.metadata.name!);
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
    const name = (parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database).metadata.name!;
    await createSample(name);
    const sts = await client!.get(StatefulSets, { namespace: 'default', name });
    assert.equal(sts.metadata.ownerReferences?.[0]?.kind, 'Database');
    const leader = podOf(await leaseHolder());
    await eventually(
      "the leader's log shows the reconcile",
      () => {
        const logs = logsOf(NS, leader);
        return logs.status === 0 && logs.stdout.includes(name) && /StatefulSet/.test(logs.stdout);
      },
      { timeoutMs: 60_000, intervalMs: 2000 },
    );
  });

  test('a request RBAC forbids: a clear error in the leader log naming verb and resource; the pods keep running', async () => {
    // Take `create` off the Secrets rule of the manager's ClusterRole, as a too-narrow RBAC would.
    const roleName = (
      parse(readFileSync(join(OPERATOR_DIR, 'config/rbac/role.yaml'), 'utf8')) as {
        metadata: { name: string };
      }
    ).metadata.name;
    const role = await client!.get(ClusterRoles, { name: roleName });
    const original = structuredClone(role.rules);
    const secretsRule = role.rules!.find((r) => r.resources?.includes('secrets'))!;
    secretsRule.verbs = secretsRule.verbs.filter((v) => v !== 'create');
    await client!.update(ClusterRoles, role);
    const as = `--as=system:serviceaccount:${NS}:${SA}`;
    await eventually(
      'create secrets forbidden to the manager',
      () => kubectl('auth', 'can-i', 'create', 'secrets', '-n', 'default', as).stdout.trim() === 'no',
    );
    const before = new Map((await managerPods()).map((p) => [p.metadata.name, restarts(p)]));
    const leader = podOf(await leaseHolder());
    const name = 'forbidden-db';
    const sample = parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database;
    await client!.create(Databases.resource, { ...sample, metadata: { name, namespace: 'default' } });
    // The API server's refusal names the verb and resource; the log line carries it and the Database.
    const line = await eventually(
      "the refusal in the leader's log",
      () => {
        const logs = logsOf(NS, leader);
        return logs.stdout
          .split('\n')
          .find((l) => l.includes('cannot create resource \\"secrets\\"') && l.includes(name));
      },
      { timeoutMs: 120_000, intervalMs: 2000 },
    );
    console.log(`# the forbidden create, as logged: ${line.slice(0, 600)}`);
    const entry = JSON.parse(line) as { level: number | string; msg: string };
    assert.ok(
      entry.level === 50 || entry.level === 'error' || entry.level === 40 || entry.level === 'warn',
      line,
    );
    assert.match(line, /forbidden/);
    // Not a crash loop: a while later the same pods run, Ready, never restarted.
    await new Promise((r) => setTimeout(r, 20_000));
    const after = await managerPods();
    assert.deepEqual(after.map((p) => p.metadata.name).sort(), [...before.keys()].sort());
    for (const p of after) {
      assert.equal(p.status?.phase, 'Running', p.metadata.name);
      assert.ok(ready(p), `${p.metadata.name} Ready`);
      assert.equal(restarts(p), before.get(p.metadata.name), `${p.metadata.name} restarts`);
    }
    // The rule back: the retries (with backoff) create the Secret, nobody restarts anything.
    const current = await client!.get(ClusterRoles, { name: roleName });
    await client!.update(ClusterRoles, { ...current, rules: original });
    await eventually(
      `${name}'s Secret once create is allowed again`,
      async () =>
        (await client!
          .get(Secrets, { namespace: 'default', name: `${name}-credentials` })
          .catch(() => undefined)) !== undefined,
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    await deleteDatabases(name);
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
    const leader = podOf(holder);
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
    // The deleted leader releases the Lease on SIGTERM: the standby usually takes it, but the Deployment's
    // replacement pod may win the race (seen once in a fresh-clone CI run); either is another live replica.
    const live = (await managerPods()).map((p) => p.metadata.name).filter((n) => n !== leader);
    assert.ok(!next.startsWith(`${leader}_`), `the deleted leader ${leader} leads again: ${next}`);
    assert.ok(
      live.some((n) => next.startsWith(`${n}_`)),
      `a live replica leads (${live.join(', ')}), not ${next}`,
    );
    assert.ok(seconds <= bound, `handed over in ${seconds.toFixed(1)} s, bound ${bound} s`);
    console.log(`# leader ${leader} deleted: ${podOf(next)} took the Lease after ${seconds.toFixed(1)} s`);
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

  // Its own bound: the first run builds Helm from the Go module proxy (minutes; see the README's table).
  test('the Helm chart: installed with 2 replicas leading and reconciling, uninstalled leaving nothing of it', {
    timeout: 1_800_000,
  }, async () => {
    // config/default out first (its Databases deleted while their operator still runs, then undeploy).
    await deleteDatabases((parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database).metadata.name!);
    expectOk('undeploy', await opkitProcess(OPERATOR_DIR, ['undeploy', '--kubeconfig', kubeconfig]));
    await eventually(
      'the CRD gone (the chart installs it again from crds/)',
      async () =>
        (await client!.get(CustomResourceDefinitions, { name: CRD }).catch(() => undefined)) === undefined,
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    // The namespace the user creates for it, enforcing the restricted standard like config/default's.
    await client!.create(Namespaces, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: HELM_NS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    });
    const [repository, tag] = IMAGE.split(':') as [string, string];
    const helm = (...args: string[]) =>
      opkitProcess(OPERATOR_DIR, ['cluster', 'helm', '--name', cluster, '--', ...args]);
    // Two replicas without leader election would reconcile twice at once: the chart refuses to render it.
    const refused = await helm('template', RELEASE, 'chart', '--set', 'leaderElection.enabled=false');
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /replicas > 1 needs leaderElection\.enabled=true/);
    const started = Date.now();
    const install = await helm(
      'install',
      RELEASE,
      'chart',
      '-n',
      HELM_NS,
      '--set',
      `image.repository=${repository}`,
      '--set',
      `image.tag=${tag}`,
      '--wait',
      '--timeout',
      '10m',
    );
    expectOk('helm install', install);
    console.log(
      `# helm install --wait: ${((Date.now() - started) / 1000).toFixed(1)} s (with helm's build if it was not cached)`,
    );
    assert.match(install.stdout, /STATUS: deployed/);
    const d = await client!.get(Deployments, { namespace: HELM_NS, name: RELEASE });
    assert.equal(d.spec?.replicas, 2, "the chart's default replicas");
    await eventually(
      'two Ready pods of the release running the image',
      async () => {
        const pods = await managerPods(HELM_NS, RELEASE_SELECTOR);
        return pods.length === 2 && pods.every((p) => ready(p) && p.spec!.containers[0]!.image === IMAGE);
      },
      { timeoutMs: 300_000, intervalMs: 1000 },
    );
    const pods = (await managerPods(HELM_NS, RELEASE_SELECTOR)).map((p) => p.metadata.name);
    const leader = podOf(await leaseHolder(HELM_NS));
    assert.ok(pods.includes(leader), `the Lease holder ${leader} is one of ${pods.join(', ')}`);
    // The chart runs the image's USER: the compile cache warmed for it is read.
    assertReadsCompileCache(HELM_NS, leader);
    // The chart's RBAC is the generated one too.
    const generated = parse(readFileSync(join(OPERATOR_DIR, 'config/rbac/role.yaml'), 'utf8')) as {
      rules: unknown[];
    };
    assert.deepEqual(
      (await client!.get(ClusterRoles, { name: `${RELEASE}-manager` })).rules,
      generated.rules,
    );

    const name = 'helm-db';
    await createSample(name);
    await eventually(
      "the chart's leader logs the reconcile",
      () => {
        const logs = logsOf(HELM_NS, leader);
        return logs.status === 0 && logs.stdout.includes(name) && /StatefulSet/.test(logs.stdout);
      },
      { timeoutMs: 60_000, intervalMs: 2000 },
    );
    await deleteDatabases(name);

    const uninstall = await helm('uninstall', RELEASE, '-n', HELM_NS, '--wait', '--timeout', '5m');
    expectOk('helm uninstall', uninstall);
    const left = async () => {
      const inNs = await Promise.all(
        [Deployments, Services, ServiceAccounts, Roles, RoleBindings, Pods].map(async (res) =>
          (await client!.list(res, { namespace: HELM_NS, labelSelector: RELEASE_SELECTOR })).items.map(
            (o) => `${o.kind ?? res.kind}/${o.metadata.name}`,
          ),
        ),
      );
      const clusterWide = await Promise.all(
        [ClusterRoles, ClusterRoleBindings].map(async (res) =>
          (await client!.list(res, { labelSelector: RELEASE_SELECTOR })).items.map(
            (o) => `${res.kind}/${o.metadata.name}`,
          ),
        ),
      );
      // The release record (Helm keeps it in a Secret of the namespace).
      const records = (
        await client!.list(Secrets, { namespace: HELM_NS, labelSelector: 'owner=helm' })
      ).items.map((o) => `Secret/${o.metadata.name}`);
      return [...inNs.flat(), ...clusterWide.flat(), ...records];
    };
    await eventually('nothing of the release left', async () => (await left()).length === 0, {
      timeoutMs: 120_000,
      intervalMs: 1000,
    });
    // Helm never deletes what it installed from crds/ (its documented rule, so Databases are not lost): the
    // CRD stays until `kubectl delete crd databases.myapp.example.com`.
    assert.ok(await client!.get(CustomResourceDefinitions, { name: CRD }));
  });
});

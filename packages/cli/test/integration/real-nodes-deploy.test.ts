/**
 * The seed's workflow for real, on a mixed cluster with one real node: init -> create api -> generate ->
 * build --load (opkit's builder, no engine) -> deploy (waits for the manager pod) -> the sample reconciled
 * by the in-cluster manager (its pod's log shows it) -> undeploy leaves nothing of it. Root only.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ClusterRoles,
  type Condition,
  CustomResourceDefinitions,
  createClient,
  defineResource,
  findCondition,
  type KubeObject,
  loadConfig,
  Namespaces,
  Pods,
  type RestClient,
} from '@opkit/runtime';
import { eventually } from '@opkit/runtime/testing';
import { parse } from 'yaml';
import {
  assertPodReadsCompileCache,
  expectOk,
  opkitProcess,
  REPO_ROOT,
  read,
  scaffold,
  tempDir,
  upRealCluster,
} from '../helpers.ts';

type Database = KubeObject & { spec: { size?: number }; status?: { conditions?: Condition[] } };
const Databases = defineResource<Database>({
  group: 'myapp.example.com',
  version: 'v1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});

const IMAGE = 'opkit.local/db-op:dev';
const NS = 'db-op-system';
const MANAGER = 'db-op-controller-manager';

describe('opkit build --load and deploy run the operator on a real node', {
  timeout: 1_200_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  const tmp = tempDir('opkit-real-deploy-');
  const dir = join(tmp.dir, 'db-op');
  const cluster = `h-deploy-${process.pid}`;
  let kubeconfig = '';
  let realCluster: { kubeconfig: string; down(): Promise<void> } | undefined;
  let client: RestClient | undefined;
  const kubectl = (...args: string[]) =>
    spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', timeout: 60_000 });

  before(async () => {
    mkdirSync(dir);
    await scaffold(dir);
    expectOk('generate', await opkitProcess(dir, ['generate']));
    realCluster = await upRealCluster(dir, cluster);
    kubeconfig = realCluster.kubeconfig;
    client = createClient(loadConfig({ kubeconfig }), { fieldManager: 'real-deploy-test' });
  });
  after(async () => {
    client?.close();
    await realCluster?.down();
    tmp[Symbol.dispose]();
  });

  test('build: the Dockerfile followed onto opkit.local/node:24, an OCI archive, loaded into the real node', async () => {
    const r = await opkitProcess(dir, ['build', '--image', IMAGE, '--load', '--cluster', cluster]);
    expectOk('build --load', r);
    assert.match(
      r.stdout,
      /built opkit\.local\/db-op:dev on opkit\.local\/node:24 \(the local stand-in for node:24-slim/,
    );
    assert.match(r.stdout, /loaded opkit\.local\/db-op:dev into cluster/);
    assert.match(r.stderr, /RUN npm install --omit=dev .*\(on the host, in the layer\)/);
    // The image: the base's layer + one with the app, the Dockerfile's USER and ENTRYPOINT.
    const list = spawnSync('tar', ['-tf', join(dir, '.opkit/image.oci.tar')], { encoding: 'utf8' });
    assert.equal(list.status, 0);
    const work = join(tmp.dir, 'image');
    mkdirSync(work);
    spawnSync('tar', ['-C', work, '-xf', join(dir, '.opkit/image.oci.tar')]);
    const blob = (d: string) => join(work, 'blobs/sha256', d.slice(7));
    const index = JSON.parse(readFileSync(join(work, 'index.json'), 'utf8'));
    assert.equal(index.manifests[0].annotations['io.containerd.image.name'], IMAGE);
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0].digest), 'utf8'));
    assert.equal(manifest.layers.length, 2);
    const config = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8')).config;
    assert.equal(config.User, '65532:65532');
    assert.deepEqual(config.Entrypoint, ['node', '--max-semi-space-size=4', 'src/main.ts']);
    assert.equal(config.WorkingDir, '/app');
    assert.ok(config.Env.includes('NODE_ENV=production'));
    const app = spawnSync('tar', ['-tf', blob(manifest.layers[1].digest)], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    assert.match(app.stdout, /^\.\/app\/src\/main\.ts$/m);
    assert.match(app.stdout, /^\.\/app\/vendor\/opkit-runtime\/package\.json$/m);
    assert.match(app.stdout, /^\.\/app\/node_modules\/yaml\/package\.json$/m);
    // npm links the file: dependency; the link must stay relative to work inside the image.
    const verbose = spawnSync('tar', ['-tvf', blob(manifest.layers[1].digest)], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    assert.match(
      verbose.stdout,
      /\.\/app\/node_modules\/@opkit\/runtime -> \.\.\/\.\.\/vendor\/opkit-runtime$/m,
    );
    assert.doesNotMatch(app.stdout, /node_modules\/@opkit\/controlplane\//, 'production dependencies only');
    // Node's compile cache, warmed on the host for the image's USER (its directory's name ends with the uid).
    assert.match(r.stderr, /warmed Node's compile cache for src\/main\.ts: \d+ entries .*\(uid 65532,/);
    assert.match(app.stdout, /^\.\/app\/\.node-compile-cache\/v24\.[\d.]+-x64-[0-9a-f]+-65532\/[0-9a-f]+$/m);
    assert.ok(config.Env.includes('NODE_COMPILE_CACHE=/app/.node-compile-cache'));
  });

  test('deploy of an image the node does not have fails early, naming the reason and the next step', async () => {
    const r = await opkitProcess(dir, [
      'deploy',
      '--image',
      'opkit.local/db-op:not-loaded',
      '--kubeconfig',
      kubeconfig,
      '--timeout',
      '600',
    ]);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(
      r.stderr,
      /error: the manager cannot start: pod db-op-controller-manager-\S+, container manager: (ErrImagePull|ImagePullBackOff)/,
    );
    assert.match(
      r.stderr,
      /next: nothing can be pulled here: build and load the image first \(opkit build --image opkit\.local\/db-op:not-loaded --load\)/,
    );
  });

  test('deploy waits until the manager pod is Ready on the real node', async () => {
    const r = await opkitProcess(dir, [
      'deploy',
      '--image',
      IMAGE,
      '--kubeconfig',
      kubeconfig,
      '--timeout',
      '600',
    ]);
    expectOk('deploy', r);
    assert.match(
      r.stderr,
      /==> waiting for the manager Deployment db-op-system\/db-op-controller-manager to be Ready/,
    );
    assert.match(r.stderr, /db-op-controller-manager: 1\/1 ready/);
    const pods = await client!.list(Pods, {
      namespace: NS,
      labelSelector: 'control-plane=controller-manager',
    });
    // The pod of the earlier rollout (the image that was not loaded) may still be terminating.
    const current = pods.items.filter(
      (p) => p.spec!.containers[0]!.image === IMAGE && !p.metadata.deletionTimestamp,
    );
    assert.equal(current.length, 1, `one manager pod runs ${IMAGE}`);
    const pod = current[0]!;
    const node = kubectl(
      'get',
      'node',
      pod.spec!.nodeName!,
      '-o',
      'jsonpath={.metadata.labels.opkit\\.dev/node}',
    );
    assert.equal(node.stdout, 'real', `the manager runs on the real node, not ${pod.spec!.nodeName}`);
  });

  test("the manager's container reads the compile cache warmed at build time (no module compiled again)", () => {
    // What the ENTRYPOINT loads, as the container's user, with the image's environment and Node.
    assertPodReadsCompileCache(
      kubeconfig,
      { namespace: NS, target: `deployment/${MANAGER}`, container: 'manager' },
      ['--max-semi-space-size=4'],
      '/app/src/main.ts',
      ['file:///app/src/main.ts', 'file:///app/vendor/opkit-runtime/src/index.ts'],
    );
  });

  test('the in-cluster manager reconciles the sample (its log shows it)', async () => {
    const sample = parse(read(dir, 'config/samples/myapp_v1_database.yaml')) as Database;
    await client!.create(Databases, { ...sample, metadata: { ...sample.metadata, namespace: 'default' } });
    await eventually(
      "the sample's Ready condition, set by the in-cluster manager",
      async () => {
        const db = await client!.get(Databases, { namespace: 'default', name: sample.metadata.name! });
        return findCondition(db.status?.conditions, 'Ready')?.status === 'True';
      },
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
    const logs = kubectl('-n', NS, 'logs', `deployment/${MANAGER}`, '-c', 'manager');
    assert.equal(logs.status, 0, logs.stderr);
    assert.match(logs.stdout, /"msg":"status updated"/);
    assert.match(logs.stdout, new RegExp(sample.metadata.name!));
  });

  test('undeploy leaves nothing of it', async () => {
    expectOk('undeploy', await opkitProcess(dir, ['undeploy', '--kubeconfig', kubeconfig]));
    const gone = (p: Promise<unknown>) =>
      p.then(
        () => false,
        (err: Error) => /not found/i.test(err.message),
      );
    await eventually(
      'the namespace, the CRD and the ClusterRole gone',
      async () =>
        (await gone(client!.get(Namespaces, { name: NS }))) &&
        (await gone(client!.get(CustomResourceDefinitions, { name: 'databases.myapp.example.com' }))) &&
        (await gone(client!.get(ClusterRoles, { name: 'db-op-manager-role' }))),
      { timeoutMs: 180_000, intervalMs: 1000 },
    );
  });

  test("build --context: the Database operator's own Dockerfile from the repository root (npm ci --workspace)", async () => {
    const archive = join(tmp.dir, 'database-operator.oci.tar');
    const r = await opkitProcess(join(REPO_ROOT, 'operators/database'), [
      'build',
      '--context',
      '../..',
      '--file',
      'Dockerfile',
      '--image',
      'opkit.local/database-operator:dev',
      '--archive',
      archive,
    ]);
    expectOk('build --context', r);
    assert.match(r.stdout, /on opkit\.local\/node:24 \(the local stand-in for node:24-bookworm-slim/);
    const work = join(tmp.dir, 'db-image');
    mkdirSync(work);
    spawnSync('tar', ['-C', work, '-xf', archive]);
    const blob = (d: string) => join(work, 'blobs/sha256', d.slice(7));
    const index = JSON.parse(readFileSync(join(work, 'index.json'), 'utf8'));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0].digest), 'utf8'));
    const config = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8')).config;
    assert.equal(config.User, '65532:65532');
    assert.equal(config.WorkingDir, '/app/operators/database');
    assert.deepEqual(config.Cmd, [
      '--leader-elect',
      '--metrics-bind-address=:8080',
      '--health-probe-bind-address=:8081',
    ]);
    assert.deepEqual(Object.keys(config.ExposedPorts).sort(), ['8080/tcp', '8081/tcp']);
    const app = spawnSync('tar', ['-tvf', blob(manifest.layers[1].digest)], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    assert.match(app.stdout, /\.\/app\/operators\/database\/src\/main\.ts$/m);
    assert.match(app.stdout, /\.\/app\/node_modules\/@opkit\/runtime -> \.\.\/\.\.\/packages\/runtime$/m);
    assert.match(app.stdout, /\.\/app\/packages\/runtime\/src\/index\.ts$/m);
    // Every RUN step followed (none skipped), the compile cache warmed for the image's USER.
    assert.doesNotMatch(r.stderr, /skipped/);
    assert.match(r.stderr, /warmed Node's compile cache for dist\/main\.js: \d+ entries .*\(uid 65532,/);
    assert.match(app.stdout, /\.\/app\/\.node-compile-cache\/v24\.[\d.]+-x64-[0-9a-f]+-65532\/[0-9a-f]+$/m);
  });
});

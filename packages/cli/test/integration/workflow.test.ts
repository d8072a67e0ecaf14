/**
 * The whole workflow in a temporary folder, as a new user would run it:
 * init -> create api -> generate -> npm install -> type-check -> the project's own unit (and integration) tests ->
 * install the CRD into a local control plane -> run the operator -> a sample is reconciled ->
 * deploy applies the manager Deployment and RBAC -> undeploy; and the image's build context works alone.
 * Every generated file is checked for content.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  ClusterRoleBindings,
  ClusterRoles,
  type Condition,
  CustomResourceDefinitions,
  createClient,
  Deployments,
  defineResource,
  findCondition,
  type KubeObject,
  loadConfig,
  Namespaces,
  type RestClient,
  RoleBindings,
  Roles,
  ServiceAccounts,
} from '@opkit/runtime';
import { parse } from 'yaml';
import { expectOk, MAIN, opkitProcess, REPO_ROOT, read, readYaml, run, tempDir } from '../helpers.ts';

type Database = KubeObject & {
  spec: { size?: number };
  status?: { observedGeneration?: number; conditions?: Condition[] };
};
const Databases = defineResource<Database>({
  group: 'myapp.example.com',
  version: 'v1',
  kind: 'Database',
  plural: 'databases',
  namespaced: true,
});
type Review = KubeObject & { spec: Record<string, unknown>; status?: { allowed: boolean } };
const SubjectAccessReviews = defineResource<Review>({
  group: 'authorization.k8s.io',
  version: 'v1',
  kind: 'SubjectAccessReview',
  plural: 'subjectaccessreviews',
  namespaced: false,
});

const NAMESPACE = 'database-operator-system';
const SERVICE_ACCOUNT = `system:serviceaccount:${NAMESPACE}:database-operator-controller-manager`;
const IMAGE = 'registry.example.com/database-operator:v0.1.0';

async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

describe('opkit workflow, from nothing to a deployed operator', { timeout: 900_000 }, () => {
  const tmp = tempDir('opkit-workflow-');
  const dir = join(tmp.dir, 'database-operator');
  let cp: ControlPlane | undefined;
  let client: RestClient | undefined;
  let operator: ChildProcess | undefined;

  before(() => mkdirSync(dir));
  after(async () => {
    if (operator && operator.exitCode === null) operator.kill('SIGKILL');
    client?.close();
    await cp?.stop();
    tmp[Symbol.dispose]();
  });

  test('opkit init scaffolds the project', async () => {
    const r = await opkitProcess(dir, [
      'init',
      '--domain',
      'example.com',
      '--repo',
      'github.com/myapp/database-operator',
    ]);
    expectOk('init', r);
    assert.match(r.stdout, /created project database-operator/);
    assert.deepEqual(readYaml(dir, 'PROJECT'), {
      domain: 'example.com',
      layout: ['typescript.opkit.dev/v1alpha1'],
      projectName: 'database-operator',
      repo: 'github.com/myapp/database-operator',
      resources: [],
      runtime: 'local',
      version: '3',
    });
  });

  test('opkit create api adds the Database kind', async () => {
    const r = await opkitProcess(dir, [
      'create',
      'api',
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Database',
      '--resource',
      '--controller',
    ]);
    expectOk('create api', r);
    assert.match(r.stdout, /created Database \(myapp\.example\.com\/v1\)/);
    assert.match(read(dir, 'src/api/v1/database.ts'), /group: 'myapp\.example\.com',/);
    assert.match(read(dir, 'src/main.ts'), /setupDatabaseController\(mgr\);/);
    assert.deepEqual(
      readYaml<{ resources: Array<{ kind: string; group: string; version: string; controller: boolean }> }>(
        dir,
        'PROJECT',
      ).resources.map((x) => [x.group, x.version, x.kind, x.controller]),
      [['myapp', 'v1', 'Database', true]],
    );
  });

  test('opkit generate writes the CRD, RBAC and manager manifests', async () => {
    const r = await opkitProcess(dir, ['generate']);
    expectOk('generate', r);
    const crd = readYaml<{
      metadata: { name: string };
      spec: {
        group: string;
        names: { kind: string; plural: string };
        scope: string;
        versions: Array<{
          name: string;
          storage: boolean;
          subresources: unknown;
          schema: {
            openAPIV3Schema: {
              properties: { spec: { properties: { size: { type: string; default: number } } } };
            };
          };
        }>;
      };
    }>(dir, 'config/crd/bases/myapp.example.com_databases.yaml');
    assert.equal(crd.metadata.name, 'databases.myapp.example.com');
    assert.equal(crd.spec.group, 'myapp.example.com');
    assert.deepEqual(
      [crd.spec.names.kind, crd.spec.names.plural, crd.spec.scope],
      ['Database', 'databases', 'Namespaced'],
    );
    assert.equal(crd.spec.versions[0]!.name, 'v1');
    assert.equal(crd.spec.versions[0]!.storage, true);
    assert.deepEqual(crd.spec.versions[0]!.subresources, { status: {} });
    assert.deepEqual(
      crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties.size.type,
      'integer',
    );
    const role = readYaml<{ rules: unknown[] }>(dir, 'config/rbac/role.yaml');
    assert.deepEqual(role.rules, [
      {
        apiGroups: ['myapp.example.com'],
        resources: ['databases'],
        verbs: ['get', 'list', 'patch', 'update', 'watch'],
      },
      { apiGroups: ['myapp.example.com'], resources: ['databases/finalizers'], verbs: ['update'] },
      {
        apiGroups: ['myapp.example.com'],
        resources: ['databases/status'],
        verbs: ['get', 'patch', 'update'],
      },
    ]);
    assert.match(
      read(dir, 'config/manager/manager.yaml'),
      /name: database-operator-controller-manager\n {2}namespace: database-operator-system/,
    );
    const sample = readYaml<{ apiVersion: string; kind: string; spec: { size: number } }>(
      dir,
      'config/samples/myapp_v1_database.yaml',
    );
    assert.deepEqual(
      [sample.apiVersion, sample.kind, sample.spec],
      ['myapp.example.com/v1', 'Database', { size: 1 }],
    );
    expectOk('generate --check', await opkitProcess(dir, ['generate', '--check']));
  });

  test("npm install, type-check and the project's own unit tests", async () => {
    const install = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], dir);
    expectOk('npm install', install);
    assert.ok(existsSync(join(dir, 'node_modules/@opkit/runtime/src/index.ts')));
    expectOk('tsc', await run(join(REPO_ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.json'], dir));
    const unit = await run('npm', ['test'], dir);
    expectOk('npm test', unit);
    assert.match(unit.stdout, /ℹ pass 1\nℹ fail 0/);
    // The project's own generate script (the installed @opkit/cli) agrees with opkit generate.
    const generate = await run('npm', ['run', '--silent', 'generate', '--', '--check'], dir);
    expectOk('npm run generate -- --check', generate);
    // The kind (with update/patch for finalizers), its status, and its finalizers subresource.
    assert.match(generate.stdout, /config\/ is up to date \(Database; 3 RBAC rules\)/);
  });

  test("the project's own integration test (its helper starts a control plane) passes", async () => {
    const r = await run('npm', ['run', 'test:integration'], dir);
    expectOk('npm run test:integration', r);
    assert.match(r.stdout, /✔ a new Database gets its defaults and becomes Ready/);
    assert.match(r.stdout, /ℹ pass 2\nℹ fail 0/);
  });

  test('opkit install puts the CRD into a local control plane', async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'workflow-test' });
    const r = await opkitProcess(dir, ['install', '--kubeconfig', cp.kubeconfigPath]);
    expectOk('install', r);
    assert.match(r.stderr, /==> installing 1 CRD into https:\/\/127\.0\.0\.1:\d+/);
    assert.match(r.stdout, /installed databases\.myapp\.example\.com/);
    const crd = (await client.get(CustomResourceDefinitions, {
      name: 'databases.myapp.example.com',
    })) as KubeObject & { spec: { group: string } };
    assert.equal(crd.spec.group, 'myapp.example.com');
    assert.ok(await client.isServed(Databases));
  });

  test('opkit run runs the operator, and the sample becomes Ready', async () => {
    assert.ok(cp && client);
    let output = '';
    operator = spawn(
      process.execPath,
      [
        MAIN,
        'run',
        '--kubeconfig',
        cp.kubeconfigPath,
        '--',
        '--health-probe-bind-address=127.0.0.1:0',
        '--metrics-bind-address=0',
      ],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    operator.stdout!.on('data', (d) => {
      output += d;
    });
    operator.stderr!.on('data', (d) => {
      output += d;
    });
    const exited = new Promise<number | null>((resolve) => operator!.on('exit', (code) => resolve(code)));

    const sample = parse(read(dir, 'config/samples/myapp_v1_database.yaml')) as Database;
    await client.create(Databases, { ...sample, metadata: { ...sample.metadata, namespace: 'default' } });
    const ready = await eventually("the sample's Ready condition", async () => {
      const db = await client!.get(Databases, { namespace: 'default', name: 'database-sample' });
      return findCondition(db.status?.conditions, 'Ready')?.status === 'True' ? db : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}\noperator output:\n${output}`);
    });
    assert.equal(findCondition(ready.status?.conditions, 'Ready')?.reason, 'Reconciled');
    assert.equal(ready.status?.observedGeneration, ready.metadata.generation);
    assert.match(output, /running the operator against/);
    assert.match(output, /"msg":"status updated"/);

    operator.kill('SIGTERM');
    assert.equal(await exited, 0, `the operator stops cleanly on SIGTERM:\n${output}`);
    assert.match(output, /manager stopped/);
  });

  test('opkit deploy applies the manager Deployment and least-privilege RBAC', async () => {
    assert.ok(cp && client);
    // An API server alone runs no pods: --no-wait (real-deploy.test.ts waits for a real manager).
    const r = await opkitProcess(dir, [
      'deploy',
      '--image',
      IMAGE,
      '--no-wait',
      '--kubeconfig',
      cp.kubeconfigPath,
    ]);
    expectOk('deploy', r);
    assert.match(
      r.stdout,
      new RegExp(
        `deployed database-operator to namespace ${NAMESPACE} with image ${IMAGE.replaceAll('.', '\\.')}`,
      ),
    );
    await client.get(Namespaces, { name: NAMESPACE });
    const deployment = await client.get(Deployments, {
      namespace: NAMESPACE,
      name: 'database-operator-controller-manager',
    });
    const container = deployment.spec!.template.spec!.containers[0]!;
    assert.equal(container.image, IMAGE);
    assert.deepEqual(container.args, [
      '--leader-elect',
      '--health-probe-bind-address=:8081',
      '--metrics-bind-address=:8080',
    ]);
    assert.equal(deployment.spec!.template.spec!.serviceAccountName, 'database-operator-controller-manager');
    await client.get(ServiceAccounts, { namespace: NAMESPACE, name: 'database-operator-controller-manager' });
    const role = await client.get(ClusterRoles, { name: 'database-operator-manager-role' });
    assert.deepEqual(role.rules, readYaml<{ rules: unknown }>(dir, 'config/rbac/role.yaml').rules);
    const binding = await client.get(ClusterRoleBindings, { name: 'database-operator-manager-rolebinding' });
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: 'database-operator-controller-manager', namespace: NAMESPACE },
    ]);
    await client.get(Roles, { namespace: NAMESPACE, name: 'database-operator-leader-election-role' });
    await client.get(RoleBindings, {
      namespace: NAMESPACE,
      name: 'database-operator-leader-election-rolebinding',
    });

    // What the manager's service account may do, asked of the API server's RBAC authorizer.
    const can = async (verb: string, resource: string, group: string, subresource = '') => {
      const review = await client!.create(SubjectAccessReviews, {
        metadata: { name: '' },
        spec: {
          user: SERVICE_ACCOUNT,
          groups: ['system:serviceaccounts'],
          resourceAttributes: { namespace: 'default', verb, group, resource, subresource },
        },
      } as Review);
      return review.status?.allowed === true;
    };
    assert.equal(await can('list', 'databases', 'myapp.example.com'), true);
    assert.equal(await can('watch', 'databases', 'myapp.example.com'), true);
    assert.equal(await can('patch', 'databases', 'myapp.example.com', 'status'), true);
    assert.equal(await can('delete', 'databases', 'myapp.example.com'), false, 'least privilege: no delete');
    assert.equal(await can('list', 'secrets', ''), false, 'least privilege: no secrets');

    const again = await opkitProcess(dir, [
      'deploy',
      '--image',
      IMAGE,
      '--no-wait',
      '--kubeconfig',
      cp.kubeconfigPath,
    ]);
    expectOk('deploy again (idempotent)', again);
  });

  test('opkit undeploy removes it', async () => {
    assert.ok(cp && client);
    const r = await opkitProcess(dir, ['undeploy', '--kubeconfig', cp.kubeconfigPath]);
    expectOk('undeploy', r);
    await assert.rejects(client.get(ClusterRoles, { name: 'database-operator-manager-role' }), /not found/i);
    await assert.rejects(
      client.get(Deployments, { namespace: NAMESPACE, name: 'database-operator-controller-manager' }),
      /not found/i,
    );
  });

  test('opkit build --engine (none works here) leaves a build context that installs and loads on its own', async () => {
    const bin = join(tmp.dir, 'fake-bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'docker'),
      '#!/bin/sh\n[ "$1" = "--version" ] && exit 0\necho "Cannot connect to the Docker daemon" >&2\nexit 1\n',
    );
    chmodSync(join(bin, 'docker'), 0o755);
    const context = join(tmp.dir, 'build-context');
    const r = await opkitProcess(
      dir,
      ['build', '--image', IMAGE, '--engine', 'docker', '--output', context],
      {
        ...process.env,
        PATH: `${bin}:${process.env.PATH}`,
      },
    );
    expectOk('build', r);
    assert.match(r.stdout, /no working container engine/);
    assert.match(
      readFileSync(join(context, 'Dockerfile'), 'utf8'),
      /ENTRYPOINT \["node", "--max-semi-space-size=4", "src\/main\.ts"\]/,
    );
    // What the Dockerfile's RUN does, outside the project: only production dependencies, from vendor/.
    expectOk(
      'npm install --omit=dev',
      await run(
        'npm',
        ['install', '--omit=dev', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline'],
        context,
      ),
    );
    assert.equal(existsSync(join(context, 'node_modules/@opkit/controlplane')), false);
    const load = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('./src/controllers/database/controller.ts'); console.log(typeof m.setupDatabaseController);",
      ],
      context,
    );
    expectOk('loading the operator from the build context', load);
    assert.equal(load.stdout.trim(), 'function');
  });
});

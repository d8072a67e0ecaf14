/** What init and create api write: every file's content, not only that it exists. */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { registerController } from '../../src/commands/create-api.ts';
import { packageDir } from '../../src/packages.ts';
import { type KindInfo, kindNames } from '../../src/templates/api.ts';
import { MAIN_CONTROLLERS_MARKER, MAIN_IMPORTS_MARKER, TOOL_VERSIONS } from '../../src/templates/project.ts';
import { opkit, REPO_ROOT, read, readYaml, scaffold, tempDir } from '../helpers.ts';

interface PackageJson {
  name: string;
  type: string;
  private: boolean;
  repository?: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  allowScripts: Record<string, boolean>;
}

describe('opkit init', () => {
  test('package.json: ESM, the scripts, the @opkit packages of this checkout, Node 24 as the root pins it', async () => {
    using tmp = tempDir('opkit-init-');
    const r = await opkit(tmp.dir, [
      'init',
      '--domain',
      'example.com',
      '--name',
      'db-op',
      '--repo',
      'github.com/me/db-op',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const pkg = JSON.parse(read(tmp.dir, 'package.json')) as PackageJson;
    assert.equal(pkg.name, 'db-op');
    assert.equal(pkg.type, 'module');
    assert.equal(pkg.private, true);
    assert.equal(pkg.repository, 'github.com/me/db-op');
    for (const s of ['generate', 'typecheck', 'test', 'start', 'build'])
      assert.ok(pkg.scripts[s], `script ${s}`);
    assert.equal(pkg.scripts.start, 'node --max-semi-space-size=4 src/main.ts');
    assert.equal(pkg.scripts.generate, 'node scripts/generate.ts');
    assert.equal(pkg.scripts.typecheck, 'tsc -p tsconfig.json');
    assert.match(pkg.scripts.test!, /node --test .*test\/unit/);
    assert.equal(pkg.dependencies['@opkit/runtime'], `file:${packageDir('@opkit/runtime')}`);
    assert.equal(pkg.devDependencies['@opkit/controlplane'], `file:${packageDir('@opkit/controlplane')}`);
    assert.equal(pkg.devDependencies['@opkit/cli'], `file:${packageDir('@opkit/cli')}`);
    assert.ok(existsSync(join(packageDir('@opkit/runtime'), 'src/index.ts')));
    assert.equal(pkg.allowScripts.node, true);
    const root = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as PackageJson;
    for (const tool of Object.keys(TOOL_VERSIONS) as Array<keyof typeof TOOL_VERSIONS>) {
      assert.equal(
        pkg.devDependencies[tool],
        root.devDependencies[tool],
        `${tool} as in the root package.json`,
      );
    }
  });

  test('PROJECT, tsconfig, main.ts, Dockerfile, README, test set-up, config/', async () => {
    using tmp = tempDir('opkit-init-');
    assert.equal((await opkit(tmp.dir, ['init', '--domain', 'example.com', '--name', 'db-op'])).code, 0);
    const project = readYaml(tmp.dir, 'PROJECT');
    assert.deepEqual(project, {
      domain: 'example.com',
      layout: ['typescript.opkit.dev/v1alpha1'],
      projectName: 'db-op',
      resources: [],
      runtime: 'local',
      version: '3',
    });
    const tsconfig = JSON.parse(read(tmp.dir, 'tsconfig.json')) as {
      compilerOptions: Record<string, unknown>;
      include: string[];
    };
    assert.equal(tsconfig.compilerOptions.strict, true);
    assert.equal(tsconfig.compilerOptions.erasableSyntaxOnly, true);
    assert.equal(tsconfig.compilerOptions.allowImportingTsExtensions, true);
    assert.equal(tsconfig.compilerOptions.noEmit, true);
    assert.deepEqual(tsconfig.include, ['src', 'test', 'scripts']);

    const main = read(tmp.dir, 'src/main.ts');
    assert.match(main, /import \{ createManager \} from '@opkit\/runtime';/);
    assert.match(main, /leaderElection: \{ enabled: values\['leader-elect'\], id: 'db-op\.example\.com' \}/);
    assert.match(main, /await mgr\.start\(\);/);
    // Imported (the image's compile-cache warm-up), it starts nothing.
    assert.match(main, /\nif \(import\.meta\.main\) await main\(process\.argv\.slice\(2\)\);\n$/);
    assert.ok(main.includes(MAIN_IMPORTS_MARKER) && main.includes(MAIN_CONTROLLERS_MARKER));

    const dockerfile = read(tmp.dir, 'Dockerfile');
    assert.match(dockerfile, /^FROM node:24-slim AS deps$/m);
    assert.match(dockerfile, /npm install --omit=dev/);
    assert.match(dockerfile, /^USER 65532:65532$/m);
    assert.match(dockerfile, /^ENTRYPOINT \["node", "--max-semi-space-size=4", "src\/main\.ts"\]$/m);
    // The compile cache is warmed with what the image runs: the ENTRYPOINT's arguments, for its USER.
    assert.match(dockerfile, /^ENV NODE_COMPILE_CACHE=\/app\/\.node-compile-cache$/m);
    assert.match(dockerfile, /^ENV NODE_COMPILE_CACHE_PORTABLE=1$/m);
    const warm = /^RUN npm exec -- opkit-warm-compile-cache --uid (\d+) -- (.+)$/m.exec(dockerfile);
    const entrypoint = JSON.parse(/^ENTRYPOINT (.+)$/m.exec(dockerfile)![1]!) as string[];
    assert.ok(warm, dockerfile);
    assert.equal(warm[2], entrypoint.slice(1).join(' '));
    assert.equal(`${warm[1]}:${warm[1]}`, /^USER (\S+)$/m.exec(dockerfile)![1]);
    assert.ok(
      dockerfile.indexOf('RUN npm exec') > dockerfile.indexOf('COPY src/'),
      'after the sources are in',
    );

    const readme = read(tmp.dir, 'README.md');
    assert.match(readme, /^# db-op$/m);
    assert.match(readme, /```sh\nnpx opkit cluster up {3}# .*\nnpm run dev {12}# .*\n```/);

    const helpers = read(tmp.dir, 'test/integration/helpers.ts');
    assert.match(helpers, /import \{ type ControlPlane, start \} from '@opkit\/controlplane';/);
    assert.match(helpers, /start\(\{ mode: 'apiserver' \}\)/);
    assert.match(helpers, /export async function startTestEnv/);

    assert.match(
      read(tmp.dir, 'scripts/generate.ts'),
      /runCli\(\['generate', \.\.\.process\.argv\.slice\(2\)\]/,
    );
    assert.deepEqual(readYaml(tmp.dir, 'config/default/kustomization.yaml'), {
      namespace: 'db-op-system',
      resources: ['../crd', '../rbac', '../manager'],
    });
    assert.deepEqual(readYaml(tmp.dir, 'config/crd/kustomization.yaml').resources, []);
    assert.deepEqual(readYaml(tmp.dir, 'config/samples/kustomization.yaml').resources, []);
    assert.deepEqual(readYaml(tmp.dir, 'config/rbac/role.yaml').rules, []);
    assert.match(read(tmp.dir, '.gitignore'), /^node_modules\/$/m);
    // Before any kind, config/ is what generate makes of it.
    assert.equal((await opkit(tmp.dir, ['generate', '--check'])).code, 0);
  });

  test('refuses a folder that is not empty, naming what is in the way; --force writes anyway', async () => {
    using tmp = tempDir('opkit-init-');
    writeFileSync(join(tmp.dir, 'notes.txt'), 'mine');
    mkdirSync(join(tmp.dir, 'src'));
    mkdirSync(join(tmp.dir, '.git'));
    const refused = await opkit(tmp.dir, ['init', '--domain', 'example.com', '--name', 'x']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /error: .* is not empty: notes\.txt, src are in the way/);
    assert.match(refused.stderr, /next: run opkit init in an empty folder .* or pass --force/);
    assert.equal(existsSync(join(tmp.dir, 'PROJECT')), false);
    const forced = await opkit(tmp.dir, ['init', '--domain', 'example.com', '--name', 'x', '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(read(tmp.dir, 'notes.txt'), 'mine');
    assert.ok(existsSync(join(tmp.dir, 'PROJECT')));
  });

  test('usage errors: no --domain, a bad domain, a bad runtime, a folder name that is no label', async () => {
    using tmp = tempDir('opkit-init-');
    const cases: Array<[string[], RegExp]> = [
      [['init'], /opkit init needs --domain/],
      [['init', '--domain', 'Example.COM'], /the domain "Example\.COM" is not a DNS-1123 subdomain/],
      [['init', '--domain', 'example.com', '--runtime', 'npm'], /--runtime must be local or tarball/],
      [
        ['init', '--domain', 'example.com', '--name', 'My_Operator'],
        /the project name "My_Operator" is not a DNS-1123 label.*"my-operator"/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await opkit(tmp.dir, args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message);
    }
    const weird = join(tmp.dir, '___');
    mkdirSync(weird);
    const r = await opkit(weird, ['init', '--domain', 'example.com']);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /cannot make a project name from the folder name "___"\nnext: pass one: --name my-operator/,
    );
  });
});

describe('opkit create api', () => {
  test('the schema, controller, reconcile, sample and tests of a namespaced kind', async () => {
    using tmp = tempDir('opkit-api-');
    await scaffold(tmp.dir, { generate: false });
    const api = read(tmp.dir, 'src/api/v1/database.ts');
    assert.match(api, /import \{ defineCustomResource, s, type TypeOf \} from '@opkit\/runtime';/);
    assert.match(api, /export const Databases = defineCustomResource\(\{/);
    assert.match(
      api,
      /group: 'myapp\.example\.com',\n {2}version: 'v1',\n {2}kind: 'Database',\n {2}plural: 'databases',\n {2}scope: 'Namespaced',/,
    );
    assert.match(api, /size: s\.integer\(\{/);
    assert.match(api, /conditions: s\s*\.conditions\(/);
    assert.match(api, /export type Database = TypeOf<typeof Databases>;/);

    const controller = read(tmp.dir, 'src/controllers/database/controller.ts');
    assert.match(controller, /export const rbac: RbacRule\[\] = \[/);
    assert.match(
      controller,
      /\{ resource: Databases\.resource, verbs: \['get', 'list', 'watch', 'update', 'patch'\] \}/,
    );
    assert.match(
      controller,
      /\{ resource: Databases\.resource, subresource: 'finalizers', verbs: \['update'\] \}/,
    );
    assert.match(controller, /subresource: 'status'/);
    assert.match(controller, /export function setupDatabaseController\(mgr: Manager\)/);
    assert.match(controller, /controllerFor\(mgr, Databases\.resource\)/);

    const reconcile = read(tmp.dir, 'src/controllers/database/reconcile.ts');
    assert.match(
      reconcile,
      /export function reconcileDatabase\(\{ client, cache \}: DatabaseReconcilerDeps\): Reconciler<Database>/,
    );
    assert.match(reconcile, /cache\.get\(Databases\.resource, req/);
    assert.match(reconcile, /patchStatus\(/);
    assert.match(reconcile, /type: 'Ready',\s+status: 'True',\s+reason: 'Reconciled'/);
    assert.match(reconcile, /observedGeneration: true/);

    assert.deepEqual(readYaml(tmp.dir, 'config/samples/myapp_v1_database.yaml'), {
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: {
        name: 'database-sample',
        labels: { 'app.kubernetes.io/name': 'db-op', 'app.kubernetes.io/managed-by': 'opkit' },
      },
      spec: { size: 1 },
    });
    const unit = read(tmp.dir, 'test/unit/database.test.ts');
    assert.match(unit, /import \{ FakeClient \} from '@opkit\/runtime\/testing';/);
    assert.match(unit, /namespace: 'default', name: 'sample'/);
    const integration = read(tmp.dir, 'test/integration/database.test.ts');
    assert.match(integration, /startTestEnv\(\[Databases\.crd\(\)\]\)/);

    const main = read(tmp.dir, 'src/main.ts');
    assert.match(
      main,
      /import \{ setupDatabaseController \} from '\.\/controllers\/database\/controller\.ts';\n\/\/ \+opkit:scaffold:imports/,
    );
    // Inside main(), indented as the marker is.
    assert.match(main, /\n {2}setupDatabaseController\(mgr\);\n {2}\/\/ \+opkit:scaffold:controllers\n/);

    assert.deepEqual(readYaml(tmp.dir, 'PROJECT').resources, [
      {
        api: { crdVersion: 'v1', namespaced: true },
        controller: true,
        domain: 'example.com',
        group: 'myapp',
        kind: 'Database',
        path: 'src/api/v1/database.ts',
        plural: 'databases',
        version: 'v1',
      },
    ]);
  });

  test('--namespaced=false makes a cluster-scoped kind; --plural is used; resources stay sorted in PROJECT', async () => {
    using tmp = tempDir('opkit-api-');
    await scaffold(tmp.dir, { generate: false });
    const r = await opkit(tmp.dir, [
      'create',
      'api',
      '--group',
      'infra',
      '--version',
      'v1alpha1',
      '--kind',
      'Cluster',
      '--namespaced=false',
      '--plural',
      'clusterz',
      '--generate=false',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const api = read(tmp.dir, 'src/api/v1alpha1/cluster.ts');
    assert.match(api, /scope: 'Cluster',/);
    assert.match(api, /plural: 'clusterz',/);
    assert.match(read(tmp.dir, 'test/unit/cluster.test.ts'), /metadata: \{ name: 'sample' \}/);
    assert.doesNotMatch(read(tmp.dir, 'test/unit/cluster.test.ts'), /namespace: 'default'/);
    const resources = readYaml<{ resources: Array<{ kind: string; api: { namespaced: boolean } }> }>(
      tmp.dir,
      'PROJECT',
    ).resources;
    assert.deepEqual(
      resources.map((x) => [x.kind, x.api.namespaced]),
      [
        ['Cluster', false],
        ['Database', true],
      ],
    );
    const main = read(tmp.dir, 'src/main.ts');
    assert.equal(main.match(/setupClusterController\(mgr\);/g)?.length, 1);
    assert.equal(main.match(/setupDatabaseController\(mgr\);/g)?.length, 1);
  });

  test('refuses to overwrite a kind (unless --force); a controller needs its API; outside a project it says so', async () => {
    using tmp = tempDir('opkit-api-');
    await scaffold(tmp.dir, { generate: false });
    const again = await opkit(tmp.dir, [
      'create',
      'api',
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Database',
    ]);
    assert.equal(again.code, 1);
    assert.match(
      again.stderr,
      /error: Database myapp\.example\.com\/v1 exists already: src\/api\/v1\/database\.ts/,
    );
    assert.match(again.stderr, /next: pass --force/);
    const forced = await opkit(tmp.dir, [
      'create',
      'api',
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Database',
      '--force',
      '--generate=false',
    ]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(
      read(tmp.dir, 'src/main.ts').match(/setupDatabaseController\(mgr\);/g)?.length,
      1,
      'registered once',
    );
    assert.equal(readYaml<{ resources: unknown[] }>(tmp.dir, 'PROJECT').resources.length, 1);

    const orphan = await opkit(tmp.dir, [
      'create',
      'api',
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Backup',
      '--controller',
      '--resource=false',
    ]);
    assert.equal(orphan.code, 1);
    assert.match(orphan.stderr, /there is no Backup myapp\.example\.com\/v1 API/);

    using empty = tempDir('opkit-api-');
    const outside = await opkit(empty.dir, [
      'create',
      'api',
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Database',
    ]);
    assert.equal(outside.code, 1);
    assert.match(outside.stderr, /no PROJECT file .*\nnext: .*opkit init --domain/);
  });

  test('registerController needs the markers and is idempotent', () => {
    const info: KindInfo = {
      group: 'myapp',
      fullGroup: 'myapp.example.com',
      version: 'v1',
      kind: 'Database',
      plural: 'databases',
      namespaced: true,
      projectName: 'p',
    };
    const main = `a\n${MAIN_IMPORTS_MARKER}\nb\n${MAIN_CONTROLLERS_MARKER}\n`;
    const once = registerController(main, info);
    assert.equal(registerController(once, info), once);
    // A main.ts of an earlier opkit, markers at the top level: the lines go there, unindented.
    assert.equal(
      once,
      `a\nimport { setupDatabaseController } from './controllers/database/controller.ts';\n${MAIN_IMPORTS_MARKER}\nb\nsetupDatabaseController(mgr);\n${MAIN_CONTROLLERS_MARKER}\n`,
    );
    assert.throws(
      () => registerController('no markers', info),
      /src\/main\.ts has no "\/\/ \+opkit:scaffold:imports" line/,
    );
    assert.deepEqual(kindNames(info), {
      file: 'database',
      definition: 'Databases',
      setup: 'setupDatabaseController',
      reconcile: 'reconcileDatabase',
      apiPath: 'src/api/v1/database.ts',
      controllerPath: 'src/controllers/database/controller.ts',
      reconcilePath: 'src/controllers/database/reconcile.ts',
      samplePath: 'config/samples/myapp_v1_database.yaml',
      unitTestPath: 'test/unit/database.test.ts',
      integrationTestPath: 'test/integration/database.test.ts',
    });
    assert.equal(kindNames({ ...info, kind: 'Endpoints' }).definition, 'EndpointsResource');
  });
});

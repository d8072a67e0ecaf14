/**
 * The files `opkit init` writes. The layout is the flagship Database operator's (operators/database):
 *
 *   PROJECT  package.json  tsconfig.json  Dockerfile  README.md
 *   src/main.ts                      the entry point: builds the manager, registers the controllers
 *   src/api/<version>/<kind>.ts       (create api) the schema: the single source of truth
 *   src/controllers/<kind>/           (create api) controller.ts (watches + rbac) and reconcile.ts
 *   config/{crd,rbac,manager,samples,default}   kustomize; `opkit generate` writes most of it
 *   scripts/generate.ts               `npm run generate`
 *   test/unit  test/integration       node:test; integration tests start a real control plane
 */
import type { Project } from '../project.ts';
import { leaderElectionId } from '../project.ts';

/** Versions of the tools a project uses, the same as this repository's root package.json. */
export const TOOL_VERSIONS = {
  node: '^24.9.0',
  '@types/node': '^24.19.4',
  typescript: '^7.0.2',
} as const;

/** The markers `opkit create api` inserts a controller's import and set-up above. */
export const MAIN_IMPORTS_MARKER = '// +opkit:scaffold:imports';
export const MAIN_CONTROLLERS_MARKER = '// +opkit:scaffold:controllers';

export interface Dependencies {
  runtime: string;
  controlplane: string;
  cli: string;
}

export function packageJson(p: Project, deps: Dependencies): string {
  const pkg: Record<string, unknown> = {
    name: p.projectName,
    version: '0.1.0',
    private: true,
    type: 'module',
    description: `${p.projectName}: a Kubernetes operator built with opkit`,
    ...(p.repo ? { repository: p.repo } : {}),
    engines: { node: '>=24' },
    scripts: {
      generate: 'node scripts/generate.ts',
      typecheck: 'tsc -p tsconfig.json',
      test: 'node --test --test-reporter=spec "test/unit/**/*.test.ts"',
      'test:integration':
        'node --test --test-concurrency=1 --test-reporter=spec "test/integration/**/*.test.ts"',
      start: 'node --max-semi-space-size=4 src/main.ts',
      build: 'opkit build',
      dev: 'opkit generate && opkit install --local && opkit run --local',
    },
    dependencies: { '@opkit/runtime': deps.runtime },
    devDependencies: {
      '@opkit/cli': deps.cli,
      '@opkit/controlplane': deps.controlplane,
      '@types/node': TOOL_VERSIONS['@types/node'],
      node: TOOL_VERSIONS.node,
      typescript: TOOL_VERSIONS.typescript,
    },
    allowScripts: { node: true },
  };
  return `${JSON.stringify(pkg, null, 2)}\n`;
}

export function tsconfigJson(): string {
  const config = {
    compilerOptions: {
      target: 'es2024',
      lib: ['es2024', 'esnext.disposable'],
      module: 'nodenext',
      moduleResolution: 'nodenext',
      types: ['node'],
      strict: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      noFallthroughCasesInSwitch: true,
      erasableSyntaxOnly: true,
      verbatimModuleSyntax: true,
      allowImportingTsExtensions: true,
      rewriteRelativeImportExtensions: true,
      resolveJsonModule: true,
      isolatedModules: true,
      skipLibCheck: true,
      noEmit: true,
    },
    include: ['src', 'test', 'scripts'],
    exclude: ['node_modules', 'vendor', '.opkit'],
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

export function gitignore(): string {
  return ['node_modules/', '.opkit/', '*.log', ''].join('\n');
}

export function dockerignore(): string {
  return ['node_modules', '.opkit', '.git', 'test', 'config', '*.log', ''].join('\n');
}

export function dockerfile(p: Project): string {
  return `# ${p.projectName}: the operator image (Node 24, non-root, no build step: Node runs the TypeScript).
# Build it with \`opkit build --image <img>\`: that prepares a self-contained build context in
# .opkit/build-context (the @opkit packages packed into vendor/) and follows these steps without a container
# engine, on opkit.local/node:24 (a local stand-in for node:24-slim); \`--engine docker\` builds it with docker.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json ./
COPY vendor/ ./vendor/
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=deps /app/vendor ./vendor
COPY package.json ./
COPY src/ ./src/
# Node's compile cache, warmed here: the modules are stripped of their types and compiled once, now,
# instead of at every start (loading them takes half the time and ~30 MiB less memory). The warm-up imports
# src/main.ts, which starts nothing when imported, with the ENTRYPOINT's Node flags, and writes the cache
# for the USER below (Node keys it by uid). Keep the three in step.
ENV NODE_COMPILE_CACHE=/app/.node-compile-cache
ENV NODE_COMPILE_CACHE_PORTABLE=1
RUN npm exec -- opkit-warm-compile-cache --uid 65532 -- --max-semi-space-size=4 src/main.ts
# 65532: the "nonroot" user of distroless images; the Deployment runs with runAsNonRoot.
USER 65532:65532
# A small young generation (4 MiB semi-spaces): an operator never needs V8's default tens of MiB; its
# peak memory drops by about 40 % for a few percent more CPU (see opkit's benchmarks).
ENTRYPOINT ["node", "--max-semi-space-size=4", "src/main.ts"]
`;
}

export function readme(p: Project): string {
  return `# ${p.projectName}

A Kubernetes operator written in TypeScript with [opkit](https://github.com/opkit): the schema of each
custom resource is its single source of truth, and a real local cluster is one command away.

## Run it

\`\`\`sh
npx opkit cluster up   # a local Kubernetes control plane (etcd, kube-apiserver, controllers, nodes)
npm run dev            # generate config/, install the CRDs into that cluster and run the operator
\`\`\`

Then, in another terminal: \`kubectl --kubeconfig "$(npx opkit cluster kubeconfig)" apply -k config/samples\`.

## Run it in the cluster

The manager as a pod, with its ServiceAccount and exactly its generated RBAC (as root: real nodes run real
containers; no registry or container engine is needed):

\`\`\`sh
npx opkit cluster up --real-nodes 1                              # a local cluster with a real node
npx opkit build --image opkit.local/${p.projectName}:dev --load   # the image, imported into that node
npx opkit deploy --local --image opkit.local/${p.projectName}:dev # CRDs, RBAC, manager; waits until Ready
kubectl --kubeconfig "$(npx opkit cluster kubeconfig)" apply -k config/samples
kubectl --kubeconfig "$(npx opkit cluster kubeconfig)" -n ${p.projectName}-system logs deploy/${p.projectName}-controller-manager
npx opkit undeploy --local                                       # removes everything deploy applied
\`\`\`

## Develop

| command | what it does |
| --- | --- |
| \`npx opkit create api --group <g> --version v1 --kind <Kind>\` | adds a kind: schema, controller, sample, tests |
| \`npm run generate\` | CRDs, RBAC and manager manifests in config/, from the schemas and controllers |
| \`npm run typecheck\` / \`npm test\` | type-check; unit tests (FakeClient, no cluster) |
| \`npm run test:integration\` | tests against a real kube-apiserver started by @opkit/controlplane |
| \`npx opkit install\` / \`npx opkit run\` | CRDs into the current kubeconfig context; the operator on this machine |
| \`npx opkit build --image <img> [--load]\` | the container image, without an engine (\`--engine docker\`: with one) |
| \`npx opkit deploy --image <img>\` | the CRDs, RBAC and manager Deployment into the cluster (\`undeploy\` removes them) |

## Layout

- \`src/api/<version>/<kind>.ts\`: the schema (\`defineCustomResource\`); its TypeScript type, validation and CRD come from it.
- \`src/controllers/<kind>/controller.ts\`: what the controller watches, and \`rbac\`: what it may read and write
  (\`opkit generate\` turns it into config/rbac/role.yaml: declare every resource the reconcile touches).
- \`src/controllers/<kind>/reconcile.ts\`: the reconcile loop.
- \`src/main.ts\`: the manager (leader election with \`--leader-elect\`, probes on :8081, metrics on :8080).
- \`config/\`: kustomize; \`kubectl apply -k config/default\` deploys what \`opkit deploy\` deploys.
- \`PROJECT\`: what opkit knows about this project (domain ${p.domain}, its kinds).
`;
}

export function mainTs(p: Project): string {
  return `/**
 * ${p.projectName}: the operator's entry point. It builds the manager (API client, shared informer cache,
 * health probes, metrics, leader election), registers every controller and runs until SIGTERM/SIGINT.
 *
 *   node src/main.ts [--kubeconfig <path>] [--context <name>] [--namespace <ns>] [--leader-elect]
 *                    [--health-probe-bind-address :8081] [--metrics-bind-address :8080]
 *
 * Out of a cluster it uses --kubeconfig, $KUBECONFIG or ~/.kube/config (\`opkit run\` passes the right one);
 * in a cluster, its service account. A bind address of 0 turns that server off.
 */
import { parseArgs } from 'node:util';
import { createManager } from '@opkit/runtime';
${MAIN_IMPORTS_MARKER}

export async function main(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      namespace: { type: 'string' },
      'leader-elect': { type: 'boolean', default: false },
      'health-probe-bind-address': { type: 'string', default: ':8081' },
      'metrics-bind-address': { type: 'string', default: ':8080' },
    },
  });
  const address = (value: string | undefined) => (value && value !== '0' ? value : undefined);

  const mgr = await createManager({
    kubeconfig: values.kubeconfig,
    context: values.context,
    namespace: values.namespace,
    fieldManager: '${p.projectName}',
    healthProbeBindAddress: address(values['health-probe-bind-address']),
    metricsBindAddress: address(values['metrics-bind-address']),
    leaderElection: { enabled: values['leader-elect'], id: '${leaderElectionId(p)}' },
  });

  ${MAIN_CONTROLLERS_MARKER}

  await mgr.start();
}

// Started as a program (node src/main.ts). Imported, it starts nothing: the image's build imports it to
// warm Node's compile cache (the Dockerfile), and tests may import it.
if (import.meta.main) await main(process.argv.slice(2));
`;
}

export function generateScript(): string {
  return `/**
 * npm run generate: config/ (CRDs, RBAC, manager manifests, samples kustomization) from the schemas in
 * src/api and the controllers' rbac declarations. The same as \`opkit generate\`; pass --check to only
 * tell whether config/ is up to date (exit code 1 if not).
 */
import { fileURLToPath } from 'node:url';
import { runCli } from '@opkit/cli';

process.exitCode = await runCli(['generate', ...process.argv.slice(2)], {
  cwd: fileURLToPath(new URL('..', import.meta.url)),
});
`;
}

export function integrationHelpers(): string {
  return `/**
 * The integration test set-up: a real local control plane (etcd + kube-apiserver, what envtest runs) from
 * @opkit/controlplane, with this project's CRDs installed. It starts in seconds once the binaries are
 * built (\`npx opkit cluster install\` builds them ahead of time).
 */
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  type CustomResourceDefinitionManifest,
  CustomResourceDefinitions,
  createClient,
  defineResource,
  loadConfig,
  type RestClient,
} from '@opkit/runtime';

export interface TestEnv {
  readonly controlPlane: ControlPlane;
  /** The kubeconfig of the control plane (an admin user). */
  readonly kubeconfig: string;
  /** An admin client. */
  readonly client: RestClient;
  stop(): Promise<void>;
}

/** Starts a control plane and installs \`crds\`; waits until they are served. */
export async function startTestEnv(crds: readonly CustomResourceDefinitionManifest[]): Promise<TestEnv> {
  const controlPlane = await start({ mode: 'apiserver' });
  const client = createClient(loadConfig({ kubeconfig: controlPlane.kubeconfigPath }), {
    fieldManager: 'integration-test',
  });
  try {
    for (const crd of crds) {
      await client.patch(CustomResourceDefinitions, { name: crd.metadata.name }, { type: 'apply', body: crd, force: true });
    }
    for (const crd of crds) {
      const version = crd.spec.versions.find((v) => v.storage) ?? crd.spec.versions[0]!;
      const resource = defineResource({
        group: crd.spec.group,
        version: version.name,
        kind: crd.spec.names.kind,
        plural: crd.spec.names.plural,
        namespaced: crd.spec.scope === 'Namespaced',
      });
      await client.waitForServed(resource, { timeoutMs: 60_000 });
    }
  } catch (err) {
    client.close();
    await controlPlane.stop();
    throw err;
  }
  return {
    controlPlane,
    kubeconfig: controlPlane.kubeconfigPath,
    client,
    async stop() {
      client.close();
      await controlPlane.stop();
    },
  };
}

/** Polls \`check\` until it returns a truthy value; fails with what it waited for after \`timeoutMs\`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(\`timed out waiting for \${what}; last: \${last instanceof Error ? last.message : JSON.stringify(last)}\`);
}
`;
}

export function defaultKustomization(p: Project, namespace: string): string {
  return `# ${p.projectName}: everything \`opkit deploy\` applies (also: kubectl apply -k config/default).
# The manager runs in the namespace below; \`opkit deploy --image <img>\` sets the image.
namespace: ${namespace}
resources:
  - ../crd
  - ../rbac
  - ../manager
`;
}

/** opkit init: a new operator project in the current folder. */
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { bool, required, str } from '../args.ts';
import { CliError, UsageError } from '../errors.ts';
import { type FileToWrite, writeFiles } from '../files.ts';
import { crdFiles, projectManifests } from '../generate/index.ts';
import { kustomization } from '../generate/manifests.ts';
import { step } from '../io.ts';
import { checkDomain, checkProjectName, suggestLabel } from '../names.ts';
import { packageDir, packInto, vendorName } from '../packages.ts';
import {
  managerNamespace,
  PROJECT_FILE,
  PROJECT_LAYOUT,
  type Project,
  projectYaml,
  type RuntimeSource,
} from '../project.ts';
import {
  type Dependencies,
  defaultKustomization,
  dockerfile,
  dockerignore,
  generateScript,
  gitignore,
  integrationHelpers,
  mainTs,
  packageJson,
  readme,
  tsconfigJson,
} from '../templates/project.ts';
import { GENERATED_HEADER, toYaml } from '../yaml.ts';
import type { Command } from './command.ts';

/** What may be in a folder that `opkit init` still calls empty. */
const IGNORED_ENTRIES = new Set(['.git', '.DS_Store']);

/** Every file `opkit init` writes for a project (without vendor/ packing). */
export function initFiles(p: Project, deps: Dependencies): FileToWrite[] {
  return [
    { path: PROJECT_FILE, content: projectYaml(p) },
    { path: 'package.json', content: packageJson(p, deps) },
    { path: 'tsconfig.json', content: tsconfigJson() },
    { path: '.gitignore', content: gitignore() },
    { path: '.dockerignore', content: dockerignore() },
    { path: 'Dockerfile', content: dockerfile(p) },
    { path: 'README.md', content: readme(p) },
    { path: 'src/main.ts', content: mainTs(p) },
    { path: 'scripts/generate.ts', content: generateScript() },
    { path: 'test/integration/helpers.ts', content: integrationHelpers() },
    { path: 'vendor/README.md', content: vendorReadme(p.runtime) },
    { path: 'config/default/kustomization.yaml', content: defaultKustomization(p, managerNamespace(p)) },
    ...crdFiles([]),
    { path: 'config/samples/kustomization.yaml', content: GENERATED_HEADER + toYaml(kustomization([])) },
    ...projectManifests(p, []),
  ];
}

function vendorReadme(runtime: RuntimeSource): string {
  return runtime === 'tarball'
    ? '# vendor\n\nThe @opkit packages, packed with `npm pack` (the .tgz files) and unpacked next to them: package.json\ndepends on the unpacked folders, because Node does not run TypeScript from under node_modules.\n'
    : '# vendor\n\nEmpty while package.json depends on the @opkit packages of a local checkout (`opkit init --runtime local`).\n`opkit build` packs them into its build context, so that the image does not need the checkout.\n';
}

export const initCommand: Command = {
  name: 'init',
  summary: 'scaffold a new operator project in the current (empty) folder',
  options: {
    domain: { type: 'string' },
    repo: { type: 'string' },
    name: { type: 'string' },
    runtime: { type: 'string' },
    force: { type: 'boolean' },
  },
  help: `Usage: opkit init --domain <domain> [--repo <repo>] [--name <name>] [--runtime local|tarball] [--force]

Scaffolds a TypeScript operator project in the current folder: package.json, tsconfig.json, src/main.ts
(the manager), config/ (kustomize: crd, rbac, manager, samples, default), a Dockerfile, a README, the test
set-up (test/integration/helpers.ts starts a real control plane) and the PROJECT file.

Flags:
  --domain <domain>     the domain of the project's API groups: create api --group myapp makes myapp.<domain>
  --repo <repo>         the source repository, e.g. github.com/me/database-operator (PROJECT, package.json)
  --name <name>         the project name (default: the folder's name); prefixes the deployed objects' names
  --runtime <source>    how package.json gets @opkit/runtime, @opkit/controlplane and @opkit/cli until they
                        are published: local (default; file: paths to this opkit checkout) or tarball
                        (packed with npm pack into vendor/, so the project does not need the checkout)
  --force               write into a folder that is not empty (files of the same name are overwritten)

Examples:
  mkdir database-operator && cd database-operator
  opkit init --domain example.com --repo github.com/me/database-operator
  opkit init --domain example.com --name db-operator --runtime tarball`,

  async run(ctx, { values }) {
    const domain = required(values, 'domain', 'init', 'opkit init --domain example.com');
    checkDomain(domain);
    const name = str(values, 'name') ?? suggestLabel(basename(ctx.cwd));
    if (!name) {
      throw new UsageError(
        `cannot make a project name from the folder name "${basename(ctx.cwd)}"`,
        'pass one: --name my-operator',
      );
    }
    checkProjectName(name);
    const runtime = str(values, 'runtime') ?? 'local';
    if (runtime !== 'local' && runtime !== 'tarball') {
      throw new UsageError(
        `--runtime must be local or tarball, not "${runtime}"`,
        'e.g. opkit init --domain example.com --runtime tarball',
      );
    }
    const inTheWay = readdirSync(ctx.cwd)
      .filter((e) => !IGNORED_ENTRIES.has(e))
      .sort();
    if (inTheWay.length > 0 && !bool(values, 'force', false)) {
      const shown =
        inTheWay.slice(0, 8).join(', ') + (inTheWay.length > 8 ? `, and ${inTheWay.length - 8} more` : '');
      throw new CliError(
        `${ctx.cwd} is not empty: ${shown} ${inTheWay.length === 1 ? 'is' : 'are'} in the way`,
        'run opkit init in an empty folder (mkdir my-operator && cd my-operator), or pass --force to write into this one',
      );
    }
    const repo = str(values, 'repo');
    const project: Project = {
      domain,
      projectName: name,
      ...(repo ? { repo } : {}),
      layout: [PROJECT_LAYOUT],
      runtime,
      resources: [],
      version: '3',
    };

    let deps: Dependencies;
    if (runtime === 'local') {
      deps = {
        runtime: `file:${packageDir('@opkit/runtime')}`,
        controlplane: `file:${packageDir('@opkit/controlplane')}`,
        cli: `file:${packageDir('@opkit/cli')}`,
      };
    } else {
      const vendor = join(ctx.cwd, 'vendor');
      for (const pkg of ['@opkit/runtime', '@opkit/controlplane', '@opkit/cli'] as const) {
        step(ctx.io, `packing ${pkg} into vendor/${vendorName(pkg)}.tgz (npm pack)`);
        packInto(pkg, vendor);
      }
      deps = {
        runtime: `file:vendor/${vendorName('@opkit/runtime')}`,
        controlplane: `file:vendor/${vendorName('@opkit/controlplane')}`,
        cli: `file:vendor/${vendorName('@opkit/cli')}`,
      };
    }
    step(ctx.io, `scaffolding ${name} (domain ${domain}) in ${ctx.cwd}`);
    writeFiles(ctx.cwd, initFiles(project, deps), ctx.io);
    ctx.io.out(`created project ${name} in ${ctx.cwd}`);
    ctx.io.out('next: opkit create api --group <group> --version v1 --kind <Kind>, then npm install');
    return 0;
  },
};

/** opkit create api: a kind's schema, controller, sample and tests, registered in src/main.ts and PROJECT. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bool, required, str } from '../args.ts';
import { CliError } from '../errors.ts';
import { type FileToWrite, writeFiles } from '../files.ts';
import { generate } from '../generate/index.ts';
import { step } from '../io.ts';
import { checkApiNames, pluralize } from '../names.ts';
import {
  fullGroup,
  type Project,
  type ProjectResource,
  projectPath,
  projectYaml,
  readProject,
} from '../project.ts';
import {
  apiModule,
  controllerModule,
  integrationTest,
  type KindInfo,
  kindNames,
  reconcileModule,
  sampleYaml,
  unitTest,
} from '../templates/api.ts';
import { MAIN_CONTROLLERS_MARKER, MAIN_IMPORTS_MARKER } from '../templates/project.ts';
import type { Command } from './command.ts';

export interface CreateApiOptions {
  group: string;
  version: string;
  kind: string;
  plural?: string;
  resource: boolean;
  controller: boolean;
  namespaced: boolean;
  force: boolean;
}

export interface CreateApiPlan {
  files: FileToWrite[];
  project: Project;
  info: KindInfo;
}

/** src/main.ts with the controller's import and set-up call added (unchanged if already there). */
export function registerController(main: string, info: KindInfo): string {
  const n = kindNames(info);
  const importLine = `import { ${n.setup} } from './controllers/${n.file}/controller.ts';`;
  const callLine = `${n.setup}(mgr);`;
  for (const marker of [MAIN_IMPORTS_MARKER, MAIN_CONTROLLERS_MARKER]) {
    if (!main.includes(marker)) {
      throw new CliError(
        `src/main.ts has no "${marker}" line, where opkit adds controllers`,
        `add the line back (see opkit init), or register the controller yourself: ${importLine} and ${callLine}`,
      );
    }
  }
  let out = main;
  if (!out.includes(importLine)) out = insertAbove(out, MAIN_IMPORTS_MARKER, importLine);
  if (!out.includes(callLine)) out = insertAbove(out, MAIN_CONTROLLERS_MARKER, callLine);
  return out;
}

/** `line` above the marker's line, indented as the marker is. */
function insertAbove(text: string, marker: string, line: string): string {
  const at = text.indexOf(marker);
  const lineStart = text.lastIndexOf('\n', at) + 1;
  const indent = /^[ \t]*/.exec(text.slice(lineStart, at))?.[0] ?? '';
  return `${text.slice(0, lineStart)}${indent}${line}\n${text.slice(lineStart)}`;
}

/** Computes everything create api writes; throws before anything is written. */
export function planCreateApi(dir: string, opts: CreateApiOptions): CreateApiPlan {
  const project = readProject(dir);
  const plural = opts.plural ?? pluralize(opts.kind);
  checkApiNames({
    group: opts.group,
    version: opts.version,
    kind: opts.kind,
    plural,
    domain: project.domain,
  });
  const info: KindInfo = {
    group: opts.group,
    fullGroup: `${opts.group}.${project.domain}`,
    version: opts.version,
    kind: opts.kind,
    plural,
    namespaced: opts.namespaced,
    projectName: project.projectName,
  };
  const n = kindNames(info);
  const existing = project.resources.find(
    (r) => r.group === opts.group && r.version === opts.version && r.kind === opts.kind,
  );
  const files: FileToWrite[] = [];
  if (opts.resource) {
    files.push(
      { path: n.apiPath, content: apiModule(info) },
      { path: n.samplePath, content: sampleYaml(info) },
    );
  } else if (!existing?.api && !existsSync(join(dir, n.apiPath))) {
    throw new CliError(
      `there is no ${opts.kind} ${info.fullGroup}/${opts.version} API (${n.apiPath}) for the controller`,
      `create both: opkit create api --group ${opts.group} --version ${opts.version} --kind ${opts.kind} --resource --controller`,
    );
  }
  if (opts.controller) {
    files.push(
      { path: n.controllerPath, content: controllerModule(info) },
      { path: n.reconcilePath, content: reconcileModule(info) },
      { path: n.unitTestPath, content: unitTest(info) },
      { path: n.integrationTestPath, content: integrationTest(info) },
    );
  }
  if (!opts.force) {
    const present = files.filter((f) => existsSync(join(dir, f.path))).map((f) => f.path);
    if (present.length > 0) {
      throw new CliError(
        `${opts.kind} ${info.fullGroup}/${opts.version} exists already: ${present.join(', ')}`,
        'pass --force to write these files again (your changes to them are lost)',
      );
    }
  }
  if (opts.controller) {
    const mainPath = join(dir, 'src/main.ts');
    if (!existsSync(mainPath))
      throw new CliError('src/main.ts is missing', 'restore it (opkit init writes it)');
    files.push({ path: 'src/main.ts', content: registerController(readFileSync(mainPath, 'utf8'), info) });
  }
  const resource: ProjectResource = {
    group: opts.group,
    version: opts.version,
    kind: opts.kind,
    plural,
    domain: project.domain,
    path: n.apiPath,
    ...(opts.resource || existing?.api
      ? { api: { crdVersion: 'v1', namespaced: opts.resource ? opts.namespaced : existing!.api!.namespaced } }
      : {}),
    controller: opts.controller || existing?.controller === true,
  };
  const resources = project.resources.filter((r) => r !== existing);
  resources.push(resource);
  return { files, project: { ...project, resources }, info };
}

export const createApiCommand: Command = {
  name: 'create api',
  summary: 'add a kind: schema, controller with a reconcile skeleton, sample and tests',
  options: {
    group: { type: 'string' },
    version: { type: 'string' },
    kind: { type: 'string' },
    plural: { type: 'string' },
    resource: { type: 'boolean' },
    controller: { type: 'boolean' },
    namespaced: { type: 'boolean' },
    generate: { type: 'boolean' },
    force: { type: 'boolean' },
  },
  help: `Usage: opkit create api --group <group> --version <version> --kind <Kind> [--resource] [--controller]
                        [--namespaced=false] [--plural <plural>] [--force]

Adds a kind to the project, with the full API group <group>.<domain> (the domain is in PROJECT):
  src/api/<version>/<kind>.ts                the schema (defineCustomResource): type, validation and CRD
  src/controllers/<kind>/controller.ts       what the controller watches, and its rbac declaration
  src/controllers/<kind>/reconcile.ts        a reconcile skeleton that sets the Ready condition
  config/samples/<group>_<version>_<kind>.yaml, test/unit/<kind>.test.ts, test/integration/<kind>.test.ts
registers the controller in src/main.ts, records the kind in PROJECT and runs opkit generate.

Flags:
  --group <group>       a DNS-1123 label, e.g. myapp (the API group becomes myapp.<domain>)
  --version <version>   v1, v1beta1, v2alpha3, ...
  --kind <Kind>         PascalCase, e.g. Database
  --plural <plural>     the resource name in URLs (default: the kind's English plural, e.g. databases)
  --resource            write the schema and sample (default true; false when only --controller is given)
  --controller          write the controller and tests (default true; false when only --resource is given)
  --namespaced=false    a cluster-scoped kind (default: namespaced)
  --generate=false      don't run opkit generate afterwards
  --force               write the kind's files again when they exist

Examples:
  opkit create api --group myapp --version v1 --kind Database --resource --controller
  opkit create api --group infra --version v1alpha1 --kind Cluster --namespaced=false
  opkit create api --group myapp --version v1 --kind Database --controller --resource=false`,

  async run(ctx, { values }) {
    const example = 'opkit create api --group myapp --version v1 --kind Database';
    const group = required(values, 'group', 'create api', example);
    const version = required(values, 'version', 'create api', example);
    const kind = required(values, 'kind', 'create api', example);
    // An unset --resource / --controller is true, unless the other one was set to true alone.
    const given = (name: string) =>
      typeof values[name] === 'boolean' ? (values[name] as boolean) : undefined;
    const opts: CreateApiOptions = {
      group,
      version,
      kind,
      resource: given('resource') ?? given('controller') !== true,
      controller: given('controller') ?? given('resource') !== true,
      namespaced: bool(values, 'namespaced', true),
      force: bool(values, 'force', false),
    };
    const plural = str(values, 'plural');
    if (plural !== undefined) opts.plural = plural;
    if (!opts.resource && !opts.controller) {
      throw new CliError(
        'nothing to create: both --resource and --controller are false',
        `e.g. ${example} --resource --controller`,
        2,
      );
    }
    const plan = planCreateApi(ctx.cwd, opts);
    step(ctx.io, `creating ${kind} ${fullGroup({ group, domain: plan.project.domain })}/${version}`);
    writeFiles(ctx.cwd, plan.files, ctx.io);
    writeFileSync(projectPath(ctx.cwd), projectYaml(plan.project));
    ctx.io.err('  updated PROJECT');
    if (bool(values, 'generate', true)) {
      step(ctx.io, 'generating config/ (opkit generate)');
      try {
        const report = await generate(ctx.cwd);
        for (const f of report.written) ctx.io.err(`  wrote ${f}`);
      } catch (err) {
        const e = err as Error & { next?: string };
        ctx.io.err(`warning: the ${kind} files are written, but generate failed: ${e.message}`);
        ctx.io.err(`next: ${e.next ?? 'fix it and run opkit generate'}`);
        return 0;
      }
    }
    ctx.io.out(`created ${kind} (${plan.info.fullGroup}/${version})`);
    ctx.io.out('next: npm install (once), then npm test; edit the schema and reconcile, then opkit generate');
    return 0;
  },
};

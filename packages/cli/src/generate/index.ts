/**
 * opkit generate: config/ from the code. Loads every schema module in src/api (defineCustomResource
 * results) and every controller in src/controllers/<kind>/controller.ts (its `rbac` export), then writes:
 *
 *   config/crd/bases/<group>_<plural>.yaml   one CRD per kind (all its versions)
 *   config/crd/kustomization.yaml
 *   config/rbac/role.yaml                    ClusterRole: the merged, sorted declarations (no wildcards)
 *   config/rbac/{role_binding,leader_election_role,leader_election_role_binding,service_account}.yaml
 *   config/manager/{manager,metrics_service,kustomization}.yaml   (kustomization.yaml keeps its `images:`)
 *   config/samples/kustomization.yaml        the samples that are there
 *
 * Output is stable: sorted keys and lists, no timestamps; a second run changes nothing. Generated CRD files
 * of kinds that are gone are removed (only files carrying the generated header).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { CliError } from '../errors.ts';
import type { Io } from '../io.ts';
import { fullGroup, type Project, readProject } from '../project.ts';
import { GENERATED_HEADER, toYaml, toYamlDocuments } from '../yaml.ts';
import {
  buildCrds,
  type CrdManifest,
  crdFileName,
  isSchemaDefinition,
  type SourcedDefinition,
} from './crd.ts';
import { importProjectModule, projectFiles } from './load.ts';
import {
  deployment,
  type ImageRule,
  imageRules,
  kustomization,
  leaderElectionRole,
  leaderElectionRoleBinding,
  managerKustomization,
  managerRole,
  managerRoleBinding,
  metricsService,
  namespace,
  serviceAccount,
} from './manifests.ts';
import { type Declared, mergeRules, normalizeRules } from './rbac.ts';
import type { PolicyRule } from './rbac-types.ts';

const MANAGER_KUSTOMIZATION = 'config/manager/kustomization.yaml';

export interface GeneratedFile {
  /** Relative to the project, with '/'. */
  path: string;
  content: string;
}

export interface GenerationPlan {
  files: GeneratedFile[];
  /** Generated files that nothing produces any more. */
  removals: string[];
  crds: CrdManifest[];
  rules: PolicyRule[];
}

export interface GenerateReport {
  written: string[];
  unchanged: string[];
  removed: string[];
}

/** What generate keeps of the committed config/ (edits that kubebuilder's habits make there). */
export interface KeptSettings {
  /** config/manager/kustomization.yaml's `images:` (kustomize edit set image controller=<img>). */
  images?: readonly ImageRule[];
}

/** The manifests that depend on the PROJECT file only (init writes them before any kind exists). */
export function projectManifests(p: Project, rules: PolicyRule[], kept: KeptSettings = {}): GeneratedFile[] {
  const file = (path: string, docs: readonly object[]): GeneratedFile => ({
    path,
    content: GENERATED_HEADER + toYamlDocuments(docs),
  });
  return [
    file('config/rbac/role.yaml', [managerRole(p, rules)]),
    file('config/rbac/role_binding.yaml', [managerRoleBinding(p)]),
    file('config/rbac/leader_election_role.yaml', [leaderElectionRole(p)]),
    file('config/rbac/leader_election_role_binding.yaml', [leaderElectionRoleBinding(p)]),
    file('config/rbac/service_account.yaml', [serviceAccount(p)]),
    file('config/rbac/kustomization.yaml', [
      kustomization([
        'service_account.yaml',
        'role.yaml',
        'role_binding.yaml',
        'leader_election_role.yaml',
        'leader_election_role_binding.yaml',
      ]),
    ]),
    file('config/manager/manager.yaml', [namespace(p), deployment(p)]),
    file('config/manager/metrics_service.yaml', [metricsService(p)]),
    file('config/manager/kustomization.yaml', [managerKustomization(kept.images)]),
  ];
}

export function crdFiles(crds: readonly CrdManifest[]): GeneratedFile[] {
  const files = crds.map((crd) => ({
    path: `config/crd/bases/${crdFileName(crd)}`,
    content: GENERATED_HEADER + toYaml(crd),
  }));
  files.push({
    path: 'config/crd/kustomization.yaml',
    content: GENERATED_HEADER + toYaml(kustomization(crds.map((c) => `bases/${crdFileName(c)}`))),
  });
  return files;
}

export function samplesKustomization(dir: string): GeneratedFile {
  const samples = projectFiles(dir, 'config/samples/*.yaml')
    .map((f) => f.slice('config/samples/'.length))
    .filter((f) => f !== 'kustomization.yaml');
  return {
    path: 'config/samples/kustomization.yaml',
    content: GENERATED_HEADER + toYaml(kustomization(samples)),
  };
}

/** The settings of the committed config/ that generate keeps (see KeptSettings). */
export function keptSettings(dir: string): KeptSettings {
  const file = join(dir, MANAGER_KUSTOMIZATION);
  if (!existsSync(file)) return {};
  let parsed: unknown;
  try {
    parsed = parse(readFileSync(file, 'utf8'));
  } catch {
    return {}; // not YAML: written again from scratch
  }
  const images = imageRules(parsed);
  return images ? { images } : {};
}

async function loadDefinitions(dir: string): Promise<SourcedDefinition[]> {
  const defs: SourcedDefinition[] = [];
  for (const file of projectFiles(dir, 'src/api/**/*.ts')) {
    const mod = await importProjectModule(dir, file);
    for (const name of Object.keys(mod).sort()) {
      const value = mod[name];
      if (isSchemaDefinition(value) && !defs.some((d) => d.definition === value)) {
        defs.push({ source: `${file} (${name})`, definition: value });
      }
    }
  }
  return defs;
}

async function loadRbac(dir: string): Promise<PolicyRule[]> {
  const rules: PolicyRule[] = [];
  for (const file of projectFiles(dir, 'src/controllers/*/controller.ts')) {
    const mod = await importProjectModule(dir, file);
    if (!('rbac' in mod)) {
      throw new CliError(
        `${file} does not export \`rbac\`: what the controller reads and writes`,
        `add e.g. export const rbac: RbacRule[] = [{ resource: Databases.resource, verbs: ['get', 'list', 'watch'] }] to ${file}`,
      );
    }
    const declared: Declared = { source: file, rules: mod.rbac };
    rules.push(...normalizeRules(declared));
  }
  return mergeRules(rules);
}

/** What generate would write, without writing. */
export async function planGeneration(dir: string): Promise<GenerationPlan> {
  const project = readProject(dir);
  const defs = await loadDefinitions(dir);
  for (const r of project.resources) {
    if (!r.api) continue;
    const found = defs.some(
      (d) =>
        d.definition.group === fullGroup(r) &&
        d.definition.version === r.version &&
        d.definition.kind === r.kind,
    );
    if (!found) {
      throw new CliError(
        `PROJECT lists ${r.kind} ${fullGroup(r)}/${r.version}, but no module in src/api exports its defineCustomResource`,
        `export it from ${r.path}, or remove the resource from PROJECT`,
      );
    }
  }
  const crds = buildCrds(defs);
  const rules = await loadRbac(dir);
  const files = [
    ...crdFiles(crds),
    ...projectManifests(project, rules, keptSettings(dir)),
    samplesKustomization(dir),
  ];
  const produced = new Set(files.map((f) => f.path));
  const removals = projectFiles(dir, 'config/crd/bases/*.yaml').filter(
    (f) => !produced.has(f) && readFileSync(join(dir, f), 'utf8').startsWith(GENERATED_HEADER),
  );
  return { files, removals, crds, rules };
}

/** Writes the files whose content differs; `check`: writes nothing and reports what differs. */
export function applyPlan(dir: string, plan: GenerationPlan, opts: { check?: boolean } = {}): GenerateReport {
  const report: GenerateReport = { written: [], unchanged: [], removed: [] };
  for (const f of plan.files) {
    const target = join(dir, f.path);
    const current = existsSync(target) ? readFileSync(target, 'utf8') : undefined;
    if (current === f.content) {
      report.unchanged.push(f.path);
      continue;
    }
    report.written.push(f.path);
    if (!opts.check) {
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, f.content);
    }
  }
  for (const r of plan.removals) {
    report.removed.push(r);
    if (!opts.check) rmSync(join(dir, r));
  }
  return report;
}

export async function generate(
  dir: string,
  opts: { check?: boolean; io?: Io } = {},
): Promise<GenerateReport> {
  const plan = await planGeneration(dir);
  return applyPlan(dir, plan, opts);
}

/**
 * Renders a kustomization (config/default) into objects, as `kubectl kustomize` would for what opkit
 * scaffolds: resources (files and folders), namespace, images and replicas. A kustomization using anything else
 * (patches, namePrefix, ...) is rendered by `kubectl kustomize` when kubectl is installed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { CliError } from '../errors.ts';
import { parseYamlDocuments } from '../yaml.ts';

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

interface ImageRule {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

interface ReplicaRule {
  name: string;
  count: number;
}

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'replicas']);
/** The kinds kustomize's `replicas:` sets spec.replicas of. */
const SCALABLE_KINDS: ReadonlySet<string> = new Set([
  'Deployment',
  'ReplicaSet',
  'ReplicationController',
  'StatefulSet',
]);

/** Kinds without a namespace (the common ones; CRD-defined kinds are taken as namespaced). */
export const CLUSTER_SCOPED_KINDS: ReadonlySet<string> = new Set([
  'Namespace',
  'CustomResourceDefinition',
  'ClusterRole',
  'ClusterRoleBinding',
  'PersistentVolume',
  'StorageClass',
  'Node',
  'PriorityClass',
  'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'APIService',
  'IngressClass',
  'RuntimeClass',
]);

export class UnsupportedKustomizationError extends CliError {
  constructor(file: string, field: string) {
    super(
      `${file} uses "${field}", which opkit's built-in renderer does not support`,
      'install kubectl (opkit then renders with `kubectl kustomize`), or drop that field',
    );
  }
}

function kustomizationFile(dir: string): string | undefined {
  for (const name of ['kustomization.yaml', 'kustomization.yml', 'Kustomization']) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

function isObject(value: unknown): value is KubeObject {
  if (!value || typeof value !== 'object') return false;
  const v = value as Partial<KubeObject>;
  return (
    typeof v.apiVersion === 'string' && typeof v.kind === 'string' && typeof v.metadata?.name === 'string'
  );
}

/** Renders the kustomization in `dir` with opkit's renderer (throws UnsupportedKustomizationError). */
export function renderBuiltin(dir: string, root = dir): KubeObject[] {
  const file = kustomizationFile(dir);
  const rel = relative(root, file ?? dir) || dir;
  if (!file) throw new CliError(`no kustomization.yaml in ${dir}`, 'run opkit generate');
  const k = (parseYamlDocuments(readFileSync(file, 'utf8'), rel)[0] ?? {}) as Record<string, unknown>;
  for (const field of Object.keys(k))
    if (!SUPPORTED.has(field)) throw new UnsupportedKustomizationError(rel, field);
  const objects: KubeObject[] = [];
  for (const r of (k.resources as string[] | undefined) ?? []) {
    const path = join(dir, r);
    if (!existsSync(path))
      throw new CliError(`${rel} lists ${r}, which does not exist`, 'run opkit generate, or fix the list');
    if (statSync(path).isDirectory()) objects.push(...renderBuiltin(path, root));
    else {
      for (const doc of parseYamlDocuments(readFileSync(path, 'utf8'), relative(root, path))) {
        if (!isObject(doc))
          throw new CliError(
            `${relative(root, path)} has a document that is not a Kubernetes object`,
            `fix ${relative(root, path)}`,
          );
        objects.push(doc);
      }
    }
  }
  if (typeof k.namespace === 'string' && k.namespace) setNamespace(objects, k.namespace);
  if (Array.isArray(k.images)) for (const rule of k.images as ImageRule[]) setImages(objects, rule);
  if (k.replicas !== undefined) {
    for (const [i, rule] of replicaRules(k.replicas, rel).entries()) {
      if (setReplicas(objects, rule) === 0)
        throw new CliError(
          `${rel}: replicas[${i}] names "${rule.name}", which is no Deployment, StatefulSet, ReplicaSet or ReplicationController here`,
          `fix the name in ${rel}`,
        );
    }
  }
  return objects;
}

/** Kustomize's `replicas:` list, checked as kustomize checks it: a name and a whole count of 0 or more. */
function replicaRules(value: unknown, file: string): ReplicaRule[] {
  if (!Array.isArray(value))
    throw new CliError(`${file}: replicas must be a list of {name, count}`, `fix replicas in ${file}`);
  return value.map((r: unknown, i) => {
    const rule = (r ?? {}) as Partial<ReplicaRule>;
    if (typeof rule.name !== 'string' || rule.name === '')
      throw new CliError(`${file}: replicas[${i}].name must be a workload's name`, `fix replicas in ${file}`);
    if (typeof rule.count !== 'number' || !Number.isInteger(rule.count) || rule.count < 0)
      throw new CliError(
        `${file}: replicas[${i}].count must be a whole number of 0 or more, not ${JSON.stringify(rule.count)}`,
        `fix replicas in ${file}`,
      );
    return { name: rule.name, count: rule.count };
  });
}

/** Sets spec.replicas of the workloads named by the rule; returns how many. */
function setReplicas(objects: KubeObject[], rule: ReplicaRule): number {
  let count = 0;
  for (const o of objects) {
    if (!SCALABLE_KINDS.has(o.kind) || o.metadata.name !== rule.name) continue;
    o.spec = { ...((o.spec as Record<string, unknown> | undefined) ?? {}), replicas: rule.count };
    count++;
  }
  return count;
}

/** Renders with `kubectl kustomize` (full kustomize). */
export function renderKubectl(dir: string): KubeObject[] {
  const out = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  if (out.status !== 0) {
    throw new CliError(
      `kubectl kustomize ${dir} failed: ${(out.stderr || String(out.error)).trim()}`,
      `fix the kustomization in ${dir}`,
    );
  }
  return parseYamlDocuments(out.stdout, `kubectl kustomize ${dir}`).filter(isObject);
}

export function kubectlAvailable(): boolean {
  return spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
}

/** opkit's renderer; falls back to kubectl kustomize for kustomizations it does not support. */
export function render(dir: string): KubeObject[] {
  try {
    return renderBuiltin(dir);
  } catch (err) {
    if (err instanceof UnsupportedKustomizationError && kubectlAvailable()) return renderKubectl(dir);
    throw err;
  }
}

/** Sets the namespace of namespaced objects, renames the Namespace objects and ServiceAccount subjects. */
export function setNamespace(objects: KubeObject[], namespace: string): void {
  const serviceAccounts = new Set(
    objects.filter((o) => o.kind === 'ServiceAccount').map((o) => o.metadata.name),
  );
  for (const o of objects) {
    if (o.kind === 'Namespace') o.metadata.name = namespace;
    else if (!CLUSTER_SCOPED_KINDS.has(o.kind)) o.metadata.namespace = namespace;
    if (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') {
      for (const s of (o.subjects as Array<{ kind: string; name: string; namespace?: string }> | undefined) ??
        []) {
        if (s.kind === 'ServiceAccount' && serviceAccounts.has(s.name)) s.namespace = namespace;
      }
    }
  }
}

function podSpecs(o: KubeObject): Array<Record<string, unknown>> {
  const spec = o.spec as Record<string, unknown> | undefined;
  if (!spec) return [];
  if (o.kind === 'Pod') return [spec];
  if (o.kind === 'CronJob') {
    const job = (spec.jobTemplate as { spec?: { template?: { spec?: Record<string, unknown> } } } | undefined)
      ?.spec;
    return job?.template?.spec ? [job.template.spec] : [];
  }
  const template = spec.template as { spec?: Record<string, unknown> } | undefined;
  return template?.spec ? [template.spec] : [];
}

function containers(o: KubeObject): Array<{ name: string; image?: string }> {
  return podSpecs(o).flatMap((p) => [
    ...((p.initContainers as Array<{ name: string; image?: string }> | undefined) ?? []),
    ...((p.containers as Array<{ name: string; image?: string }> | undefined) ?? []),
  ]);
}

/** 'reg:5000/a/b:tag' -> 'reg:5000/a/b'; 'a@sha256:..' -> 'a'. */
export function imageName(image: string): string {
  const at = image.indexOf('@');
  const noDigest = at >= 0 ? image.slice(0, at) : image;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

function setImages(objects: KubeObject[], rule: ImageRule): void {
  for (const o of objects) {
    for (const c of containers(o)) {
      if (!c.image || imageName(c.image) !== rule.name) continue;
      const name = rule.newName ?? rule.name;
      if (rule.digest) c.image = `${name}@${rule.digest}`;
      else if (rule.newTag) c.image = `${name}:${rule.newTag}`;
      else c.image = name + c.image.slice(imageName(c.image).length);
    }
  }
}

/** Sets the image of the manager container(s): what `opkit deploy --image` does. Returns how many. */
export function setManagerImage(objects: KubeObject[], image: string): number {
  let count = 0;
  for (const o of objects) {
    if (o.kind !== 'Deployment' || o.metadata.labels?.['control-plane'] !== 'controller-manager') continue;
    for (const c of containers(o)) {
      if (c.name === 'manager') {
        c.image = image;
        count++;
      }
    }
  }
  return count;
}

/** The order objects are applied in (reverse for deletion): namespaces and CRDs first. */
const KIND_ORDER = [
  'Namespace',
  'CustomResourceDefinition',
  'ServiceAccount',
  'ClusterRole',
  'Role',
  'ClusterRoleBinding',
  'RoleBinding',
  'ConfigMap',
  'Secret',
  'Service',
  'Deployment',
];

export function sortForApply(objects: readonly KubeObject[]): KubeObject[] {
  const rank = (o: KubeObject) => {
    const i = KIND_ORDER.indexOf(o.kind);
    return i >= 0 ? i : KIND_ORDER.length;
  };
  return objects
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map((x) => x.o);
}

/**
 * CustomResourceDefinitions from the schemas: every defineCustomResource result exported by a module in
 * src/api. Versions of one kind (src/api/v1/database.ts, src/api/v2/database.ts) become one CRD; the
 * storage version is the most stable, newest one (Kubernetes' version priority: GA > beta > alpha).
 */
import { CliError } from '../errors.ts';

/** The part of a defineCustomResource result that generate uses (duck-typed across module copies). */
export interface SchemaDefinition {
  group: string;
  version: string;
  kind: string;
  plural: string;
  crdName: string;
  crd(): CrdManifest;
}

export interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  [key: string]: unknown;
}

export interface CrdManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [key: string]: unknown };
  spec: {
    group: string;
    names: { kind: string; plural: string; [key: string]: unknown };
    scope: string;
    versions: CrdVersion[];
    [key: string]: unknown;
  };
}

export function isSchemaDefinition(value: unknown): value is SchemaDefinition {
  if (!value || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.crd === 'function' &&
    typeof v.crdName === 'string' &&
    typeof v.group === 'string' &&
    typeof v.version === 'string' &&
    typeof v.kind === 'string' &&
    typeof v.plural === 'string'
  );
}

/** Kubernetes' version priority: v2 > v1 > v2beta1 > v1beta2 > v1beta1 > v1alpha1. Negative: a first. */
export function compareVersionPriority(a: string, b: string): number {
  const parse = (v: string) => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return { kind: 0, major: 0, minor: 0 };
    const kind = m[2] === undefined ? 3 : m[2] === 'beta' ? 2 : 1;
    return { kind, major: Number(m[1]), minor: Number(m[3] ?? 0) };
  };
  const x = parse(a);
  const y = parse(b);
  return y.kind - x.kind || y.major - x.major || y.minor - x.minor || a.localeCompare(b);
}

export interface SourcedDefinition {
  source: string;
  definition: SchemaDefinition;
}

/** One CRD per crdName, versions sorted by priority, exactly one storage version. */
export function buildCrds(defs: readonly SourcedDefinition[]): CrdManifest[] {
  const byName = new Map<string, SourcedDefinition[]>();
  for (const d of defs) {
    const list = byName.get(d.definition.crdName) ?? [];
    if (!list.some((x) => x.definition.version === d.definition.version)) list.push(d);
    else if (!list.some((x) => x.definition === d.definition)) {
      const first = list.find((x) => x.definition.version === d.definition.version)!;
      throw new CliError(
        `${d.definition.crdName} version ${d.definition.version} is defined twice: in ${first.source} and in ${d.source}`,
        'keep one defineCustomResource per kind and version',
      );
    }
    byName.set(d.definition.crdName, list);
  }
  const crds: CrdManifest[] = [];
  for (const name of [...byName.keys()].sort()) {
    const list = byName
      .get(name)!
      .sort((a, b) => compareVersionPriority(a.definition.version, b.definition.version));
    const manifests = list.map((d) => ({ source: d.source, crd: d.definition.crd() }));
    const base = structuredClone(manifests[0]!.crd);
    for (const m of manifests.slice(1)) {
      const diff = (what: string, x: unknown, y: unknown) => {
        if (JSON.stringify(x) !== JSON.stringify(y)) {
          throw new CliError(
            `${name}: ${m.source} and ${manifests[0]!.source} disagree on ${what}`,
            `give every version of ${base.spec.names.kind} the same ${what}`,
          );
        }
      };
      diff('names', m.crd.spec.names, base.spec.names);
      diff('scope', m.crd.spec.scope, base.spec.scope);
    }
    base.spec.versions = manifests.map((m, i) => ({
      ...structuredClone(m.crd.spec.versions[0]!),
      storage: i === 0,
    }));
    crds.push(base);
  }
  return crds;
}

/** config/crd/bases/<group>_<plural>.yaml, as controller-gen names them. */
export function crdFileName(crd: CrdManifest): string {
  return `${crd.spec.group}_${crd.spec.names.plural}.yaml`;
}

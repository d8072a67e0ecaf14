/**
 * Least-privilege RBAC from the controllers' declarations: validated (no wildcards, known verbs), merged
 * (one rule per API group and verb set, resources listed together) and sorted, so that the same
 * declarations always give the same role.yaml.
 */
import { CliError } from '../errors.ts';
import type { PolicyRule } from './rbac-types.ts';

export const KNOWN_VERBS: ReadonlySet<string> = new Set([
  'get',
  'list',
  'watch',
  'create',
  'update',
  'patch',
  'delete',
  'deletecollection',
  'bind',
  'escalate',
  'impersonate',
  'use',
  'approve',
  'sign',
]);

const VERB_ORDER = [...KNOWN_VERBS];

/** A declaration, with where it comes from (for error messages). */
export interface Declared {
  source: string;
  rules: unknown;
}

function strings(value: unknown): value is readonly string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

/** Turns one controller's `rbac` export into plain rules, or throws a CliError naming what is wrong. */
export function normalizeRules(declared: Declared): PolicyRule[] {
  const fail = (what: string): never => {
    throw new CliError(
      `${declared.source}: ${what}`,
      `fix the rbac export of ${declared.source} (see: opkit generate --help)`,
    );
  };
  if (!Array.isArray(declared.rules)) fail('`rbac` must be an array of rules');
  const out: PolicyRule[] = [];
  (declared.rules as unknown[]).forEach((raw, i) => {
    const where = `rbac[${i}]`;
    if (!raw || typeof raw !== 'object') fail(`${where} is not an object`);
    const r = raw as Record<string, unknown>;
    const verbs = r.verbs;
    if (!strings(verbs) || verbs.length === 0) fail(`${where}.verbs must be a non-empty list of verbs`);
    const verbList = verbs as readonly string[];
    for (const v of verbList) {
      if (v === '*') fail(`${where}.verbs has the wildcard '*': name each verb the controller uses`);
      if (!KNOWN_VERBS.has(v))
        fail(`${where}.verbs has an unknown verb "${v}" (known: ${VERB_ORDER.join(', ')})`);
    }
    let apiGroups: readonly string[];
    let resources: readonly string[];
    if (r.resource !== undefined) {
      const res = r.resource as { group?: unknown; plural?: unknown };
      if (typeof res?.group !== 'string' || typeof res.plural !== 'string') {
        fail(
          `${where}.resource must be a Resource descriptor (with group and plural), e.g. Databases.resource`,
        );
      }
      const sub = r.subresource;
      if (sub !== undefined && (typeof sub !== 'string' || !/^[a-z]+$/.test(sub))) {
        fail(`${where}.subresource must be a lower-case name like 'status'`);
      }
      apiGroups = [res.group as string];
      resources = [sub ? `${res.plural}/${sub}` : (res.plural as string)];
    } else {
      const groups = r.apiGroups ?? (typeof r.group === 'string' ? [r.group] : undefined);
      if (!strings(groups) || groups.length === 0) {
        fail(`${where} needs either resource (a Resource descriptor) or apiGroups and resources`);
      }
      if (!strings(r.resources) || r.resources.length === 0)
        fail(`${where}.resources must be a non-empty list`);
      apiGroups = groups as readonly string[];
      resources = r.resources as readonly string[];
    }
    for (const g of apiGroups)
      if (g === '*') fail(`${where}.apiGroups has the wildcard '*': name the API group`);
    for (const res of resources) {
      if (res.includes('*')) fail(`${where}.resources has a wildcard ("${res}"): name each resource`);
    }
    const rule: PolicyRule = { apiGroups: [...apiGroups], resources: [...resources], verbs: [...verbList] };
    if (r.resourceNames !== undefined) {
      if (!strings(r.resourceNames)) fail(`${where}.resourceNames must be a list of names`);
      rule.resourceNames = [...(r.resourceNames as readonly string[])];
    }
    out.push(rule);
  });
  return out;
}

/**
 * Merges rules: the verbs of each (API group, resource, resource names) are united, then resources with
 * the same API group, verbs and names share one rule. Sorted by API group, then resources.
 */
export function mergeRules(rules: readonly PolicyRule[]): PolicyRule[] {
  const atoms = new Map<string, { group: string; resource: string; names: string[]; verbs: Set<string> }>();
  for (const rule of rules) {
    const names = [...new Set(rule.resourceNames ?? [])].sort();
    for (const group of rule.apiGroups) {
      for (const resource of rule.resources) {
        const key = JSON.stringify([group, resource, names]);
        let atom = atoms.get(key);
        if (!atom) {
          atom = { group, resource, names, verbs: new Set() };
          atoms.set(key, atom);
        }
        for (const v of rule.verbs) atom.verbs.add(v);
      }
    }
  }
  const merged = new Map<string, PolicyRule>();
  for (const atom of atoms.values()) {
    const verbs = [...atom.verbs].sort();
    const key = JSON.stringify([atom.group, verbs, atom.names]);
    let rule = merged.get(key);
    if (!rule) {
      rule = { apiGroups: [atom.group], resources: [], verbs };
      if (atom.names.length > 0) rule.resourceNames = atom.names;
      merged.set(key, rule);
    }
    rule.resources.push(atom.resource);
  }
  const out = [...merged.values()];
  for (const r of out) r.resources.sort();
  return out.sort(
    (a, b) =>
      a.apiGroups[0]!.localeCompare(b.apiGroups[0]!) ||
      a.resources[0]!.localeCompare(b.resources[0]!) ||
      a.verbs.join(',').localeCompare(b.verbs.join(',')),
  );
}

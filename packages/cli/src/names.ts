/**
 * Name rules of Kubernetes APIs, checked up front with messages that say what is wrong and what would do.
 * Each `validate*` returns undefined when the name is fine, else the message; `check*` throws a UsageError.
 */
import { UsageError } from './errors.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const VERSION = /^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/;
const PASCAL_CASE = /^[A-Z][A-Za-z0-9]*$/;

/** A DNS-1123 label: what a group (before the domain), a plural and a project name must be. */
export function validateDnsLabel(what: string, value: string): string | undefined {
  if (value === '') return `${what} must not be empty`;
  if (value.length > 63)
    return `${what} "${value}" is ${value.length} characters long; at most 63 are allowed`;
  if (!DNS1123_LABEL.test(value)) {
    return (
      `${what} "${value}" is not a DNS-1123 label: use lower-case letters, digits and '-', ` +
      `starting and ending with a letter or digit (e.g. "${suggestLabel(value) || 'myapp'}")`
    );
  }
  return undefined;
}

export function validateDomain(value: string): string | undefined {
  if (value === '') return 'the domain must not be empty (e.g. --domain example.com)';
  if (value.length > 253) return `the domain "${value}" is longer than 253 characters`;
  if (!DNS1123_SUBDOMAIN.test(value)) {
    return (
      `the domain "${value}" is not a DNS-1123 subdomain: use lower-case labels of letters, digits and '-' ` +
      `separated by dots (e.g. "example.com")`
    );
  }
  for (const label of value.split('.')) {
    if (label.length > 63) return `the domain "${value}" has a label longer than 63 characters: "${label}"`;
  }
  return undefined;
}

export function validateGroup(group: string, domain: string): string | undefined {
  const label = validateDnsLabel('the group', group);
  if (label) return group.includes('.') ? `${label}; the domain (${domain}) is appended for you` : label;
  const full = `${group}.${domain}`;
  if (full.length > 253) return `the full API group "${full}" is longer than 253 characters`;
  return undefined;
}

export function validateVersion(version: string): string | undefined {
  if (VERSION.test(version)) return undefined;
  return (
    `the version "${version}" is not a Kubernetes API version: use v<N>, v<N>alpha<M> or v<N>beta<M> ` +
    `with N, M >= 1 (e.g. "v1", "v1beta1", "v2alpha3")`
  );
}

export function validateKind(kind: string): string | undefined {
  if (kind === '') return 'the kind must not be empty (e.g. --kind Database)';
  if (kind.length > 63) return `the kind "${kind}" is longer than 63 characters`;
  if (!PASCAL_CASE.test(kind)) {
    return (
      `the kind "${kind}" is not PascalCase: start with an upper-case letter, then letters and digits only ` +
      `(e.g. "${toPascalCase(kind) || 'Database'}")`
    );
  }
  if (kind.endsWith('List')) return `the kind "${kind}" must not end in "List" (that names its list type)`;
  return undefined;
}

export function validatePlural(plural: string): string | undefined {
  return validateDnsLabel('the plural', plural);
}

function usage(message: string | undefined, next: string): void {
  if (message) throw new UsageError(message, next);
}

export function checkDomain(domain: string): void {
  usage(validateDomain(domain), 'pass a DNS domain you own, e.g. opkit init --domain example.com');
}

export function checkProjectName(name: string): void {
  usage(validateDnsLabel('the project name', name), 'pass a valid one with --name, e.g. --name my-operator');
}

export function checkApiNames(opts: {
  group: string;
  version: string;
  kind: string;
  plural: string;
  domain: string;
}): void {
  const example = 'e.g. opkit create api --group myapp --version v1 --kind Database';
  usage(validateGroup(opts.group, opts.domain), `fix --group (${example})`);
  usage(validateVersion(opts.version), `fix --version (${example})`);
  usage(validateKind(opts.kind), `fix --kind (${example})`);
  usage(validatePlural(opts.plural), 'fix --plural, e.g. --plural databases');
}

const IRREGULAR_PLURALS: Record<string, string> = {
  person: 'people',
  child: 'children',
  index: 'indices',
  matrix: 'matrices',
  status: 'statuses',
  endpoints: 'endpoints',
};

/** 'Database' -> 'Databases', 'Policy' -> 'Policies': the kind's plural, its own capitals kept. */
export function pluralizeKind(kind: string): string {
  const match = /[A-Z]?[a-z0-9]*$/.exec(kind);
  const last = match?.[0] ?? kind;
  const irregular = IRREGULAR_PLURALS[last.toLowerCase()];
  if (irregular) {
    const head = kind.slice(0, kind.length - last.length);
    return (
      head +
      (last.charAt(0) === last.charAt(0).toUpperCase()
        ? irregular.charAt(0).toUpperCase() + irregular.slice(1)
        : irregular)
    );
  }
  if (/[^aeiouAEIOU]y$/.test(kind)) return `${kind.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/i.test(kind)) return `${kind}es`;
  return `${kind}s`;
}

/** The plural a kind gets by default (lower case), the way kubebuilder makes the common English ones. */
export function pluralize(kind: string): string {
  return pluralizeKind(kind).toLowerCase();
}

/** 'Database' -> 'database'; the file and folder name of a kind. */
export function kindFileName(kind: string): string {
  return kind.toLowerCase();
}

/** 'Database' -> 'database' (identifier case: first letter lower). */
export function lowerFirst(value: string): string {
  return value.charAt(0).toLowerCase() + value.slice(1);
}

export function toPascalCase(value: string): string {
  return value
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('')
    .replace(/^[0-9]+/, '');
}

/** A DNS-1123 label made from any text (a folder name), or '' when nothing usable is left. */
export function suggestLabel(value: string): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
}

/**
 * Reads kubeconfig files and the in-cluster service account into plain objects, without
 * @kubernetes/client-node: importing it costs ~80 MiB RSS and ~1 s (its generated API), which an
 * operator using a token or a client certificate never needs. Follows kubectl: relative paths are
 * resolved against the kubeconfig file's directory, and in a KUBECONFIG list the first file to define
 * a name (or current-context) wins.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { messageOf } from '../util/errors.ts';

/** The configuration could not be found, parsed, or applied. */
export class ConfigError extends Error {
  override readonly cause: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = 'ConfigError';
    this.cause = cause;
  }
}

/** A cluster entry. File paths are absolute; `*Data` fields are base64 as in the file. */
export interface KubeconfigCluster {
  readonly name: string;
  /** Where the entry comes from ("kubeconfig /path" or "the in-cluster service account"), for errors. */
  readonly source: string;
  readonly server?: string;
  readonly certificateAuthority?: string;
  readonly certificateAuthorityData?: string;
  readonly insecureSkipTlsVerify: boolean;
  readonly tlsServerName?: string;
  readonly proxyUrl?: string;
}

/** A user entry. File paths are absolute; `*Data` fields are base64 as in the file. */
export interface KubeconfigUser {
  readonly name: string;
  readonly source: string;
  readonly token?: string;
  readonly tokenFile?: string;
  readonly clientCertificate?: string;
  readonly clientCertificateData?: string;
  readonly clientKey?: string;
  readonly clientKeyData?: string;
  readonly username?: string;
  readonly password?: string;
  /** `as`: the user to impersonate. */
  readonly impersonate?: string;
  /** The exec plugin and auth-provider sections, as in the file (handled by client-node). */
  readonly exec?: Readonly<Record<string, unknown>>;
  readonly authProvider?: Readonly<Record<string, unknown>>;
}

export interface KubeconfigContext {
  readonly name: string;
  readonly cluster?: string;
  readonly user?: string;
  readonly namespace?: string;
}

export interface Kubeconfig {
  readonly clusters: readonly KubeconfigCluster[];
  readonly users: readonly KubeconfigUser[];
  readonly contexts: readonly KubeconfigContext[];
  readonly currentContext?: string;
}

/** The entries a context selects. */
export interface SelectedContext {
  readonly name: string;
  readonly cluster: KubeconfigCluster;
  /** Absent for a context without a user: requests are anonymous. */
  readonly user?: KubeconfigUser;
  /** The context's namespace, or "default". */
  readonly namespace: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

let yamlParse: ((text: string) => unknown) | undefined;

/** Reads and parses one kubeconfig file. */
export function readKubeconfig(file: string): Kubeconfig {
  if (!existsSync(file)) {
    throw new ConfigError(
      `kubeconfig file not found: ${file} (check the path, or unset it to use the defaults)`,
    );
  }
  try {
    // Loaded on first use (~10 MiB RSS): the in-cluster configuration needs no YAML.
    yamlParse ??= (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse;
    return parseKubeconfig(yamlParse(readFileSync(file, 'utf8')), file);
  } catch (err) {
    throw new ConfigError(
      `failed to load kubeconfig ${file}: ${messageOf(err)} (fix the file or point to another one)`,
      err,
    );
  }
}

/** The kubeconfig of a parsed file; `file` is its path, for resolving relative paths. */
export function parseKubeconfig(doc: unknown, file: string): Kubeconfig {
  if (doc === null || doc === undefined) return { clusters: [], users: [], contexts: [] }; // empty file
  const root = object(doc, 'the document');
  const dir = dirname(resolve(file));
  const source = `kubeconfig ${file}`;
  /** kubectl's rule: relative paths in a kubeconfig are relative to the file's directory. */
  const path = (p: unknown): string | undefined => {
    const s = text(p);
    return s && !isAbsolute(s) ? join(dir, s) : s;
  };
  const clusters = entries(root.clusters, 'clusters', 'cluster').map(
    ([name, c]): KubeconfigCluster => ({
      name,
      source,
      server: text(c.server),
      certificateAuthority: path(c['certificate-authority']),
      certificateAuthorityData: text(c['certificate-authority-data']),
      insecureSkipTlsVerify: c['insecure-skip-tls-verify'] === true,
      tlsServerName: text(c['tls-server-name']),
      proxyUrl: text(c['proxy-url']),
    }),
  );
  const users = entries(root.users, 'users', 'user').map(([name, u]): KubeconfigUser => {
    let exec = u.exec === undefined || u.exec === null ? undefined : object(u.exec, `user "${name}" exec`);
    // Like kubectl, a command given as a relative path (not a bare name looked up in PATH).
    const command = text(exec?.command);
    if (exec && command?.includes('/') && !isAbsolute(command))
      exec = { ...exec, command: join(dir, command) };
    const authProvider = u['auth-provider'];
    return {
      name,
      source,
      token: text(u.token),
      // kubectl spells it tokenFile, client-node token-file.
      tokenFile: path(u.tokenFile ?? u['token-file']),
      clientCertificate: path(u['client-certificate']),
      clientCertificateData: text(u['client-certificate-data']),
      clientKey: path(u['client-key']),
      clientKeyData: text(u['client-key-data']),
      username: text(u.username),
      password: text(u.password),
      impersonate: text(u.as),
      exec,
      authProvider:
        authProvider === undefined || authProvider === null
          ? undefined
          : object(authProvider, `user "${name}" auth-provider`),
    };
  });
  const contexts = entries(root.contexts, 'contexts', 'context').map(
    ([name, c]): KubeconfigContext => ({
      name,
      cluster: text(c.cluster),
      user: text(c.user),
      namespace: text(c.namespace),
    }),
  );
  return { clusters, users, contexts, currentContext: text(root['current-context']) };
}

/** kubectl's merge rules for a KUBECONFIG list: the first file to define a name (or current-context) wins. */
export function mergeKubeconfigs(configs: readonly Kubeconfig[]): Kubeconfig {
  const firstByName = <T extends { name: string }>(lists: (readonly T[])[]): T[] => {
    const seen = new Map<string, T>();
    for (const list of lists) for (const item of list) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  return {
    clusters: firstByName(configs.map((c) => c.clusters)),
    users: firstByName(configs.map((c) => c.users)),
    contexts: firstByName(configs.map((c) => c.contexts)),
    currentContext: configs.find((c) => c.currentContext)?.currentContext,
  };
}

/** True inside a pod: KUBERNETES_SERVICE_HOST is set and the service account token is mounted. */
export function inCluster(env: Record<string, string | undefined>, prefix: string): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST) && existsSync(`${prefix}${SERVICE_ACCOUNT_DIR}/token`);
}

/**
 * The in-cluster configuration: the API server from KUBERNETES_SERVICE_HOST/PORT, the service
 * account's token file (re-read as it rotates), CA and namespace.
 */
export function inClusterKubeconfig(env: Record<string, string | undefined>, prefix: string): Kubeconfig {
  const dir = `${prefix}${SERVICE_ACCOUNT_DIR}`;
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const source = 'the in-cluster service account';
  const name = 'in-cluster';
  let namespace: string | undefined;
  try {
    namespace = readFileSync(`${dir}/namespace`, 'utf8').trim();
  } catch {
    // No namespace file: "default", as client-go.
  }
  return {
    clusters: [
      {
        name,
        source,
        server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
        // client-go goes on with the system roots when ca.crt is missing; so do we.
        certificateAuthority: existsSync(`${dir}/ca.crt`) ? `${dir}/ca.crt` : undefined,
        insecureSkipTlsVerify: false,
      },
    ],
    users: [{ name, source, tokenFile: `${dir}/token` }],
    contexts: [{ name, cluster: name, user: name, namespace }],
    currentContext: name,
  };
}

/** The cluster, user and namespace of `context` (default: the current-context). */
export function selectContext(kc: Kubeconfig, context?: string): SelectedContext {
  const names = (list: readonly { name: string }[]) => list.map((x) => x.name).join(', ') || 'none';
  const name = context ?? kc.currentContext;
  if (!name)
    throw new ConfigError('kubeconfig has no current-context: pass a context or set current-context');
  const ctx = kc.contexts.find((c) => c.name === name);
  if (!ctx) {
    throw new ConfigError(
      `${context === undefined ? 'current-context' : 'context'} "${name}" not found in kubeconfig ` +
        `(known: ${names(kc.contexts)})`,
    );
  }
  if (!ctx.cluster) throw new ConfigError(`kubeconfig context "${name}" has no cluster: set its cluster`);
  const cluster = kc.clusters.find((c) => c.name === ctx.cluster);
  if (!cluster) {
    throw new ConfigError(
      `kubeconfig context "${name}" has no cluster (or it is not defined): cluster "${ctx.cluster}" ` +
        `not found (known: ${names(kc.clusters)})`,
    );
  }
  const user = ctx.user ? kc.users.find((u) => u.name === ctx.user) : undefined;
  if (ctx.user && !user) {
    throw new ConfigError(
      `kubeconfig context "${name}" refers to user "${ctx.user}", which is not defined ` +
        `(known: ${names(kc.users)})`,
    );
  }
  return { name, cluster, user, namespace: ctx.namespace?.trim() || 'default' };
}

/** `[name, body]` of each `{ name, <key>: body }` in a clusters/users/contexts list. */
function entries(list: unknown, field: string, key: string): [string, Record<string, unknown>][] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw new Error(`${field} is not a list`);
  return list.map((item, i) => {
    const entry = object(item, `${field}[${i}]`);
    const name = text(entry.name);
    if (!name) throw new Error(`${field}[${i}] has no name`);
    const body = entry[key];
    return [name, body === undefined || body === null ? {} : object(body, `${field}[${i}].${key}`)];
  });
}

function object(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${what} is not a mapping`);
  }
  return value as Record<string, unknown>;
}

/** A string field; YAML numbers (a numeric password or token) count as strings, as in kubectl. */
function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value || undefined;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return undefined;
}

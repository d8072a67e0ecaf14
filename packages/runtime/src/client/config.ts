/**
 * Connection settings for the API server: where it is, and how to authenticate to it.
 *
 * Parsing and credential handling (client certificates, bearer tokens, token files, exec plugins,
 * auth providers) are delegated to @kubernetes/client-node's `KubeConfig`; opkit only decides where
 * the configuration comes from and applies the result to its own HTTP transport.
 */
import { existsSync } from 'node:fs';
import type * as http from 'node:http';
import type * as https from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

/** The configuration could not be found, parsed, or applied. */
export class ConfigError extends Error {
  override readonly cause: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = 'ConfigError';
    this.cause = cause;
  }
}

/** The subset of request options the configuration fills in: TLS material and authentication. */
export interface RequestAuth {
  headers: Record<string, string>;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  pfx?: string | Buffer;
  passphrase?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
  /** "user:password" for basic auth. */
  auth?: string;
}

export interface RestConfig {
  /** Base URL of the API server, without a trailing slash, e.g. "https://127.0.0.1:6443". */
  readonly server: string;
  /** host[:port] of the server; the `host` label of request metrics. */
  readonly host: string;
  /** The namespace of the current context, or "default". */
  readonly namespace: string;
  /**
   * The underlying client-node configuration (e.g. to build client-node API clients): the one the
   * credentials currently come from (`refreshCredentials` replaces it).
   */
  readonly kubeConfig: KubeConfig;
  /**
   * When the cluster entry sets proxy-url, the (cached) proxy agent client-node built for it. The
   * transport then uses it instead of its own keep-alive agent.
   */
  readonly proxyAgent?: http.Agent;
  /**
   * TLS and credentials for one request. Called per request so that rotating credentials (exec
   * plugins, projected service-account tokens) are picked up; cheap once the credential is cached.
   */
  authenticate(): Promise<RequestAuth>;
  /**
   * Drops cached credentials so that the next `authenticate()` gets fresh ones. client-node caches an
   * exec plugin's credential until its expirationTimestamp (forever without one) and reads a user's
   * `token-file` only when the kubeconfig is loaded; so the configuration is loaded again from where it
   * came from (the kubeconfig file(s), or the in-cluster service account), with fresh authenticators:
   * exec plugins run again, token files are read again. The transport calls it once when the API
   * server answers 401 Unauthorized, and retries the request if the credentials changed.
   *
   * `stale` is the RequestAuth the server rejected: if the credentials were refreshed since it was
   * issued (a concurrent request got there first), nothing is reloaded. Never rejects: if reloading
   * fails the current credentials stay. Optional, for configurations built by hand.
   */
  refreshCredentials?(stale?: RequestAuth): Promise<void>;
}

export interface LoadConfigOptions {
  /** Path to a kubeconfig file. Without it: $KUBECONFIG, then in-cluster, then ~/.kube/config. */
  kubeconfig?: string;
  /** Context to use instead of the file's current-context. */
  context?: string;
  /** Environment to read KUBECONFIG / KUBERNETES_SERVICE_HOST from (tests). Defaults to process.env. */
  env?: Record<string, string | undefined>;
  /** Home directory holding .kube/config (tests). Defaults to os.homedir(). */
  homeDir?: string;
  /** Prefix for /var/run/secrets/kubernetes.io/serviceaccount (tests). Defaults to ''. */
  inClusterPathPrefix?: string;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Loads the configuration: an explicit kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config. */
export function loadConfig(opts: LoadConfigOptions = {}): RestConfig {
  const env = opts.env ?? process.env;
  const kc = new KubeConfig();
  let load: (into: KubeConfig) => void;
  if (opts.kubeconfig) {
    const file = opts.kubeconfig;
    load = (into) => loadFile(into, file);
  } else if (env.KUBECONFIG) {
    const files = env.KUBECONFIG.split(delimiter).filter((f) => f.length > 0);
    const existing = files.filter((f) => existsSync(f));
    if (existing.length === 0) {
      throw new ConfigError(`KUBECONFIG is set but none of its files exist: ${files.join(delimiter)}`);
    }
    load = (into) => loadMerged(into, existing);
  } else if (inCluster(env, opts.inClusterPathPrefix ?? '')) {
    const prefix = opts.inClusterPathPrefix ?? '';
    load = (into) => loadInCluster(into, env, prefix);
  } else {
    const home = opts.homeDir ?? safeHomedir();
    const file = home ? join(home, '.kube', 'config') : '';
    if (!file || !existsSync(file)) {
      throw new ConfigError('no Kubernetes configuration found: set KUBECONFIG or pass --kubeconfig');
    }
    load = (into) => loadFile(into, file);
  }
  load(kc);
  if (opts.context !== undefined) {
    if (!kc.getContextObject(opts.context)) {
      throw new ConfigError(
        `context "${opts.context}" not found in kubeconfig (known: ${
          kc
            .getContexts()
            .map((c) => c.name)
            .join(', ') || 'none'
        })`,
      );
    }
    kc.setCurrentContext(opts.context);
  }
  const context = kc.getCurrentContext();
  return buildConfig(kc, () => {
    const fresh = new KubeConfig();
    load(fresh);
    if (!fresh.getContextObject(context))
      throw new ConfigError(`context "${context}" is gone from the kubeconfig`);
    fresh.setCurrentContext(context);
    return fresh;
  });
}

/**
 * Wraps an already loaded client-node KubeConfig. Its `refreshCredentials` works on a copy of `kc`
 * with fresh authenticators (exec plugins run again); a user's token read from a `token-file` when
 * `kc` was loaded cannot be re-read (use {@link loadConfig} for that).
 */
export function configFromKubeConfig(kc: KubeConfig): RestConfig {
  return buildConfig(kc, () => copyKubeConfig(kc));
}

/** A copy of `kc` with fresh client-node authenticators (no cached exec credentials), keeping custom ones. */
function copyKubeConfig(kc: KubeConfig): KubeConfig {
  const fresh = new KubeConfig();
  fresh.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  // Authenticators added with addAuthenticator() live in a private field of client-node's KubeConfig.
  const custom: unknown = Reflect.get(kc, 'custom_authenticators');
  if (Array.isArray(custom)) {
    for (const authenticator of custom as Parameters<KubeConfig['addAuthenticator']>[0][]) {
      fresh.addAuthenticator(authenticator);
    }
  }
  return fresh;
}

function buildConfig(kc: KubeConfig, reload: () => KubeConfig): RestConfig {
  const cluster = kc.getCurrentCluster();
  if (!kc.getCurrentContext() && !cluster) {
    throw new ConfigError('kubeconfig has no current-context: pass a context or set current-context');
  }
  if (!cluster) {
    throw new ConfigError(
      `kubeconfig context "${kc.getCurrentContext()}" has no cluster (or it is not defined)`,
    );
  }
  if (!cluster.server) {
    throw new ConfigError(`kubeconfig cluster "${cluster.name}" has no server URL`);
  }
  let url: URL;
  try {
    url = new URL(cluster.server);
  } catch (err) {
    throw new ConfigError(
      `kubeconfig cluster "${cluster.name}" has an invalid server URL: ${cluster.server}`,
      err,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`unsupported server URL scheme ${url.protocol} in ${cluster.server}`);
  }
  const server = cluster.server.replace(/\/+$/, '');
  const namespace = kc.getContextObject(kc.getCurrentContext())?.namespace?.trim() || 'default';
  let proxyAgent: http.Agent | undefined;
  /** Where credentials come from now; refreshCredentials replaces it. */
  let credentials = kc;
  let generation = 0;
  /** The credentials generation each RequestAuth handed out was made from. */
  const issued = new WeakMap<RequestAuth, number>();

  /** The authentication in progress: concurrent requests share it (one exec plugin run, not N). */
  let inflight: Promise<RequestAuth> | undefined;

  const authenticate = (): Promise<RequestAuth> => {
    if (inflight) return inflight;
    const current: Promise<RequestAuth> = applyCredentials().finally(() => {
      if (inflight === current) inflight = undefined;
    });
    inflight = current;
    return current;
  };

  const applyCredentials = async (): Promise<RequestAuth> => {
    const source = credentials;
    const sourceGeneration = generation;
    const opts: https.RequestOptions = { headers: {} };
    try {
      await source.applyToHTTPSOptions(opts);
    } catch (err) {
      // client-node refuses plain http unless insecure-skip-tls-verify is set, but only after it
      // applied the credentials: for an http server that's the one error we don't care about.
      const plainHttp = url.protocol === 'http:' && err instanceof Error && /HTTP protocol/.test(err.message);
      if (!plainHttp) {
        throw new ConfigError(`failed to apply credentials for ${server}: ${errorMessage(err)}`, err);
      }
    }
    // applyToHTTPSOptions also sets `agent` to an agent of its own (no keep-alive); the transport
    // passes its own agent instead. With a proxy, client-node's (cached) proxy agent is the one to use.
    if (cluster.proxyUrl && opts.agent && proxyAgent === undefined) proxyAgent = opts.agent as http.Agent;
    const out: RequestAuth = { headers: {} };
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (typeof v === 'string') out.headers[k] = v;
      else if (Array.isArray(v)) out.headers[k] = v.join(', ');
      else if (typeof v === 'number') out.headers[k] = String(v);
    }
    if (opts.ca !== undefined) out.ca = opts.ca as string | Buffer;
    if (opts.cert !== undefined) out.cert = opts.cert as string | Buffer;
    if (opts.key !== undefined) out.key = opts.key as string | Buffer;
    if (opts.pfx !== undefined) out.pfx = opts.pfx as string | Buffer;
    if (opts.passphrase !== undefined) out.passphrase = opts.passphrase;
    if (opts.rejectUnauthorized !== undefined) out.rejectUnauthorized = opts.rejectUnauthorized;
    if (opts.servername !== undefined) out.servername = opts.servername;
    if (opts.auth) out.auth = opts.auth;
    issued.set(out, sourceGeneration);
    return out;
  };

  const refreshCredentials = async (stale?: RequestAuth): Promise<void> => {
    const staleGeneration = stale === undefined ? undefined : issued.get(stale);
    if (staleGeneration !== undefined && staleGeneration !== generation) return; // refreshed meanwhile
    try {
      credentials = reload();
      generation++;
      inflight = undefined; // an authentication still running uses the old credentials
    } catch {
      // Keep the current credentials: the caller's request fails with its 401 as it would have.
    }
  };

  return {
    server,
    host: url.host,
    namespace,
    get kubeConfig() {
      return credentials;
    },
    get proxyAgent() {
      return proxyAgent;
    },
    authenticate,
    refreshCredentials,
  };
}

function loadFile(kc: KubeConfig, file: string): void {
  if (!existsSync(file)) throw new ConfigError(`kubeconfig file not found: ${file}`);
  try {
    kc.loadFromFile(file);
  } catch (err) {
    throw new ConfigError(`failed to load kubeconfig ${file}: ${errorMessage(err)}`, err);
  }
}

/** kubectl's merge rules: the first file to define a name (or current-context) wins. */
function loadMerged(kc: KubeConfig, files: string[]): void {
  const [first, ...rest] = files;
  loadFile(kc, first as string);
  if (rest.length === 0) return;
  const clusters = [...kc.clusters];
  const users = [...kc.users];
  const contexts = [...kc.contexts];
  let currentContext = kc.currentContext;
  for (const file of rest) {
    const other = new KubeConfig();
    loadFile(other, file);
    for (const c of other.clusters) if (!clusters.some((x) => x.name === c.name)) clusters.push(c);
    for (const u of other.users) if (!users.some((x) => x.name === u.name)) users.push(u);
    for (const c of other.contexts) if (!contexts.some((x) => x.name === c.name)) contexts.push(c);
    if (!currentContext) currentContext = other.currentContext;
  }
  kc.loadFromOptions({ clusters, users, contexts, currentContext });
}

/** client-node's loadFromCluster, but reading the service host/port from `env`. */
function loadInCluster(kc: KubeConfig, env: Record<string, string | undefined>, prefix: string): void {
  kc.loadFromCluster(prefix);
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const h = isIPv6(host) ? `[${host}]` : host;
  kc.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server: `${scheme}://${h}:${port}` })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
}

function inCluster(env: Record<string, string | undefined>, prefix: string): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST) && existsSync(`${prefix}${SERVICE_ACCOUNT_DIR}/token`);
}

function safeHomedir(): string {
  try {
    return process.env.HOME || homedir();
  } catch {
    return '';
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

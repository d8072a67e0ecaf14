/**
 * Connection settings for the API server: where it is, and how to authenticate to it.
 *
 * The kubeconfig (or in-cluster configuration) is read by ./kubeconfig.ts, and tokens, token files,
 * client certificates, CAs and basic auth are applied here. Only exec plugins, auth providers and
 * proxies (proxy-url) are delegated to @kubernetes/client-node's `KubeConfig`, imported on first use:
 * importing it costs ~80 MiB RSS and ~1 s, which the common configurations don't pay.
 */
import { existsSync, readFileSync } from 'node:fs';
import type * as http from 'node:http';
import type * as https from 'node:https';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { messageOf } from '../util/errors.ts';
import {
  ConfigError,
  inCluster,
  inClusterKubeconfig,
  type Kubeconfig,
  type KubeconfigCluster,
  type KubeconfigUser,
  mergeKubeconfigs,
  readKubeconfig,
  type SelectedContext,
  selectContext,
} from './kubeconfig.ts';

export { ConfigError };

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
   * When the cluster entry sets proxy-url, the (cached) proxy agent client-node built for it, once
   * `authenticate()` ran. The transport then uses it instead of its own keep-alive agent.
   */
  readonly proxyAgent?: http.Agent;
  /**
   * TLS and credentials for one request. Called per request so that rotating credentials (exec
   * plugins, projected service-account tokens) are picked up; cheap once the credential is cached.
   */
  authenticate(): Promise<RequestAuth>;
  /**
   * Drops cached credentials so that the next `authenticate()` gets fresh ones: the configuration is
   * loaded again from where it came from (the kubeconfig file(s), or the in-cluster service account),
   * so token, certificate and key files are read again and exec plugins (whose credential client-node
   * caches until its expirationTimestamp, forever without one) run again. The transport calls it once
   * when the API server answers 401 Unauthorized, and retries the request if the credentials changed.
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

/**
 * How long credential files are used before being read again: client-go re-reads a token file about
 * every minute (projected service-account tokens rotate); certificates rotate too.
 */
const FILE_MAX_AGE_MS = 60_000;

/** Where the credentials of a configuration come from; `refreshCredentials` replaces it. */
interface Credentials {
  apply(): Promise<RequestAuth>;
  /** client-node's proxy agent, once `apply` built one (clusters with proxy-url). */
  readonly proxyAgent?: http.Agent;
}

/** Loads the configuration: an explicit kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config. */
export function loadConfig(opts: LoadConfigOptions = {}): RestConfig {
  const env = opts.env ?? process.env;
  const prefix = opts.inClusterPathPrefix ?? '';
  let load: () => Kubeconfig;
  if (opts.kubeconfig) {
    const file = opts.kubeconfig;
    load = () => readKubeconfig(file);
  } else if (env.KUBECONFIG) {
    const files = env.KUBECONFIG.split(delimiter).filter((f) => f.length > 0);
    const existing = files.filter((f) => existsSync(f));
    if (existing.length === 0) {
      throw new ConfigError(`KUBECONFIG is set but none of its files exist: ${files.join(delimiter)}`);
    }
    load = () => mergeKubeconfigs(existing.map(readKubeconfig));
  } else if (inCluster(env, prefix)) {
    load = () => inClusterKubeconfig(env, prefix);
  } else {
    const home = opts.homeDir ?? safeHomedir();
    const file = home ? join(home, '.kube', 'config') : '';
    if (!file || !existsSync(file)) {
      throw new ConfigError('no Kubernetes configuration found: set KUBECONFIG or pass --kubeconfig');
    }
    load = () => readKubeconfig(file);
  }
  const selected = selectContext(load(), opts.context);
  const { server, url } = endpoint(selected.cluster.name, selected.cluster.server);
  return buildConfig(server, url, selected.namespace, credentialsFor(selected, url), () =>
    credentialsFor(selectContext(load(), selected.name), url),
  );
}

/**
 * Wraps an already loaded client-node KubeConfig; its credentials are applied by client-node. Its
 * `refreshCredentials` works on a copy of `kc` with fresh authenticators (exec plugins run again); a
 * user's token read from a `token-file` when `kc` was loaded cannot be re-read (use {@link loadConfig}).
 */
export function configFromKubeConfig(kc: KubeConfig): RestConfig {
  const cluster = kc.getCurrentCluster();
  if (!kc.getCurrentContext() && !cluster) {
    throw new ConfigError('kubeconfig has no current-context: pass a context or set current-context');
  }
  if (!cluster) {
    throw new ConfigError(
      `kubeconfig context "${kc.getCurrentContext()}" has no cluster (or it is not defined)`,
    );
  }
  const { server, url } = endpoint(cluster.name, cluster.server);
  const namespace = kc.getContextObject(kc.getCurrentContext())?.namespace?.trim() || 'default';
  const proxy = Boolean(cluster.proxyUrl);
  return buildConfig(
    server,
    url,
    namespace,
    clientNodeCredentials(() => kc, url, proxy),
    () => clientNodeCredentials((KC) => copyKubeConfig(KC, kc), url, proxy),
  );
}

function endpoint(cluster: string, server: string | undefined): { server: string; url: URL } {
  if (!server) {
    throw new ConfigError(`kubeconfig cluster "${cluster}" has no server URL: set its server`);
  }
  let url: URL;
  try {
    url = new URL(server);
  } catch (err) {
    throw new ConfigError(
      `kubeconfig cluster "${cluster}" has an invalid server URL: ${server} (expected https://host[:port])`,
      err,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`unsupported server URL scheme ${url.protocol} in ${server} (use https://)`);
  }
  return { server: server.replace(/\/+$/, ''), url };
}

function buildConfig(
  server: string,
  url: URL,
  namespace: string,
  initial: Credentials,
  reload: () => Credentials,
): RestConfig {
  let proxyAgent: http.Agent | undefined;
  /** Where credentials come from now; refreshCredentials replaces it. */
  let credentials = initial;
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
    const auth = await source.apply();
    proxyAgent ??= source.proxyAgent;
    issued.set(auth, sourceGeneration);
    return auth;
  };

  const refreshCredentials = async (stale?: RequestAuth): Promise<void> => {
    const staleGeneration = stale === undefined ? undefined : issued.get(stale);
    if (staleGeneration !== undefined && staleGeneration !== generation) return; // refreshed meanwhile
    try {
      // Synchronous, so that concurrent callers see the new generation and don't reload again.
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
    get proxyAgent() {
      return proxyAgent;
    },
    authenticate,
    refreshCredentials,
  };
}

/** The credentials of a context: native unless they need exec, an auth provider or a proxy. */
function credentialsFor(selected: SelectedContext, url: URL): Credentials {
  const { cluster, user } = selected;
  if (user?.exec || user?.authProvider || cluster.proxyUrl) {
    // Token files are read now (and again by refreshCredentials), as client-node reads them on load.
    const token = user?.tokenFile ? readToken(user.tokenFile, user) : user?.token;
    return clientNodeCredentials(
      (KC) => {
        const kc = new KC();
        kc.loadFromOptions({
          clusters: [clientNodeCluster(cluster)],
          users: [clientNodeUser(user, token)],
          contexts: [{ name: selected.name, cluster: cluster.name, user: user?.name ?? '' }],
          currentContext: selected.name,
        });
        return kc;
      },
      url,
      Boolean(cluster.proxyUrl),
    );
  }
  return nativeCredentials(cluster, user);
}

/**
 * Tokens, token files, client certificates, CAs, basic auth and TLS options, applied without
 * client-node. Files are read now, so that a wrong path fails loadConfig; they are read again by
 * refreshCredentials (a new Credentials) and when older than a minute (rotated tokens and certificates).
 */
function nativeCredentials(cluster: KubeconfigCluster, user: KubeconfigUser | undefined): Credentials {
  const ofCluster = `cluster "${cluster.name}" in ${cluster.source}`;
  const read = (): RequestAuth => {
    const auth: RequestAuth = { headers: {} };
    const ca = material(
      cluster.certificateAuthority,
      cluster.certificateAuthorityData,
      'certificate-authority',
      ofCluster,
    );
    if (ca) auth.ca = ca;
    if (cluster.insecureSkipTlsVerify) auth.rejectUnauthorized = false;
    if (cluster.tlsServerName) auth.servername = cluster.tlsServerName;
    if (!user) return auth;
    const ofUser = `user "${user.name}" in ${user.source}`;
    const cert = material(user.clientCertificate, user.clientCertificateData, 'client-certificate', ofUser);
    const key = material(user.clientKey, user.clientKeyData, 'client-key', ofUser);
    if (cert) auth.cert = cert;
    if (key) auth.key = key;
    if (user.username) auth.auth = `${user.username}:${user.password ?? ''}`;
    if (user.impersonate) auth.headers['Impersonate-User'] = user.impersonate;
    // A token file wins over a token, as in client-go.
    const token = user.tokenFile ? readToken(user.tokenFile, user) : user.token;
    if (token) auth.headers.Authorization = `Bearer ${token}`;
    return auth;
  };
  let current = read();
  let readAt = Date.now();
  const files = Boolean(
    cluster.certificateAuthority || user?.clientCertificate || user?.clientKey || user?.tokenFile,
  );
  return {
    async apply() {
      if (files && Date.now() - readAt > FILE_MAX_AGE_MS) {
        readAt = Date.now();
        try {
          current = read();
        } catch {
          // Keep the last ones read: if they are no longer valid, the 401 makes refreshCredentials retry.
        }
      }
      return { ...current, headers: { ...current.headers } };
    },
  };
}

type KubeConfigClass = typeof import('@kubernetes/client-node').KubeConfig;

/**
 * Credentials applied by client-node's KubeConfig (exec plugins, auth providers, proxies), imported
 * and built on first use. `proxy`: the cluster sets proxy-url, so client-node's agent is the one to use.
 */
function clientNodeCredentials(
  build: (KC: KubeConfigClass) => KubeConfig,
  url: URL,
  proxy: boolean,
): Credentials {
  let kc: Promise<KubeConfig> | undefined;
  let proxyAgent: http.Agent | undefined;
  return {
    get proxyAgent() {
      return proxyAgent;
    },
    async apply() {
      const opts: https.RequestOptions = { headers: {} };
      try {
        kc ??= import('@kubernetes/client-node').then((m) => build(m.KubeConfig));
        await (await kc).applyToHTTPSOptions(opts);
      } catch (err) {
        // client-node refuses plain http unless insecure-skip-tls-verify is set, but only after it
        // applied the credentials: for an http server that's the one error we don't care about.
        const plainHttp =
          url.protocol === 'http:' && err instanceof Error && /HTTP protocol/.test(err.message);
        if (!plainHttp) {
          throw new ConfigError(`failed to apply credentials for ${url.href}: ${messageOf(err)}`, err);
        }
      }
      // applyToHTTPSOptions also sets `agent` to an agent of its own (no keep-alive); the transport
      // passes its own agent instead. With a proxy, client-node's (cached) proxy agent is the one to use.
      if (proxy && opts.agent) proxyAgent = opts.agent as http.Agent;
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
      return out;
    },
  };
}

type ClientNodeCluster = KubeConfig['clusters'][number];
type ClientNodeUser = KubeConfig['users'][number];

function clientNodeCluster(c: KubeconfigCluster): ClientNodeCluster {
  return {
    name: c.name,
    server: c.server ?? '',
    caFile: c.certificateAuthority,
    caData: c.certificateAuthorityData,
    skipTLSVerify: c.insecureSkipTlsVerify,
    tlsServerName: c.tlsServerName,
    proxyUrl: c.proxyUrl,
  };
}

/** `token`: the user's token, or its token file's content. Without a user, an empty one. */
function clientNodeUser(u: KubeconfigUser | undefined, token: string | undefined): ClientNodeUser {
  // Always one user: without a current user, client-node skips the cluster's TLS settings too.
  if (!u) return { name: '' };
  return {
    name: u.name,
    token,
    certFile: u.clientCertificate,
    certData: u.clientCertificateData,
    keyFile: u.clientKey,
    keyData: u.clientKeyData,
    username: u.username,
    password: u.password,
    impersonateUser: u.impersonate,
    exec: u.exec,
    authProvider: u.authProvider,
  };
}

/** A copy of `kc` with fresh client-node authenticators (no cached exec credentials), keeping custom ones. */
function copyKubeConfig(KC: KubeConfigClass, kc: KubeConfig): KubeConfig {
  const fresh = new KC();
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

/** A file's content, else base64 data, else undefined. */
function material(
  file: string | undefined,
  data: string | undefined,
  field: string,
  entry: string,
): Buffer | undefined {
  if (file) return readEntryFile(file, field, entry);
  return data ? Buffer.from(data, 'base64') : undefined;
}

function readToken(file: string, user: KubeconfigUser): string {
  return readEntryFile(file, 'token-file', `user "${user.name}" in ${user.source}`).toString('utf8').trim();
}

/** `entry` describes the kubeconfig entry naming the file, for the error. */
function readEntryFile(file: string, field: string, entry: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(
      `cannot read ${field} ${file} of ${entry}: ${messageOf(err)} ` +
        '(fix the path in the kubeconfig, or create the file)',
      err,
    );
  }
}

function safeHomedir(): string {
  try {
    return process.env.HOME || homedir();
  } catch {
    return '';
  }
}

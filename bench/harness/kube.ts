/**
 * The harness's own lean HTTPS client for the API server. It counts every request it makes by the verb
 * and resource the API server records in apiserver_request_total, so that the operator's requests are
 * (after - before - harness's own) per verb: apiserver_request_total has no user agent label.
 */
import { Agent, request } from 'node:https';
import type { Kubeconfig } from '@opkit/controlplane';

export type KubeObject = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
};

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export class HttpError extends Error {
  readonly code: number;
  constructor(method: string, path: string, code: number, body: string) {
    super(`${method} ${path}: HTTP ${code}: ${body.slice(0, 400)}`);
    this.code = code;
  }
}

/** verb (as apiserver_request_total labels it) -> resource[/subresource] -> count */
export type RequestCounts = Map<string, Map<string, number>>;

export function addCount(counts: RequestCounts, verb: string, resource: string, n = 1): void {
  let byRes = counts.get(verb);
  if (!byRes) {
    byRes = new Map();
    counts.set(verb, byRes);
  }
  byRes.set(resource, (byRes.get(resource) ?? 0) + n);
}

export function cloneCounts(c: RequestCounts): RequestCounts {
  return new Map([...c].map(([v, m]) => [v, new Map(m)]));
}

/** The API server's verb and resource for a request, as in apiserver_request_total. */
export function classify(
  method: string,
  path: string,
  contentType?: string,
): { verb: string; resource: string } | undefined {
  const url = new URL(path, 'https://x');
  const parts = url.pathname.split('/').filter(Boolean);
  let rest: string[];
  if (parts[0] === 'api') rest = parts.slice(2);
  else if (parts[0] === 'apis') rest = parts.slice(3);
  else return undefined; // non-resource URLs (/metrics, /readyz) are not in apiserver_request_total
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const resource = rest[0] ?? '';
  const named = rest.length >= 2;
  const sub = rest[2];
  const res = sub ? `${resource}/${sub}` : resource;
  let verb = method;
  if (method === 'GET') {
    if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') verb = 'WATCH';
    else verb = named ? 'GET' : 'LIST';
  } else if (method === 'PATCH' && contentType === 'application/apply-patch+yaml') verb = 'APPLY';
  else if (method === 'DELETE' && !named) verb = 'DELETECOLLECTION';
  return { verb, resource: res };
}

export class Kube {
  readonly server: string;
  private readonly agent: Agent;
  private readonly creds: { ca: string; cert: string; key: string };
  /** Requests this client made, by verb and resource (watches are counted when they end). */
  readonly counts: RequestCounts = new Map();

  constructor(kubeconfig: Kubeconfig, opts: { maxSockets?: number } = {}) {
    const cluster = kubeconfig.clusters[0]!.cluster;
    const user = kubeconfig.users[0]!.user;
    this.server = cluster.server;
    this.creds = {
      ca: Buffer.from(cluster['certificate-authority-data'], 'base64').toString(),
      cert: Buffer.from(user['client-certificate-data'], 'base64').toString(),
      key: Buffer.from(user['client-key-data'], 'base64').toString(),
    };
    this.agent = new Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 64, ...this.creds });
  }

  close(): void {
    this.agent.destroy();
  }

  private count(method: string, path: string, contentType?: string): void {
    const c = classify(method, path, contentType);
    if (c) addCount(this.counts, c.verb, c.resource);
  }

  raw(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
    accept = 'application/json',
  ): Promise<{ code: number; text: string }> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        new URL(path, this.server),
        {
          method,
          agent: this.agent,
          headers: {
            accept,
            'user-agent': 'opkit-bench-harness',
            ...(payload !== undefined ? { 'content-type': contentType } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            this.count(method, path, payload !== undefined ? contentType : undefined);
            resolve({ code: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  async json<T = KubeObject>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const res = await this.raw(method, path, body, contentType);
    if (res.code >= 300) throw new HttpError(method, path, res.code, res.text);
    return JSON.parse(res.text) as T;
  }

  async get<T = KubeObject>(path: string): Promise<T | undefined> {
    const res = await this.raw('GET', path);
    if (res.code === 404) return undefined;
    if (res.code >= 300) throw new HttpError('GET', path, res.code, res.text);
    return JSON.parse(res.text) as T;
  }

  async list<T = KubeObject>(path: string): Promise<T[]> {
    const items: T[] = [];
    let cont = '';
    do {
      const sep = path.includes('?') ? '&' : '?';
      const page = await this.json<{ items: T[]; metadata: { continue?: string } }>(
        'GET',
        `${path}${sep}limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`,
      );
      items.push(...page.items);
      cont = page.metadata.continue ?? '';
    } while (cont);
    return items;
  }

  /**
   * A watch from a resourceVersion. Calls onEvent per event; resolves when the stream ends.
   * Use `abort` to stop it. With `metadataOnly`, objects are PartialObjectMetadata.
   */
  watch(
    path: string,
    resourceVersion: string,
    onEvent: (type: string, obj: KubeObject) => void,
    opts: { signal?: AbortSignal; metadataOnly?: boolean } = {},
  ): Promise<void> {
    const sep = path.includes('?') ? '&' : '?';
    const full = `${path}${sep}watch=true&allowWatchBookmarks=true&resourceVersion=${resourceVersion}&timeoutSeconds=3600`;
    const accept = opts.metadataOnly
      ? 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json'
      : 'application/json';
    return new Promise((resolve, reject) => {
      const req = request(
        new URL(full, this.server),
        {
          method: 'GET',
          agent: this.agent,
          headers: { accept, 'user-agent': 'opkit-bench-harness' },
          signal: opts.signal,
        },
        (res) => {
          if ((res.statusCode ?? 0) >= 300) {
            res.resume();
            reject(new HttpError('WATCH', path, res.statusCode ?? 0, ''));
            return;
          }
          let buf = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            buf += chunk;
            let nl = buf.indexOf('\n');
            while (nl >= 0) {
              const line = buf.slice(0, nl);
              buf = buf.slice(nl + 1);
              if (line.trim()) {
                const ev = JSON.parse(line) as { type: string; object: KubeObject };
                onEvent(ev.type, ev.object);
              }
              nl = buf.indexOf('\n');
            }
          });
          const done = () => {
            this.count('GET', full);
            resolve();
          };
          res.on('end', done);
          res.on('error', () => done());
          res.on('aborted', () => done());
        },
      );
      req.on('error', (err: Error) => {
        if (err.name === 'AbortError') {
          this.count('GET', full);
          resolve();
        } else reject(err);
      });
      req.end();
    });
  }
}

/** A bounded-concurrency runner: the tight concurrent writer. */
export async function runConcurrently<T>(
  items: T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

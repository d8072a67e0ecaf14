/** The API client: typed CRUD, patch, server-side apply, status subresource, and watch over HTTP. */
import type { KubeObject, ObjectKey, ObjectList, WatchEvent, WatchEventType } from '../api/object.ts';
import { type Resource, resourcePath } from '../api/resource.ts';
import { abortReason } from '../util/abort.ts';
import { sleep } from '../util/clock.ts';
import { withTypeMeta } from '../util/type-meta.ts';
import type { RestConfig } from './config.ts';
import {
  ApiError,
  BadRequestError,
  errorFromStatus,
  GoneError,
  NotFoundError,
  type Status,
} from './errors.ts';
import {
  buildQuery,
  type HttpRequest,
  HttpTransport,
  type Query,
  type RequestMetric,
  type TransportMode,
} from './http.ts';
import { protobufKnows } from './protobuf/decode.ts';
import { sharedEncoder } from './protobuf/encode.ts';
import { PROTOBUF } from './protobuf/frames.ts';
import { type RateLimitOptions, TokenBucket } from './rate-limit.ts';
import type { Client, DeleteOptions, ListOptions, Patch, WatchOptions, WriteOptions } from './types.ts';

export interface ClientOptions {
  /** Field manager for every write (server-side apply ownership). Defaults to "opkit". */
  fieldManager?: string;
  userAgent?: string;
  /** Per-request timeout in ms (0: none). Defaults to 60 s. Watches: only until the headers arrive. */
  timeoutMs?: number;
  /** Request metrics hook, e.g. for rest_client_requests_total{code,method,host}. */
  onRequest?: (metric: RequestMetric) => void;
  /**
   * Connection limit of the config's shared pool, per server identity: each request in flight holds
   * one; watches run on connections of their own. Defaults to 100.
   */
  maxSockets?: number;
  /** The config's connection pool to use (see TransportOptions.connectionPool). Default 'default'. */
  connectionPool?: string;
  /**
   * 'auto' | 'http1' | 'http2' (see TransportOptions.transport): HTTP/2 multiplexes every request and watch
   * of the config and pool on one session per API server. Defaults to OPKIT_TRANSPORT, else 'http1'.
   */
  transport?: TransportMode;
  /**
   * Client-side throttling of requests (not watches): a token bucket of `burst` refilled at `qps` per second,
   * as client-go's rest.Config QPS/Burst. Default: none (the API server's Priority and Fairness protects it).
   */
  rateLimit?: RateLimitOptions;
  /**
   * 'protobuf': watches of built-in kinds ask for protobuf, as client-go does (custom resources stay
   * JSON); the objects come out as the JSON would have them (protobuf/decode.ts). A response the schema
   * cannot decode (a server newer than it, or code generation disallowed) turns the client back to JSON.
   * Creates and updates of built-in kinds send protobuf bodies, as controller-runtime's client does, each
   * one that the encoder can say exactly as its JSON (protobuf/encode.ts; anything else goes as JSON).
   * 'json': JSON for everything. Defaults to OPKIT_WIRE_FORMAT, else 'protobuf' (docs/runtime.md, Client,
   * has the measured trade-off).
   */
  wireFormat?: WireFormat;
}

export type WireFormat = 'json' | 'protobuf';

/** The wire format of clients that don't choose: OPKIT_WIRE_FORMAT (json, protobuf), else 'protobuf'. */
export function wireFormatFrom(value: string | undefined): WireFormat {
  if (value === undefined || value === '') return 'protobuf';
  const format = value.toLowerCase();
  if (format === 'json' || format === 'protobuf') return format;
  throw new Error(`OPKIT_WIRE_FORMAT=${value}: expected json or protobuf`);
}

/** metav1.APIResource, as listed by discovery. */
export interface APIResource {
  name: string;
  singularName?: string;
  namespaced: boolean;
  group?: string;
  version?: string;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
}

/** metav1.APIResourceList: what one group-version serves. */
export interface APIResourceList {
  kind?: string;
  apiVersion?: string;
  groupVersion: string;
  resources: APIResource[];
}

export const PATCH_CONTENT_TYPES: Readonly<Record<Patch['type'], string>> = Object.freeze({
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
});

/** Query parameters of a list request (pure; exported for tests). */
export function listQuery(opts: ListOptions = {}): Query {
  return {
    labelSelector: opts.labelSelector || undefined,
    fieldSelector: opts.fieldSelector || undefined,
    limit: opts.limit,
    continue: opts.continue || undefined,
    resourceVersion: opts.resourceVersion,
    resourceVersionMatch: opts.resourceVersionMatch,
  };
}

/** Query parameters of a watch request (pure; exported for tests). */
export function watchQuery(opts: WatchOptions = {}): Query {
  const initial = opts.sendInitialEvents === true;
  return {
    watch: 1,
    labelSelector: opts.labelSelector || undefined,
    fieldSelector: opts.fieldSelector || undefined,
    resourceVersion: opts.resourceVersion,
    // The API requires both of these with sendInitialEvents=true.
    resourceVersionMatch: initial ? 'NotOlderThan' : undefined,
    allowWatchBookmarks: initial ? true : opts.allowWatchBookmarks,
    sendInitialEvents: opts.sendInitialEvents,
    timeoutSeconds: opts.timeoutSeconds,
  };
}

/** Query parameters of a write (pure; exported for tests). */
export function writeQuery(fieldManager: string, opts: WriteOptions = {}, force?: boolean): Query {
  return {
    fieldManager: opts.fieldManager ?? fieldManager,
    dryRun: opts.dryRun ? 'All' : undefined,
    force,
  };
}

/** A metav1.DeleteOptions body (pure; exported for tests). */
export function deleteBody(opts: DeleteOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { kind: 'DeleteOptions', apiVersion: 'v1' };
  if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
  if (opts.gracePeriodSeconds !== undefined) body.gracePeriodSeconds = opts.gracePeriodSeconds;
  if (opts.preconditions) body.preconditions = { ...opts.preconditions };
  if (opts.dryRun) body.dryRun = ['All'];
  return body;
}

const WATCH_TYPES: ReadonlySet<string> = new Set<WatchEventType>([
  'ADDED',
  'MODIFIED',
  'DELETED',
  'BOOKMARK',
]);

export class RestClient implements Client {
  readonly fieldManager: string;
  readonly config: RestConfig;
  readonly transport: HttpTransport;
  /** The client-side limiter, when `rateLimit` is set. */
  readonly rateLimiter: TokenBucket | undefined;

  constructor(config: RestConfig, opts: ClientOptions = {}) {
    this.config = config;
    this.fieldManager = opts.fieldManager ?? 'opkit';
    this.transport = new HttpTransport(config, {
      userAgent: opts.userAgent,
      timeoutMs: opts.timeoutMs,
      onRequest: opts.onRequest,
      maxSockets: opts.maxSockets,
      connectionPool: opts.connectionPool,
      transport: opts.transport,
    });
    this.rateLimiter = opts.rateLimit ? new TokenBucket(opts.rateLimit) : undefined;
    this.#protobuf = (opts.wireFormat ?? wireFormatFrom(process.env.OPKIT_WIRE_FORMAT)) === 'protobuf';
    this.#protobufBodies = this.#protobuf;
  }

  /** Whether watches of built-in kinds ask for protobuf. */
  readonly #protobuf: boolean;
  /** Whether creates and updates of built-in kinds send protobuf (until a server refuses it). */
  #protobufBodies: boolean;
  readonly #encoder = sharedEncoder();

  async get<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    opts: { signal?: AbortSignal } = {},
  ): Promise<T> {
    return this.#request<T>({ method: 'GET', path: objectPath(res, key), signal: opts.signal });
  }

  async list<T extends KubeObject>(res: Resource<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    const path = resourcePath(res, { namespace: opts.namespace });
    const page = (o: ListOptions) =>
      this.#request<ObjectList<T>>({
        method: 'GET',
        path,
        query: listQuery(o),
        signal: opts.signal,
      });
    const first = await page(opts);
    first.items ??= [];
    first.metadata ??= {};
    if (opts.limit === undefined || opts.continue || opts.onePage) return first;
    const items = first.items;
    let token = first.metadata.continue;
    while (token) {
      let next: ObjectList<T>;
      try {
        // Later pages must not set resourceVersion: the token pins the snapshot.
        next = await page({
          ...opts,
          continue: token,
          resourceVersion: undefined,
          resourceVersionMatch: undefined,
        });
      } catch (err) {
        // The continue token expired (410): fall back to one unpaginated list, as client-go's pager does.
        if (err instanceof GoneError) return this.list(res, { ...opts, limit: undefined });
        throw err;
      }
      for (const item of next.items ?? []) items.push(item);
      token = next.metadata?.continue;
    }
    const { continue: _done, remainingItemCount: _rest, ...metadata } = first.metadata;
    return { ...first, metadata, items };
  }

  async create<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    const namespace = namespaceFor(res, obj.metadata?.namespace, 'create');
    return this.#sendObject<T>(res, obj, {
      method: 'POST',
      path: resourcePath(res, { namespace }),
      query: writeQuery(this.fieldManager, opts),
      signal: opts.signal,
    });
  }

  async update<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.#put(res, obj, opts);
  }

  async updateStatus<T extends KubeObject>(res: Resource<T>, obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.#put(res, obj, opts, 'status');
  }

  async patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions = {},
  ): Promise<T> {
    return this.#patch(res, key, patch, opts);
  }

  async patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions = {},
  ): Promise<T> {
    return this.#patch(res, key, patch, opts, 'status');
  }

  async delete<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    opts: DeleteOptions = {},
  ): Promise<void> {
    await this.#request({
      method: 'DELETE',
      path: objectPath(res, key),
      body: deleteBody(opts),
      signal: opts.signal,
    });
  }

  /**
   * One watch stream. Ends when the server closes it (e.g. after timeoutSeconds) or `signal` aborts;
   * an ERROR event is thrown as its typed error (GoneError: the resourceVersion is too old, relist).
   */
  async *watch<T extends KubeObject>(
    res: Resource<T>,
    opts: WatchOptions = {},
  ): AsyncGenerator<WatchEvent<T>> {
    const path = resourcePath(res, { namespace: opts.namespace }) + buildQuery(watchQuery(opts));
    const stream = this.transport.stream(path, opts.signal, {
      ...(opts.omitManagedFields ? { omitManagedFields: true } : {}),
      ...(opts.deepFreeze ? { deepFreeze: opts.deepFreeze } : {}),
      ...(this.#protobuf && protobufKnows(res.apiVersion, res.kind) ? { protobuf: true } : {}),
    });
    for await (const raw of stream) {
      const event = raw as { type?: string; object?: unknown };
      if (event.type === 'ERROR') {
        const status = (event.object ?? {}) as Status;
        throw errorFromStatus(status.code ?? 500, { kind: 'Status', ...status });
      }
      if (!event.type || !WATCH_TYPES.has(event.type) || !event.object) {
        throw new Error(`unexpected watch event: ${JSON.stringify(raw).slice(0, 200)}`);
      }
      yield { type: event.type as WatchEventType, object: event.object as T };
    }
  }

  /** What a group-version serves ("v1", "apps/v1"); NotFoundError when the group-version isn't served. */
  async discover(groupVersion: string, opts: { signal?: AbortSignal } = {}): Promise<APIResourceList> {
    const path = groupVersion.includes('/') ? `/apis/${groupVersion}` : `/api/${groupVersion}`;
    const list = await this.#request<APIResourceList>({ method: 'GET', path, signal: opts.signal });
    list.resources ??= [];
    return list;
  }

  /** Whether the API serves `res` (its plural in its group-version): e.g. whether a CRD is established. */
  async isServed(res: Resource, opts: { signal?: AbortSignal } = {}): Promise<boolean> {
    try {
      const list = await this.discover(res.apiVersion, opts);
      return list.resources.some((r) => r.name === res.plural);
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Polls isServed until true; throws the signal's reason on abort, or an Error after timeoutMs. */
  async waitForServed(
    res: Resource,
    opts: { timeoutMs?: number; intervalMs?: number; signal?: AbortSignal } = {},
  ): Promise<void> {
    const deadline = performance.now() + (opts.timeoutMs ?? 60_000);
    const interval = opts.intervalMs ?? 200;
    for (;;) {
      if (await this.isServed(res, { signal: opts.signal })) return;
      if (performance.now() >= deadline) {
        throw new Error(`${res.plural}.${res.apiVersion} is not served after ${opts.timeoutMs ?? 60_000}ms`);
      }
      if (!(await sleep(interval, opts.signal)) && opts.signal) throw abortReason(opts.signal);
    }
  }

  /** Destroys the pooled connections of this client's config (shared with other clients of it). */
  close(): void {
    this.transport.close();
  }

  /** One request, after the rate limiter (if any) lets it through. */
  async #request<T>(req: HttpRequest): Promise<T> {
    if (this.rateLimiter) await this.rateLimiter.wait(req.signal);
    return this.transport.request<T>(req);
  }

  async #put<T extends KubeObject>(
    res: Resource<T>,
    obj: T,
    opts: WriteOptions,
    subresource?: 'status',
  ): Promise<T> {
    const key = objectKeyFor(res, obj);
    return this.#sendObject<T>(res, obj, {
      method: 'PUT',
      path: resourcePath(res, { namespace: key.namespace, name: key.name, subresource }),
      query: writeQuery(this.fieldManager, opts),
      signal: opts.signal,
    });
  }

  /**
   * A create or update. The body is protobuf for a built-in kind, as controller-runtime's client sends
   * it, when every part of the object can be said exactly as its JSON says it (protobuf/encode.ts); JSON
   * otherwise. A server that refuses protobuf bodies (415 Unsupported Media Type: it acted on nothing)
   * gets this request again in JSON, and JSON from then on.
   */
  async #sendObject<T>(res: Resource, obj: KubeObject, req: Omit<HttpRequest, 'body'>): Promise<T> {
    const json = withTypeMeta(res, obj);
    const bytes = this.#protobufBodies ? this.#encoder.encode(res.apiVersion, res.kind, json) : undefined;
    if (!bytes) return this.#request<T>({ ...req, body: json });
    try {
      return await this.#request<T>({ ...req, body: bytes, contentType: PROTOBUF });
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 415) throw err;
      this.#protobufBodies = false;
      return this.#request<T>({ ...req, body: json });
    }
  }

  async #patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts: WriteOptions,
    subresource?: 'status',
  ): Promise<T> {
    const contentType = PATCH_CONTENT_TYPES[patch.type];
    if (!contentType) throw new BadRequestError({ message: `unknown patch type ${String(patch.type)}` }, 0);
    let body: unknown = patch.body;
    let force: boolean | undefined;
    if (patch.type === 'apply') {
      const obj = withTypeMeta(res, patch.body);
      // Apply configurations must name the object; fill it in from the key when omitted.
      const metadata = { ...obj.metadata, name: obj.metadata?.name ?? key.name };
      if (res.namespaced && key.namespace && !metadata.namespace) metadata.namespace = key.namespace;
      body = { ...obj, metadata };
      force = patch.force ? true : undefined;
    }
    return this.#request<T>({
      method: 'PATCH',
      path: resourcePath(res, {
        namespace: namespaceFor(res, key.namespace, 'patch'),
        name: key.name,
        subresource,
      }),
      query: writeQuery(this.fieldManager, opts, force),
      body,
      contentType,
      signal: opts.signal,
    });
  }
}

/** Creates the API client for `config`. */
export function createClient(config: RestConfig, opts: ClientOptions = {}): RestClient {
  return new RestClient(config, opts);
}

function namespaceFor(res: Resource, namespace: string | undefined, verb: string): string | undefined {
  if (!res.namespaced) return undefined;
  if (!namespace) {
    throw new BadRequestError(
      {
        kind: 'Status',
        code: 400,
        reason: 'BadRequest',
        message: `${verb} ${res.kind}: a namespace is required`,
      },
      400,
    );
  }
  return namespace;
}

function objectPath(res: Resource, key: ObjectKey): string {
  if (!key.name) {
    throw new BadRequestError(
      { kind: 'Status', code: 400, reason: 'BadRequest', message: `${res.kind}: a name is required` },
      400,
    );
  }
  return resourcePath(res, { namespace: namespaceFor(res, key.namespace, 'access'), name: key.name });
}

function objectKeyFor(res: Resource, obj: KubeObject): ObjectKey {
  const name = obj.metadata?.name;
  if (!name) {
    throw new BadRequestError(
      {
        kind: 'Status',
        code: 400,
        reason: 'BadRequest',
        message: `update ${res.kind}: metadata.name is required`,
      },
      400,
    );
  }
  return { name, namespace: namespaceFor(res, obj.metadata.namespace, 'update') };
}

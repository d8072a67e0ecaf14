/**
 * The transport to the API server: JSON in, JSON or protobuf out, typed errors, over HTTP/1.1 with
 * keep-alive connection pools per configuration (h1-requests.ts, h1-connections.ts, pools.ts) and a
 * connection per watch (h1-watch.ts), through a proxy with Node's client (h1-proxy.ts), or over HTTP/2
 * sessions (h2-requests.ts, h2-sessions.ts); watches as newline-delimited JSON (json-lines.ts) or
 * protobuf frames (protobuf/frames.ts).
 *
 * A 401 Unauthorized is retried once with fresh credentials when the configuration can refresh them
 * (RestConfig.refreshCredentials: exec plugins run again, token files are re-read) and they changed:
 * an expired or rotated token does not fail requests until a restart.
 */
import type * as http from 'node:http';
import * as https from 'node:https';
import { abortReason } from '../util/abort.ts';
import type { DeepFreezeOptions } from '../util/freeze.ts';
import { nodeHttp } from '../util/node-http.ts';
import { authenticate, reauthenticate } from './auth.ts';
import { bodyLength, type EncodedBody, encodeBody, parseBody, parseErrorBody } from './bodies.ts';
import type { RequestAuth, RestConfig } from './config.ts';
import {
  type ApiError,
  ConnectionError,
  DeadConnectionError,
  errorFromStatus,
  RequestTimeoutError,
  StaleConnectionError,
  UnauthorizedError,
} from './errors.ts';
import { h1Open, h1ProxyRequest } from './h1-proxy.ts';
import { type H1Context, type H1Failure, type H1Response, h1Request } from './h1-requests.ts';
import { h1Watch } from './h1-watch.ts';
import { type H2Context, h2Headers, h2Open, h2Request } from './h2-requests.ts';
import {
  type H2Pool,
  h2PoolFor,
  NGHTTP2_CANCEL,
  type TransportMode,
  transportModeFrom,
} from './h2-sessions.ts';
import { type JsonLinesOptions, jsonLines } from './json-lines.ts';
import {
  type AnyAgent,
  agentFor,
  closeWatches,
  connectionsOf,
  DEFAULT_POOL,
  dropIdleSockets,
  type InFlight,
  PROVE_ALIVE_MS,
  presumeDead,
  trackInFlight,
} from './pools.ts';
import { ProtobufSchemaError, sharedDecoder } from './protobuf/decode.ts';
import { PROTOBUF, protobufWatchEvents } from './protobuf/frames.ts';
import { SCHEMA_API_VERSION } from './protobuf/schema.generated.ts';
import { buildQuery, type Query } from './query.ts';

export { authenticate, reauthenticate } from './auth.ts';
export { parseBody } from './bodies.ts';
export { RequestTimeoutError } from './errors.ts';
export type { TransportMode } from './h2-sessions.ts';
export { JsonLineDecoder, type JsonLinesOptions, jsonLines } from './json-lines.ts';
export { withoutManagedFields } from './managed-fields.ts';
export { agentFor, DEFAULT_POOL, LEADER_ELECTION_POOL } from './pools.ts';
export { buildQuery, type Query, type QueryValue } from './query.ts';

/**
 * The protocol of clients that don't choose one: OPKIT_TRANSPORT (auto, http1, http2), else 'http1'.
 * See TransportOptions.transport.
 */
export const DEFAULT_TRANSPORT: TransportMode = transportModeFrom(process.env.OPKIT_TRANSPORT);

/** One finished request, for rest_client_requests_total{code,method,host} and latency histograms. */
export interface RequestMetric {
  method: string;
  /** The HTTP status code, or "<error>" when no response arrived (client-go's convention). */
  code: string;
  /** Until the body was read; for streams, until the response headers arrived. */
  durationMs: number;
  host: string;
}

export interface TransportOptions {
  /** Defaults to "opkit/<version> (node <version>)". */
  userAgent?: string;
  /**
   * Default per-request timeout in milliseconds; 0 disables it. Defaults to 60 s. For streams it only
   * bounds the wait for the response headers.
   */
  timeoutMs?: number;
  /** Called once per request (never throws into the request). */
  onRequest?: (metric: RequestMetric) => void;
  /**
   * Connection limit of the pool (per server identity), used when this is the first transport for the
   * config and pool. Requests in flight hold one each, and wait for one when all are held; watches run on
   * connections of their own (h1-watch.ts). Defaults to 100.
   */
  maxSockets?: number;
  /**
   * The connection pool to use: transports of one config with the same pool share connections.
   * Defaults to DEFAULT_POOL.
   */
  connectionPool?: string;
  /**
   * 'http2': one HTTP/2 session per API server (and pool) multiplexes every request and watch as streams
   * (h2-sessions.ts); an error if the server does not negotiate h2. 'auto': HTTP/2 when the server
   * negotiates it (ALPN), else HTTP/1.1. 'http1': a keep-alive connection of the pool per request in
   * flight, and a connection of its own per watch. Plain-http servers and proxies (proxy-url) always
   * get HTTP/1.1. Defaults to DEFAULT_TRANSPORT.
   */
  transport?: TransportMode;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface HttpRequest {
  method: HttpMethod;
  /** Path below the server URL, e.g. "/api/v1/namespaces/default/configmaps". */
  path: string;
  query?: Query;
  /** JSON-serialised unless it is a string or a Buffer. */
  body?: unknown;
  /** Defaults to application/json when there is a body. */
  contentType?: string;
  signal?: AbortSignal;
  /** Overrides the transport's timeout for this request; 0 disables it. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 60_000;
/** The User-Agent of every request unless told otherwise. */
export const USER_AGENT = `opkit/0.1.0 (node ${process.version})`;

/** Options of {@link HttpTransport.stream}. */
export interface StreamOptions extends JsonLinesOptions {
  /** Bounds the wait for the response headers (ms); defaults to the transport's timeout. */
  timeoutMs?: number;
  /**
   * Ask for protobuf (the API server still answers JSON for kinds without it, e.g. custom resources):
   * only for kinds the client's protobuf schema knows (protobuf/decode.ts). A protobuf response is
   * decoded to exactly the values the server's JSON has.
   */
  protobuf?: boolean;
  /**
   * Deliver protobuf-decoded objects deep-frozen, long strings through `strings` (DecodeOptions'
   * `deepFreeze`). JSON values come unfrozen: the caller freezes what is not frozen.
   */
  deepFreeze?: DeepFreezeOptions;
}

/** A watch's 2xx response, whatever the protocol. */
interface Opened {
  body: AsyncIterable<Buffer>;
  /** The response's Content-Type. */
  contentType: string;
  /** Whether the server ended the response (else the connection or stream must not be reused). */
  complete(): boolean;
  destroy(): void;
  /** The HTTP/2 session it runs on, to check when the watch goes silent. */
  ping?: (timeoutMs: number) => void;
}

export class HttpTransport {
  readonly config: RestConfig;
  readonly agent: AnyAgent;
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #onRequest: ((m: RequestMetric) => void) | undefined;
  readonly #base: URL;
  /** Compiled once per process (decoders are generated code), shared by every transport. */
  readonly #protobuf = sharedDecoder();
  /** Set when a protobuf response could not be decoded: streams ask for JSON from then on. */
  #protobufOff = false;
  readonly #basePath: string;
  /** The HTTP/2 sessions of the config and pool (http1Only for mode 'http1'). */
  readonly h2: H2Pool;
  readonly #h1: H1Context;

  constructor(config: RestConfig, opts: TransportOptions = {}) {
    this.config = config;
    this.agent = agentFor(config, opts.maxSockets, opts.connectionPool);
    this.h2 = h2PoolFor(config, opts.connectionPool ?? DEFAULT_POOL, opts.transport ?? DEFAULT_TRANSPORT);
    this.#userAgent = opts.userAgent ?? USER_AGENT;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#onRequest = opts.onRequest;
    this.#base = new URL(config.server);
    this.#basePath = this.#base.pathname.replace(/\/+$/, '');
    this.#h1 = {
      module: this.#base.protocol === 'https:' ? https : nodeHttp,
      agent: this.agent,
      host: config.host,
      options: (method, path, auth, extra) => this.#options(method, path, auth, extra),
      metric: (method, code, start) => this.#metric(method, code, start),
      connectionError: (method, path, err) => this.#connectionError(method, path, err),
      apiError: (status, body, headers) =>
        this.#apiError(status, parseErrorBody(body, headers, this.#protobuf), headers),
    };
  }

  /** Sends one request; resolves with the parsed JSON body (undefined when empty). Non-2xx throws typed. */
  async request<T = unknown>(req: HttpRequest): Promise<T> {
    const body = encodeBody(req.body);
    const contentType = body !== undefined ? (req.contentType ?? 'application/json') : undefined;
    const path = req.path + buildQuery(req.query);
    if (req.signal?.aborted) throw abortReason(req.signal);
    let auth = await authenticate(this.config, req.signal);
    let reauthenticated = false;
    for (let attempt = 0; ; attempt++) {
      const res = await this.#attempt(req.method, path, body, contentType, auth, req.signal, req.timeoutMs);
      if ('error' in res) {
        // A keep-alive socket the server closed just as we reused it: retry GETs once (like Go's transport).
        if (res.retryable && attempt === 0 && req.method === 'GET' && !req.signal?.aborted) continue;
        throw res.error;
      }
      if (res.status === 401 && !reauthenticated) {
        // The server rejected the credentials before acting on the request: retrying is safe.
        reauthenticated = true;
        const fresh = await reauthenticate(this.config, auth, req.signal);
        if (fresh) {
          auth = fresh;
          continue;
        }
      }
      const parsed = parseBody(res.body);
      if (res.status < 200 || res.status > 299) throw this.#apiError(res.status, parsed, res.headers);
      return parsed as T;
    }
  }

  /**
   * A GET whose response is a stream of newline-delimited JSON values (a watch). The request is sent
   * when iteration starts. Iteration ends when the server ends the response or `signal` aborts; if the
   * consumer stops early (break/return/throw) or aborts, the response and its socket are destroyed, and
   * every listener is removed. Non-2xx responses throw typed errors; a broken connection throws
   * ConnectionError.
   */
  stream(path: string, signal?: AbortSignal, opts: StreamOptions = {}): AsyncIterable<unknown> {
    return this.#stream(path, signal, opts);
  }

  /**
   * Destroys the pool's sockets and HTTP/2 sessions, and ends its watches with a ConnectionError (of
   * every client using this config and pool).
   */
  close(): void {
    // Watches over HTTP/1.1 run on connections of their own (h1-watch.ts), outside the agent.
    closeWatches(
      this.agent,
      new DeadConnectionError(`connection to ${this.config.host} closed: the client was closed`),
    );
    dropIdleSockets(this.agent);
    connectionsOf(this.agent).destroy();
    this.agent.destroy();
    this.h2.close();
  }

  /** Whether requests go over HTTP/2 (until the server refuses h2). */
  #useH2(): boolean {
    return !this.h2.http1Only && this.config.proxyAgent === undefined;
  }

  #h2Context(method: string, path: string, timeoutMs: number): H2Context {
    return {
      pool: this.h2,
      host: this.config.host,
      connectionError: (err) => this.#connectionError(method, path, err),
      timeoutError: () =>
        new RequestTimeoutError(`${method} ${path} to ${this.config.host} timed out after ${timeoutMs}ms`),
    };
  }

  #h2Headers(method: string, path: string, auth: RequestAuth, extra: Record<string, string>) {
    return h2Headers(method, this.#basePath + path, auth, {
      Accept: 'application/json',
      'User-Agent': this.#userAgent,
      ...extra,
    });
  }

  async *#stream(
    path: string,
    signal: AbortSignal | undefined,
    opts: StreamOptions,
  ): AsyncGenerator<unknown> {
    const { timeoutMs } = opts;
    if (signal?.aborted) return;
    const accept = opts.protobuf && !this.#protobufOff ? `${PROTOBUF}, application/json` : 'application/json';
    // Closed by the pool (a DeadConnectionError) when another of its connections was found dead and
    // this one delivered nothing within the pool's check: then the stream throws that error.
    const dead = new AbortController();
    const conn = trackInFlight(this.agent, 'watch', (err) => dead.abort(err));
    // Aborted by its caller as a dead connection (a silent watch): the pool checks its other connections.
    let ping: ((timeoutMs: number) => void) | undefined;
    const onStale = (): void => {
      const reason: unknown = signal?.reason;
      if (reason instanceof StaleConnectionError && !(reason instanceof DeadConnectionError) && ping) {
        // HTTP/2: the session must answer a PING, else it closes and fails its other streams.
        ping(PROVE_ALIVE_MS);
      } else if (reason instanceof StaleConnectionError && !(reason instanceof DeadConnectionError)) {
        const pending = conn.underCheck();
        conn.done();
        // Already under an earlier sweep's check (its own deadline came first): that sweep covers it.
        if (pending) reason.sweep = { ...pending, joined: true };
        else presumeDead(this.agent, this.config.host, reason);
      }
    };
    signal?.addEventListener('abort', onStale, { once: true });
    const both = signal ? AbortSignal.any([signal, dead.signal]) : dead.signal;
    try {
      let opened: Opened | undefined;
      try {
        const auth = await authenticate(this.config, both);
        try {
          opened = await this.#openAny(path, auth, both, timeoutMs, accept);
        } catch (err) {
          if (!(err instanceof UnauthorizedError)) throw err;
          const fresh = await reauthenticate(this.config, auth, both);
          if (!fresh) throw err;
          opened = await this.#openAny(path, fresh, both, timeoutMs, accept);
        }
      } catch (err) {
        if (dead.signal.aborted) throw dead.signal.reason;
        if (signal?.aborted) return;
        throw err;
      }
      if (!opened) {
        // aborted before the response arrived
        if (dead.signal.aborted) throw dead.signal.reason;
        return;
      }
      conn.alive();
      ping = opened.ping;
      yield* this.#read(path, opened, both, conn, opts);
      if (dead.signal.aborted) throw dead.signal.reason;
    } catch (err) {
      if (dead.signal.aborted) throw dead.signal.reason;
      throw err;
    } finally {
      signal?.removeEventListener('abort', onStale);
      conn.done();
    }
  }

  /** The values of an opened stream until the server ends it (or `signal` aborts: then it just ends). */
  async *#read(
    path: string,
    opened: Opened,
    signal: AbortSignal,
    conn: InFlight,
    opts: StreamOptions,
  ): AsyncGenerator<unknown> {
    let aborted = false;
    const onAbort = (): void => {
      aborted = true;
      opened.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal.aborted) return;
      const values = opened.contentType.startsWith(PROTOBUF)
        ? protobufWatchEvents(opened.body, this.#protobuf, opts)
        : jsonLines(opened.body, opts);
      for await (const value of values) {
        // Values already decoded from the last chunk are not delivered after an abort.
        if (aborted) return;
        conn.alive();
        yield value;
      }
      // An HTTP/2 stream whose session closed ends its body without an error: it did not complete.
      if (!opened.complete() && !aborted && !signal.aborted) {
        throw new Error('the connection closed before the server ended the response');
      }
    } catch (err) {
      if (aborted || signal.aborted) return;
      if (err instanceof SyntaxError) throw err;
      if (err instanceof ProtobufSchemaError) {
        // A kind or field the schema does not know (a newer server): JSON from now on, for every stream.
        this.#protobufOff = true;
        throw new ProtobufSchemaError(
          `${err.message}; this client reads JSON from now on (the schema is of k8s.io/api ${SCHEMA_API_VERSION}; ` +
            'packages/runtime/tools/protobuf-schema regenerates it for a newer one)',
          { cause: err },
        );
      }
      throw new ConnectionError(`stream ${path} from ${this.config.host} broke: ${messageOf(err)}`, err);
    } finally {
      signal.removeEventListener('abort', onAbort);
      // Ended by the server: the socket goes back to the pool. Otherwise it must not be reused.
      if (!opened.complete()) opened.destroy();
    }
  }

  #options(
    method: string,
    path: string,
    auth: RequestAuth,
    extra: Record<string, string>,
  ): https.RequestOptions {
    const { headers, ...tls } = auth;
    return {
      ...tls,
      protocol: this.#base.protocol,
      hostname: this.#base.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: this.#base.port || (this.#base.protocol === 'https:' ? 443 : 80),
      method,
      path: this.#basePath + path,
      // Pass the agent explicitly: client-node's applyToHTTPSOptions sets one of its own (without
      // keep-alive); RestConfig.authenticate drops it. Proxies need client-node's proxy agent.
      agent: this.config.proxyAgent ?? this.agent,
      headers: { Accept: 'application/json', 'User-Agent': this.#userAgent, ...headers, ...extra },
    };
  }

  #metric(method: string, code: string, start: number): void {
    if (!this.#onRequest) return;
    try {
      this.#onRequest({ method, code, durationMs: performance.now() - start, host: this.config.host });
    } catch {
      // Metrics must never break requests.
    }
  }

  #apiError(status: number, body: unknown, headers: http.IncomingHttpHeaders): ApiError {
    const retryAfter = headers['retry-after'];
    return errorFromStatus(status, body, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
  }

  async #attempt(
    method: HttpMethod,
    path: string,
    body: EncodedBody | undefined,
    contentType: string | undefined,
    auth: RequestAuth,
    signal: AbortSignal | undefined,
    timeoutMs = this.#timeoutMs,
  ): Promise<H1Response | H1Failure> {
    if (signal?.aborted) throw abortReason(signal);
    const start = performance.now();
    const extra: Record<string, string> = {};
    if (body !== undefined) {
      extra['Content-Type'] = contentType ?? 'application/json';
      extra['Content-Length'] = String(bodyLength(body));
    }
    if (this.#useH2()) {
      const headers = this.#h2Headers(method, path, auth, extra);
      const res = await h2Request(
        this.#h2Context(method, path, timeoutMs),
        auth,
        headers,
        body,
        signal,
        timeoutMs,
      );
      if (res !== undefined) {
        this.#metric(method, 'error' in res ? '<error>' : String(res.status), start);
        return res;
      }
      // The server does not speak h2: HTTP/1.1 from now on.
    }
    const send = this.config.proxyAgent === undefined ? h1Request : h1ProxyRequest;
    return send(this.#h1, method, path, auth, extra, body, signal, timeoutMs, start);
  }

  /**
   * Opens a watch over HTTP/2 when the server speaks it, else HTTP/1.1 on a connection of its own
   * (h1-watch.ts), or through the configuration's proxy (h1Open).
   */
  async #openAny(
    path: string,
    auth: RequestAuth,
    signal: AbortSignal | undefined,
    timeoutMs = this.#timeoutMs,
    accept = 'application/json',
  ): Promise<Opened | undefined> {
    if (this.#useH2()) {
      if (signal?.aborted) return undefined;
      const start = performance.now();
      const ctx = this.#h2Context('GET', path, timeoutMs);
      const headers = this.#h2Headers('GET', path, auth, { Accept: accept });
      const res = await h2Open(ctx, auth, headers, signal, timeoutMs);
      if (res !== undefined || signal?.aborted) {
        if (res === undefined) return undefined;
        if ('error' in res) {
          this.#metric('GET', '<error>', start);
          throw res.error;
        }
        this.#metric('GET', String(res.status), start);
        if ('body' in res) {
          throw this.#apiError(
            res.status,
            parseErrorBody(res.body, res.headers, this.#protobuf),
            res.headers,
          );
        }
        const { stream, session } = res;
        return {
          body: stream,
          contentType: res.contentType,
          complete: () => stream.readableEnded,
          destroy: () => stream.close(NGHTTP2_CANCEL),
          ping: (ms) => session.ping(ms),
        };
      }
    }
    if (this.config.proxyAgent === undefined) {
      return h1Watch(this.#h1, path, auth, signal, timeoutMs, accept);
    }
    // Through a proxy: Node's client, with client-node's proxy agent.
    const opened = await h1Open(this.#h1, path, auth, signal, timeoutMs, accept);
    if (!opened) return undefined;
    const { req, res } = opened;
    return {
      body: res,
      contentType: res.headers['content-type'] ?? '',
      complete: () => res.complete,
      destroy: () => {
        res.destroy();
        req.destroy();
      },
    };
  }

  #connectionError(method: string, path: string, err: Error): ConnectionError {
    return new ConnectionError(`${method} ${path} to ${this.config.host} failed: ${messageOf(err)}`, err);
  }
}

function messageOf(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}

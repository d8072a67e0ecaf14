/**
 * Requests over HTTP/1.1 without Node's HTTP client: the request is written to a connection of the pool
 * (h1-connections.ts) and its response read by ResponseReader (h1-response.ts); the connection goes back
 * to the pool when the response ended and the server keeps it.
 *
 * Why: in a convergence profile of the Database operator at N=1000, Node's client (ClientRequest, the
 * agent's socket lists, llhttp callbacks, IncomingMessage streams) was about 11 % of the busy time.
 *
 * A request that timed out after it was sent, or a connection found dead, makes the pool check its other
 * connections (presumeDead); a kept connection the server closed before any of the answer came is marked
 * retryable. Through a proxy, requests use Node's client (h1-proxy.ts).
 */
import type * as http from 'node:http';
import type * as https from 'node:https';
import type { Socket } from 'node:net';
import { abortReason } from '../util/abort.ts';
import { type EncodedBody, joinChunks } from './bodies.ts';
import type { RequestAuth } from './config.ts';
import { type ApiError, type ConnectionError, RequestTimeoutError } from './errors.ts';
import { type Granted, openConnection } from './h1-connections.ts';
import { ResponseReader } from './h1-response.ts';
import { type AnyAgent, connectionsOf, presumeDead, trackInFlight } from './pools.ts';

/** What the requests need from their transport. */
export interface H1Context {
  module: typeof http | typeof https;
  agent: AnyAgent;
  host: string;
  /** The request's options: server, TLS identity, agent and headers. */
  options(
    method: string,
    path: string,
    auth: RequestAuth,
    extra: Record<string, string>,
  ): https.RequestOptions;
  /** Records a finished request (see RequestMetric). */
  metric(method: string, code: string, start: number): void;
  connectionError(method: string, path: string, err: Error): ConnectionError;
  /** The typed error of a non-2xx response to a watch. */
  apiError(status: number, body: Buffer, headers: http.IncomingHttpHeaders): ApiError;
}

/** A whole response. */
export interface H1Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** An error the transport raised itself, marked so that a reused-socket reset can be retried. */
export interface H1Failure {
  error: Error;
  retryable: boolean;
}

/**
 * Sends a request and reads its whole response; the metric is recorded when it settles. Throws the abort
 * reason when `signal` aborts.
 */
export function h1Request(
  ctx: H1Context,
  method: string,
  path: string,
  auth: RequestAuth,
  extra: Record<string, string>,
  body: EncodedBody | undefined,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  start: number,
): Promise<H1Response | H1Failure> {
  const options = ctx.options(method, path, auth, extra);
  const name = ctx.agent.getName(options);
  const pool = connectionsOf(ctx.agent);
  const open = (): Socket => openConnection(options);
  let head: string;
  try {
    head = requestHead(method, options);
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise<H1Response | H1Failure>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let socket: Socket | undefined;
    let reused = false;
    let gotBytes = false;
    const chunks: Buffer[] = [];
    const reader = new ResponseReader((piece) => chunks.push(piece));
    // Closed by the pool when another of its connections was found dead and this one stayed silent.
    const conn = trackInFlight(ctx.agent, 'request', (error) => finish({ error, retryable: true }));
    /** Settles once; the connection goes back to the pool only after a whole response it may carry on. */
    const finish = (result: H1Response | H1Failure | Error): void => {
      if (settled) return;
      settled = true;
      conn.done();
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      withdraw();
      if (socket) {
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        const keep = !(result instanceof Error) && !('error' in result) && reader.reusable;
        pool.release(name, socket, keep && socket.writableLength === 0, open);
      }
      if (result instanceof Error) {
        reject(result);
        return;
      }
      ctx.metric(method, 'error' in result ? '<error>' : String(result.status), start);
      resolve(result);
    };
    /** A kept connection the server closed before any of the answer came: a GET may be sent again. */
    const fail = (err: Error, retryable: boolean): void =>
      finish({ error: ctx.connectionError(method, path, err), retryable: retryable && reused && !gotBytes });
    const onData = (bytes: Buffer): void => {
      gotBytes = true;
      conn.alive();
      try {
        reader.write(bytes);
      } catch (err) {
        fail(err as Error, false);
        return;
      }
      if (reader.complete) complete();
    };
    const complete = (): void => {
      const got = reader.head;
      if (got) finish({ status: got.status, headers: got.headers, body: joinChunks(chunks) });
    };
    const onError = (err: NodeJS.ErrnoException): void =>
      fail(err, err.code === 'ECONNRESET' || err.code === 'EPIPE');
    const onClose = (): void => {
      reader.end();
      if (reader.complete) complete();
      else fail(new Error('the connection closed before the response arrived (socket hang up)'), true);
    };
    const onAbort = (): void => finish(abortReason(signal as AbortSignal));
    // Called once, before this request settles: settling withdraws it from the pool's queue.
    const send = (granted: Granted): void => {
      if ('error' in granted) {
        fail(granted.error, false);
        return;
      }
      socket = granted.socket;
      reused = granted.reused;
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      socket.cork();
      socket.write(head, 'latin1');
      if (body !== undefined) socket.write(body);
      socket.uncork();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    timer = requestTimeout(
      ctx,
      method,
      path,
      timeoutMs,
      () => socket !== undefined,
      (error) => finish({ error, retryable: false }),
    );
    let withdraw = (): void => {};
    withdraw = pool.acquire(name, open, send);
  });
}

/**
 * Bounds a request's wait for its answer: after `timeoutMs` (none if 0) `fail` gets a
 * RequestTimeoutError. If the request had been `sent`, it likely sat on a dead connection, and so may
 * the pool's others: the pool checks them (presumeDead). A request still waiting for a connection of a
 * full pool proves nothing.
 */
export function requestTimeout(
  ctx: H1Context,
  method: string,
  path: string,
  timeoutMs: number,
  sent: () => boolean,
  fail: (error: RequestTimeoutError) => void,
): NodeJS.Timeout | undefined {
  if (timeoutMs <= 0) return undefined;
  return setTimeout(() => {
    const error = new RequestTimeoutError(`${method} ${path} to ${ctx.host} timed out after ${timeoutMs}ms`);
    const wasSent = sent();
    fail(error);
    if (wasSent) presumeDead(ctx.agent, ctx.host, error);
  }, timeoutMs);
}

/** requestTimeout for a watch's response head; the metric records the error. */
export function headTimeout(
  ctx: H1Context,
  path: string,
  timeoutMs: number,
  start: number,
  sent: () => boolean,
  fail: (error: RequestTimeoutError) => void,
): NodeJS.Timeout | undefined {
  return requestTimeout(ctx, 'GET', path, timeoutMs, sent, (error) => {
    ctx.metric('GET', '<error>', start);
    fail(error);
  });
}

/** The request's head: the method, the path, Host and the given headers (credentials included). */
export function requestHead(
  method: string,
  options: {
    hostname?: string | null;
    port?: number | string | null;
    protocol?: string | null;
    path?: string | null;
    auth?: string | null;
    headers?: unknown;
  },
): string {
  const path = options.path ?? '/';
  if (/[^\u0021-\u00ff]/.test(path))
    throw new TypeError(`the request path ${JSON.stringify(path)} has invalid characters`);
  const hostname = options.hostname ?? 'localhost';
  const host = hostname.includes(':') ? `[${hostname}]` : hostname;
  const defaultPort = options.protocol === 'https:' ? 443 : 80;
  const port = options.port === undefined || options.port === null ? defaultPort : Number(options.port);
  let text = `${method} ${path} HTTP/1.1\r\nHost: ${port === defaultPort ? host : `${host}:${port}`}\r\n`;
  const headers = { ...(options.headers as Record<string, string | number | undefined> | undefined) };
  if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const v = String(value);
    // As Node's client: a token for the name; in the value tabs, visible ASCII and Latin-1 only.
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[^\t\u0020-\u007e\u0080-\u00ff]/.test(v)) {
      throw new TypeError(`the request header ${JSON.stringify(name)} has invalid characters`);
    }
    text += `${name}: ${v}\r\n`;
  }
  return `${text}\r\n`;
}

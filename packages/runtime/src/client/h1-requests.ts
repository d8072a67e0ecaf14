/**
 * Requests over HTTP/1.1, with Node's client: a keep-alive socket of the pool (pools.ts) per request in
 * flight; watches too when they go through a proxy (else h1-watch.ts). A request that timed out after it
 * was sent, or a socket found dead, makes the pool check its other connections (presumeDead); a reused
 * socket the server reset before answering is marked retryable.
 */
import type * as http from 'node:http';
import type * as https from 'node:https';
import { abortReason } from '../util/abort.ts';
import { type EncodedBody, joinChunks } from './bodies.ts';
import type { RequestAuth } from './config.ts';
import { type ApiError, type ConnectionError, RequestTimeoutError } from './errors.ts';
import { type AnyAgent, presumeDead, trackInFlight } from './pools.ts';

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
  return new Promise<H1Response | H1Failure>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const req = ctx.module.request(ctx.options(method, path, auth, extra));
    // Closed by the pool when another of its connections was found dead and this one stayed silent.
    const conn = trackInFlight(ctx.agent, 'request', (error) => {
      finish({ error, retryable: true });
      req.destroy();
    });
    const finish = (result: H1Response | H1Failure | Error): void => {
      if (settled) return;
      settled = true;
      conn.done();
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (result instanceof Error) {
        reject(result);
        return;
      }
      ctx.metric(method, 'error' in result ? '<error>' : String(result.status), start);
      resolve(result);
    };
    const onAbort = (): void => {
      finish(abortReason(signal as AbortSignal));
      req.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        const error = new RequestTimeoutError(
          `${method} ${path} to ${ctx.host} timed out after ${timeoutMs}ms`,
        );
        // Sent and no answer in time: it likely sat on a dead pooled socket, and so may the others (a
        // request still waiting for a free socket of a full pool proves nothing).
        const sent = req.socket !== null;
        finish({ error, retryable: false });
        req.destroy();
        if (sent) presumeDead(ctx.agent, ctx.host, error);
      }, timeoutMs);
    }
    req.on('error', (err: NodeJS.ErrnoException) => {
      const retryable = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
      finish({ error: ctx.connectionError(method, path, err), retryable });
    });
    req.on('response', (res) => {
      conn.alive();
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => {
        conn.alive();
        chunks.push(chunk);
      });
      res.on('end', () =>
        finish({ status: res.statusCode ?? 0, headers: res.headers, body: joinChunks(chunks) }),
      );
      res.on('error', (err) => finish({ error: ctx.connectionError(method, path, err), retryable: false }));
    });
    req.end(body);
  });
}

/**
 * Bounds the wait for a watch's response head: after `timeoutMs` (none if 0) the metric records an error
 * and `fail` gets a RequestTimeoutError; if the request had been `sent`, the pool checks its other
 * connections (presumeDead).
 */
export function headTimeout(
  ctx: H1Context,
  path: string,
  timeoutMs: number,
  start: number,
  sent: () => boolean,
  fail: (error: RequestTimeoutError) => void,
): NodeJS.Timeout | undefined {
  if (timeoutMs <= 0) return undefined;
  return setTimeout(() => {
    ctx.metric('GET', '<error>', start);
    const error = new RequestTimeoutError(`GET ${path} to ${ctx.host} timed out after ${timeoutMs}ms`);
    // Sent and no answer in time: the pool's other connections may be as dead.
    const wasSent = sent();
    fail(error);
    if (wasSent) presumeDead(ctx.agent, ctx.host, error);
  }, timeoutMs);
}

/**
 * Opens a watch through a proxy: resolves on a 2xx response, undefined if aborted first; throws typed
 * errors.
 */
export function h1Open(
  ctx: H1Context,
  path: string,
  auth: RequestAuth,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  accept: string,
): Promise<{ req: http.ClientRequest; res: http.IncomingMessage } | undefined> {
  if (signal?.aborted) return Promise.resolve(undefined);
  const start = performance.now();
  return new Promise((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const req = ctx.module.request(ctx.options('GET', path, auth, { Accept: accept }));
    const finish = (err: Error | undefined, res?: http.IncomingMessage): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(res ? { req, res } : undefined);
    };
    const onAbort = (): void => {
      finish(undefined);
      req.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    timer = headTimeout(
      ctx,
      path,
      timeoutMs,
      start,
      () => req.socket !== null,
      (error) => {
        finish(error);
        req.destroy();
      },
    );
    req.on('error', (err) => {
      if (settled) return;
      ctx.metric('GET', '<error>', start);
      finish(ctx.connectionError('GET', path, err));
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      ctx.metric('GET', String(status), start);
      if (status >= 200 && status <= 299) {
        finish(undefined, res);
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => finish(ctx.apiError(status, joinChunks(chunks), res.headers)));
      res.on('error', (err) => finish(ctx.connectionError('GET', path, err)));
    });
    req.end();
  });
}

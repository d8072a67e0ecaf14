/**
 * Requests and watches through a proxy (RestConfig.proxyAgent): Node's HTTP client with client-node's
 * proxy agent. A request that timed out after it was sent makes the pool check its other connections
 * (presumeDead); a reused socket the server reset before answering is marked retryable.
 */
import type * as http from 'node:http';
import { abortReason } from '../util/abort.ts';
import { type EncodedBody, joinChunks } from './bodies.ts';
import type { RequestAuth } from './config.ts';
import {
  type H1Context,
  type H1Failure,
  type H1Response,
  headTimeout,
  requestTimeout,
} from './h1-requests.ts';
import { trackInFlight } from './pools.ts';

/**
 * Sends a request through the proxy and reads its whole response; the metric is recorded when it
 * settles. Throws the abort reason when `signal` aborts.
 */
export function h1ProxyRequest(
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
    timer = requestTimeout(
      ctx,
      method,
      path,
      timeoutMs,
      () => req.socket !== null,
      (error) => {
        finish({ error, retryable: false });
        req.destroy();
      },
    );
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

/**
 * Requests and watches as HTTP/2 streams on the sessions of h2-sessions.ts. A stream the server refused
 * (REFUSED_STREAM, or above a GOAWAY's lastStreamId: it never processed it) is sent again on another
 * session, whatever its method; anything else that breaks is a ConnectionError, as on HTTP/1.1.
 */
import type * as http from 'node:http';
import type * as http2 from 'node:http2';
import { abortReason } from '../util/abort.ts';
import { type EncodedBody, joinChunks } from './bodies.ts';
import type { RequestAuth } from './config.ts';
import { ConnectionError } from './errors.ts';
import { type H2Pool, type H2Session, NGHTTP2_CANCEL, refusedStream } from './h2-sessions.ts';

/** How many times a refused stream is sent again. */
const REFUSED_RETRIES = 3;
/** How long a session must answer a PING once a request on it timed out. */
const PROVE_ALIVE_MS = 2000;

/** What the transport needs from its caller to build errors. */
export interface H2Context {
  pool: H2Pool;
  host: string;
  connectionError(err: Error): ConnectionError;
  timeoutError(): ConnectionError;
}

/** A whole response. */
export interface H2Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A failure before or while the response came: `retryable` when nothing reached the server. */
export interface H2Failure {
  error: Error;
  retryable: boolean;
}

/** A 2xx response whose body is read as it comes (a watch). */
export interface H2Opened {
  stream: http2.ClientHttp2Stream;
  status: number;
  /** The response's Content-Type. */
  contentType: string;
  session: H2Session;
}

/** The request headers of an HTTP/2 request: lower-case names, basic auth as a header. */
export function h2Headers(
  method: string,
  path: string,
  auth: RequestAuth,
  base: Record<string, string>,
): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = { ':method': method, ':path': path };
  for (const [k, v] of Object.entries(base)) out[k.toLowerCase()] = v;
  for (const [k, v] of Object.entries(auth.headers)) out[k.toLowerCase()] = v;
  if (auth.auth && out.authorization === undefined) {
    out.authorization = `Basic ${Buffer.from(auth.auth, 'utf8').toString('base64')}`;
  }
  // Connection-specific headers are forbidden in HTTP/2.
  delete out.connection;
  delete out['keep-alive'];
  delete out.host;
  return out;
}

type Step<T> = { done: T } | { refused: true };

/**
 * Sends a request and reads its whole response. Undefined: the server speaks HTTP/1.1 only (use it).
 * Throws the abort reason when `signal` aborts.
 */
export async function h2Request(
  ctx: H2Context,
  auth: RequestAuth,
  headers: http2.OutgoingHttpHeaders,
  body: EncodedBody | undefined,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<H2Response | H2Failure | undefined> {
  for (let attempt = 0; ; attempt++) {
    const session = await acquire(ctx, auth, signal);
    if (session === undefined) return undefined;
    if ('error' in session) return session;
    const step = await exchange(ctx, session, headers, body, signal, timeoutMs, false);
    if ('done' in step) return step.done as H2Response | H2Failure;
    if (attempt >= REFUSED_RETRIES) {
      return {
        error: ctx.connectionError(new Error('stream refused by the server repeatedly')),
        retryable: false,
      };
    }
  }
}

/**
 * Opens a stream for a watch: a 2xx resolves with the stream, other statuses with their whole response;
 * undefined when the server speaks HTTP/1.1 only, or `signal` aborted first (check it).
 */
export async function h2Open(
  ctx: H2Context,
  auth: RequestAuth,
  headers: http2.OutgoingHttpHeaders,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<H2Opened | H2Response | H2Failure | undefined> {
  for (let attempt = 0; ; attempt++) {
    const session = await acquire(ctx, auth, signal).catch((err: unknown) => {
      if (signal?.aborted) return undefined;
      throw err;
    });
    if (session === undefined) return undefined;
    if ('error' in session) return session;
    const step = await exchange(ctx, session, headers, undefined, signal, timeoutMs, true);
    if ('done' in step) return step.done;
    if (attempt >= REFUSED_RETRIES) {
      return {
        error: ctx.connectionError(new Error('stream refused by the server repeatedly')),
        retryable: false,
      };
    }
  }
}

async function acquire(
  ctx: H2Context,
  auth: RequestAuth,
  signal: AbortSignal | undefined,
): Promise<H2Session | H2Failure | undefined> {
  try {
    return await ctx.pool.acquire(auth, ctx.host, signal);
  } catch (err) {
    if (signal?.aborted) throw abortReason(signal);
    if (err instanceof ConnectionError) return { error: err, retryable: false };
    throw err;
  }
}

/** One stream: its response (whole, or opened for a watch), or `refused` to send it again elsewhere. */
function exchange(
  ctx: H2Context,
  session: H2Session,
  headers: http2.OutgoingHttpHeaders,
  body: EncodedBody | undefined,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  open: boolean,
): Promise<Step<H2Opened | H2Response | H2Failure | undefined>> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let stream: http2.ClientHttp2Stream;
    let responded = false;
    const finish = (step: Step<H2Opened | H2Response | H2Failure | undefined> | Error): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (step instanceof Error) reject(step);
      else resolve(step);
    };
    const onAbort = (): void => {
      // A watch aborted before its response: just undefined, as on HTTP/1.1.
      finish(open ? { done: undefined } : abortReason(signal as AbortSignal));
      stream?.close(NGHTTP2_CANCEL);
    };
    try {
      stream = session.request(headers, body === undefined);
    } catch {
      // The session took a GOAWAY or closed just now: nothing was sent.
      session.retire();
      finish({ refused: true });
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        finish({ done: { error: ctx.timeoutError(), retryable: false } });
        stream.close(NGHTTP2_CANCEL);
        // Sent and no answer in time: the session may be dead; it must answer a PING quickly.
        session.ping(PROVE_ALIVE_MS);
      }, timeoutMs);
    }
    const fail = (err: Error | undefined): void => {
      if (settled) return;
      // Never sent (no stream id: the session was gone before it), or refused: send it again.
      if (!responded && (stream.id === undefined || refusedStream(stream, session.goawayLastStreamId))) {
        if (stream.id === undefined) session.retire();
        finish({ refused: true });
        return;
      }
      const cause = err ?? new Error(`stream closed (HTTP/2 error code ${stream.rstCode})`);
      finish({ done: { error: ctx.connectionError(cause), retryable: false } });
    };
    stream.on('error', (err) => fail(err));
    stream.on('close', () => fail(undefined));
    stream.on('response', (h) => {
      responded = true;
      const status = Number(h[':status'] ?? 0);
      if (open && status >= 200 && status <= 299) {
        finish({ done: { stream, status, contentType: String(h['content-type'] ?? ''), session } });
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const { ':status': _s, ...rest } = h;
        finish({ done: { status, headers: rest as http.IncomingHttpHeaders, body: joinChunks(chunks) } });
      });
    });
    if (body !== undefined) stream.end(body);
  });
}

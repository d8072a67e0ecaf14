/**
 * Watches over HTTP/1.1 on a connection of their own, read without Node's HTTP client: the request is
 * written to a TLS (or TCP) socket and the response read by ResponseReader (h1-response.ts).
 *
 * Why: the API server sends each watch event as its own chunk. Node's client parses every chunk with
 * llhttp, calls back into JavaScript, pushes it through the response's Readable and emits it again; at
 * N=1000 Databases that was about 150 ms of the operator's start-up (bench/harness profile.ts). Here a
 * socket read becomes body pieces in one pass.
 *
 * A watch holds its connection as long as it runs, so it is not taken from the request pool (pools.ts):
 * requests never wait behind watches for a socket. When the server ends a watch (every 25-35 s) its
 * connection is kept, with the pool's idle ones, for the next request or watch (h1-connections.ts). The pool
 * still tracks the watch (trackInFlight, by its caller) and can close it when another of its
 * connections was found dead; dropping the pool's idle connections drops the kept ones too.
 */
import type * as net from 'node:net';
import * as tls from 'node:tls';
import { joinChunks } from './bodies.ts';
import type { RequestAuth } from './config.ts';
import { openConnection } from './h1-connections.ts';
import { type H1Context, headTimeout, requestHead } from './h1-requests.ts';
import { ResponseReader } from './h1-response.ts';
import { connectionsOf } from './pools.ts';

/** Body bytes held for a consumer that is behind before the socket stops reading. */
const HIGH_WATER_BYTES = 1024 * 1024;

/** A watch's 2xx response. */
export interface H1Watch {
  body: AsyncIterable<Buffer>;
  contentType: string;
  /** Whether the server ended the response. */
  complete(): boolean;
  destroy(): void;
}

/**
 * Opens a watch: resolves on a 2xx response, undefined if `signal` aborts first; throws typed errors
 * (the API error of a non-2xx response, ConnectionError, RequestTimeoutError when no response head
 * arrives within `timeoutMs`). A kept connection of an ended watch is used if there is one; if the
 * server closed it meanwhile (nothing of a response came), the watch is sent once more on a new one.
 */
export async function h1Watch(
  ctx: H1Context,
  path: string,
  auth: RequestAuth,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  accept: string,
): Promise<H1Watch | undefined> {
  if (signal?.aborted) return undefined;
  const start = performance.now();
  const options = ctx.options('GET', path, auth, { Accept: accept });
  const head = requestHead('GET', options);
  const key = ctx.agent.getName(options);
  const kept = connectionsOf(ctx.agent).takeIdle(key);
  if (kept) {
    const result = await exchange(ctx, path, kept, true, key, head, signal, timeoutMs, start);
    if (result !== STALE) return result;
  }
  let socket: net.Socket;
  try {
    socket = openConnection(options);
  } catch (err) {
    // TLS options Node refuses (a malformed certificate or key), thrown before any connection.
    ctx.metric('GET', '<error>', start);
    throw ctx.connectionError('GET', path, err as Error);
  }
  const fresh = await exchange(ctx, path, socket, false, key, head, signal, timeoutMs, start);
  return fresh === STALE ? undefined : fresh;
}

/** A kept connection that closed or failed before any of the response arrived. */
const STALE = Symbol('stale');

/** Sends the watch on `socket` and reads its response head (and, for a non-2xx answer, its body). */
function exchange(
  ctx: H1Context,
  path: string,
  socket: net.Socket,
  reused: boolean,
  key: string,
  head: string,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  start: number,
): Promise<H1Watch | undefined | typeof STALE> {
  if (signal?.aborted) {
    socket.destroy();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let connected = reused;
    let gotBytes = false;
    /** Kept for the next watch, after the server ended this one. */
    let kept = false;
    const body = new BodyQueue(
      () => socket.pause(),
      () => socket.resume(),
    );
    /** The body of a non-2xx response, read whole for its error. */
    const errorBody: Buffer[] = [];
    const isSuccess = (): boolean => {
      const status = reader.head?.status ?? 0;
      return status >= 200 && status <= 299;
    };
    // The reader reads the head before it hands over any of the body.
    const reader: ResponseReader = new ResponseReader((piece) => {
      if (isSuccess()) body.push(piece);
      else errorBody.push(Buffer.from(piece));
    });
    const settle = (err: Error | undefined, opened?: H1Watch | typeof STALE): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (err) {
        socket.destroy();
        reject(err);
      } else resolve(opened);
    };
    /** Before any of the response: a kept connection is stale (sent again on a new one), else `err`. */
    const failEarly = (err: Error): void => {
      if (reused && !gotBytes) {
        socket.destroy();
        settle(undefined, STALE);
        return;
      }
      ctx.metric('GET', '<error>', start);
      settle(ctx.connectionError('GET', path, err));
    };
    const onAbort = (): void => {
      settle(undefined);
      socket.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    timer = headTimeout(
      ctx,
      path,
      timeoutMs,
      start,
      () => connected,
      (error) => settle(error),
    );
    if (!reused) {
      socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', () => {
        connected = true;
      });
    }
    const onData = (bytes: Buffer): void => {
      gotBytes = true;
      const hadHead = reader.head !== undefined;
      try {
        reader.write(bytes);
      } catch (err) {
        const error = ctx.connectionError('GET', path, err as Error);
        if (settled) body.fail(error);
        else ctx.metric('GET', '<error>', start);
        settle(error);
        socket.destroy();
        return;
      }
      const got = reader.head;
      if (!hadHead && got) {
        ctx.metric('GET', String(got.status), start);
        if (isSuccess()) {
          // Whatever the reader handed over before this point was this response's body too.
          settle(undefined, {
            body,
            contentType: got.headers['content-type'] ?? '',
            complete: () => reader.complete,
            // Not once kept for the next watch: the connection is no longer this one's.
            destroy: () => {
              if (!kept) socket.destroy();
            },
          });
        }
      }
      if (!reader.complete || !got) return;
      if (!isSuccess()) {
        settle(ctx.apiError(got.status, joinChunks(errorBody), got.headers));
        return;
      }
      body.end();
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      // The server ended the watch and may keep the connection: the next watch can use it.
      if (reader.reusable) {
        kept = true;
        connectionsOf(ctx.agent).park(key, socket);
      } else socket.destroy();
    };
    const onError = (err: Error): void => {
      if (!settled) failEarly(err);
      else body.fail(err);
    };
    const onClose = (): void => {
      reader.end();
      const got = reader.head;
      if (!settled) {
        if (got && reader.complete && !isSuccess()) {
          settle(ctx.apiError(got.status, joinChunks(errorBody), got.headers));
          return;
        }
        failEarly(new Error('the connection closed before the response arrived'));
        return;
      }
      if (reader.complete) body.end();
      else body.fail(new Error('the connection closed before the server ended the response'));
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.write(head, 'latin1');
  });
}

/**
 * The body's pieces as the socket delivers them, to one consumer. The socket pauses while the consumer
 * is more than HIGH_WATER_BYTES behind.
 */
class BodyQueue implements AsyncIterable<Buffer> {
  #items: Buffer[] = [];
  #bytes = 0;
  #paused = false;
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  readonly #pause: () => void;
  readonly #resume: () => void;

  constructor(pause: () => void, resume: () => void) {
    this.#pause = pause;
    this.#resume = resume;
  }

  push(piece: Buffer): void {
    if (piece.length === 0) return;
    this.#items.push(piece);
    this.#bytes += piece.length;
    if (this.#bytes > HIGH_WATER_BYTES && !this.#paused) {
      this.#paused = true;
      this.#pause();
    }
    this.#notify();
  }

  end(): void {
    this.#ended = true;
    this.#notify();
  }

  fail(err: Error): void {
    if (this.#ended) return;
    this.#error ??= err;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    for (;;) {
      if (this.#items.length > 0) {
        const items = this.#items;
        this.#items = [];
        this.#bytes = 0;
        if (this.#paused) {
          this.#paused = false;
          this.#resume();
        }
        for (const piece of items) yield piece;
        continue;
      }
      if (this.#error) throw this.#error;
      if (this.#ended) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }
}

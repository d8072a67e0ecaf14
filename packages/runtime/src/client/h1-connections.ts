/**
 * The HTTP/1.1 connections of a pool (pools.ts), kept without Node's agent, per server identity (the
 * agent's pool key, which covers the TLS identity):
 * - the idle connections, kept for the next request or watch: a request's after its response, a
 *   watch's after the server ended it;
 * - the connections requests hold, at most `maxSockets`, with a queue of requests behind them.
 *
 * Watches hold their connection outside the limit (h1-watch.ts): requests never wait behind watches.
 */

import type { Socket } from 'node:net';
import * as net from 'node:net';
import * as tls from 'node:tls';

/** A connection for a request: a kept one (`reused`), a new one, or the error that opening one threw. */
export type Granted = { socket: Socket; reused: boolean } | { error: Error };

/** What a pool holds for one server identity. */
interface Key {
  /** Idle connections, the most recently used last (taken first, as Node's agent does by default). */
  idle: Socket[];
  /** The listener that drops each idle connection. */
  drops: Map<Socket, () => void>;
  /** The connections requests hold. */
  busy: Set<Socket>;
  /** Requests waiting for a connection under the limit, first come first served. */
  waiting: Array<(granted: Granted) => void>;
}

const IDLE_EVENTS = ['close', 'data', 'error'] as const;

export class H1Connections {
  readonly maxSockets: number;
  readonly #keys = new Map<string, Key>();

  constructor(maxSockets: number) {
    this.maxSockets = maxSockets;
  }

  #key(name: string): Key {
    let key = this.#keys.get(name);
    if (!key) {
      key = { idle: [], drops: new Map(), busy: new Set(), waiting: [] };
      this.#keys.set(name, key);
    }
    return key;
  }

  /**
   * A connection for a request of `name`: a kept idle one, else a new one from `open`, as soon as fewer
   * than maxSockets are held by requests. `granted` is called once (at once, or when another request of
   * `name` releases its connection). Returns a function that withdraws the request from the queue.
   */
  acquire(name: string, open: () => Socket, granted: (g: Granted) => void): () => void {
    const key = this.#key(name);
    if (key.busy.size < this.maxSockets) {
      const grant = this.#grant(key, open);
      if ('error' in grant) this.#prune(name, key);
      granted(grant);
      return noop;
    }
    const waiter = (g: Granted): void => granted(g);
    key.waiting.push(waiter);
    return () => {
      const at = key.waiting.indexOf(waiter);
      if (at !== -1) key.waiting.splice(at, 1);
      this.#prune(name, key);
    };
  }

  #grant(key: Key, open: () => Socket): Granted {
    const socket = this.#takeIdle(key);
    if (socket) {
      key.busy.add(socket);
      return { socket, reused: true };
    }
    try {
      const fresh = open();
      key.busy.add(fresh);
      return { socket: fresh, reused: false };
    } catch (err) {
      // TLS options Node refuses (a malformed certificate or key), thrown before any connection.
      return { error: err as Error };
    }
  }

  /**
   * A request of `name` is done with its connection: kept idle (or handed to the next request waiting)
   * when `reusable`, else destroyed. `open` makes a new connection for a waiting request.
   */
  release(name: string, socket: Socket, reusable: boolean, open: () => Socket): void {
    const key = this.#key(name);
    key.busy.delete(socket);
    if (reusable && !socket.destroyed) this.park(name, socket);
    else socket.destroy();
    // Until one holds a connection: a grant that failed to open one leaves the slot free.
    while (key.busy.size < this.maxSockets) {
      const next = key.waiting.shift();
      if (!next) break;
      next(this.#grant(key, open));
    }
    this.#prune(name, key);
  }

  /** Forgets a server identity the pool holds nothing for (an old TLS identity after a rotation). */
  #prune(name: string, key: Key): void {
    if (key.idle.length === 0 && key.busy.size === 0 && key.waiting.length === 0) this.#keys.delete(name);
  }

  /** How many server identities the pool holds connections or requests for. */
  get identities(): number {
    return this.#keys.size;
  }

  /**
   * Keeps an idle connection of `name` (one of a watch the server ended, or of a request), unref'd, for
   * the next request or watch; dropped when it closes, when anything arrives on it, and by dropIdle.
   */
  park(name: string, socket: Socket): void {
    const key = this.#key(name);
    if (key.idle.length >= this.maxSockets || socket.destroyed) {
      socket.destroy();
      return;
    }
    // An idle connection has nothing to say: whatever arrives, or an error, ends it.
    const drop = (): void => {
      this.#forget(key, socket);
      socket.destroy();
      this.#prune(name, key);
    };
    for (const event of IDLE_EVENTS) socket.on(event, drop);
    socket.unref();
    // Flowing (a watch's consumer may have paused it), so that a close or stray bytes are seen.
    socket.resume();
    key.idle.push(socket);
    key.drops.set(socket, drop);
  }

  /** An idle connection of `name` (ref'd again), for a watch; undefined if none is kept. */
  takeIdle(name: string): Socket | undefined {
    const key = this.#keys.get(name);
    if (!key) return undefined;
    const socket = this.#takeIdle(key);
    this.#prune(name, key);
    return socket;
  }

  #takeIdle(key: Key): Socket | undefined {
    for (;;) {
      const socket = key.idle.at(-1);
      if (!socket) return undefined;
      this.#forget(key, socket);
      if (socket.destroyed) continue;
      socket.ref();
      return socket;
    }
  }

  #forget(key: Key, socket: Socket): void {
    const drop = key.drops.get(socket);
    if (!drop) return;
    key.drops.delete(socket);
    for (const event of IDLE_EVENTS) socket.off(event, drop);
    const at = key.idle.lastIndexOf(socket);
    if (at !== -1) key.idle.splice(at, 1);
  }

  /** Destroys every idle connection; returns how many. */
  dropIdle(): number {
    let n = 0;
    for (const [name, key] of [...this.#keys]) {
      for (const socket of [...key.idle]) {
        this.#forget(key, socket);
        socket.destroy();
        n++;
      }
      this.#prune(name, key);
    }
    return n;
  }

  /** How many connections requests hold. */
  inUse(): number {
    let n = 0;
    for (const key of this.#keys.values()) n += key.busy.size;
    return n;
  }

  /** Destroys every connection, idle or held by a request (whose request then fails). */
  destroy(): void {
    this.dropIdle();
    for (const key of this.#keys.values()) for (const socket of [...key.busy]) socket.destroy();
  }
}

function noop(): void {}

/** The connection options a pool key covers: the server and the TLS identity. */
export interface ConnectOptions {
  protocol?: string | null;
  hostname?: string | null;
  port?: number | string | null;
  servername?: string;
  ca?: tls.ConnectionOptions['ca'];
  cert?: tls.ConnectionOptions['cert'];
  key?: tls.ConnectionOptions['key'];
  pfx?: tls.ConnectionOptions['pfx'];
  passphrase?: string;
  rejectUnauthorized?: boolean;
}

/** TCP keepalive, as Node's agents set it. */
const KEEPALIVE_MS = 30_000;

/**
 * A new connection to the server the options name, with their TLS identity: no Nagle delay, TCP
 * keepalive after 30 s idle. Throws what tls.connect throws for options it refuses.
 */
export function openConnection(options: ConnectOptions): Socket {
  const host = options.hostname ?? 'localhost';
  const port = Number(options.port);
  const socket =
    options.protocol !== 'https:'
      ? net.connect({ host, port })
      : tls.connect({
          host,
          port,
          // As node:https: the server name is the host unless told otherwise, and never an IP address.
          servername: options.servername ?? (net.isIP(host) ? undefined : host),
          ca: options.ca,
          cert: options.cert,
          key: options.key,
          pfx: options.pfx,
          passphrase: options.passphrase,
          rejectUnauthorized: options.rejectUnauthorized,
          ALPNProtocols: ['http/1.1'],
        });
  socket.setNoDelay(true);
  socket.setKeepAlive(true, KEEPALIVE_MS);
  return socket;
}

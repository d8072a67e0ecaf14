/**
 * HTTP/2 sessions to the API server (node:http2), as client-go's transport keeps them: one session per API
 * server and TLS identity multiplexes every request and watch as streams. A session takes at most the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS streams (kube-apiserver: 100 by default); beyond that a second
 * session opens. After a GOAWAY or a session error no new stream goes to that session. An idle-or-not
 * session is PINGed every PING_INTERVAL_MS; one that does not answer within PING_TIMEOUT_MS is closed
 * (client-go's ReadIdleTimeout/PingTimeout, 30 s/15 s), which fails its streams with ConnectionErrors.
 * Sessions without streams don't keep the process alive.
 *
 * ALPN decides: a server that does not negotiate h2 is served by the HTTP/1.1 transport (mode 'auto'),
 * or is an error (mode 'http2').
 */
import type * as http2 from 'node:http2';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import { abortReason } from '../util/abort.ts';
import type { RequestAuth, RestConfig } from './config.ts';
import { ConnectionError, DeadConnectionError } from './errors.ts';

/**
 * node:http2, loaded when the first HTTP/2 session opens: a client on HTTP/1.1 (the default) never loads
 * it. Loading it takes 12-17 ms of CPU (more when Node compiles its built-in modules from source, as under
 * --max-opt) and about 2 MiB of the Database operator's RSS.
 */
export function http2Module(): typeof import('node:http2') {
  return process.getBuiltinModule('node:http2');
}

/** Which protocol the client speaks: 'auto' tries HTTP/2 (ALPN) and falls back to HTTP/1.1. */
export type TransportMode = 'auto' | 'http1' | 'http2';

export const TRANSPORT_MODES: readonly TransportMode[] = ['auto', 'http1', 'http2'];

/** What a session may carry until the server's SETTINGS arrive (and kube-apiserver's default). */
export const DEFAULT_MAX_STREAMS = 100;
/** client-go's ReadIdleTimeout and PingTimeout. */
export const PING_INTERVAL_MS = 30_000;
export const PING_TIMEOUT_MS = 15_000;
/** How long the TLS handshake of a new session may take. */
const CONNECT_TIMEOUT_MS = 30_000;
/** HTTP/2 error codes (RFC 9113, section 7), as http2.constants has them, without loading it. */
export const NGHTTP2_REFUSED_STREAM = 0x7;
export const NGHTTP2_CANCEL = 0x8;
/** Go's transport: 4 MiB per stream, 1 GiB per connection (Node's 64 KiB would stall large LISTs). */
const STREAM_WINDOW = 4 << 20;
const SESSION_WINDOW = 1 << 30;

/**
 * The transport mode from OPKIT_TRANSPORT (auto, http1, http2), else 'http1'. Throws on an unknown value:
 * a typo must not silently pick a protocol.
 */
export function transportModeFrom(value: string | undefined): TransportMode {
  if (value === undefined || value === '') return 'http1';
  const mode = value.toLowerCase() as TransportMode;
  if (!TRANSPORT_MODES.includes(mode)) {
    throw new Error(`OPKIT_TRANSPORT=${value}: expected one of ${TRANSPORT_MODES.join(', ')}`);
  }
  return mode;
}

/** A session as the picker sees it (pure; exported for tests). */
export interface SessionSlot {
  /** False after GOAWAY, an error or close: no new streams. */
  readonly usable: boolean;
  /** The TLS identity it was opened with (see tlsIdentity). */
  readonly identity: string;
  /** Streams open or reserved on it. */
  readonly active: number;
  /** The server's SETTINGS_MAX_CONCURRENT_STREAMS (DEFAULT_MAX_STREAMS until they arrive). */
  readonly maxStreams: number;
}

/**
 * The session a new stream goes to: the first usable one of `identity` with a free stream, so that
 * streams pack into as few sessions as the server allows (like Go's connection pool). Undefined: open one.
 */
export function pickSession<T extends SessionSlot>(sessions: readonly T[], identity: string): T | undefined {
  for (const s of sessions) if (s.usable && s.identity === identity && s.active < s.maxStreams) return s;
  return undefined;
}

/**
 * Whether a stream that failed before its response can be sent again on another session: the server
 * refused it (RST_STREAM REFUSED_STREAM) or its GOAWAY said it never processed it (id above lastStreamId,
 * or no id yet). Pure; exported for tests.
 */
export function refusedStream(
  stream: { id?: number | undefined; rstCode?: number | undefined },
  goawayLastStreamId: number | undefined,
): boolean {
  if (stream.rstCode === NGHTTP2_REFUSED_STREAM) return true;
  if (goawayLastStreamId === undefined) return false;
  return stream.id === undefined || stream.id > goawayLastStreamId;
}

let lastTls: { parts: unknown[]; key: string } | undefined;

/** A key of the TLS material of `auth`: sessions are only shared by requests with the same. */
export function tlsIdentity(auth: RequestAuth): string {
  const parts = [
    auth.ca,
    auth.cert,
    auth.key,
    auth.pfx,
    auth.passphrase,
    auth.servername,
    auth.rejectUnauthorized,
  ];
  // The configuration hands out the same material every request: skip re-encoding it.
  if (lastTls?.parts.every((p, i) => p === parts[i])) return lastTls.key;
  const key = tlsKey(auth);
  lastTls = { parts, key };
  return key;
}

function tlsKey(auth: RequestAuth): string {
  const part = (v: string | Buffer | undefined): string =>
    v === undefined ? '' : typeof v === 'string' ? v : v.toString('base64');
  return [
    part(auth.ca),
    part(auth.cert),
    part(auth.key),
    part(auth.pfx),
    auth.passphrase ?? '',
    auth.servername ?? '',
    auth.rejectUnauthorized === false ? '0' : '1',
  ].join('\u0000');
}

/** One HTTP/2 session and its bookkeeping. */
export class H2Session implements SessionSlot {
  readonly session: http2.ClientHttp2Session;
  readonly identity: string;
  active = 0;
  #usable = true;
  /** The lastStreamId of the server's GOAWAY, once one arrived. */
  goawayLastStreamId: number | undefined;
  readonly #pinger: NodeJS.Timeout;
  #settled = false;

  constructor(session: http2.ClientHttp2Session, identity: string, onGone: (s: H2Session) => void) {
    this.session = session;
    this.identity = identity;
    session.unref();
    const gone = (): void => {
      if (!this.#usable) return;
      this.#usable = false;
      onGone(this);
    };
    session.on('goaway', (_code: number, lastStreamId: number) => {
      this.goawayLastStreamId = lastStreamId;
      gone();
    });
    session.on('error', gone);
    session.on('close', () => {
      clearInterval(this.#pinger);
      gone();
    });
    session.on('frameError', () => undefined);
    session.once('remoteSettings', () => {
      this.#settled = true;
    });
    this.#pinger = setInterval(() => this.ping(PING_TIMEOUT_MS), PING_INTERVAL_MS).unref();
  }

  /** Whether it takes new streams: no GOAWAY, error or close yet (node emits those a tick later). */
  get usable(): boolean {
    return this.#usable && !this.session.destroyed && !this.session.closed;
  }

  /** No new streams on this session (it took a GOAWAY or failed a stream creation). */
  retire(): void {
    this.#usable = false;
  }

  /** The server's limit once its SETTINGS arrived (node reports the protocol's unlimited default before). */
  get maxStreams(): number {
    if (!this.#settled) return DEFAULT_MAX_STREAMS;
    return this.session.remoteSettings.maxConcurrentStreams ?? DEFAULT_MAX_STREAMS;
  }

  /** Takes a stream slot (acquire does, synchronously, so that concurrent callers see it taken). */
  reserve(): void {
    this.active++;
    if (this.active === 1) this.session.ref();
  }

  /** Gives back a slot that was reserved and not used for a stream. */
  release(): void {
    this.active--;
    if (this.active === 0 && !this.session.destroyed) this.session.unref();
  }

  /** PINGs the server; closes the session (its streams fail) if no answer comes within `timeoutMs`. */
  ping(timeoutMs: number): void {
    if (this.session.destroyed || this.session.closed) return;
    const timer = setTimeout(() => {
      this.session.destroy(
        new DeadConnectionError(
          `HTTP/2 session unanswered PING after ${timeoutMs} ms; retry on a new session`,
        ),
      );
    }, timeoutMs).unref();
    try {
      this.session.ping((err) => {
        if (!err) clearTimeout(timer);
      });
    } catch {
      clearTimeout(timer);
    }
  }

  /**
   * A new stream on the slot acquire reserved, given back when the stream closes. Throws when the session
   * takes no more (GOAWAY, closed: nothing was sent, the caller retries); the slot is given back then.
   */
  request(headers: http2.OutgoingHttpHeaders, endStream: boolean): http2.ClientHttp2Stream {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = this.session.request(headers, { endStream });
    } catch (err) {
      this.release();
      throw err;
    }
    // The slot is free once the response ended (END_STREAM both ways: the server counts it closed);
    // 'close' comes a tick later, too late for a request sent right after this one's answer.
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.release();
    };
    stream.once('end', release);
    stream.once('close', release);
    return stream;
  }

  close(): void {
    this.#usable = false;
    this.session.destroy();
  }
}

/** Sessions of one configuration and pool. */
export class H2Pool {
  readonly mode: TransportMode;
  readonly #url: URL;
  readonly #sessions: H2Session[] = [];
  readonly #connecting = new Map<string, Promise<H2Session | undefined>>();
  /** Set when the server did not negotiate h2 (mode 'auto'): every request uses HTTP/1.1. */
  http1Only = false;

  constructor(server: string, mode: TransportMode) {
    this.#url = new URL(server);
    this.mode = mode;
    // No h2c: plain-HTTP servers (tests, proxies) are spoken to in HTTP/1.1.
    if (mode === 'http1' || this.#url.protocol !== 'https:') this.http1Only = true;
  }

  /** Open sessions (for tests and metrics). */
  get sessions(): readonly H2Session[] {
    return this.#sessions;
  }

  /**
   * A session with a free stream for `auth`'s TLS identity, opening one if needed, with that stream
   * reserved (H2Session.request uses it, or release gives it back); undefined when the server speaks
   * HTTP/1.1 only (mode 'auto'). Throws ConnectionError when it cannot connect.
   */
  async acquire(
    auth: RequestAuth,
    host: string,
    signal: AbortSignal | undefined,
  ): Promise<H2Session | undefined> {
    const identity = tlsIdentity(auth);
    for (;;) {
      if (signal?.aborted) throw abortReason(signal);
      if (this.http1Only) return undefined;
      const found = pickSession(this.#sessions, identity);
      if (found) {
        found.reserve();
        return found;
      }
      let pending = this.#connecting.get(identity);
      if (!pending) {
        pending = this.#connect(auth, identity, host).finally(() => this.#connecting.delete(identity));
        this.#connecting.set(identity, pending);
      }
      const opened = await pending;
      if (!opened) return undefined;
      // Full already (many waiters): the loop opens the next one.
      if (opened.usable && opened.active < opened.maxStreams) {
        opened.reserve();
        return opened;
      }
    }
  }

  /** Closes every session. */
  close(): void {
    for (const s of [...this.#sessions]) s.close();
    this.#sessions.length = 0;
  }

  /** The server does not speak h2: HTTP/1.1 from now on ('auto'), else an error. */
  #notH2(host: string, alpn: string): undefined {
    if (this.mode !== 'auto') {
      throw new ConnectionError(
        `${host} did not negotiate HTTP/2 (ALPN: ${alpn}); use transport 'auto' or 'http1'`,
        undefined,
      );
    }
    this.http1Only = true;
    return undefined;
  }

  async #connect(auth: RequestAuth, identity: string, host: string): Promise<H2Session | undefined> {
    const hostname = this.#url.hostname.replace(/^\[(.*)\]$/, '$1');
    const socket = tls.connect({
      host: hostname,
      port: Number(this.#url.port || 443),
      ca: auth.ca,
      cert: auth.cert,
      key: auth.key,
      pfx: auth.pfx,
      passphrase: auth.passphrase,
      rejectUnauthorized: auth.rejectUnauthorized,
      // SNI must not be an IP address.
      servername: auth.servername ?? (isIP(hostname) ? undefined : hostname),
      ALPNProtocols: this.mode === 'http2' ? ['h2'] : ['h2', 'http/1.1'],
    });
    // Frames of many streams share the socket: Nagle would hold small ones back (node's HTTP agents set
    // noDelay too).
    socket.setNoDelay(true);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`TLS handshake not done after ${CONNECT_TIMEOUT_MS} ms`));
        }, CONNECT_TIMEOUT_MS);
        socket.once('secureConnect', () => {
          clearTimeout(timer);
          resolve();
        });
        socket.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
    } catch (err) {
      socket.destroy();
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL') return this.#notH2(host, 'refused h2');
      const why = err instanceof Error ? err.message : String(err);
      throw new ConnectionError(
        `HTTP/2 connection to ${host} failed: ${code && !why.includes(code) ? `${why} (${code})` : why}`,
        err,
      );
    }
    if (socket.alpnProtocol !== 'h2') {
      socket.destroy();
      return this.#notH2(host, socket.alpnProtocol || 'none');
    }
    const session = http2Module().connect(this.#url.origin, {
      createConnection: () => socket,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
      maxSessionMemory: 64,
    });
    session.on('connect', () => {
      try {
        session.setLocalWindowSize(SESSION_WINDOW);
      } catch {
        // a session destroyed meanwhile
      }
    });
    const s = new H2Session(session, identity, (gone) => {
      const i = this.#sessions.indexOf(gone);
      if (i >= 0) this.#sessions.splice(i, 1);
      // Drained sessions close; streams still open on them finish first (GOAWAY lets them).
      if (gone.active === 0) gone.session.close();
    });
    this.#sessions.push(s);
    return s;
  }
}

const pools = new WeakMap<RestConfig, Map<string, H2Pool>>();

/** The HTTP/2 sessions of `pool`, shared by every transport of `config` that uses that pool and mode. */
export function h2PoolFor(config: RestConfig, pool: string, mode: TransportMode): H2Pool {
  let byPool = pools.get(config);
  if (!byPool) {
    byPool = new Map();
    pools.set(config, byPool);
  }
  const key = `${mode}/${pool}`;
  let p = byPool.get(key);
  if (!p) {
    p = new H2Pool(config.server, mode);
    byPool.set(key, p);
  }
  return p;
}

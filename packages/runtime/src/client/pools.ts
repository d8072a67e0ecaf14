/**
 * Connection pools: each configuration has named pools. 'default' serves every request; a separate pool
 * serves requests that must never wait for a connection behind other requests (leader election's Lease
 * renewals use LEADER_ELECTION_POOL). Each pool has a keep-alive agent: its pool key names a server
 * identity, and through a proxy it serves the requests. Otherwise HTTP/1.1 requests and watches use the
 * pool's own connections (connectionsOf, h1-connections.ts); watches hold theirs outside the limit.
 *
 * Dead connections: the transport registers every request and watch in flight (trackInFlight); when one
 * connection of a pool is found dead, presumeDead closes the pool's idle connections and every connection
 * in use that delivers nothing within PROVE_ALIVE_MS. Connections get TCP keepalive (30 s idle).
 */
import type * as http from 'node:http';
import * as https from 'node:https';
import { nodeHttp } from '../util/node-http.ts';
import type { RestConfig } from './config.ts';
import { DeadConnectionError, type PoolSweep, StaleConnectionError } from './errors.ts';
import { H1Connections } from './h1-connections.ts';

const DEFAULT_MAX_SOCKETS = 100;

/** The pool of every request (and the pool that tracks every watch) unless told otherwise. */
export const DEFAULT_POOL = 'default';
/** Leader election's own pool: Lease renewals never queue behind other requests for a socket. */
export const LEADER_ELECTION_POOL = 'leader-election';

/** An HTTP or HTTPS keep-alive agent. */
export type AnyAgent = http.Agent | https.Agent;
const agents = new WeakMap<RestConfig, Map<string, AnyAgent>>();

/** The connections of each agent's pool over HTTP/1.1 outside a proxy (h1-connections.ts). */
const connections = new WeakMap<AnyAgent, H1Connections>();

/**
 * The HTTP/1.1 connections of `agent`'s pool (requests and watches use them; Node's agent itself only
 * serves requests through a proxy).
 */
export function connectionsOf(agent: AnyAgent): H1Connections {
  let pool = connections.get(agent);
  if (!pool) {
    pool = new H1Connections(agent.maxSockets);
    connections.set(agent, pool);
  }
  return pool;
}

/**
 * Destroys the pool's idle keep-alive connections (connections in use are left alone): after a
 * connection was found dead, the next request opens a fresh one instead of waiting out a timeout on a
 * stale one. Returns how many it closed.
 */
export function dropIdleSockets(agent: AnyAgent): number {
  let n = connections.get(agent)?.dropIdle() ?? 0;
  for (const sockets of Object.values(agent.freeSockets)) {
    for (const socket of sockets ?? []) {
      socket.destroy();
      n++;
    }
  }
  return n;
}

/**
 * How long a connection in use must take to deliver a byte once another connection of its pool was found
 * dead. The API server answers ordinary requests in milliseconds; an idle watch that is closed for nothing
 * re-opens from its resourceVersion (no relist).
 */
export const PROVE_ALIVE_MS = 2000;

/** A request or watch in flight on a pool's connection, as the transport registers it. */
export interface InFlight {
  /** Tells the pool the connection delivered something (a response, a chunk, a watch event). */
  alive(): void;
  /** Unregisters it (the request ended). */
  done(): void;
  /** The sweep whose check this connection is under right now, if any. */
  underCheck(): PoolSweep | undefined;
}

interface Tracked {
  kind: 'request' | 'watch';
  deliveries: number;
  active: boolean;
  checkedBy: PoolSweep | undefined;
  abort: (err: DeadConnectionError) => void;
}

const inFlight = new WeakMap<AnyAgent, Set<Tracked>>();

/**
 * Registers a request or watch in flight on `agent`'s pool: if the pool finds a connection dead
 * meanwhile, `abort` is called with a DeadConnectionError unless this one delivered within the check.
 */
export function trackInFlight(
  agent: AnyAgent,
  kind: 'request' | 'watch',
  abort: (err: DeadConnectionError) => void,
): InFlight {
  let set = inFlight.get(agent);
  if (!set) {
    set = new Set();
    inFlight.set(agent, set);
  }
  const t: Tracked = { kind, deliveries: 0, active: true, checkedBy: undefined, abort };
  set.add(t);
  const pool = set;
  return {
    alive: () => {
      t.deliveries++;
    },
    done: () => {
      t.active = false;
      pool.delete(t);
    },
    underCheck: () => t.checkedBy,
  };
}

/**
 * Ends the watches in flight on `agent`'s pool (the transport is being closed): each fails with `err`,
 * as when its socket is destroyed. Returns how many.
 */
export function closeWatches(agent: AnyAgent, err: DeadConnectionError): number {
  let n = 0;
  for (const t of [...(inFlight.get(agent) ?? [])]) {
    if (t.kind !== 'watch' || !t.active) continue;
    t.abort(err);
    n++;
  }
  return n;
}

/**
 * One connection of `agent`'s pool was found dead (`cause`: a watch silent past its deadline, a request
 * without an answer in its timeout). Half-open connections rarely come alone (a peer or a middlebox lost
 * them all), and on HTTP/1.1 a connection in use cannot be probed; so, like an HTTP/2 ping sent to every
 * connection: idle connections are closed at once, and every request or watch in flight must deliver
 * something within `proveAliveMs` or is closed with a DeadConnectionError (its caller retries on a new
 * connection). Returns what it did; when `cause` is a StaleConnectionError, also records it there.
 */
export function presumeDead(
  agent: AnyAgent,
  host: string,
  cause: Error,
  proveAliveMs = PROVE_ALIVE_MS,
): PoolSweep {
  const idleClosed = dropIdleSockets(agent);
  const checked = [...(inFlight.get(agent) ?? [])].map((t) => ({ t, seen: t.deliveries }));
  const sweep: PoolSweep = {
    idleClosed,
    requests: checked.filter((c) => c.t.kind === 'request').length,
    watches: checked.filter((c) => c.t.kind === 'watch').length,
    proveAliveMs,
  };
  if (checked.length > 0) {
    for (const { t } of checked) t.checkedBy ??= sweep;
    setTimeout(() => {
      for (const { t, seen } of checked) {
        if (t.checkedBy === sweep) t.checkedBy = undefined;
        if (!t.active || t.deliveries !== seen) continue;
        t.abort(
          new DeadConnectionError(
            `connection to ${host} closed: another connection of its pool was found dead (${cause.message}) ` +
              `and this one delivered nothing within ${proveAliveMs} ms; retry on a new connection`,
          ),
        );
      }
    }, proveAliveMs).unref();
  }
  if (cause instanceof StaleConnectionError) cause.sweep = sweep;
  return sweep;
}

/**
 * The request options an HTTPS agent's pool key is made of: Node's `getName` (node:https over node:http)
 * joins these into the name its socket lists are kept under.
 */
const POOL_KEY_OPTIONS = [
  'host',
  'port',
  'localAddress',
  'family',
  'socketPath',
  'ca',
  'cert',
  'clientCertEngine',
  'ciphers',
  'key',
  'pfx',
  'passphrase',
  'rejectUnauthorized',
  'servername',
  'minVersion',
  'maxVersion',
  'secureProtocol',
  'crl',
  'honorCipherOrder',
  'ecdhCurve',
  'dhparam',
  'secureOptions',
  'sessionIdContext',
  'sigalgs',
  'privateKeyIdentifier',
  'privateKeyEngine',
  'checkServerIdentity',
] as const;

/**
 * An HTTPS keep-alive agent that makes its pool key once per TLS identity. Node's `getName` builds the
 * key of every request by joining the CA, client certificate and key into one string (Buffers decoded to
 * text first): kilobytes made, and then hashed and compared at each of the agent's socket-list lookups.
 * The key is a function of the options above, and the transport passes the same credential objects until
 * they are read again: when every one of them is the same value or object as the last call's, the last
 * key is the answer, and the same string each time, so the lookups find it at once.
 */
export class HttpsPoolAgent extends https.Agent {
  #last: { values: unknown[]; name: string } | undefined;

  override getName(options: https.RequestOptions = {}): string {
    const given = options as Record<string, unknown>;
    const last = this.#last;
    if (last) {
      let same = true;
      for (let i = 0; i < POOL_KEY_OPTIONS.length; i++) {
        if (given[POOL_KEY_OPTIONS[i] as string] !== last.values[i]) {
          same = false;
          break;
        }
      }
      if (same) return last.name;
    }
    const name = super.getName(options);
    // A per-request server identity check is part of Node's key in a way not visible here: no memo.
    if (given.checkServerIdentity === undefined) {
      this.#last = { values: POOL_KEY_OPTIONS.map((o) => given[o]), name };
    }
    return name;
  }
}

/** The keep-alive agent of `pool`, shared by every transport of `config` that uses that pool. */
export function agentFor(
  config: RestConfig,
  maxSockets = DEFAULT_MAX_SOCKETS,
  pool: string = DEFAULT_POOL,
): AnyAgent {
  let pools = agents.get(config);
  if (!pools) {
    pools = new Map();
    agents.set(config, pools);
  }
  let agent = pools.get(pool);
  if (!agent) {
    const opts: http.AgentOptions = {
      keepAlive: true,
      keepAliveMsecs: 30_000,
      maxSockets,
      // Every connection stays pooled between bursts: with 16 kept, the Database operator at N=1000 (two
      // workers plus its Event writes) opened 356 connections, a TLS handshake each, instead of 37
      // (bench/harness --opkit-node-flags with a net.client.socket counter; 17.2 -> 15.7 s CPU).
      maxFreeSockets: maxSockets,
    };
    agent = config.server.startsWith('https:') ? new HttpsPoolAgent(opts) : new nodeHttp.Agent(opts);
    pools.set(pool, agent);
  }
  return agent;
}

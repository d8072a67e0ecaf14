/**
 * Connection pools: each configuration has named pools, one keep-alive agent each. 'default' serves
 * every request and watch; a separate pool serves requests that must never wait for a socket behind
 * watches (leader election's Lease renewals use LEADER_ELECTION_POOL). Every open watch holds one
 * socket of its pool for as long as it runs.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { RestConfig } from './config.ts';

const DEFAULT_MAX_SOCKETS = 100;

/** The pool requests and watches share unless told otherwise. */
export const DEFAULT_POOL = 'default';
/** Leader election's own pool: Lease renewals never queue behind watches for a socket. */
export const LEADER_ELECTION_POOL = 'leader-election';

/** An HTTP or HTTPS keep-alive agent. */
export type AnyAgent = http.Agent | https.Agent;
const agents = new WeakMap<RestConfig, Map<string, AnyAgent>>();

/**
 * Destroys the pool's idle keep-alive sockets (sockets in use are left alone): after a connection was
 * found dead, the next request opens a fresh one instead of waiting out a timeout on a stale socket.
 */
export function dropIdleSockets(agent: AnyAgent): void {
  for (const sockets of Object.values(agent.freeSockets)) {
    for (const socket of sockets ?? []) socket.destroy();
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
      maxFreeSockets: 16,
    };
    agent = config.server.startsWith('https:') ? new https.Agent(opts) : new http.Agent(opts);
    pools.set(pool, agent);
  }
  return agent;
}

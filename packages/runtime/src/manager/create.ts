/** createManager: a Manager with a client built from the kubeconfig. */
import { loadConfig } from '../client/config.ts';
import { LEADER_ELECTION_POOL } from '../client/pools.ts';
import { createClient } from '../client/rest-client.ts';
import { MetricsRegistry } from '../metrics/registry.ts';
import { Manager } from './manager.ts';
import type { LeaderElectionOptions, ManagerInit, ManagerOptions } from './options.ts';

/**
 * Builds a manager: loads the kubeconfig (unless `client` is given), creates the client (counting
 * rest_client_requests_total in the manager's registry), the shared cache and the rest.
 */
export async function createManager(opts: ManagerOptions = {}): Promise<Manager> {
  const metrics = opts.metrics ?? new MetricsRegistry({ defaultMetrics: true });
  let client = opts.client;
  let defaultNamespace: string | undefined;
  let onStopped: (() => void) | undefined;
  let leaderElection: LeaderElectionOptions | undefined;
  if (!client) {
    const config = await loadConfig({
      ...(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}),
      ...(opts.context !== undefined ? { context: opts.context } : {}),
    });
    const clientOptions = {
      ...(opts.fieldManager !== undefined ? { fieldManager: opts.fieldManager } : {}),
      onRequest: metrics.restClientObserver(),
      ...(opts.transport !== undefined ? { transport: opts.transport } : {}),
      ...(opts.wireFormat !== undefined ? { wireFormat: opts.wireFormat } : {}),
    };
    const built = createClient(config, {
      ...clientOptions,
      ...(opts.rateLimit ? { rateLimit: opts.rateLimit } : {}),
    });
    client = built;
    defaultNamespace = config.namespace;
    const le = opts.leaderElection;
    if (le && le.enabled !== false && !le.client) {
      const leClient = createClient(config, { ...clientOptions, connectionPool: LEADER_ELECTION_POOL });
      leaderElection = { ...le, client: leClient };
      onStopped = () => {
        built.close();
        leClient.close();
      };
    } else {
      onStopped = () => built.close();
    }
  }
  const init: ManagerInit = {
    ...opts,
    ...(leaderElection ? { leaderElection } : {}),
    client,
    metrics,
    ...(defaultNamespace ? { defaultNamespace } : {}),
    ...(onStopped ? { onStopped } : {}),
  };
  delete (init as ManagerOptions).kubeconfig;
  delete (init as ManagerOptions).context;
  delete (init as ManagerOptions).fieldManager;
  delete (init as ManagerOptions).rateLimit;
  delete (init as ManagerOptions).transport;
  delete (init as ManagerOptions).wireFormat;
  return new Manager(init);
}

/** The manager: probes, metrics, leader election, runnables, shutdown (docs/runtime.md, "Manager"). */
import { createLogger, createManager, type Manager, type Runnable } from '@opkit/runtime';
import { setupGreetingController } from './quickstart.ts';

// #region manager
export async function buildManager(): Promise<Manager> {
  const mgr = await createManager({
    kubeconfig: process.env.KUBECONFIG, // default: $KUBECONFIG, in-cluster, ~/.kube/config
    namespace: 'demo', // cache only this namespace (and the Lease's default namespace)
    healthProbeBindAddress: ':8081', // GET /healthz, /readyz (ready once the caches synced)
    metricsBindAddress: ':8080', // GET /metrics (controller-runtime's metric names)
    gracefulShutdownTimeoutMs: 30_000, // for in-flight reconciles after SIGTERM
    logger: createLogger({ name: 'greeting-operator' }), // JSON lines, secrets redacted
    leaderElection: {
      id: 'greetings.demo.opkit.dev', // the Lease's name
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      releaseOnCancel: true, // on a graceful shutdown the next replica takes over within its retryPeriod
    },
  });
  setupGreetingController(mgr);
  mgr.addReadyzCheck('warm', () => mgr.cache.hasSynced()); // passes unless it throws or returns false
  return mgr;
}
// #endregion manager

// #region runnable
// Anything else the process runs. needLeaderElection: true runs it only on the leader (like controllers).
export const reporter: Runnable = {
  name: 'reporter',
  needLeaderElection: true,
  async start(signal) {
    const timer = setInterval(() => console.log('still leading'), 60_000);
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    clearInterval(timer); // resolve once stopped: graceful shutdown waits for it
  },
};

export async function run(): Promise<void> {
  const mgr = await buildManager();
  mgr.add(reporter);
  void mgr.elected.then(() => mgr.logger.info('leading'));
  // Without a signal: SIGTERM/SIGINT start a graceful shutdown (a second one exits at once).
  // Rejects with LeaderElectionLostError, CacheSyncTimeoutError (caches not synced in 2 min), a failed
  // runnable's error or GracefulShutdownTimeoutError.
  await mgr.start();
}
// #endregion runnable

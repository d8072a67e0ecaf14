/** @opkit/runtime manager: runs controllers and other runnables with a shared client, cache and leader election. */
export { CHECK_TIMEOUT_MS, type Checker, HealthChecks } from './health.ts';
export {
  CacheSyncTimeoutError,
  createManager,
  GracefulShutdownTimeoutError,
  LeaderElectionLostError,
  type LeaderElectionOptions,
  Manager,
  type ManagerInit,
  type ManagerOptions,
  type StartOptions,
} from './manager.ts';
export type { Runnable } from './runnable.ts';
export { type BindAddress, formatAddress, parseBindAddress } from './server.ts';

/** @opkit/runtime manager: runs controllers and other runnables with a shared client, cache and leader election. */
export { createManager } from './create.ts';
export { CacheSyncTimeoutError, GracefulShutdownTimeoutError, LeaderElectionLostError } from './errors.ts';
export { CHECK_TIMEOUT_MS, type Checker, HealthChecks } from './health.ts';
export { Manager } from './manager.ts';
export type { LeaderElectionOptions, ManagerInit, ManagerOptions, StartOptions } from './options.ts';
export type { Runnable } from './runnable.ts';
export { type BindAddress, formatAddress, parseBindAddress } from './server.ts';

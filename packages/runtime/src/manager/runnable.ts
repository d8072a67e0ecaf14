/**
 * Anything the manager runs: controllers, caches, servers, user tasks. `start` runs until `signal`
 * aborts and then resolves once the runnable has stopped (graceful shutdown waits for it).
 */
export interface Runnable {
  readonly name: string;
  /**
   * true (the default for controllers): started only once this manager holds the leader lease.
   * false: started at once on every replica (caches, servers), so non-leaders stay warm.
   */
  readonly needLeaderElection: boolean;
  start(signal: AbortSignal): Promise<void>;
}

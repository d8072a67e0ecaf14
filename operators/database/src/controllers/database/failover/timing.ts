/** The failover procedure's timeouts and pacing (procedure.ts and its steps). */

/** Exec timeout: a fast shutdown is bounded at 50 s by the commands themselves. */
export const EXEC_TIMEOUT_MS = 60_000;
export const QUERY_TIMEOUT_MS = 20_000;
/** How long a primary that is not Ready gets to answer before it is failed over. */
export const CONFIRM_TIMEOUT_MS = 15_000;
/** How soon to look again while a step takes effect. */
export const STEP_MS = 1_000;
export const RETRY_MS = 3_000;

export function isoNow(ms: number): string {
  return new Date(ms).toISOString();
}

import { AssertionError } from 'node:assert';

export interface EventuallyOptions {
  /** Default 20 s. */
  timeoutMs?: number;
  /** Default 50 ms. */
  intervalMs?: number;
}

/**
 * Polls `probe` until it returns a value (anything but undefined, null or false) and returns it. A probe
 * that throws is retried; after `timeoutMs` the test fails naming `what` and the last error.
 * For integration tests, where the API server and controllers converge on their own time.
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: EventuallyOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new AssertionError({
        message: `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`,
      });
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}

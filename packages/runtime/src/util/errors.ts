/** Small helpers for unknown thrown values. */

/** The message of an Error, or the thrown value as a string. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** `err` and the errors of its `cause` chain, outermost first (stops at a non-Error or a cycle). */
export function* causeChain(err: unknown): Generator<Error> {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    yield e;
  }
}

/** The first error in `err`'s cause chain (itself included) that is an instance of `type`, if any. */
export function findCause<E extends Error>(
  err: unknown,
  type: abstract new (...args: never[]) => E,
): E | undefined {
  for (const e of causeChain(err)) if (e instanceof type) return e;
  return undefined;
}

/** Calling a reconciler and classifying how it ended (the controller acts on the outcome). */
import type { KubeObject } from '../api/object.ts';
import { TooManyRequestsError } from '../client/errors.ts';
import { findCause } from '../util/errors.ts';
import type { ReconcileContext, Reconciler, ReconcileTimeoutError, Request, Result } from './reconcile.ts';

export type Outcome =
  | { kind: 'ok'; result: Result }
  | { kind: 'error'; err: unknown; panic: boolean }
  | { kind: 'timeout'; err: ReconcileTimeoutError };

/** Calls the reconciler; the returned promise never rejects. */
export function invokeReconciler<T extends KubeObject>(
  reconciler: Reconciler<T>,
  req: Request,
  ctx: ReconcileContext,
): Promise<Outcome> {
  let pending: Promise<Result> | Result;
  try {
    pending = reconciler(req, ctx);
  } catch (err) {
    return Promise.resolve({ kind: 'error', err, panic: true });
  }
  return Promise.resolve(pending).then(
    (result): Outcome => ({ kind: 'ok', result }),
    (err: unknown): Outcome => ({ kind: 'error', err, panic: isRuntimeFault(err) }),
  );
}

/** The TooManyRequestsError `err` is or was caused by (searching its `cause` chain), if any. */
export function tooManyRequests(err: unknown): TooManyRequestsError | undefined {
  return findCause(err, TooManyRequestsError);
}

/** A JS runtime fault (the closest thing to a Go panic): ReferenceError, or TypeError with no cause. */
export function isRuntimeFault(err: unknown): boolean {
  return err instanceof ReferenceError || (err instanceof TypeError && err.cause === undefined);
}

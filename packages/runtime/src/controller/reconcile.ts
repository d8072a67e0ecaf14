/**
 * The reconcile contract, like controller-runtime's pkg/reconcile.
 *
 * A reconciler is called with the key of one object (never the object: read the current state from the
 * cache) and drives the world towards the object's desired state. It must be idempotent: it may be
 * called any number of times for the same key, also when nothing changed.
 *
 * Outcome:
 * - resolves with nothing / `{}`: done; the key's backoff is reset.
 * - resolves with `{ requeueAfter: ms }`: done, and reconcile the key again after `ms` (backoff reset).
 * - resolves with `{ requeue: true }`: reconcile again after the rate limiter's backoff.
 * - throws a {@link TerminalError}: logged and counted, never retried (until the next event for the key).
 * - throws anything else: logged and counted, retried with per-key exponential backoff.
 */
import type { Logger } from 'pino';
import type { KubeObject, ObjectKey } from '../api/object.ts';
import { findCause } from '../util/errors.ts';

/** What a reconciler is asked to reconcile: one object's namespace/name. */
export type Request = ObjectKey;
/** Alias of {@link Request} for modules where the fetch API's global `Request` is in scope. */
export type ReconcileRequest = Request;

export interface ResultOptions {
  /** Reconcile the key again after this many milliseconds (the key's backoff is reset). */
  requeueAfter?: number;
  /** Reconcile the key again after the rate limiter's backoff (ignored when `requeueAfter` > 0). */
  requeue?: boolean;
}

/** What a reconcile resolves with; `void` so that `async () => {}` is a reconciler. */
// biome-ignore lint/suspicious/noConfusingVoidType: see above.
export type Result = ResultOptions | void;

export interface ReconcileContext {
  /**
   * Aborted when the reconcile times out (the reason is a {@link ReconcileTimeoutError}) or the
   * controller shuts down. Pass it to every client call, cache read and wait:
   *
   *     await client.get(Widgets, req, { signal: ctx.signal });
   *     await mgr.cache.get(Widgets, req, ctx);        // a ReconcileContext is a valid { signal } option
   *     await mgr.cache.list(Pods, { namespace, signal: ctx.signal });
   *
   * A cache read waits for its informer's first sync; with the signal it rejects with the abort reason
   * instead of outliving the reconcile (an informer may never sync: RBAC forbids the list, a CRD is
   * missing). A reconcile that ignores its signal is abandoned at the timeout and keeps running (see
   * opkit_controller_abandoned_reconciles).
   */
  readonly signal: AbortSignal;
  /** A child logger bound to `controller`, `key` (namespace/name) and `reconcileID`. */
  readonly log: Logger;
  /** A fresh UUID for this invocation (also in every log line of `log`). */
  readonly reconcileID: string;
  /** The controller's name. */
  readonly controller: string;
}

/**
 * Reconciles one key. `T` (the primary object type) is only documentation: the reconciler reads the
 * object itself.
 */
export type Reconciler<_T extends KubeObject = KubeObject> = (
  req: Request,
  ctx: ReconcileContext,
) => Promise<Result>;

/**
 * An error that retrying cannot fix (invalid spec, say): the key is not requeued. It is still logged
 * and counted in controller_runtime_reconcile_errors_total and
 * controller_runtime_terminal_reconcile_errors_total. Wrap another error with `new TerminalError(err)`.
 */
export class TerminalError extends Error {
  constructor(messageOrCause: string | Error, options?: ErrorOptions) {
    if (typeof messageOrCause === 'string') super(messageOrCause, options);
    else super(`terminal error: ${messageOrCause.message}`, { cause: options?.cause ?? messageOrCause });
    this.name = 'TerminalError';
  }
}

/** True if `err`, or an error in its `cause` chain, is a {@link TerminalError}. */
export function isTerminalError(err: unknown): boolean {
  return findCause(err, TerminalError) !== undefined;
}

/** The abort reason of a reconcile's signal when it ran past the controller's reconcile timeout. */
export class ReconcileTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`reconcile timed out after ${timeoutMs} ms`);
    this.name = 'ReconcileTimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/** The abort reason of a reconcile's signal when the controller shuts down. */
export class ControllerShutdownError extends Error {
  constructor(controller: string) {
    super(`controller ${controller} is shutting down`);
    this.name = 'ControllerShutdownError';
  }
}

/** `return requeueAfter(30_000)`: reconcile this key again in 30 s. */
export function requeueAfter(ms: number): Result {
  if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`requeueAfter: invalid delay ${ms}`);
  return { requeueAfter: ms };
}

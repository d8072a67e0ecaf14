/**
 * How the errors informers report are logged. Most are recovery working as designed (a watch broken by an
 * API server restart, 410 Gone after compaction, a silent watch re-opened): one info line each, with the
 * error's message and no stack. Errors that need someone to act (403 Forbidden: RBAC; 404: a CRD not
 * installed) are warnings saying what to check; failures of user code (event handlers, transforms) are
 * warnings with the stack. Every line that leaves the stack out repeats the error with it at debug.
 */
import type { Logger } from 'pino';
import { ShortWatchError, WatchSilenceError } from '../cache/watcher.ts';
import {
  ConnectionError,
  DeadConnectionError,
  ForbiddenError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnauthorizedError,
} from '../client/errors.ts';
import { messageOf } from '../util/errors.ts';

/** The context an informer (or the cache) reports with an error; every variant fits this shape. */
export interface InformerErrorInfo {
  phase: string;
  resource?: string;
  action?: string;
  delayMs?: number;
  resourceVersion?: string;
  key?: string;
  event?: string;
}

export type InformerLogLevel = 'debug' | 'info' | 'warn';

export interface InformerLogLine {
  level: InformerLogLevel;
  msg: string;
  fields: Record<string, unknown>;
  /** Whether `fields.err` (the error with its stack) is in the line; if not, it is logged again at debug. */
  withStack: boolean;
}

/** Errors a list or watch recovers from by retrying: the API server restarting, overloaded or unreachable. */
export function isTransient(err: unknown): boolean {
  return (
    err instanceof ConnectionError ||
    err instanceof ServerError ||
    err instanceof TimeoutError ||
    err instanceof TooManyRequestsError ||
    err instanceof ShortWatchError
  );
}

function hintFor(err: unknown): string | undefined {
  if (err instanceof ForbiddenError)
    return "check the RBAC rules of the manager's ServiceAccount (list and watch)";
  if (err instanceof NotFoundError)
    return 'is the CRD installed? (opkit install, or kubectl apply -f config/crd)';
  if (err instanceof UnauthorizedError)
    return 'check the credentials of the kubeconfig or the ServiceAccount token';
  return undefined;
}

/** The log line for one reported informer error (pure). */
export function informerLogLine(err: unknown, ctx: InformerErrorInfo): InformerLogLine {
  const where = {
    ...(ctx.resource !== undefined ? { resource: ctx.resource } : {}),
    phase: ctx.phase,
  };
  if (ctx.phase === 'list' || ctx.phase === 'watch') {
    if (ctx.action === 'relist') {
      return {
        level: 'info',
        msg: 'relisting: the watch resourceVersion is too old (410 Gone)',
        fields: { ...where, resourceVersion: ctx.resourceVersion },
        withStack: false,
      };
    }
    if (err instanceof WatchSilenceError && err.sweep?.joined) {
      return {
        level: 'debug',
        msg: 're-opening a silent watch: its pool was already checking its connections',
        fields: { ...where, error: messageOf(err) },
        withStack: false,
      };
    }
    if (err instanceof WatchSilenceError) {
      // The one line of a half-open: the watches and requests the pool closed with it log at debug.
      const sweep = err.sweep;
      return {
        level: 'warn',
        msg:
          'connection to the API server presumed dead (a watch silent past its deadline, half-open): ' +
          're-opening the watch on a new connection' +
          (sweep
            ? `; the pool closed its idle connections and closes those in use that deliver nothing within ${
                sweep.proveAliveMs / 1000
              } s`
            : ''),
        fields: {
          ...where,
          silentSeconds: Math.round(err.silenceMs / 1000),
          ...(sweep
            ? { idleClosed: sweep.idleClosed, watchesChecked: sweep.watches, requestsChecked: sweep.requests }
            : {}),
        },
        withStack: false,
      };
    }
    if (err instanceof DeadConnectionError) {
      return {
        level: 'debug',
        msg: 're-opening a watch closed with the dead connections of its pool',
        fields: { ...where, error: messageOf(err) },
        withStack: false,
      };
    }
    if (ctx.action === 'rewatch') {
      return {
        level: 'info',
        msg: 're-opening a watch on a new connection',
        fields: { ...where, error: messageOf(err) },
        withStack: false,
      };
    }
    const fields = { ...where, error: messageOf(err), retryInMs: ctx.delayMs };
    if (isTransient(err)) {
      return { level: 'info', msg: `${ctx.phase} failed, retrying`, fields, withStack: false };
    }
    const hint = hintFor(err);
    return {
      level: 'warn',
      msg: 'informer error',
      fields: hint ? { ...fields, hint } : fields,
      withStack: false,
    };
  }
  if (ctx.phase === 'restart') {
    return {
      level: 'warn',
      msg: 'informer error: restarting the reflector',
      fields: { ...where, error: messageOf(err), retryInMs: ctx.delayMs },
      withStack: false,
    };
  }
  // A handler, transform or malformed object: someone's code or data is wrong; the stack says where.
  return {
    level: 'warn',
    msg: 'informer error',
    fields: {
      err,
      ...where,
      ...(ctx.key !== undefined ? { key: ctx.key } : {}),
      ...(ctx.event !== undefined ? { event: ctx.event } : {}),
    },
    withStack: true,
  };
}

/** Logs one reported informer error: see {@link informerLogLine}. */
export function logInformerError(log: Logger, err: unknown, ctx: InformerErrorInfo): void {
  const line = informerLogLine(err, ctx);
  log[line.level](line.fields, line.msg);
  if (!line.withStack) log.debug({ err, ...line.fields }, `${line.msg} (details)`);
}

/**
 * Typed API errors, built from the metav1.Status the API server returns. Callers branch on the class
 * (`err instanceof NotFoundError`) or on `reason`, never on message text.
 */
import { findCause } from '../util/errors.ts';

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface Status {
  kind?: 'Status';
  status?: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
}

export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly status: Status;
  constructor(status: Status, fallbackCode = 0) {
    super(status.message ?? `API request failed with status ${status.code ?? fallbackCode}`);
    this.name = new.target.name;
    this.code = status.code ?? fallbackCode;
    this.reason = status.reason ?? '';
    this.status = status;
  }
}

export class NotFoundError extends ApiError {}
export class AlreadyExistsError extends ApiError {}
export class ConflictError extends ApiError {}
/** 422: the object failed validation; `causes` names each field. */
export class InvalidError extends ApiError {
  get causes(): StatusCause[] {
    return this.status.details?.causes ?? [];
  }
}
export class BadRequestError extends ApiError {}
/** 410: the requested resourceVersion is too old (compacted); relist. */
export class GoneError extends ApiError {}
export class TooManyRequestsError extends ApiError {
  /** Seconds the server asked us to wait, from Retry-After or the Status details. */
  readonly retryAfterSeconds: number;
  constructor(status: Status, retryAfterSeconds?: number) {
    super(status, 429);
    this.retryAfterSeconds = retryAfterSeconds ?? status.details?.retryAfterSeconds ?? 1;
  }
}
export class ForbiddenError extends ApiError {}
export class UnauthorizedError extends ApiError {}
export class MethodNotAllowedError extends ApiError {}
export class ServerError extends ApiError {}
export class TimeoutError extends ApiError {}

/** Thrown when the server cannot be reached at all (connection refused, reset, TLS failure). */
export class ConnectionError extends Error {
  override readonly cause: unknown;
  constructor(message: string, cause: unknown) {
    super(message);
    this.name = 'ConnectionError';
    this.cause = cause;
  }
}

/** The request did not complete within its timeout. */
export class RequestTimeoutError extends ConnectionError {
  constructor(message: string) {
    super(message, undefined);
    this.name = 'RequestTimeoutError';
  }
}

/**
 * True when `err` (or an error in its cause chain) says the API server could not be reached at all: no
 * connection, a reset, a dead or timed-out connection. Retrying is the only thing to do, and an Event about
 * it could not be written either; callers log such errors quietly instead of once per reconcile.
 */
export function isUnreachable(err: unknown): boolean {
  return findCause(err, ConnectionError) !== undefined;
}

/** What a connection pool did when one of its connections was found dead (see presumeDead in pools.ts). */
export interface PoolSweep {
  /** Idle keep-alive connections closed at once. */
  idleClosed: number;
  /** Requests and watches in flight on the pool, each closed unless it delivers a byte within `proveAliveMs`. */
  requests: number;
  watches: number;
  proveAliveMs: number;
  /**
   * The connection this error is about was already being checked by an earlier sweep (its own deadline
   * came first): no new sweep was started, the figures are the earlier sweep's.
   */
  joined?: true;
}

/**
 * A connection found dead without an error from the network (a watch silent for longer than the API
 * server ever stays silent): aborting a request or watch with it also makes the pool close its idle
 * connections and check every connection in use (`sweep` says what it found).
 */
export class StaleConnectionError extends ConnectionError {
  /** Set by the pool when it acted on this error (half-open connections are rarely alone). */
  sweep: PoolSweep | undefined;
  constructor(message: string, cause?: unknown) {
    super(message, cause);
    this.name = 'StaleConnectionError';
  }
}

/** The metav1.Status an error response carries, or one made of its text (a proxy's, or plain text). */
export function statusFromBody(httpCode: number, body: unknown): Status {
  return body && typeof body === 'object' && (body as Status).kind === 'Status'
    ? (body as Status)
    : { code: httpCode, message: typeof body === 'string' && body ? body : `HTTP ${httpCode}` };
}

/**
 * A request or watch closed by its pool: another connection of the pool was found dead, and this one
 * delivered nothing within the pool's check (half-open connections die together). GETs are retried once
 * on a new connection; watches re-open at once; other requests fail with it and their caller retries.
 */
export class DeadConnectionError extends StaleConnectionError {
  constructor(message: string) {
    super(message);
    this.name = 'DeadConnectionError';
  }
}

/** Maps an HTTP status code and body to the matching typed error. */
export function errorFromStatus(httpCode: number, body: unknown, retryAfterHeader?: string | null): ApiError {
  const status = statusFromBody(httpCode, body);
  const code = status.code ?? httpCode;
  const reason = status.reason ?? '';
  switch (true) {
    case code === 404 || reason === 'NotFound':
      return new NotFoundError(status, code);
    case reason === 'AlreadyExists':
      return new AlreadyExistsError(status, code);
    case code === 409 || reason === 'Conflict':
      return new ConflictError(status, code);
    case code === 422 || reason === 'Invalid':
      return new InvalidError(status, code);
    case code === 410 || reason === 'Gone' || reason === 'Expired':
      return new GoneError(status, code);
    case code === 429 || reason === 'TooManyRequests': {
      const header = retryAfterHeader ? Number.parseInt(retryAfterHeader, 10) : Number.NaN;
      return new TooManyRequestsError(status, Number.isFinite(header) ? header : undefined);
    }
    case code === 403:
      return new ForbiddenError(status, code);
    case code === 401:
      return new UnauthorizedError(status, code);
    case code === 405:
      return new MethodNotAllowedError(status, code);
    case code === 400:
      return new BadRequestError(status, code);
    case code === 504 || reason === 'Timeout':
      return new TimeoutError(status, code);
    default:
      return new ServerError(status, code);
  }
}

export const isNotFound = (err: unknown): err is NotFoundError => err instanceof NotFoundError;
export const isConflict = (err: unknown): err is ConflictError => err instanceof ConflictError;
export const isAlreadyExists = (err: unknown): err is AlreadyExistsError => err instanceof AlreadyExistsError;
export const isInvalid = (err: unknown): err is InvalidError => err instanceof InvalidError;
export const isGone = (err: unknown): err is GoneError => err instanceof GoneError;

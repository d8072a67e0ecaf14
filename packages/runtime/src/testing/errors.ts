/**
 * Builders for the typed API errors, shaped like the metav1.Status bodies the API server returns. The fake
 * client throws these; tests can pass them to `FakeClient.failNext` or throw them from an `onRequest` hook.
 */
import type { Resource } from '../api/resource.ts';
import {
  AlreadyExistsError,
  BadRequestError,
  ConflictError,
  GoneError,
  InvalidError,
  NotFoundError,
  ServerError,
  type StatusCause,
  TimeoutError,
  TooManyRequestsError,
} from '../client/errors.ts';

/** 'configmaps' or 'statefulsets.apps': how the API server names a resource in messages. */
function groupResource(res: Resource): string {
  return res.group ? `${res.plural}.${res.group}` : res.plural;
}

export function notFoundError(res: Resource, name: string, message?: string): NotFoundError {
  return new NotFoundError({
    kind: 'Status',
    status: 'Failure',
    message: message ?? `${groupResource(res)} "${name}" not found`,
    reason: 'NotFound',
    code: 404,
    details: { name, group: res.group || undefined, kind: res.plural },
  });
}

export function alreadyExistsError(res: Resource, name: string): AlreadyExistsError {
  return new AlreadyExistsError({
    kind: 'Status',
    status: 'Failure',
    message: `${groupResource(res)} "${name}" already exists`,
    reason: 'AlreadyExists',
    code: 409,
    details: { name, group: res.group || undefined, kind: res.plural },
  });
}

export const STALE_OBJECT_MESSAGE =
  'the object has been modified; please apply your changes to the latest version and try again';

export function conflictError(
  res: Resource,
  name: string,
  detail: string = STALE_OBJECT_MESSAGE,
): ConflictError {
  return new ConflictError({
    kind: 'Status',
    status: 'Failure',
    message: `Operation cannot be fulfilled on ${groupResource(res)} "${name}": ${detail}`,
    reason: 'Conflict',
    code: 409,
    details: { name, group: res.group || undefined, kind: res.plural },
  });
}

export function invalidError(res: Resource, name: string, causes: StatusCause[]): InvalidError {
  const summary = causes
    .map((c) => (c.field ? `${c.field}: ${c.message ?? ''}` : (c.message ?? '')))
    .join(', ');
  return new InvalidError({
    kind: 'Status',
    status: 'Failure',
    message: `${res.kind} "${name}" is invalid: ${summary}`,
    reason: 'Invalid',
    code: 422,
    details: { name, group: res.group || undefined, kind: res.kind, causes },
  });
}

/**
 * The 422 of an update without metadata.resourceVersion of a kind that does not allow unconditional
 * updates (every custom resource), worded as the API server words it (it names the resource, not the kind).
 */
export function unconditionalUpdateError(res: Resource, name: string): InvalidError {
  const cause = 'Invalid value: 0: must be specified for an update';
  return new InvalidError({
    kind: 'Status',
    status: 'Failure',
    message: `${groupResource(res)} "${name}" is invalid: metadata.resourceVersion: ${cause}`,
    reason: 'Invalid',
    code: 422,
    details: {
      name,
      group: res.group || undefined,
      kind: res.plural,
      causes: [{ reason: 'FieldValueInvalid', message: cause, field: 'metadata.resourceVersion' }],
    },
  });
}

/** A 422 without field causes, as the API server returns when a JSON patch cannot be applied. */
export function unprocessableError(message: string): InvalidError {
  return new InvalidError({ kind: 'Status', status: 'Failure', message, reason: 'Invalid', code: 422 });
}

export function badRequestError(message: string): BadRequestError {
  return new BadRequestError({ kind: 'Status', status: 'Failure', message, reason: 'BadRequest', code: 400 });
}

/** 410 Expired: the resourceVersion or continue token is older than what the server keeps. */
export function goneError(message = 'too old resource version'): GoneError {
  return new GoneError({ kind: 'Status', status: 'Failure', message, reason: 'Expired', code: 410 });
}

export function timeoutError(
  message = 'Timeout: request did not complete within the allotted timeout',
): TimeoutError {
  return new TimeoutError({ kind: 'Status', status: 'Failure', message, reason: 'Timeout', code: 504 });
}

export function tooManyRequestsError(retryAfterSeconds = 1): TooManyRequestsError {
  return new TooManyRequestsError({
    kind: 'Status',
    status: 'Failure',
    message: 'Too many requests, please try again later.',
    reason: 'TooManyRequests',
    code: 429,
    details: { retryAfterSeconds },
  });
}

export function internalError(message = 'Internal error occurred'): ServerError {
  return new ServerError({ kind: 'Status', status: 'Failure', message, reason: 'InternalError', code: 500 });
}

/** Test support for code built on @opkit/runtime: `import { FakeClient } from '@opkit/runtime/testing'`. */

export {
  alreadyExistsError,
  badRequestError,
  conflictError,
  goneError,
  internalError,
  invalidError,
  notFoundError,
  STALE_OBJECT_MESSAGE,
  timeoutError,
  tooManyRequestsError,
  unprocessableError,
} from './errors.ts';
export {
  type FakeAction,
  type FakeActionFilter,
  FakeClient,
  type FakeClientOptions,
  type FakeObject,
  type FakeRequest,
  type FakeVerb,
  READ_VERBS,
  type RequestHook,
} from './fake-client.ts';

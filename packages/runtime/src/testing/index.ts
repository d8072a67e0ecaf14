/**
 * Test support for code built on @opkit/runtime: `import { FakeClient } from '@opkit/runtime/testing'`.
 * FakeClient: an in-memory API server with real semantics, for reconciler tests. ScriptedClient: list
 * and watch answered step by step, for tests of watchers, reflectors and informers. eventually: polling
 * for integration tests. FakePodExecutor: pod exec answered by handlers, refusing what the API server
 * refuses.
 */

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
  unconditionalUpdateError,
  unprocessableError,
} from './errors.ts';
export { type EventuallyOptions, eventually } from './eventually.ts';
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
export { type FakeEventDelivery, type FakeWatchInfo, randomDelays } from './fake-delivery.ts';
export {
  type ExecCall,
  type ExecHandler,
  type ExecMatcher,
  FakePodExecutor,
  type FakePodExecutorOptions,
} from './fake-pod-executor.ts';
export {
  ScriptedClient,
  type ScriptedList,
  ScriptedWatch,
  type ScriptedWatchEvent,
} from './scripted-client.ts';

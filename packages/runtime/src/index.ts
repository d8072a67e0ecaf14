/**
 * @opkit/runtime: controller-runtime for TypeScript.
 *
 *   watch -> cache -> handler -> queue -> reconcile -> client
 *
 * Each concept lives in its own folder and is re-exported here: api (objects, resources), client,
 * cache (watcher, reflector, informer, store), queue, controller (builder, predicates, handlers),
 * exec (commands in pods' containers), manager (leader election, probes, metrics, shutdown), helpers
 * (owner refs, finalizers, conditions, status, create-or-update, events) and schema (one source of
 * truth for custom resources).
 * The fake client for unit tests is in '@opkit/runtime/testing'.
 */
export * from './api/builtin.ts';
export * from './api/object.ts';
export * from './api/quantity.ts';
export * from './api/resource.ts';
export * from './cache/index.ts';
export * from './client/index.ts';
export * from './controller/index.ts';
export * from './exec/index.ts';
// Both helpers and schema name a StatusOf; the helpers' one (status of any object) is the public one.
export type { StatusOf } from './helpers/index.ts';
export * from './helpers/index.ts';
export * from './leaderelection/index.ts';
export * from './log/index.ts';
export * from './manager/index.ts';
export * from './metrics/index.ts';
export * from './queue/index.ts';
export * from './schema/index.ts';
export { type Clock, FakeClock, realClock, sleep } from './util/clock.ts';
export { parseDuration } from './util/duration.ts';
export { messageOf } from './util/errors.ts';
export { withTypeMeta } from './util/type-meta.ts';

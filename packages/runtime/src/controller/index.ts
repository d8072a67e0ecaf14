/**
 * @opkit/runtime controllers: reconcile contract, predicates, event handlers, the controller and its
 * builder (controller-runtime's pkg/reconcile, pkg/predicate, pkg/handler, pkg/controller, pkg/builder).
 */
export {
  ControllerBuilder,
  controllerFor,
  type ForOptions,
  type OwnsOptions,
  type WatchesOptions,
} from './builder.ts';
export { Controller } from './controller.ts';
export {
  type EnqueueForOwnerOptions,
  type EventHandler,
  enqueueForObject,
  enqueueForOwner,
  enqueueMapped,
  groupOf,
  ownerRequests,
  type RequestSink,
} from './handler.ts';
export type { ControllerContext, ControllerOptions, ControllerWatchOptions } from './options.ts';
export {
  and,
  annotationChanged,
  type EventObject,
  generationChanged,
  type LabelSelectorInput,
  labelChanged,
  labelSelectorMatcher,
  labelSelectorPredicate,
  not,
  or,
  type Predicate,
  passesCreate,
  passesDelete,
  passesGeneric,
  passesUpdate,
  predicateFuncs,
  resourceVersionChanged,
} from './predicate.ts';
export {
  ControllerShutdownError,
  isTerminalError,
  type ReconcileContext,
  type ReconcileRequest,
  type Reconciler,
  ReconcileTimeoutError,
  type Request,
  type Result,
  type ResultOptions,
  requeueAfter,
  TerminalError,
} from './reconcile.ts';
export type {
  InformerProvider,
  InformerSource,
  SourceEventHandler,
  SourceRegistration,
  WatchSelector,
} from './source.ts';

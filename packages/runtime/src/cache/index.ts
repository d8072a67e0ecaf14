/**
 * Watch and cache: composable stages, each usable and testable alone.
 *
 *   watcher   list+watch as an async stream of init / initApply / initDone / apply / delete events
 *   Reflector applies those events to a Store and emits onAdd / onUpdate / onDelete for real changes
 *   SharedInformer  one reflector shared by many event handlers, with late-handler replay and resync
 *   Cache     lazily started shared informers per resource and selector; get/list from memory
 *
 * Everything read from a store is deep-frozen and typed DeepReadonly<T>: structuredClone before mutating.
 */
export { Backoff, type BackoffOptions, DEFAULT_BACKOFF } from './backoff.ts';
export {
  Cache,
  type CacheGetOptions,
  type CacheListOptions,
  CacheNotStartedError,
  type CacheOptions,
  type CacheReadOptions,
  type CacheSelectorOptions,
  forResource,
  type InformerSelector,
  NamespaceNotCachedError,
  type ResourceCacheConfig,
  type ResourceCacheOptions,
} from './cache.ts';
export {
  type EventHandlerRegistration,
  type InformerErrorContext,
  SharedInformer,
  type SharedInformerOptions,
} from './informer.ts';
export {
  MalformedObjectError,
  Reflector,
  type ReflectorErrorContext,
  type ReflectorOptions,
  type ResourceEventHandler,
  stripManagedFields,
  type Transform,
} from './reflector.ts';
export {
  canonicalLabelSelector,
  fieldMatcher,
  type LabelMatcher,
  type LabelRequirement,
  labelKeyError,
  labelMatcher,
  labelValueError,
  parseFieldSelector,
  parseLabelSelector,
  SelectorParseError,
} from './selector.ts';
export {
  CONTROLLER_UID_INDEX,
  controllerUIDIndexFunc,
  type DeepReadonly,
  deepFreeze,
  type IndexFunc,
  NAMESPACE_INDEX,
  namespaceIndexFunc,
  type ReadonlyStore,
  type ReplaceDiff,
  type SetResult,
  Store,
  type StoreOptions,
} from './store.ts';
export {
  DEFAULT_STRING_POOL_MAX_CHARS,
  DEFAULT_STRING_POOL_MIN_LENGTH,
  StringPool,
  type StringPoolOptions,
  type StringPoolStats,
} from './string-pool.ts';
export {
  DEFAULT_PAGE_SIZE,
  ShortWatchError,
  type WatcherErrorContext,
  type WatcherEvent,
  type WatcherOptions,
  WatchSilenceError,
  watcher,
} from './watcher.ts';

/** Watch streams of the fake client: replay from a resourceVersion, then live events, selector transitions. */
import type { KubeObject, WatchEvent } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import { resourceId } from '../api/resource.ts';
import type { WatchOptions } from '../client/types.ts';
import { goneError } from './errors.ts';
import { DelayLine } from './fake-delivery.ts';
import { parseSelectors, type Selectors, selects } from './fake-query.ts';
import {
  compareKeys,
  copy,
  type FakeStore,
  type HistoryEntry,
  type Obj,
  parseResourceVersion,
  sortKey,
  type Watcher,
} from './fake-store.ts';

export function openWatch<T extends KubeObject>(
  store: FakeStore,
  res: Resource<T>,
  opts: WatchOptions,
  namespace: string | undefined,
  startRv: number,
  intercept: (() => Promise<void>) | undefined,
  delay?: (event: WatchEvent<KubeObject>) => number,
): AsyncIterator<WatchEvent<T>> {
  const resId = resourceId(res);
  const queue: WatchEvent<KubeObject>[] = [];
  const waiters: Array<{
    resolve: (r: IteratorResult<WatchEvent<T>>) => void;
    reject: (e: unknown) => void;
  }> = [];
  let state: 'new' | 'open' | 'closed' = 'new';
  let failure: unknown;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sel: Selectors = { labels: [], fields: [] };
  const signal = opts.signal;
  const done = (): IteratorResult<WatchEvent<T>> => ({ value: undefined, done: true });

  const push = (event: WatchEvent<KubeObject>): void => {
    if (state === 'closed') return;
    const waiter = waiters.shift();
    if (waiter) waiter.resolve({ value: copy<WatchEvent<T>>(event), done: false });
    else queue.push(event);
  };
  // With per-watch delays, events pass through a delay line (in order) before reaching the consumer.
  const line = delay ? new DelayLine<WatchEvent<KubeObject>>(push) : undefined;
  const emit = (event: WatchEvent<KubeObject>): void => {
    if (line && delay) line.push(event, delay(event));
    else push(event);
  };
  const finish = (error?: unknown, dropQueued = false): void => {
    if (state === 'closed') return;
    if (dropQueued) line?.clear();
    else line?.flush();
    state = 'closed';
    store.watchers.delete(watcher);
    signal?.removeEventListener('abort', onAbort);
    if (timer) clearTimeout(timer);
    if (dropQueued) queue.length = 0;
    // A pending next() means the queue is empty: it gets the error (or the end) now; otherwise the error
    // is thrown by the next() that finds the queue drained.
    const pending = waiters.splice(0);
    const first = pending.shift();
    if (first && error !== undefined) first.reject(error);
    else if (first) first.resolve(done());
    else failure = error;
    for (const waiter of pending) waiter.resolve(done());
  };
  const onAbort = (): void => finish(undefined, true);
  const toEvent = (entry: HistoryEntry): WatchEvent<KubeObject> | undefined => {
    const now = selects(sel, entry.object);
    if (entry.type === 'ADDED') return now ? { type: 'ADDED', object: entry.object } : undefined;
    if (entry.type === 'DELETED') return now ? { type: 'DELETED', object: entry.object } : undefined;
    const before = entry.previous !== undefined && selects(sel, entry.previous);
    if (now) return { type: before ? 'MODIFIED' : 'ADDED', object: entry.object };
    if (before && entry.previous) {
      const gone = copy<Obj>(entry.previous);
      gone.metadata.resourceVersion = entry.object.metadata.resourceVersion;
      return { type: 'DELETED', object: gone };
    }
    return undefined;
  };
  const watcher: Watcher = {
    resId,
    deliver: (entry) => {
      const event = toEvent(entry);
      if (event) emit(event);
    },
    close: (error) => finish(error),
  };

  const start = async (): Promise<void> => {
    if (intercept) await intercept();
    sel = parseSelectors(namespace, opts.labelSelector, opts.fieldSelector);
    if (signal?.aborted) {
      finish(undefined, true);
      return;
    }
    let from = startRv;
    if (opts.resourceVersion && opts.resourceVersion !== '0') {
      from = parseResourceVersion(opts.resourceVersion);
      if (from < store.compactedRv)
        throw goneError(`too old resource version: ${from} (${store.compactedRv})`);
    } else if (opts.sendInitialEvents) {
      const current = [...store.current(resId).values()]
        .filter((obj) => selects(sel, obj))
        .sort((a, b) => compareKeys(sortKey(a), sortKey(b)));
      for (const obj of current) emit({ type: 'ADDED', object: obj });
      if (opts.allowWatchBookmarks) {
        emit({
          type: 'BOOKMARK',
          object: {
            apiVersion: res.apiVersion,
            kind: res.kind,
            metadata: {
              resourceVersion: String(store.rv),
              annotations: { 'k8s.io/initial-events-end': 'true' },
            },
          },
        });
      }
      from = store.rv;
    }
    // Replay and subscribe in the same synchronous step: no event can fall in between.
    for (const entry of store.history) {
      if (entry.rv > from && entry.resId === resId) watcher.deliver(entry);
    }
    state = 'open';
    store.watchers.add(watcher);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.timeoutSeconds !== undefined && opts.timeoutSeconds > 0) {
      timer = setTimeout(() => finish(), opts.timeoutSeconds * 1000);
    }
  };

  const iterator: AsyncIterator<WatchEvent<T>> & AsyncIterable<WatchEvent<T>> = {
    next: async () => {
      if (state === 'new') {
        try {
          await start();
        } catch (err) {
          finish();
          throw err;
        }
      }
      const event = queue.shift();
      if (event) return { value: copy<WatchEvent<T>>(event), done: false };
      if (state === 'closed') {
        if (failure !== undefined) {
          const error = failure;
          failure = undefined;
          throw error;
        }
        return done();
      }
      return new Promise<IteratorResult<WatchEvent<T>>>((resolve, reject) =>
        waiters.push({ resolve, reject }),
      );
    },
    return: async () => {
      finish(undefined, true);
      return done();
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

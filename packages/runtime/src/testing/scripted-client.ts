/**
 * A Client whose `list` and `watch` are scripted step by step, for testing watchers, reflectors and
 * informers with exact event sequences (clean closes, 410s, errors, silence). Exported from
 * '@opkit/runtime/testing' (it used to live in src/cache/).
 *
 *   const client = new ScriptedClient();
 *   client.queueList(ConfigMaps, { items: [...], resourceVersion: '10' });
 *   const w = await client.nextWatch();     // resolves when the code under test opens a watch
 *   w.push({ type: 'ADDED', object: cm });   // deliver an event
 *   w.close();                               // clean server close
 *   w.fail(new GoneError({ code: 410 }));    // stream error
 *
 * Other Client methods reject: the cache never writes.
 */
import type { KubeObject, ObjectList, WatchEvent } from '../api/object.ts';
import { type Resource, resourceId } from '../api/resource.ts';
import type { Client, ListOptions, WatchOptions } from '../client/types.ts';

export interface ScriptedList {
  items: KubeObject[];
  resourceVersion: string;
  /** The continue token of this page (more pages follow). */
  continue?: string;
}

/** A watch event as the wire may carry it, ERROR included. */
export type ScriptedWatchEvent = WatchEvent<KubeObject> | { type: 'ERROR'; object: unknown };

export class ScriptedWatch {
  readonly resource: Resource;
  readonly opts: WatchOptions;
  #queue: ({ ev: ScriptedWatchEvent } | { end: true } | { err: unknown })[] = [];
  #wake: (() => void) | undefined;
  #finished = false;
  /** Set when the consumer stopped reading (return() or its signal aborted). */
  closedByClient = false;

  constructor(resource: Resource, opts: WatchOptions) {
    this.resource = resource;
    this.opts = opts;
    opts.signal?.addEventListener('abort', () => {
      this.closedByClient = true;
      this.#wake?.();
    });
  }

  get signal(): AbortSignal | undefined {
    return this.opts.signal;
  }

  push(...events: ScriptedWatchEvent[]): this {
    for (const ev of events) this.#queue.push({ ev });
    this.#wake?.();
    return this;
  }

  bookmark(resourceVersion: string): this {
    return this.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion } } });
  }

  /** The server closes the stream cleanly (after queued events are read). */
  close(): this {
    this.#queue.push({ end: true });
    this.#wake?.();
    return this;
  }

  /** The stream breaks with `err` (after queued events are read). */
  fail(err: unknown): this {
    this.#queue.push({ err });
    this.#wake?.();
    return this;
  }

  async *iterate(respectSignal: boolean): AsyncGenerator<WatchEvent<KubeObject>, void, undefined> {
    try {
      for (;;) {
        if (respectSignal && this.opts.signal?.aborted) throw this.opts.signal.reason;
        const next = this.#queue.shift();
        if (!next) {
          await new Promise<void>((resolve) => {
            this.#wake = resolve;
          });
          this.#wake = undefined;
          continue;
        }
        if ('end' in next) return;
        if ('err' in next) throw next.err;
        yield next.ev as WatchEvent<KubeObject>;
      }
    } finally {
      this.#finished = true;
      this.closedByClient ||= this.opts.signal?.aborted ?? false;
    }
  }

  get finished(): boolean {
    return this.#finished;
  }
}

export class ScriptedClient implements Client {
  readonly fieldManager = 'scripted';
  readonly listCalls: { resource: Resource; opts: ListOptions }[] = [];
  readonly watches: ScriptedWatch[] = [];
  /** When false the watch streams ignore their abort signal (a misbehaving client). */
  respectSignal = true;
  #lists = new Map<string, (ScriptedList | { error: unknown })[]>();
  #watchWaiters: ((w: ScriptedWatch) => void)[] = [];
  #pendingWatches: ScriptedWatch[] = [];
  #listWaiters: (() => void)[] = [];

  /** Queues the answer for the next list of `resource`. */
  queueList(resource: Resource, list: ScriptedList | { error: unknown }): this {
    const id = resourceId(resource);
    const q = this.#lists.get(id) ?? [];
    q.push(list);
    this.#lists.set(id, q);
    for (const w of this.#listWaiters.splice(0)) w();
    return this;
  }

  /** Resolves with the next watch opened (in order of opening). */
  nextWatch(timeoutMs = 2000): Promise<ScriptedWatch> {
    const ready = this.#pendingWatches.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('timed out waiting for a watch to be opened')),
        timeoutMs,
      );
      this.#watchWaiters.push((w) => {
        clearTimeout(timer);
        resolve(w);
      });
    });
  }

  async list<T extends KubeObject>(res: Resource<T>, opts: ListOptions = {}): Promise<ObjectList<T>> {
    this.listCalls.push({ resource: res, opts });
    const id = resourceId(res);
    for (;;) {
      opts.signal?.throwIfAborted();
      const next = this.#lists.get(id)?.shift();
      if (next) {
        if ('error' in next) throw next.error;
        return {
          metadata: {
            resourceVersion: next.resourceVersion,
            ...(next.continue ? { continue: next.continue } : {}),
          },
          items: structuredClone(next.items) as T[],
        };
      }
      // Nothing queued yet: wait until a test queues an answer (or the signal aborts).
      await new Promise<void>((resolve) => {
        this.#listWaiters.push(resolve);
        opts.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  watch<T extends KubeObject>(res: Resource<T>, opts: WatchOptions = {}): AsyncIterable<WatchEvent<T>> {
    const w = new ScriptedWatch(res, opts);
    this.watches.push(w);
    const waiter = this.#watchWaiters.shift();
    if (waiter) waiter(w);
    else this.#pendingWatches.push(w);
    return w.iterate(this.respectSignal) as AsyncIterable<WatchEvent<T>>;
  }

  get(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: get is not scripted'));
  }
  create(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: create is not scripted'));
  }
  update(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: update is not scripted'));
  }
  patch(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: patch is not scripted'));
  }
  delete(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: delete is not scripted'));
  }
  updateStatus(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: updateStatus is not scripted'));
  }
  patchStatus(): Promise<never> {
    return Promise.reject(new Error('ScriptedClient: patchStatus is not scripted'));
  }
}

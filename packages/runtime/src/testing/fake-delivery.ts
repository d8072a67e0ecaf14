/**
 * Per-watch event delivery delays for the fake client (`eventDelivery` option): each watch stream gets its
 * events late by its own delay, in order, so tests can catch code that assumes two informers (or an
 * informer and a watch) see an event at the same moment. By default events are delivered synchronously.
 */
import type { KubeObject, WatchEvent } from '../api/object.ts';
import type { Resource } from '../api/resource.ts';
import type { WatchOptions } from '../client/types.ts';

/** The watch stream a delay is asked for. */
export interface FakeWatchInfo {
  resource: Resource;
  /** Absent for all-namespace watches and cluster-scoped kinds. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** 0, 1, 2, ...: the order in which the client's watch streams were opened. */
  index: number;
}

export interface FakeEventDelivery {
  /**
   * How many milliseconds `event` takes to reach `watch`'s consumer (<= 0: at once). Asked once per event
   * and stream; a stream still delivers in order (an event is never handed out before the previous one).
   */
  delayMs: (watch: FakeWatchInfo, event: WatchEvent<KubeObject>) => number;
}

/** The delay of each event of a new watch stream (the `index`-th the client opened). */
export function watchDelay(
  delivery: FakeEventDelivery,
  resource: Resource,
  namespace: string | undefined,
  opts: WatchOptions,
  index: number,
): (event: WatchEvent<KubeObject>) => number {
  const info: FakeWatchInfo = {
    resource,
    ...(namespace ? { namespace } : {}),
    ...(opts.labelSelector ? { labelSelector: opts.labelSelector } : {}),
    ...(opts.fieldSelector ? { fieldSelector: opts.fieldSelector } : {}),
    index,
  };
  return (event) => delivery.delayMs(info, event);
}

/** mulberry32: a small seeded PRNG, good enough for test jitter. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * Random per-event delays in [0, maxMs), reproducible: each watch stream draws from its own generator,
 * seeded by `seed` and the stream's index, so a failing seed fails again.
 */
export function randomDelays(options: { maxMs: number; seed: number }): FakeEventDelivery {
  const generators = new Map<number, () => number>();
  return {
    delayMs: (watch) => {
      let next = generators.get(watch.index);
      if (!next) {
        next = prng(options.seed * 1_000_003 + watch.index);
        generators.set(watch.index, next);
      }
      return Math.floor(next() * options.maxMs);
    },
  };
}

/** Holds one stream's events until they are due, then hands them on in order. */
export class DelayLine<E> {
  readonly #pending: Array<{ event: E; due: number }> = [];
  readonly #deliver: (event: E) => void;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(deliver: (event: E) => void) {
    this.#deliver = deliver;
  }

  push(event: E, delayMs: number): void {
    if (delayMs <= 0 && this.#pending.length === 0) {
      this.#deliver(event);
      return;
    }
    const last = this.#pending[this.#pending.length - 1]?.due ?? 0;
    this.#pending.push({ event, due: Math.max(performance.now() + Math.max(0, delayMs), last) });
    this.#schedule();
  }

  /** Hands on everything still held, at once (a stream that ends cleanly delivers what it sent first). */
  flush(): void {
    this.#stop();
    for (const { event } of this.#pending.splice(0)) this.#deliver(event);
  }

  /** Drops everything still held. */
  clear(): void {
    this.#stop();
    this.#pending.length = 0;
  }

  #stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    const head = this.#pending[0];
    if (this.#timer || !head) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        const now = performance.now();
        while (this.#pending[0] && this.#pending[0].due <= now) {
          const item = this.#pending.shift();
          if (item) this.#deliver(item.event);
        }
        this.#schedule();
      },
      Math.max(0, head.due - performance.now()),
    );
  }
}

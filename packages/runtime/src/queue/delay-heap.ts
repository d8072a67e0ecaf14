/**
 * Internal: a binary min-heap of items keyed by ready time, with one entry per item (client-go's
 * waitForPriorityQueue plus its `waitingEntryByData` index). Not exported from the package.
 */

interface Entry<T extends string> {
  readonly item: T;
  readyAt: number;
  /** Insertion order, to keep FIFO among equal ready times. */
  readonly seq: number;
  index: number;
}

export class DelayHeap<T extends string> {
  readonly #heap: Entry<T>[] = [];
  readonly #byItem = new Map<T, Entry<T>>();
  #seq = 0;

  get size(): number {
    return this.#heap.length;
  }

  /** Ready time of the earliest entry. */
  peekReadyAt(): number | undefined {
    return this.#heap[0]?.readyAt;
  }

  /** Inserts `item`, or moves it earlier if it is already waiting with a later ready time. */
  upsert(item: T, readyAt: number): void {
    const existing = this.#byItem.get(item);
    if (existing !== undefined) {
      if (readyAt < existing.readyAt) {
        existing.readyAt = readyAt;
        this.#up(existing.index);
      }
      return;
    }
    const entry: Entry<T> = { item, readyAt, seq: this.#seq++, index: this.#heap.length };
    this.#heap.push(entry);
    this.#byItem.set(item, entry);
    this.#up(entry.index);
  }

  /** Removes and returns the earliest entry if it is ready at `now`. */
  popReady(now: number): T | undefined {
    const top = this.#heap[0];
    if (top === undefined || top.readyAt > now) return undefined;
    const last = this.#heap.pop()!;
    if (last !== top) {
      last.index = 0;
      this.#heap[0] = last;
      this.#down(0);
    }
    this.#byItem.delete(top.item);
    return top.item;
  }

  clear(): void {
    this.#heap.length = 0;
    this.#byItem.clear();
  }

  #less(a: Entry<T>, b: Entry<T>): boolean {
    return a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq);
  }

  #swap(i: number, j: number): void {
    const a = this.#heap[i]!;
    const b = this.#heap[j]!;
    this.#heap[i] = b;
    this.#heap[j] = a;
    a.index = j;
    b.index = i;
  }

  #up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(this.#heap[i]!, this.#heap[parent]!)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const n = this.#heap.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let min = i;
      if (l < n && this.#less(this.#heap[l]!, this.#heap[min]!)) min = l;
      if (r < n && this.#less(this.#heap[r]!, this.#heap[min]!)) min = r;
      if (min === i) return;
      this.#swap(i, min);
      i = min;
    }
  }
}

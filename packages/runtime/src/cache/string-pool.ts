/**
 * Shares equal long strings between cached objects.
 *
 * Every watch event is parsed on its own, so N cached objects that carry the same text hold N copies of
 * it: the Database operator's ConfigMaps carry ~37 KB of scripts that are the same for every Database
 * of an engine, 37 MB at 1000 Databases. A reflector passes each long string it stores through its pool
 * (see `deepFreezeJson`), which hands back the copy it already holds; the new copy is garbage while still
 * young, before a garbage collection would have to copy it into the old generation.
 *
 * Nothing observable changes: the stored values are equal strings, and stored objects are frozen anyway.
 *
 * Bounded. Strings shorter than `minLength` are not pooled (the lookup hashes the string, which costs
 * more than a short copy saves). The pool itself holds at most `maxChars` characters: when adding a
 * string would pass that, it starts over empty. Strings that stored objects still use stay where they
 * are; later copies are then shared with a new first copy instead. So the most a pool keeps alive that
 * no cached object uses any more (texts of objects since updated or deleted) is `maxChars` characters.
 */

export interface StringPoolOptions {
  /** Strings shorter than this are returned as they are. Default 1024. */
  minLength?: number;
  /** Characters the pool holds at most; default 4 Mi (4-8 MiB). */
  maxChars?: number;
}

export interface StringPoolStats {
  /** Distinct strings held. */
  strings: number;
  /** Their characters. */
  chars: number;
  /** Strings handed back from the pool instead of the caller's copy, since the pool was made. */
  hits: number;
  /** Characters those hits saved. */
  charsShared: number;
  /** Times the pool started over because it was full. */
  resets: number;
}

export const DEFAULT_STRING_POOL_MIN_LENGTH = 1024;
export const DEFAULT_STRING_POOL_MAX_CHARS = 4 * 1024 * 1024;

export class StringPool {
  readonly minLength: number;
  readonly maxChars: number;
  readonly #strings = new Map<string, string>();
  #chars = 0;
  #hits = 0;
  #charsShared = 0;
  #resets = 0;

  constructor(opts: StringPoolOptions = {}) {
    this.minLength = opts.minLength ?? DEFAULT_STRING_POOL_MIN_LENGTH;
    this.maxChars = opts.maxChars ?? DEFAULT_STRING_POOL_MAX_CHARS;
    if (!Number.isInteger(this.minLength) || this.minLength < 1) {
      throw new RangeError(`StringPool minLength must be an integer >= 1, got ${this.minLength}`);
    }
    if (!Number.isInteger(this.maxChars) || this.maxChars < this.minLength) {
      throw new RangeError(`StringPool maxChars must be an integer >= minLength, got ${this.maxChars}`);
    }
  }

  /** The pool's copy of `s` if it holds an equal string, else `s` (kept for next time if it fits). */
  intern(s: string): string {
    if (s.length < this.minLength) return s;
    const held = this.#strings.get(s);
    if (held !== undefined) {
      this.#hits++;
      this.#charsShared += held.length;
      return held;
    }
    if (s.length > this.maxChars) return s;
    if (this.#chars + s.length > this.maxChars) {
      this.#strings.clear();
      this.#chars = 0;
      this.#resets++;
    }
    this.#strings.set(s, s);
    this.#chars += s.length;
    return s;
  }

  stats(): StringPoolStats {
    return {
      strings: this.#strings.size,
      chars: this.#chars,
      hits: this.#hits,
      charsShared: this.#charsShared,
      resets: this.#resets,
    };
  }
}

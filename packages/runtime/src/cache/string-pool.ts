/**
 * Shares equal long strings between cached objects.
 *
 * Every watch event is parsed on its own, so N cached objects that carry the same text hold N copies of
 * it: the Database operator's ConfigMaps carry the engine's scripts, the same for every Database of an
 * engine (36 KB of strings of 1 KiB or more for PostgreSQL, 5 KB for MySQL; ~20 MB at 1000 Databases,
 * half of each). A reflector passes each long string it stores through its pool (see `deepFreezeJson`;
 * over protobuf the decoder does as it reads them, WatchOptions.deepFreeze), which hands back the copy it
 * already holds; the new copy is garbage while still young, before a garbage collection would have to copy
 * it into the old generation.
 *
 * Nothing observable changes: the stored values are equal strings, and stored objects are frozen anyway.
 *
 * Bounded, per pool (a reflector, so an informer, has one):
 * - Strings shorter than `minLength` are not pooled (the lookup hashes the string, which costs more than a
 *   short copy saves), nor strings longer than `maxChars`.
 * - The pool holds at most `maxChars` characters (2 bytes each at most): when adding a string would pass
 *   that, it starts over empty. Strings that stored objects still use stay where they are; later copies are
 *   then shared with a new first copy. So what a pool keeps alive that no cached object uses any more
 *   (texts of objects since updated or deleted) is at most `maxChars` characters.
 * - V8 hashes a string longer than 16383 characters by its length alone, so a lookup compares it with every
 *   held string of that length: at most 4 such strings of one length are held.
 * Secrets are not pooled by default (the reflector's choice): the pool would keep the keys of deleted or
 * rotated Secrets alive until it starts over.
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
/** Longer strings are hashed by V8 by their length alone (String::kMaxHashCalcLength). */
const HASHED_BY_LENGTH_ABOVE = 16_383;
const MAX_HELD_PER_LENGTH = 4;

export class StringPool {
  readonly minLength: number;
  readonly maxChars: number;
  readonly #strings = new Map<string, string>();
  /** How many strings of each length above HASHED_BY_LENGTH_ABOVE are held. */
  readonly #heldByLength = new Map<number, number>();
  #chars = 0;
  #hits = 0;
  #charsShared = 0;
  #resets = 0;

  constructor(opts: StringPoolOptions = {}) {
    this.minLength = opts.minLength ?? DEFAULT_STRING_POOL_MIN_LENGTH;
    this.maxChars = opts.maxChars ?? DEFAULT_STRING_POOL_MAX_CHARS;
    if (!Number.isInteger(this.minLength) || this.minLength < 1) {
      throw new RangeError(
        `stringPool.minLength must be an integer >= 1, got ${this.minLength}: set it to at least 1 (default ${DEFAULT_STRING_POOL_MIN_LENGTH})`,
      );
    }
    if (!Number.isInteger(this.maxChars) || this.maxChars < this.minLength) {
      throw new RangeError(
        `stringPool.maxChars (${this.maxChars}) must be an integer >= stringPool.minLength (${this.minLength}): raise maxChars or lower minLength`,
      );
    }
  }

  /** The pool's copy of `s` if it holds an equal string, else `s` (kept for next time if it fits). */
  intern(s: string): string {
    if (s.length < this.minLength || s.length > this.maxChars) return s;
    const held = this.#strings.get(s);
    if (held !== undefined) {
      this.#hits++;
      this.#charsShared += held.length;
      return held;
    }
    if (this.#chars + s.length > this.maxChars) {
      this.#strings.clear();
      this.#heldByLength.clear();
      this.#chars = 0;
      this.#resets++;
    }
    if (s.length > HASHED_BY_LENGTH_ABOVE) {
      const sameLength = this.#heldByLength.get(s.length) ?? 0;
      if (sameLength >= MAX_HELD_PER_LENGTH) return s;
      this.#heldByLength.set(s.length, sameLength + 1);
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

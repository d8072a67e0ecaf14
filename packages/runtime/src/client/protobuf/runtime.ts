/** What the generated decoders (compile.ts) call: varints, times, quantities, int-or-strings, errors. */

import { deepFreezeJson, type StringInterner } from '../../util/freeze.ts';
import type { MessageDecoder } from './compile.ts';
import { ProtobufSchemaError } from './errors.ts';

const ZERO_TIME_SECONDS = -62135596800; // Go's zero time.Time (year 1)

/** The helpers generated code calls; `pos` is where the last read ended. */
/**
 * Buffer's undocumented but long-standing slice methods (Node 0.x to 24): `toString(encoding, start, end)`
 * without its argument handling, which costs more than the copy for the short strings of an object.
 */
interface Slicing {
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}

/** Strings up to this many bytes are shared (see Runtime.string); longer ones are rarely repeated. */
const SHORT = 24;
const SLOTS = 8192; // a power of two

export class Runtime {
  pos = 0;
  /**
   * While a decode that delivers its objects deep-frozen runs (ProtobufDecoder's `deepFreeze`): each
   * decoder freezes the objects and arrays it makes once it has filled them, as deepFreezeJson would.
   */
  freeze = false;
  /** Meanwhile, the interner long string values go through (deepFreezeJson's `strings`). */
  strings: StringInterner | undefined = undefined;
  /** Recent short strings by a hash of their bytes: one instance per distinct value. */
  readonly #short: (string | undefined)[] = new Array(SLOTS);
  readonly #times = new Map<number, string>();
  readonly decoders = new Map<string, MessageDecoder>();

  varint(buf: Buffer, p: number): number {
    let b = buf[p++]!;
    if (b < 0x80) {
      this.pos = p;
      return b;
    }
    let x = b & 0x7f;
    b = buf[p++]!;
    x |= (b & 0x7f) << 7;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    b = buf[p++]!;
    x |= (b & 0x7f) << 14;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    b = buf[p++]!;
    x |= (b & 0x7f) << 21;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    let value = x;
    let scale = 2 ** 28;
    for (let i = 4; i < 10; i++) {
      b = buf[p++]!;
      if (b === undefined) throw new ProtobufSchemaError('truncated varint');
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        this.pos = p;
        return value;
      }
      scale *= 128;
    }
    throw new ProtobufSchemaError('malformed varint');
  }

  /** A string value at buf[from, to): `key`'s, or the interner's copy (`strings`) when long enough. */
  string(buf: Buffer, from: number, to: number): string {
    // A string has no more characters than bytes: shorter byte ranges cannot reach minLength.
    if (this.strings !== undefined && to - from >= this.strings.minLength) {
      return this.pooled((buf as Buffer & Slicing).utf8Slice(from, to));
    }
    return this.key(buf, from, to);
  }

  /**
   * The UTF-8 string at buf[from, to), never through the interner (map keys: deepFreezeJson pools values
   * only). Short ASCII strings (names, label keys and values, enum values such as "TCP") repeat across
   * objects: they come from a small table, one instance per value, as JSON.parse shares its short values
   * (V8 internalizes them); a miss or a collision just makes a new one.
   */
  key(buf: Buffer, from: number, to: number): string {
    const len = to - from;
    const slicing = buf as Buffer & Slicing;
    if (len > SHORT || len === 0) return len === 0 ? '' : slicing.utf8Slice(from, to);
    let h = 0x811c9dc5;
    for (let i = from; i < to; i++) {
      const b = buf[i]!;
      if (b > 0x7f) return slicing.utf8Slice(from, to);
      h = Math.imul(h ^ b, 0x01000193);
    }
    const slot = (h >>> 0) & (SLOTS - 1);
    const known = this.#short[slot];
    if (known !== undefined && known.length === len) {
      let same = true;
      for (let i = 0; i < len; i++) {
        if (known.charCodeAt(i) !== buf[from + i]) {
          same = false;
          break;
        }
      }
      if (same) return known;
    }
    const made = slicing.latin1Slice(from, to); // ASCII: the same characters
    this.#short[slot] = made;
    return made;
  }

  /** `s`, or the interner's equal copy when there is one and `s` is long enough (deepFreezeJson's rule). */
  pooled(s: string): string {
    const strings = this.strings;
    return strings !== undefined && s.length >= strings.minLength ? strings.intern(s) : s;
  }

  /** A decoded slice or map, frozen when the decode delivers frozen objects. */
  done<T extends object>(value: T): T {
    return this.freeze ? Object.freeze(value) : value;
  }

  /** A signed int32/int64 (negative values are 10-byte two's complement varints). */
  signed(buf: Buffer, p: number): number {
    const v = this.varint(buf, p);
    if (v < 2 ** 63) return v;
    let big = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[p++]!;
      big |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) break;
      shift += 7n;
    }
    this.pos = p;
    return Number(BigInt.asIntN(64, big));
  }

  /** Skips a field of this wire type whose value starts at p; returns where it ends. */
  skip(buf: Buffer, p: number, wireType: number, end: number): number {
    let to: number;
    if (wireType === 0) {
      this.varint(buf, p);
      to = this.pos;
    } else if (wireType === 1) to = p + 8;
    else if (wireType === 2) {
      const len = this.varint(buf, p);
      to = this.pos + len;
    } else if (wireType === 5) to = p + 4;
    else throw new ProtobufSchemaError(`unsupported wire type ${wireType}`);
    if (to > end) throw new ProtobufSchemaError('truncated message');
    return to;
  }

  /** An own property named `__proto__`, as JSON.parse makes it. */
  own(object: Record<string, unknown>, key: string, value: unknown): void {
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  }

  unknown(message: string, tag: number): never {
    throw new ProtobufSchemaError(
      `${message} has no field ${tag >>> 3} with wire type ${tag & 7} in opkit's protobuf schema (a newer API server?)`,
    );
  }

  truncated(message: string): never {
    throw new ProtobufSchemaError(`${message}: truncated`);
  }

  /** metav1.Time / MicroTime: Timestamp {seconds = 1, nanos = 2}; empty or Go's zero: null. */
  time(buf: Buffer, from: number, to: number, micro: boolean): string | null {
    if (from === to) return null;
    let seconds = 0;
    let nanos = 0;
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) seconds = this.signed(buf, p);
      else if (tag === 0x10) nanos = this.signed(buf, p);
      else {
        p = this.skip(buf, p, tag & 7, to);
        continue;
      }
      p = this.pos;
    }
    if (seconds === ZERO_TIME_SECONDS && nanos === 0) return null;
    if (!micro) {
      // Objects made together share their seconds: the formatted times are kept (bounded).
      const known = this.#times.get(seconds);
      if (known !== undefined) return known;
      if (this.#times.size >= 4096) this.#times.clear();
      const formatted = `${new Date(seconds * 1000).toISOString().slice(0, 19)}Z`;
      this.#times.set(seconds, formatted);
      return formatted;
    }
    const iso = new Date(seconds * 1000).toISOString(); // 2026-12-06T14:30:00.000Z
    return `${iso.slice(0, 19)}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z`;
  }

  /** The byte range of field 1 (bytes) of a message: RawExtension.raw, FieldsV1.raw, Quantity.string. */
  first(buf: Buffer, from: number, to: number): [number, number] | undefined {
    let p = from;
    let found: [number, number] | undefined;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x0a) {
        const len = this.varint(buf, p);
        p = this.pos + len;
        found = [this.pos, p];
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return found;
  }

  quantity(buf: Buffer, from: number, to: number): string {
    const r = this.first(buf, from, to);
    return r ? buf.toString('utf8', r[0], r[1]) : '0';
  }

  json(buf: Buffer, from: number, to: number): unknown {
    const r = this.first(buf, from, to);
    if (!r) return null;
    const value: unknown = JSON.parse(buf.toString('utf8', r[0], r[1]));
    return this.freeze ? deepFreezeJson(value, this.strings) : value;
  }

  /** intstr.IntOrString {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}. */
  intOrString(buf: Buffer, from: number, to: number): number | string {
    let type = 0;
    let intVal = 0;
    let strVal = '';
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) {
        type = this.varint(buf, p);
        p = this.pos;
      } else if (tag === 0x10) {
        intVal = this.signed(buf, p);
        p = this.pos;
      } else if (tag === 0x1a) {
        const len = this.varint(buf, p);
        strVal = buf.toString('utf8', this.pos, this.pos + len);
        p = this.pos + len;
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return type === 1 ? strVal : intVal;
  }

  duration(buf: Buffer, from: number, to: number): string {
    let ns = 0;
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) {
        ns = this.signed(buf, p);
        p = this.pos;
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return goDuration(ns);
  }
}

/** Go's time.Duration.String() for whole values (what the API's Durations hold). */
export function goDuration(ns: number): string {
  if (ns === 0) return '0s';
  const sign = ns < 0 ? '-' : '';
  let n = Math.abs(ns);
  if (n < 1000) return `${sign}${n}ns`;
  if (n < 1e6) return `${sign}${trimFraction(n / 1e3)}µs`;
  if (n < 1e9) return `${sign}${trimFraction(n / 1e6)}ms`;
  const h = Math.floor(n / 3.6e12);
  n -= h * 3.6e12;
  const m = Math.floor(n / 6e10);
  n -= m * 6e10;
  const s = `${trimFraction(n / 1e9)}s`;
  if (h > 0) return `${sign}${h}h${m}m${s}`;
  if (m > 0) return `${sign}${m}m${s}`;
  return `${sign}${s}`;
}

function trimFraction(x: number): string {
  return String(Number(x.toFixed(9)));
}

/**
 * Protobuf wire-format writing into one growing buffer. A length-delimited field's length is not known
 * before its content is written: `begin` reserves the longest varint (5 bytes) and `end` writes the
 * length there and moves the content back over what it did not need.
 */

const RESERVED = 5; // a varint of up to 2^35 - 1: more than any body

export class ProtobufWriter {
  #buf: Buffer;
  #pos = 0;

  constructor(capacity = 4096) {
    this.#buf = Buffer.allocUnsafe(capacity);
  }

  /** The bytes written so far, as a Buffer of their own (the writer's buffer is reused). */
  finish(): Buffer {
    return Buffer.from(this.#buf.subarray(0, this.#pos));
  }

  /** Empties the writer; a buffer grown past 1 MiB (one large body) is let go. */
  reset(): void {
    this.#pos = 0;
    if (this.#buf.length > 1 << 20) this.#buf = Buffer.allocUnsafe(4096);
  }

  tag(field: number, wireType: number): void {
    this.varint(field * 8 + wireType);
  }

  /** A varint of a non-negative safe integer. */
  varint(n: number): void {
    this.#room(10);
    const buf = this.#buf;
    let p = this.#pos;
    while (n > 0x7f) {
      buf[p++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    buf[p++] = n;
    this.#pos = p;
  }

  /** An int32 or int64 (a negative one as the 10-byte two's complement varint). */
  signed(n: number): void {
    if (n >= 0) {
      this.varint(n);
      return;
    }
    let v = BigInt.asUintN(64, BigInt(n));
    this.#room(10);
    while (v > 0x7fn) {
      this.#buf[this.#pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.#buf[this.#pos++] = Number(v);
  }

  /** A string's length and UTF-8 bytes. */
  string(s: string): void {
    const len = Buffer.byteLength(s, 'utf8');
    this.varint(len);
    this.#room(len);
    this.#pos += this.#buf.write(s, this.#pos, len, 'utf8');
  }

  /** Bytes as they are (no length). */
  raw(b: Uint8Array): void {
    this.#room(b.length);
    this.#buf.set(b, this.#pos);
    this.#pos += b.length;
  }

  /** Bytes with their length. */
  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.#room(b.length);
    this.#buf.set(b, this.#pos);
    this.#pos += b.length;
  }

  /** Starts a length-delimited value (after its tag); returns what `end` needs. */
  begin(): number {
    this.#room(RESERVED);
    const at = this.#pos;
    this.#pos += RESERVED;
    return at;
  }

  end(at: number): void {
    const start = at + RESERVED;
    const len = this.#pos - start;
    let size = 1;
    for (let n = len; n > 0x7f; n = Math.floor(n / 128)) size++;
    if (size < RESERVED) this.#buf.copyWithin(at + size, start, this.#pos);
    const end = this.#pos - (RESERVED - size);
    this.#pos = at;
    this.varint(len);
    this.#pos = end;
  }

  #room(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#pos + n));
    this.#buf.copy(grown, 0, 0, this.#pos);
    this.#buf = grown;
  }
}

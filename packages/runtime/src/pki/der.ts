/**
 * The DER (ASN.1) the PKI writes and reads: encoders for the few types an X.509 certificate is made of,
 * and a reader that walks an element's children (enough to take a CA's subject and key identifier out
 * of its certificate). Certificates are signed and keys made by node:crypto; nothing here is crypto.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** A tag, its length and the content: one DER element. */
export function tlv(tag: number, content: Uint8Array): Buffer {
  const n = content.length;
  let head: number[];
  if (n < 0x80) head = [tag, n];
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    head = [tag, 0x80 | bytes.length, ...bytes];
  }
  return Buffer.concat([Buffer.from(head), content]);
}

export const sequence = (...items: Uint8Array[]): Buffer => tlv(0x30, Buffer.concat(items));
export const set = (...items: Uint8Array[]): Buffer => tlv(0x31, Buffer.concat(items));
/** An explicitly tagged, constructed context-specific element: [n] { content }. */
export const explicit = (n: number, content: Uint8Array): Buffer => tlv(0xa0 | n, content);
export const octetString = (content: Uint8Array): Buffer => tlv(0x04, content);
export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
/** A BIT STRING with `unused` trailing bits in its last byte. */
export const bitString = (content: Uint8Array, unused = 0): Buffer =>
  tlv(0x03, Buffer.concat([Buffer.from([unused]), content]));

/** A non-negative INTEGER from its big-endian magnitude (a 0 byte is added when the first bit is set). */
export function unsignedInteger(magnitude: Uint8Array): Buffer {
  let i = 0;
  while (i < magnitude.length - 1 && magnitude[i] === 0) i++;
  const bytes = magnitude.subarray(i);
  const pad = bytes.length === 0 || (bytes[0] ?? 0) & 0x80 ? [0] : [];
  return tlv(0x02, Buffer.concat([Buffer.from(pad), bytes]));
}

export const smallInteger = (n: number): Buffer => unsignedInteger(Buffer.from([n]));

/** An OBJECT IDENTIFIER from its dotted form. */
export function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const [a = 0, b = 0, ...rest] = parts;
  const out: number[] = [a * 40 + b];
  for (const p of rest) {
    const groups: number[] = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) groups.unshift((v & 0x7f) | 0x80);
    out.push(...groups);
  }
  return tlv(0x06, Buffer.from(out));
}

const pad2 = (n: number) => String(n).padStart(2, '0');

/** UTCTime before 2050, GeneralizedTime from 2050 on (RFC 5280 4.1.2.5), to the second, in UTC. */
export function time(date: Date): Buffer {
  const y = date.getUTCFullYear();
  const rest =
    pad2(date.getUTCMonth() + 1) +
    pad2(date.getUTCDate()) +
    pad2(date.getUTCHours()) +
    pad2(date.getUTCMinutes()) +
    pad2(date.getUTCSeconds());
  if (y >= 1950 && y < 2050) return tlv(0x17, Buffer.from(`${pad2(y % 100)}${rest}Z`, 'latin1'));
  return tlv(0x18, Buffer.from(`${String(y).padStart(4, '0')}${rest}Z`, 'latin1'));
}

export const utf8String = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
export const printableString = (s: string): Buffer => tlv(0x13, Buffer.from(s, 'latin1'));
export const ia5String = (s: string): Buffer => tlv(0x16, Buffer.from(s, 'latin1'));

/** The 4 or 16 bytes of an IP address (IPv6 with `::`, and an IPv4 tail, accepted). */
export function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip)) throw new Error(`not an IP address: ${ip}`);
  let text = ip.replace(/%.*$/, '');
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (s: string) => (s ? s.split(':').map((g) => Number.parseInt(g, 16)) : []);
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const words = [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  const out = Buffer.alloc(16);
  for (const [i, w] of words.entries()) out.writeUInt16BE(w, i * 2);
  return out;
}

/** One element read from DER: its tag, where its content starts and ends in the buffer. */
export interface Element {
  tag: number;
  start: number;
  end: number;
  /** The whole element, header included. */
  raw: Buffer;
  content: Buffer;
}

/** The element at `offset`. Throws on a truncated or long-form-indefinite encoding. */
export function readElement(buf: Buffer, offset = 0): Element {
  const tag = buf[offset];
  let len = buf[offset + 1];
  if (tag === undefined || len === undefined) throw new Error('DER: truncated element');
  let start = offset + 2;
  if (len & 0x80) {
    const count = len & 0x7f;
    if (count === 0 || count > 4) throw new Error('DER: unsupported length');
    len = 0;
    for (let i = 0; i < count; i++) len = len * 256 + (buf[start + i] ?? 0);
    start += count;
  }
  const end = start + len;
  if (end > buf.length) throw new Error('DER: truncated element');
  return { tag, start, end, raw: buf.subarray(offset, end), content: buf.subarray(start, end) };
}

/** The elements inside a constructed element's content. */
export function children(el: Element): Element[] {
  const out: Element[] = [];
  for (let at = 0; at < el.content.length; ) {
    const child = readElement(el.content, at);
    out.push(child);
    at = child.end;
  }
  return out;
}

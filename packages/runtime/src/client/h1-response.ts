/**
 * An HTTP/1.1 response read from raw bytes (pure: no I/O): the status line and headers, then the body as
 * its framing gives it (chunked, Content-Length, or until the connection closes). Watches read their
 * responses with it (h1-watch.ts): the API server sends every watch event as its own chunk, and Node's
 * HTTP client turns each chunk into a parser callback, a Readable push and a stream event.
 */

/** A response's status and headers (header names in lower case; repeated headers joined by ", "). */
export interface ResponseHead {
  status: number;
  headers: Record<string, string>;
}

/** The bytes are not an HTTP/1.1 response this reader accepts. */
export class MalformedResponseError extends Error {
  override name = 'MalformedResponseError';
}

/** The most a response's status line and headers may take (Node's default limit is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024;
/** The most a chunk-size line or a trailer line may take. */
const MAX_LINE_BYTES = 16 * 1024;

type State = 'head' | 'size' | 'data' | 'data-end' | 'trailer' | 'length' | 'close' | 'done';

/**
 * Reads one response. `write` takes the bytes as they arrive (split anywhere) and hands each piece of
 * the body to `onBody` as a view of the given bytes (no copy); `head` is set once the headers are read
 * (1xx interim responses are skipped); `complete` once the body ended as its framing says. `end` tells
 * it the connection closed: that completes a body delimited by the close. Throws MalformedResponseError.
 */
export class ResponseReader {
  head: ResponseHead | undefined;
  complete = false;
  #state: State = 'head';
  /** Bytes of the line (or head) being read, not yet ended. */
  #line: Buffer[] = [];
  #lineBytes = 0;
  /** Bytes left of the current chunk or of the Content-Length body. */
  #left = 0;
  /** How many of a chunk's closing CRLF bytes were read. */
  #crlf = 0;
  /** The body ended with the connection. */
  #closeDelimited = false;
  /** Bytes came after the response. */
  #extra = false;
  readonly #onBody: (piece: Buffer) => void;

  constructor(onBody: (piece: Buffer) => void) {
    this.#onBody = onBody;
  }

  write(bytes: Buffer): void {
    let at = 0;
    while (at < bytes.length) {
      switch (this.#state) {
        case 'head':
          at = this.#readHead(bytes, at);
          break;
        case 'size':
        case 'trailer': {
          const nl = bytes.indexOf(0x0a, at);
          if (nl === -1) {
            this.#hold(bytes.subarray(at), MAX_LINE_BYTES, 'a chunk-size or trailer line');
            return;
          }
          const line = this.#take(bytes.subarray(at, nl)).toString('latin1');
          at = nl + 1;
          this.#endLine(line.endsWith('\r') ? line.slice(0, -1) : line);
          break;
        }
        case 'data':
        case 'length': {
          const n = Math.min(this.#left, bytes.length - at);
          this.#onBody(bytes.subarray(at, at + n));
          at += n;
          this.#left -= n;
          if (this.#left === 0) {
            if (this.#state === 'length') this.#finish();
            else {
              this.#state = 'data-end';
              this.#crlf = 0;
            }
          }
          break;
        }
        case 'data-end': {
          const expected = this.#crlf === 0 ? 0x0d : 0x0a;
          if (bytes[at] !== expected) {
            throw new MalformedResponseError('malformed chunked body: a chunk does not end with CRLF');
          }
          at++;
          if (++this.#crlf === 2) this.#state = 'size';
          break;
        }
        case 'close':
          this.#onBody(at === 0 ? bytes : bytes.subarray(at));
          return;
        case 'done':
          // Nothing may follow a response (this reader reads one): the connection is not reusable.
          this.#extra = true;
          return;
      }
    }
  }

  /** The connection closed: a body delimited by the close is complete. */
  end(): void {
    if (this.#state !== 'close') return;
    this.#closeDelimited = true;
    this.#finish();
  }

  #readHead(bytes: Buffer, at: number): number {
    // The blank line ending the head may start in an earlier piece: search from 3 bytes before.
    const held = this.#lineBytes;
    const joined = held > 0 ? Buffer.concat([...this.#line, bytes.subarray(at)]) : bytes.subarray(at);
    const end = joined.indexOf('\r\n\r\n', Math.max(0, held - 3), 'latin1');
    if (end === -1) {
      this.#line = [];
      this.#lineBytes = 0;
      this.#hold(Buffer.from(joined), MAX_HEAD_BYTES, 'the response head');
      return bytes.length;
    }
    if (end > MAX_HEAD_BYTES)
      throw new MalformedResponseError(`the response head exceeds ${MAX_HEAD_BYTES} bytes`);
    this.#line = [];
    this.#lineBytes = 0;
    const head = parseHead(joined.subarray(0, end).toString('latin1'));
    const consumed = end + 4 - held;
    if (head.status >= 100 && head.status <= 199 && head.status !== 101) return at + consumed;
    this.head = head;
    this.#state = framing(head);
    if (this.#state === 'length') this.#left = Number(head.headers['content-length']);
    if (this.#state === 'done') this.complete = true;
    return at + consumed;
  }

  #endLine(line: string): void {
    if (this.#state === 'trailer') {
      if (line === '') this.#finish();
      return;
    }
    const semi = line.indexOf(';');
    const hex = (semi === -1 ? line : line.slice(0, semi)).trim();
    if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) {
      throw new MalformedResponseError(`malformed chunked body: chunk size ${JSON.stringify(hex)}`);
    }
    const size = Number.parseInt(hex, 16);
    if (size === 0) this.#state = 'trailer';
    else {
      this.#state = 'data';
      this.#left = size;
    }
  }

  #hold(piece: Buffer, max: number, what: string): void {
    this.#lineBytes += piece.length;
    if (this.#lineBytes > max) throw new MalformedResponseError(`${what} exceeds ${max} bytes`);
    // A copy: a view would pin the whole socket read it came in.
    this.#line.push(Buffer.from(piece));
  }

  /** The held bytes of the current line followed by `rest`. */
  #take(rest: Buffer): Buffer {
    if (this.#lineBytes === 0) return rest;
    const line = Buffer.concat([...this.#line, rest]);
    this.#line = [];
    this.#lineBytes = 0;
    return line;
  }

  #finish(): void {
    this.#state = 'done';
    this.complete = true;
  }

  /**
   * Whether the connection may carry another request: the response is complete, its end was not the
   * connection's close, no byte followed it, and the server did not say `Connection: close`.
   */
  get reusable(): boolean {
    return (
      this.complete &&
      !this.#closeDelimited &&
      !this.#extra &&
      !/(?:^|,)\s*close\s*(?:,|$)/i.test(this.head?.headers.connection ?? '')
    );
  }
}

/** The status line and header lines of a response head (without its ending blank line). */
export function parseHead(text: string): ResponseHead {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
  if (!m)
    throw new MalformedResponseError(`malformed status line ${JSON.stringify(lines[0]?.slice(0, 100))}`);
  const headers: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    if (colon <= 0)
      throw new MalformedResponseError(`malformed header line ${JSON.stringify(line.slice(0, 100))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  return { status: Number(m[1]), headers };
}

/** How the body of a response with this head is delimited (RFC 9112, section 6.3). */
function framing(head: ResponseHead): State {
  const { status, headers } = head;
  if (status === 204 || status === 304) return 'done';
  const te = headers['transfer-encoding'];
  if (te !== undefined) {
    if (/(?:^|,)\s*chunked\s*$/i.test(te)) return 'size';
    return 'close';
  }
  const cl = headers['content-length'];
  if (cl !== undefined) {
    if (!/^\d{1,15}$/.test(cl))
      throw new MalformedResponseError(`malformed Content-Length ${JSON.stringify(cl)}`);
    return Number(cl) === 0 ? 'done' : 'length';
  }
  return 'close';
}

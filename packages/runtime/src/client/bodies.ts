/** Request and response bodies: JSON out, JSON (or a protobuf Status) in. */
import type * as http from 'node:http';
import type { ProtobufDecoder } from './protobuf/decode.ts';
import { envelope, PROTOBUF } from './protobuf/frames.ts';

/**
 * A request body as it goes to the socket. JSON stays a string: the socket writes it as UTF-8 from the
 * string itself (no Buffer to allocate, copy and later collect for every write).
 */
export type EncodedBody = string | Buffer;

export function encodeBody(body: unknown): EncodedBody | undefined {
  if (body === undefined) return undefined;
  if (Buffer.isBuffer(body) || typeof body === 'string') return body;
  return JSON.stringify(body);
}

/** The Content-Length of an encoded body: its UTF-8 bytes. */
export function bodyLength(body: EncodedBody): number {
  return typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.length;
}

/**
 * A response's chunks as one Buffer. Most responses arrive in one chunk, which is used as it is
 * (Buffer.concat would copy it into a new Buffer).
 */
export function joinChunks(chunks: Buffer[]): Buffer {
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/** A response body: parsed JSON, else its text; undefined when empty. */
export function parseBody(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  const text = body.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * A non-2xx response's body. A request that accepted protobuf gets its error Status in protobuf too:
 * decoded as JSON would have it (when it cannot be, the body is dropped: the status code still says
 * what failed).
 */
export function parseErrorBody(
  body: Buffer,
  headers: http.IncomingHttpHeaders,
  decoder: ProtobufDecoder,
): unknown {
  if (!String(headers['content-type'] ?? '').startsWith(PROTOBUF)) return parseBody(body);
  try {
    const e = envelope(body);
    return decoder.object(e.apiVersion, e.kind, body, e.start, e.end);
  } catch {
    return undefined;
  }
}

/** Request and response bodies: JSON out, JSON (or a protobuf Status) in. */
import type * as http from 'node:http';
import type { ProtobufDecoder } from './protobuf/decode.ts';
import { envelope, PROTOBUF } from './protobuf/frames.ts';

export function encodeBody(body: unknown): Buffer | undefined {
  if (body === undefined) return undefined;
  if (Buffer.isBuffer(body)) return body;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  return Buffer.from(JSON.stringify(body), 'utf8');
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

/**
 * The API server's protobuf envelopes: every object or list is `k8s\0` + runtime.Unknown {typeMeta = 1
 * {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3, contentType = 4}; a watch stream
 * (`application/vnd.kubernetes.protobuf;stream=watch`) is frames of a 4-byte big-endian length and a
 * metav1.WatchEvent {type = 1, object = 2: RawExtension {raw = 1: an enveloped object}}, itself not
 * enveloped.
 */
import { type DecodeOptions, eachField, type ProtobufDecoder } from './decode.ts';
import { ProtobufSchemaError } from './errors.ts';

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';
export const PROTOBUF_WATCH = 'application/vnd.kubernetes.protobuf;stream=watch';

/** What every enveloped object or list starts with: "k8s\0". */
export const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);
const MAX_FRAME = 64 * 1024 * 1024;

export interface Envelope {
  apiVersion: string;
  kind: string;
  /** the message's bytes: buf[start, end) */
  start: number;
  end: number;
}

/** Opens an envelope at buf[start, end). */
export function envelope(buf: Buffer, start = 0, end = buf.length): Envelope {
  for (let i = 0; i < 4; i++) {
    if (buf[start + i] !== MAGIC[i]) throw new ProtobufSchemaError('not a Kubernetes protobuf envelope');
  }
  let apiVersion = '';
  let kind = '';
  let raw: [number, number] = [0, 0];
  eachField(buf, start + 4, end, 'envelope', (field, from, to) => {
    if (field === 1) {
      eachField(buf, from, to, 'envelope type', (f, a, b) => {
        if (f === 1) apiVersion = buf.toString('utf8', a, b);
        else if (f === 2) kind = buf.toString('utf8', a, b);
      });
    } else if (field === 2) raw = [from, to];
    else if (field === 3 && to > from)
      throw new ProtobufSchemaError('compressed envelopes are not supported');
  });
  return { apiVersion, kind, start: raw[0], end: raw[1] };
}

/** A watch event's type and object (JSON's shape: {type, object}). */
export function watchEvent(
  decoder: ProtobufDecoder,
  buf: Buffer,
  opts: DecodeOptions,
): { type: string; object: Record<string, unknown> } {
  let type = '';
  let object: Record<string, unknown> | undefined;
  eachField(buf, 0, buf.length, 'watch event', (field, from, to) => {
    if (field === 1) type = buf.toString('utf8', from, to);
    else if (field === 2) {
      // RawExtension {raw = 1}: an enveloped object
      eachField(buf, from, to, 'watch event object', (f, a, b) => {
        if (f !== 1) return;
        const inner = envelope(buf, a, b);
        object = decoder.object(inner.apiVersion, inner.kind, buf, inner.start, inner.end, opts);
      });
    } else throw new ProtobufSchemaError(`malformed watch event (field ${field})`);
  });
  if (!type || !object) throw new ProtobufSchemaError('watch event without type or object');
  return { type, object };
}

/** Splits a watch stream's bytes into frames. Chunks may end anywhere. */
export class FrameDecoder {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** The byte length the pending frame needs (header included), once its header is in. */
  #need = 0;

  /**
   * Feeds one chunk; returns the frames it completed (each a Buffer, possibly a view of the chunk). Only
   * a frame that spans chunks is copied, once all of it is in: the frames after it in the chunk are read
   * in place.
   */
  write(chunk: Uint8Array): Buffer[] {
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    const frames: Buffer[] = [];
    let p = 0;
    if (this.#pendingBytes > 0) {
      if (this.#need === 0) {
        // The header itself spans chunks.
        p = this.#take(buf, 0, 4 - this.#pendingBytes);
        if (this.#pendingBytes < 4) return frames;
        this.#need = 4 + this.#header();
      }
      p = this.#take(buf, p, this.#need - this.#pendingBytes);
      if (this.#pendingBytes < this.#need) return frames;
      frames.push(Buffer.concat(this.#pending, this.#pendingBytes).subarray(4));
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#need = 0;
    }
    while (buf.length - p >= 4) {
      const len = frameLength(buf, p);
      if (buf.length - p - 4 < len) break;
      frames.push(buf.subarray(p + 4, p + 4 + len));
      p += 4 + len;
    }
    if (p < buf.length) {
      // The start of the next frame: a view, held only until the rest of the frame arrives (the server
      // writes whole frames), when the parts are joined once.
      const rest = buf.subarray(p);
      this.#pending.push(rest);
      this.#pendingBytes = rest.length;
      this.#need = rest.length >= 4 ? 4 + frameLength(rest, 0) : 0;
    }
    return frames;
  }

  /** Adds up to `count` bytes of buf from `p` to the pending frame; returns where they end. */
  #take(buf: Buffer, p: number, count: number): number {
    const end = Math.min(buf.length, p + count);
    if (end > p) {
      this.#pending.push(buf.subarray(p, end));
      this.#pendingBytes += end - p;
    }
    return end;
  }

  /** Whether a partial frame is left (the stream ended inside one). */
  get partial(): boolean {
    return this.#pendingBytes > 0;
  }

  #header(): number {
    return frameLength(Buffer.concat(this.#pending, 4), 0);
  }
}

function frameLength(buf: Buffer, p: number): number {
  const len = buf.readUInt32BE(p);
  if (len > MAX_FRAME) throw new ProtobufSchemaError(`watch frame of ${len} bytes`);
  return len;
}

/** The watch events of a protobuf watch stream, as JSON's `{type, object}` values. */
export async function* protobufWatchEvents(
  source: AsyncIterable<Uint8Array>,
  decoder: ProtobufDecoder,
  opts: DecodeOptions = {},
): AsyncGenerator<unknown, void, undefined> {
  const frames = new FrameDecoder();
  for await (const chunk of source) {
    for (const frame of frames.write(chunk)) {
      let event: { type: string; object: Record<string, unknown> };
      try {
        event = watchEvent(decoder, frame, opts);
      } catch (err) {
        // Bytes that do not decode, whatever threw: the same bytes would come again over protobuf.
        if (err instanceof ProtobufSchemaError) throw err;
        throw new ProtobufSchemaError(`undecodable watch event: ${String(err)}`, { cause: err });
      }
      yield event;
    }
  }
  // Cut off inside a frame (a connection or HTTP/2 stream that ended early): a broken stream, not a
  // schema problem; the transport reports it as such.
  if (frames.partial) throw new Error('the watch stream ended inside a frame');
}

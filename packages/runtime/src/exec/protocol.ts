/**
 * The Kubernetes remote command protocol over WebSocket (v4 and v5.channel.k8s.io), as pure functions:
 * every binary message is one channel byte followed by data. Channels: 0 stdin, 1 stdout, 2 stderr,
 * 3 error (a metav1.Status when the command ends), 4 resize (TTYs only, unused here). v5 adds 255:
 * a client message [255, channel] closes that channel (stdin: the command reads EOF).
 */
import { buildQuery } from '../client/query.ts';

export const V5_PROTOCOL = 'v5.channel.k8s.io';
export const V4_PROTOCOL = 'v4.channel.k8s.io';
/** Offered in order of preference; the API server picks the first it supports. */
export const EXEC_PROTOCOLS: readonly string[] = [V5_PROTOCOL, V4_PROTOCOL];

export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;
export const ERROR = 3;
export const CLOSE = 255;

/** Largest stdin message sent: the data is split in messages of this size. */
const STDIN_CHUNK = 32 * 1024;

/** The path and query of a pods/exec request. */
export function execPath(
  namespace: string,
  name: string,
  opts: { container?: string; command: readonly string[]; stdin: boolean },
): string {
  const query = buildQuery({
    command: opts.command,
    container: opts.container || undefined,
    stdin: opts.stdin ? 'true' : undefined,
    stdout: 'true',
    stderr: 'true',
  });
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/exec${query}`;
}

/** A received message: its channel and data (a view of the message, not a copy). */
export interface Frame {
  channel: number;
  data: Buffer;
}

/** Splits a message into channel and data; undefined for an empty message. */
export function decodeFrame(message: Buffer): Frame | undefined {
  if (message.length === 0) return undefined;
  return { channel: message[0] as number, data: message.subarray(1) };
}

/** The messages that send `data` on stdin, then (v5 only) close it. */
export function stdinFrames(data: Uint8Array, protocol: string): Buffer[] {
  const frames: Buffer[] = [];
  for (let at = 0; at < data.length; at += STDIN_CHUNK) {
    const chunk = data.subarray(at, Math.min(at + STDIN_CHUNK, data.length));
    frames.push(Buffer.concat([Buffer.from([STDIN]), chunk]));
  }
  if (protocol === V5_PROTOCOL) frames.push(Buffer.from([CLOSE, STDIN]));
  return frames;
}

/** The output of one stream, kept up to `max` bytes; the rest is counted and dropped. */
export class BoundedOutput {
  readonly #chunks: Buffer[] = [];
  readonly #max: number;
  #size = 0;
  truncated = false;

  constructor(max: number) {
    this.#max = max;
  }

  push(data: Buffer): void {
    if (data.length === 0) return;
    const room = this.#max - this.#size;
    if (data.length > room) this.truncated = true;
    if (room <= 0) return;
    // Copy: `data` is a view of a message buffer.
    const kept = Buffer.from(data.length > room ? data.subarray(0, room) : data);
    this.#chunks.push(kept);
    this.#size += kept.length;
  }

  text(): string {
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

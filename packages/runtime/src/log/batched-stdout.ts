/**
 * Log lines to stdout in batches: the lines of up to FLUSH_MS (or BATCH_BYTES) go out in one write.
 *
 * pino's asynchronous destination (sonic-boom) writes a line as soon as no write is in flight, so a
 * burst of lines spread over a few milliseconds each became a write of its own: a system call on one of
 * libuv's threads, and a hand-over to it and back. At N=1000 Databases the operator logs about 10 700
 * lines while converging, and batching them took its CPU from a median of 15.7 to 14.4 s (five
 * interleaved pairs; docs/runtime.md, Logging).
 *
 * No timer runs while nothing is logged. Lines still held when the process exits (process.exit, an
 * uncaught error, the end of the event loop) are written synchronously then; a SIGKILL loses at most the
 * last FLUSH_MS of lines.
 */
import { writeSync } from 'node:fs';
import type { DestinationStream } from 'pino';
import { pino } from 'pino';

/** How long a line may wait for others before the batch is written. */
export const FLUSH_MS = 100;
/** A batch this large is written at once. */
export const BATCH_BYTES = 16 * 1024;

/** Where the batches go: asynchronously, or (at exit) synchronously after what the stream holds. */
export interface BatchSink {
  /** The stream the batches are written to. */
  write(text: string): unknown;
  /** Writes what the stream holds, synchronously. */
  flushSync(): void;
  /** Writes `text` synchronously, past the stream (which may have a write in flight that would take it). */
  writeSync(text: string): void;
  /** Calls `cb` once what the stream was given is written (pino's `logger.flush(cb)`). */
  flush(cb: (err?: Error | null) => void): void;
}

/** Destinations with lines held, written synchronously at exit. */
const live = new Set<WeakRef<BatchedDestination>>();
let exitHooked = false;

function flushAllAtExit(): void {
  for (const ref of live) {
    try {
      ref.deref()?.flushSync();
    } catch {
      // A closed stdout: nothing more can be written.
    }
  }
}

/** Lines batched into one write of `sink` per FLUSH_MS or BATCH_BYTES (see the module comment). */
export class BatchedDestination implements DestinationStream {
  readonly #sink: BatchSink;
  readonly #flushMs: number;
  readonly #ref = new WeakRef(this);
  #lines: string[] = [];
  #bytes = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(sink: BatchSink, flushMs = FLUSH_MS) {
    this.#sink = sink;
    this.#flushMs = flushMs;
  }

  write(line: string): void {
    this.#lines.push(line);
    this.#bytes += line.length;
    if (this.#bytes >= BATCH_BYTES) {
      this.#drain();
      return;
    }
    if (this.#timer) return;
    this.#timer = setTimeout(() => this.#drain(), this.#flushMs);
    // The process may exit meanwhile: the exit hook writes what is held.
    this.#timer.unref();
    live.add(this.#ref);
    if (!exitHooked) {
      exitHooked = true;
      process.on('exit', flushAllAtExit);
    }
  }

  /** Hands the held lines to the sink now; `cb` (pino's `logger.flush(cb)`) once they are written. */
  flush(cb?: (err?: Error | null) => void): void {
    this.#drain();
    if (cb) this.#sink.flush(cb);
  }

  /** Writes whatever the sink holds, then the held lines, synchronously. */
  flushSync(): void {
    const text = this.#take();
    this.#sink.flushSync();
    if (text !== undefined) this.#sink.writeSync(text);
  }

  #drain(): void {
    const text = this.#take();
    if (text !== undefined) this.#sink.write(text);
  }

  /** The held lines as one text (undefined if none); no timer is left armed. */
  #take(): string | undefined {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    live.delete(this.#ref);
    if (this.#lines.length === 0) return undefined;
    const text = this.#lines.length === 1 ? (this.#lines[0] as string) : this.#lines.join('');
    this.#lines = [];
    this.#bytes = 0;
    return text;
  }
}

/** Batched lines to stdout, written asynchronously by pino's destination (sonic-boom). */
export function batchedStdout(): BatchedDestination {
  const stream = pino.destination({ dest: 1, sync: false });
  return new BatchedDestination({
    write: (text) => stream.write(text),
    flushSync: () => stream.flushSync(),
    writeSync: (text) => writeAllSync(1, text),
    flush: (cb) => stream.flush(cb),
  });
}

/** Writes all of `text` to `fd`, waiting out a full non-blocking pipe (EAGAIN) for up to a second. */
function writeAllSync(fd: number, text: string): void {
  let bytes = Buffer.from(text, 'utf8');
  const waitCell = new Int32Array(new SharedArrayBuffer(4));
  for (let tries = 0; bytes.length > 0; ) {
    try {
      bytes = bytes.subarray(writeSync(fd, bytes));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || ++tries > 100) throw err;
      Atomics.wait(waitCell, 0, 0, 10);
    }
  }
}

/** Newline-delimited JSON, as watch responses stream it. */
import { withoutManagedFields } from './managed-fields.ts';

export interface JsonLinesOptions {
  /** Cut `object.metadata.managedFields` out of each line before parsing it (watch events; managed-fields.ts). */
  omitManagedFields?: boolean;
}

/**
 * Splits a byte stream into newline-delimited JSON values. Chunks may end anywhere, including inside
 * a multi-byte UTF-8 character: lines are only decoded once complete. Blank lines are skipped.
 */
export class JsonLineDecoder {
  #pending: Buffer[] = [];
  readonly #omitManagedFields: boolean;

  constructor(opts: JsonLinesOptions = {}) {
    this.#omitManagedFields = opts.omitManagedFields ?? false;
  }

  /** Feeds one chunk; returns the values of the lines it completed. */
  write(chunk: Uint8Array | string): unknown[] {
    const buf =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    const out: unknown[] = [];
    let start = 0;
    let nl = buf.indexOf(0x0a, start);
    while (nl !== -1) {
      let line = buf.subarray(start, nl);
      if (this.#pending.length > 0) {
        this.#pending.push(line);
        line = Buffer.concat(this.#pending);
        this.#pending = [];
      }
      parseLine(line, out, this.#omitManagedFields);
      start = nl + 1;
      nl = buf.indexOf(0x0a, start);
    }
    // Copy the tail: holding a view would pin the whole (possibly large) chunk.
    if (start < buf.length) this.#pending.push(Buffer.from(buf.subarray(start)));
    return out;
  }

  /** Ends the input; a final line without a trailing newline still counts. */
  end(): unknown[] {
    const out: unknown[] = [];
    if (this.#pending.length > 0) parseLine(Buffer.concat(this.#pending), out, this.#omitManagedFields);
    this.#pending = [];
    return out;
  }
}

function parseLine(line: Buffer, out: unknown[], omitManagedFields: boolean): void {
  const text = line.toString('utf8').trim();
  if (text.length === 0) return;
  try {
    out.push(JSON.parse(omitManagedFields ? withoutManagedFields(text) : text));
  } catch (err) {
    const preview = text.length > 200 ? `${text.slice(0, 200)}...` : text;
    throw new SyntaxError(`malformed JSON line in stream: ${preview}`, { cause: err });
  }
}

/** Newline-delimited JSON values from a chunked source. Stopping early returns (closes) the source. */
export async function* jsonLines(
  source: AsyncIterable<Uint8Array | string>,
  opts: JsonLinesOptions = {},
): AsyncGenerator<unknown, void, undefined> {
  const decoder = new JsonLineDecoder(opts);
  for await (const chunk of source) {
    for (const value of decoder.write(chunk)) yield value;
  }
  for (const value of decoder.end()) yield value;
}

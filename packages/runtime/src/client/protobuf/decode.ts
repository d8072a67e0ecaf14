/**
 * Kubernetes objects from their protobuf encoding, as the JSON the API server would have sent for them.
 *
 * The API server encodes built-in kinds in protobuf when asked (client-go always asks); decoding it skips
 * what JSON costs: quoted keys, escaped strings, and managedFields parsed only to be dropped. The result
 * must be what JSON.parse of the server's JSON gives, so the decoders follow Go's JSON encoder over the
 * decoded Go struct: fields in declaration order; `omitempty` leaves out zero scalars, empty slices and
 * maps, never structs; an absent pointer, slice or map without it is `null`, an absent scalar its zero;
 * times in RFC 3339, IntOrString a number or string, Quantity its string, bytes base64; embedded structs
 * inlined. The layout comes from the Go types (schema.generated.ts); compile.ts makes the decoders.
 *
 * A field number the schema does not know (a server newer than the schema) throws ProtobufSchemaError.
 */
import type { DeepFreezeOptions } from '../../util/freeze.ts';
import { type MessageDecoder, MessageDecoders } from './compile.ts';
import { ProtobufSchemaError } from './errors.ts';
import { SCHEMA } from './schema.generated.ts';
import type { ProtobufSchema } from './schema-types.ts';

export { ProtobufSchemaError };

export interface DecodeOptions {
  /** Leave `metadata.managedFields` out (informers drop them anyway): skipped without being decoded. */
  omitManagedFields?: boolean;
  /**
   * Deliver each object deep-frozen, each of its parts frozen as soon as it is decoded: the result of
   * deepFreezeJson(object, strings), without the walk over the object that freezing afterwards takes.
   */
  deepFreeze?: DeepFreezeOptions;
}

/** Whether the built-in schema has this kind ("apps/v1", "StatefulSet"). */
export function protobufKnows(apiVersion: string, kind: string): boolean {
  return Object.hasOwn(SCHEMA.kinds, `${apiVersion}/${kind}`);
}

/** Decodes the objects and lists of a schema's kinds. */
export class ProtobufDecoder {
  readonly #schema: ProtobufSchema;
  readonly #decoders: MessageDecoders;

  constructor(schema: ProtobufSchema = SCHEMA) {
    this.#schema = schema;
    this.#decoders = new MessageDecoders(schema);
  }

  /** One object's message bytes (no envelope), as JSON would give it, with kind and apiVersion first. */
  object(
    apiVersion: string,
    kind: string,
    buf: Buffer,
    start = 0,
    end = buf.length,
    opts: DecodeOptions = {},
  ): Record<string, unknown> {
    const decode = this.#kind(apiVersion, kind);
    const omit = opts.omitManagedFields ?? false;
    if (opts.deepFreeze) {
      return this.#decoders.frozen(opts.deepFreeze.strings, () =>
        decode(buf, start, end, omit, { kind, apiVersion }),
      );
    }
    return decode(buf, start, end, omit, { kind, apiVersion });
  }

  /** A `<Kind>List`'s bytes: its items (without apiVersion and kind, as in JSON lists) and its metadata. */
  list(
    apiVersion: string,
    kind: string,
    buf: Buffer,
    start = 0,
    end = buf.length,
    opts: DecodeOptions = {},
  ): { metadata: Record<string, unknown>; items: Record<string, unknown>[] } {
    const decode = this.#kind(apiVersion, kind);
    const omit = opts.omitManagedFields ?? false;
    const items: Record<string, unknown>[] = [];
    let meta: [number, number] = [0, 0];
    const frozen = opts.deepFreeze;
    eachField(buf, start, end, `${kind}List`, (field, from, to) => {
      if (field === 1) meta = [from, to];
      else if (field === 2 && frozen) {
        items.push(this.#decoders.frozen(frozen.strings, () => decode(buf, from, to, omit)));
      } else if (field === 2) items.push(decode(buf, from, to, omit));
    });
    const metadata = this.#decoders.get('meta.v1.ListMeta')(buf, meta[0], meta[1], omit);
    return { metadata, items };
  }

  #kind(apiVersion: string, kind: string): MessageDecoder {
    const name = this.#schema.kinds[`${apiVersion}/${kind}`];
    if (!name) throw new ProtobufSchemaError(`no protobuf layout for ${apiVersion} ${kind}`);
    return this.#decoders.get(name);
  }
}

let shared: ProtobufDecoder | undefined;

/** The built-in schema's decoder, one per process: clients share its compiled decoders. */
export function sharedDecoder(): ProtobufDecoder {
  shared ??= new ProtobufDecoder();
  return shared;
}

/**
 * Calls `visit` with the number and byte range of each field of the message at buf[from, to), every field
 * being length-delimited (strings, bytes, messages: the envelopes, watch events and lists are only
 * these). Throws ProtobufSchemaError, naming `what`, on any other wire type or a length past the end.
 */
export function eachField(
  buf: Buffer,
  from: number,
  to: number,
  what: string,
  visit: (field: number, start: number, end: number) => void,
): void {
  let p = from;
  while (p < to) {
    const [tag, afterTag] = varint(buf, p);
    if ((tag & 7) !== 2)
      throw new ProtobufSchemaError(`${what}: unexpected field ${tag >>> 3} (wire type ${tag & 7})`);
    const [len, start] = varint(buf, afterTag);
    p = start + len;
    if (p > to) throw new ProtobufSchemaError(`${what}: truncated`);
    visit(tag >>> 3, start, p);
  }
}

/** A varint at p and the position after it. */
function varint(buf: Buffer, p: number): [number, number] {
  let x = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    const b = buf[p++];
    if (b === undefined) throw new ProtobufSchemaError('truncated varint');
    x += (b & 0x7f) * scale;
    if (b < 0x80) return [x, p];
    scale *= 128;
  }
  throw new ProtobufSchemaError('malformed varint');
}

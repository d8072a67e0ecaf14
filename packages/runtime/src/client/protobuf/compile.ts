/**
 * One specialized decoding function per message, generated from the schema on first use: property names
 * written as literals and fields read in a switch on their tag, so V8 builds every object of a message with
 * one hidden class, as JSON.parse does. A generic loop over the schema's fields decodes the same bytes
 * about as fast as JSON.parse does its text (bench/results, protobuf notes); this is several times faster.
 *
 * The rules (Go's JSON encoder over the decoded Go struct) are those of decode.ts's description.
 */
import { ProtobufSchemaError } from './errors.ts';
import { FieldFlag, type ProtobufSchema, type SchemaField } from './schema-types.ts';

/** Decodes buf[start, end) as a message into a new object (`into`: into that object instead). */
export type MessageDecoder = (
  buf: Buffer,
  start: number,
  end: number,
  omitManagedFields: boolean,
  into?: Record<string, unknown>,
) => Record<string, unknown>;

/**
 * Nested objects whose apiVersion and kind the API server's conversion sets (so its JSON has them) while
 * protobuf, which carries no nested TypeMeta, drops them: a StatefulSet's volumeClaimTemplates
 * (k8s.io/kubernetes pkg/apis/apps/v1/conversion.go, issue 87583).
 */
const NESTED_TYPE_META: Record<string, { kind: string; apiVersion: string }> = {
  'apps.v1.StatefulSetSpec.volumeClaimTemplates': { kind: 'PersistentVolumeClaim', apiVersion: 'v1' },
};

const ZERO_TIME_SECONDS = -62135596800; // Go's zero time.Time (year 1)

/** The helpers generated code calls; `pos` is where the last read ended. */
class Runtime {
  pos = 0;
  readonly #times = new Map<number, string>();
  readonly decoders = new Map<string, MessageDecoder>();

  varint(buf: Buffer, p: number): number {
    let b = buf[p++]!;
    if (b < 0x80) {
      this.pos = p;
      return b;
    }
    let x = b & 0x7f;
    b = buf[p++]!;
    x |= (b & 0x7f) << 7;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    b = buf[p++]!;
    x |= (b & 0x7f) << 14;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    b = buf[p++]!;
    x |= (b & 0x7f) << 21;
    if (b < 0x80) {
      this.pos = p;
      return x;
    }
    let value = x;
    let scale = 2 ** 28;
    for (let i = 4; i < 10; i++) {
      b = buf[p++]!;
      if (b === undefined) throw new ProtobufSchemaError('truncated varint');
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        this.pos = p;
        return value;
      }
      scale *= 128;
    }
    throw new ProtobufSchemaError('malformed varint');
  }

  /** A signed int32/int64 (negative values are 10-byte two's complement varints). */
  signed(buf: Buffer, p: number): number {
    const v = this.varint(buf, p);
    if (v < 2 ** 63) return v;
    let big = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[p++]!;
      big |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) break;
      shift += 7n;
    }
    this.pos = p;
    return Number(BigInt.asIntN(64, big));
  }

  /** Skips a field of this wire type whose value starts at p; returns where it ends. */
  skip(buf: Buffer, p: number, wireType: number, end: number): number {
    let to: number;
    if (wireType === 0) {
      this.varint(buf, p);
      to = this.pos;
    } else if (wireType === 1) to = p + 8;
    else if (wireType === 2) {
      const len = this.varint(buf, p);
      to = this.pos + len;
    } else if (wireType === 5) to = p + 4;
    else throw new ProtobufSchemaError(`unsupported wire type ${wireType}`);
    if (to > end) throw new ProtobufSchemaError('truncated message');
    return to;
  }

  unknown(message: string, tag: number): never {
    throw new ProtobufSchemaError(`${message} has no field ${tag >>> 3} with wire type ${tag & 7}`);
  }

  truncated(message: string): never {
    throw new ProtobufSchemaError(`${message}: truncated`);
  }

  /** metav1.Time / MicroTime: Timestamp {seconds = 1, nanos = 2}; empty or Go's zero: null. */
  time(buf: Buffer, from: number, to: number, micro: boolean): string | null {
    if (from === to) return null;
    let seconds = 0;
    let nanos = 0;
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) seconds = this.signed(buf, p);
      else if (tag === 0x10) nanos = this.signed(buf, p);
      else {
        p = this.skip(buf, p, tag & 7, to);
        continue;
      }
      p = this.pos;
    }
    if (seconds === ZERO_TIME_SECONDS && nanos === 0) return null;
    if (!micro) {
      // Objects made together share their seconds: the formatted times are kept (bounded).
      const known = this.#times.get(seconds);
      if (known !== undefined) return known;
      if (this.#times.size >= 4096) this.#times.clear();
      const formatted = `${new Date(seconds * 1000).toISOString().slice(0, 19)}Z`;
      this.#times.set(seconds, formatted);
      return formatted;
    }
    const iso = new Date(seconds * 1000).toISOString(); // 2026-12-06T14:30:00.000Z
    return `${iso.slice(0, 19)}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z`;
  }

  /** The byte range of field 1 (bytes) of a message: RawExtension.raw, FieldsV1.raw, Quantity.string. */
  first(buf: Buffer, from: number, to: number): [number, number] | undefined {
    let p = from;
    let found: [number, number] | undefined;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x0a) {
        const len = this.varint(buf, p);
        p = this.pos + len;
        found = [this.pos, p];
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return found;
  }

  quantity(buf: Buffer, from: number, to: number): string {
    const r = this.first(buf, from, to);
    return r ? buf.toString('utf8', r[0], r[1]) : '0';
  }

  json(buf: Buffer, from: number, to: number): unknown {
    const r = this.first(buf, from, to);
    return r ? JSON.parse(buf.toString('utf8', r[0], r[1])) : null;
  }

  /** intstr.IntOrString {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}. */
  intOrString(buf: Buffer, from: number, to: number): number | string {
    let type = 0;
    let intVal = 0;
    let strVal = '';
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) {
        type = this.varint(buf, p);
        p = this.pos;
      } else if (tag === 0x10) {
        intVal = this.signed(buf, p);
        p = this.pos;
      } else if (tag === 0x1a) {
        const len = this.varint(buf, p);
        strVal = buf.toString('utf8', this.pos, this.pos + len);
        p = this.pos + len;
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return type === 1 ? strVal : intVal;
  }

  duration(buf: Buffer, from: number, to: number): string {
    let ns = 0;
    let p = from;
    while (p < to) {
      const tag = buf[p++]!;
      if (tag === 0x08) {
        ns = this.signed(buf, p);
        p = this.pos;
      } else p = this.skip(buf, p, tag & 7, to);
    }
    return goDuration(ns);
  }
}

/** Go's time.Duration.String() for whole values (what the API's Durations hold). */
export function goDuration(ns: number): string {
  if (ns === 0) return '0s';
  const sign = ns < 0 ? '-' : '';
  let n = Math.abs(ns);
  if (n < 1000) return `${sign}${n}ns`;
  if (n < 1e6) return `${sign}${trimFraction(n / 1e3)}µs`;
  if (n < 1e9) return `${sign}${trimFraction(n / 1e6)}ms`;
  const h = Math.floor(n / 3.6e12);
  n -= h * 3.6e12;
  const m = Math.floor(n / 6e10);
  n -= m * 6e10;
  const s = `${trimFraction(n / 1e9)}s`;
  if (h > 0) return `${sign}${h}h${m}m${s}`;
  if (m > 0) return `${sign}${m}m${s}`;
  return `${sign}${s}`;
}

function trimFraction(x: number): string {
  return String(Number(x.toFixed(9)));
}

const SCALARS = new Set(['string', 'bool', 'int', 'float', 'bytes']);
const SPECIALS = new Set(['time', 'microtime', 'duration', 'quantity', 'intstr', 'raw', 'fieldsv1']);

/** The decoders of one schema's messages, each compiled on first use. */
export class MessageDecoders {
  readonly #schema: ProtobufSchema;
  readonly #rt = new Runtime();

  constructor(schema: ProtobufSchema) {
    this.#schema = schema;
  }

  /**
   * Where each message's decoder is referenced from compiled code (a dependency array and its index), so
   * that a compiled decoder replaces the lazy one there: no extra call per message once compiled.
   */
  readonly #uses = new Map<string, [MessageDecoder[], number][]>();

  get(name: string): MessageDecoder {
    const known = this.#rt.decoders.get(name);
    if (known) return known;
    const fields = this.#schema.messages[name];
    if (!fields) throw new ProtobufSchemaError(`no protobuf layout for message ${name}`);
    // Registered before it is compiled: messages refer to themselves and each other.
    let compiled: MessageDecoder | undefined;
    const lazy: MessageDecoder = (buf, start, end, omit, into) => {
      if (!compiled) {
        compiled = this.#compile(name, fields);
        this.#rt.decoders.set(name, compiled);
        for (const [deps, i] of this.#uses.get(name) ?? []) deps[i] = compiled;
        this.#uses.delete(name);
      }
      return compiled(buf, start, end, omit, into);
    };
    this.#rt.decoders.set(name, lazy);
    return lazy;
  }

  #compile(name: string, fields: SchemaField[]): MessageDecoder {
    const deps: MessageDecoder[] = [];
    const depIndex = new Map<string, number>();
    const dep = (message: string): string => {
      let i = depIndex.get(message);
      if (i === undefined) {
        i = deps.length;
        const decoder = this.get(message);
        deps.push(decoder);
        depIndex.set(message, i);
        if (decoder.name === 'lazy') {
          const uses = this.#uses.get(message) ?? [];
          uses.push([deps, i]);
          this.#uses.set(message, uses);
        }
      }
      return `d[${i}]`;
    };
    const lines: string[] = [];
    const vars = fields.map((_, i) => `v${i}`);
    lines.push(`let ${vars.join(', ')};`, 'let p = start;', 'while (p < end) {');
    lines.push('  let tag = buf[p++];', '  if (tag > 0x7f) { tag = rt.varint(buf, p - 1); p = rt.pos; }');
    lines.push('  switch (tag) {');
    fields.forEach(([fieldName, number, type, flags], i) => {
      const v = vars[i]!;
      const slice = (flags & FieldFlag.slice) !== 0;
      const isMap = (flags & FieldFlag.map) !== 0;
      const inline = (flags & FieldFlag.inline) !== 0;
      const managed = name === 'meta.v1.ObjectMeta' && fieldName === 'managedFields';
      const typeMeta = NESTED_TYPE_META[`${name}.${fieldName}`];
      const lenTag = (number << 3) | 2;
      if (inline) {
        lines.push(
          `  case ${lenTag}: { const l = rt.varint(buf, p); p = rt.pos; ${v} = [p, p + l]; p += l; break; }`,
        );
        return;
      }
      if (isMap) {
        const entry = [
          `const l = rt.varint(buf, p); const to = rt.pos + l; let q = rt.pos; p = to;`,
          `let k = '', val;`,
          `while (q < to) { const t = buf[q++];`,
          `  if (t === 0x0a) { const kl = rt.varint(buf, q); k = buf.utf8Slice(rt.pos, rt.pos + kl); q = rt.pos + kl; }`,
          `  else if (t === ${valueTag(type, 2)}) { ${readInto('val', type, 'q', dep, typeMeta)} }`,
          `  else q = rt.skip(buf, q, t & 7, to); }`,
          `(${v} ??= {})[k] = val === undefined ? ${zeroExpr(type, dep)} : val;`,
        ];
        lines.push(`  case ${lenTag}: { ${entry.join(' ')} break; }`);
        return;
      }
      const tag = valueTag(type, number);
      if (managed) {
        lines.push(
          `  case ${tag}: { if (omit) { const l = rt.varint(buf, p); p = rt.pos + l; ${v} = null; break; } ${readInto('const x', type, 'p', dep, typeMeta)} (${v} ??= []).push(x); break; }`,
        );
        return;
      }
      if (slice) {
        lines.push(
          `  case ${tag}: { ${readInto('const x', type, 'p', dep, typeMeta)} (${v} ??= []).push(x); break; }`,
        );
        if (type === 'int' || type === 'bool') {
          // packed
          lines.push(
            `  case ${lenTag}: { const l = rt.varint(buf, p); const to = rt.pos + l; p = rt.pos; while (p < to) { ${readInto('const x', type, 'p', dep, typeMeta)} (${v} ??= []).push(x); } break; }`,
          );
        }
        return;
      }
      lines.push(`  case ${tag}: { ${readInto(v, type, 'p', dep, typeMeta)} break; }`);
    });
    lines.push(`  default: rt.unknown(${JSON.stringify(name)}, tag);`, '  }', '}');
    lines.push(`if (p !== end) rt.truncated(${JSON.stringify(name)});`);
    lines.push('const o = into ?? {};');
    fields.forEach(([fieldName, , type, flags], i) => {
      const v = vars[i]!;
      const key = `o[${JSON.stringify(fieldName)}]`;
      const omitEmpty = (flags & FieldFlag.omitEmpty) !== 0;
      const omitZero = (flags & FieldFlag.omitZero) !== 0;
      const pointer = (flags & FieldFlag.pointer) !== 0;
      const slice = (flags & FieldFlag.slice) !== 0;
      const isMap = (flags & FieldFlag.map) !== 0;
      const inline = (flags & FieldFlag.inline) !== 0;
      const managed = name === 'meta.v1.ObjectMeta' && fieldName === 'managedFields';
      if (inline) {
        lines.push(
          `if (${v} === undefined) ${dep(type)}(buf, 0, 0, omit, o); else ${dep(type)}(buf, ${v}[0], ${v}[1], omit, o);`,
        );
        return;
      }
      if (managed) {
        // null: skipped (omitManagedFields)
        lines.push(
          `if (${v} !== null) { if (${v} !== undefined) ${key} = ${v};${omitEmpty ? '' : ` else ${key} = null;`} }`,
        );
        return;
      }
      if (pointer || slice || isMap) {
        lines.push(`if (${v} !== undefined) ${key} = ${v};${omitEmpty ? '' : ` else ${key} = null;`}`);
        return;
      }
      if (SCALARS.has(type)) {
        const empty = type === 'string' ? "''" : type === 'bool' ? 'false' : type === 'bytes' ? "''" : '0';
        if (omitEmpty) lines.push(`if (${v} !== undefined && ${v} !== ${empty}) ${key} = ${v};`);
        else lines.push(`${key} = ${v} === undefined ? ${type === 'bytes' ? 'null' : empty} : ${v};`);
        return;
      }
      if (type === 'time' || type === 'microtime') {
        if (omitZero) lines.push(`if (${v} !== undefined && ${v} !== null) ${key} = ${v};`);
        else lines.push(`${key} = ${v} === undefined ? null : ${v};`);
        return;
      }
      lines.push(`${key} = ${v} === undefined ? ${zeroExpr(type, dep)} : ${v};`);
    });
    lines.push('return o;');
    const body = lines.join('\n');
    let factory: (rt: Runtime, d: MessageDecoder[]) => MessageDecoder;
    try {
      factory = new Function(
        'rt',
        'd',
        `return function decode(buf, start, end, omit, into) {\n${body}\n};`,
      ) as (rt: Runtime, d: MessageDecoder[]) => MessageDecoder;
    } catch (err) {
      // node --disallow-code-generation-from-strings: the client goes back to JSON.
      throw new ProtobufSchemaError(`cannot compile the decoder of ${name}: ${String(err)}`);
    }
    return factory(this.#rt, deps);
  }
}

/** The tag a value of this type is sent with, for field `number`. */
function valueTag(type: string, number: number): number {
  if (type === 'int' || type === 'bool') return number << 3;
  if (type === 'float') return (number << 3) | 1;
  return (number << 3) | 2;
}

/** Statements reading one value of `type` at `at` (the position after its tag) into `target`. */
function readInto(
  target: string,
  type: string,
  at: string,
  dep: (message: string) => string,
  typeMeta: { kind: string; apiVersion: string } | undefined,
): string {
  if (type === 'int') return `${target} = rt.signed(buf, ${at}); ${at} = rt.pos;`;
  if (type === 'bool') return `${target} = rt.varint(buf, ${at}) !== 0; ${at} = rt.pos;`;
  if (type === 'float') return `${target} = buf.readDoubleLE(${at}); ${at} += 8;`;
  return `const l${at} = rt.varint(buf, ${at}); const f${at} = rt.pos; ${at} = f${at} + l${at}; ${target} = ${valueExpr(type, `f${at}`, at, dep, typeMeta)};`;
}

/** The expression of a length-delimited value in buf[from, to). */
function valueExpr(
  type: string,
  from: string,
  to: string,
  dep: (message: string) => string,
  typeMeta: { kind: string; apiVersion: string } | undefined,
): string {
  switch (type) {
    case 'string':
      return `buf.utf8Slice(${from}, ${to})`;
    case 'bytes':
      return `buf.base64Slice(${from}, ${to})`;
    case 'time':
      return `rt.time(buf, ${from}, ${to}, false)`;
    case 'microtime':
      return `rt.time(buf, ${from}, ${to}, true)`;
    case 'quantity':
      return `rt.quantity(buf, ${from}, ${to})`;
    case 'intstr':
      return `rt.intOrString(buf, ${from}, ${to})`;
    case 'raw':
    case 'fieldsv1':
      return `rt.json(buf, ${from}, ${to})`;
    case 'duration':
      return `rt.duration(buf, ${from}, ${to})`;
    default: {
      if (SPECIALS.has(type) || SCALARS.has(type)) throw new Error(`no reader for ${type}`);
      const into = typeMeta
        ? `{ kind: ${JSON.stringify(typeMeta.kind)}, apiVersion: ${JSON.stringify(typeMeta.apiVersion)} }`
        : 'undefined';
      return `${dep(type)}(buf, ${from}, ${to}, omit, ${into})`;
    }
  }
}

/** Go's zero value of a (non-pointer) field of this type, as JSON has it. */
function zeroExpr(type: string, dep: (message: string) => string): string {
  switch (type) {
    case 'string':
      return "''";
    case 'bool':
      return 'false';
    case 'int':
    case 'float':
      return '0';
    case 'bytes':
    case 'time':
    case 'microtime':
    case 'raw':
    case 'fieldsv1':
      return 'null';
    case 'quantity':
      return "'0'";
    case 'intstr':
      return '0';
    case 'duration':
      return "'0s'";
    default:
      return `${dep(type)}(buf, 0, 0, omit, undefined)`;
  }
}

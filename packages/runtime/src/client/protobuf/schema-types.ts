/** The shape of schema.generated.ts (written by packages/runtime/tools/protobuf-schema). */

/** A field's scalar or special type, or the name of a message (contains a dot). */
export type FieldType =
  | 'string'
  | 'bool'
  | 'int'
  | 'float'
  | 'bytes'
  | 'time'
  | 'microtime'
  | 'duration'
  | 'quantity'
  | 'intstr'
  | 'raw'
  | 'fieldsv1'
  | (string & {});

/** [JSON name, protobuf field number, type, flags (FieldFlag)], in Go declaration order. */
export type SchemaField = [name: string, number: number, type: FieldType, flags: number];

export interface ProtobufSchema {
  /** "apps/v1/StatefulSet" -> its message */
  kinds: Record<string, string>;
  messages: Record<string, SchemaField[]>;
}

/** The Go JSON encoder's rules for a field, as its struct tags and Go type give them. */
export const FieldFlag = {
  /** `json:",omitempty"` */
  omitEmpty: 1,
  /** a Go pointer: present when sent, else nil */
  pointer: 2,
  /** a Go slice (repeated) */
  slice: 4,
  /** a Go map (repeated key/value entries) */
  map: 8,
  /** an embedded struct: its fields are the parent's in JSON, a nested message in protobuf */
  inline: 16,
  /** `json:",omitzero"`: a zero struct (a zero time) is left out */
  omitZero: 32,
} as const;

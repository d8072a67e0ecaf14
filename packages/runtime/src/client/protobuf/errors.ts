/** The bytes are not in the schema's layout: a field it does not know (a server newer than the schema), a
 * wire type other than the schema's, truncated bytes. The object cannot be given back whole. */
export class ProtobufSchemaError extends Error {
  override name = 'ProtobufSchemaError';
}

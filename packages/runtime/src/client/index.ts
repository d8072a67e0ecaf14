/** @opkit/runtime client: configuration loading, the HTTP transport and the API client. */
export type { DeepFreezeOptions, StringInterner } from '../util/freeze.ts';
export {
  ConfigError,
  configFromKubeConfig,
  type LoadConfigOptions,
  loadConfig,
  type RequestAuth,
  type RestConfig,
} from './config.ts';
export * from './errors.ts';
export {
  agentFor,
  buildQuery,
  DEFAULT_POOL,
  DEFAULT_TRANSPORT,
  type HttpMethod,
  type HttpRequest,
  HttpTransport,
  JsonLineDecoder,
  type JsonLinesOptions,
  jsonLines,
  LEADER_ELECTION_POOL,
  type Query,
  type QueryValue,
  type RequestMetric,
  RequestTimeoutError,
  type StreamOptions,
  type TransportMode,
  type TransportOptions,
  withoutManagedFields,
} from './http.ts';
export { type DecodeOptions, ProtobufDecoder, ProtobufSchemaError } from './protobuf/decode.ts';
export { type RateLimitOptions, RateLimitOptionsError, TokenBucket } from './rate-limit.ts';
export {
  type APIResource,
  type APIResourceList,
  type ClientOptions,
  createClient,
  deleteBody,
  listQuery,
  PATCH_CONTENT_TYPES,
  RestClient,
  type WireFormat,
  watchQuery,
  wireFormatFrom,
  writeQuery,
} from './rest-client.ts';
export type * from './types.ts';

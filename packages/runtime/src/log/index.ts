/** @opkit/runtime log: structured JSON logs (pino) that never contain secrets. */
export {
  type CreateLoggerOptions,
  createLogger,
  isSecretKey,
  type Logger,
  type LogLevel,
  REDACTED,
  redactSecrets,
  redactString,
  silentLogger,
} from './logger.ts';

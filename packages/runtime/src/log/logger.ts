/**
 * Structured JSON logs (pino), one line per entry:
 *   {"level":"info","time":"2025-01-01T00:00:00.000Z","name":"manager","msg":"starting"}
 *
 * Secrets never reach the output. Every logged object (and child-logger bindings, and serialized
 * errors) is walked before it is written, and
 * - values of secret-looking keys (password, token, secret, apiKey, authorization, cookie, privateKey,
 *   credentials, client-key-data, ... and any key ending in one of them, e.g. `dbPassword`,
 *   `bearerToken`, `clientSecret`) are replaced by "[REDACTED]";
 * - `data` and `stringData` of Secrets (objects with `kind: 'Secret'`) keep their keys but lose their
 *   values;
 * - "Bearer xyz" / "Basic xyz" credentials inside strings (including the message) are masked.
 * Keys like `secretName` or `tokenFile` name a secret without holding one and are kept.
 */
import {
  type Bindings,
  type ChildLoggerOptions,
  type DestinationStream,
  type Level,
  type Logger,
  type LoggerOptions,
  pino,
} from 'pino';

import { batchedStdout } from './batched-stdout.ts';

export type { Logger } from 'pino';

export type LogLevel = Level | 'silent';

export interface CreateLoggerOptions {
  /** Default: $LOG_LEVEL, else 'info'. */
  level?: LogLevel;
  /** Added as `name` to every line (e.g. the operator's name). */
  name?: string;
  /** Where lines go. Default: stdout, in batches of up to 100 ms written asynchronously, flushed on exit. */
  destination?: DestinationStream;
  /** Bound to every line, e.g. `{ pod: process.env.POD_NAME }`. Default: no pid/hostname. */
  base?: Record<string, unknown>;
  /** Extra key names to redact (matched like the built-in ones: case-, dash- and underscore-insensitive). */
  redactKeys?: readonly string[];
}

export const REDACTED = '[REDACTED]';

/** Keys whose value is a credential, in normalized form (lower case, no '-', '_' or '.'). */
const SECRET_KEY_SUFFIXES: readonly string[] = [
  'password',
  'passwd',
  'passphrase',
  'secret',
  'token',
  'apikey',
  'privatekey',
  'keydata',
  'credential',
  'credentials',
  'authorization',
  'cookie',
];

/** Exact (normalized) keys that are credentials although they do not end in a suffix above. */
const SECRET_KEYS: ReadonlySet<string> = new Set(['pwd', 'auth', 'setcookie', 'jwt']);

const MAX_DEPTH = 12;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi;

function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/[-_.]/g, '');
}

/** Builds the predicate deciding whether a key holds a credential. */
function secretKeyMatcher(extra: readonly string[] = []): (key: string) => boolean {
  const exact = new Set([...SECRET_KEYS, ...extra.map(normalizeKey)]);
  return (key: string): boolean => {
    const k = normalizeKey(key);
    if (exact.has(k)) return true;
    for (const suffix of SECRET_KEY_SUFFIXES) if (k.endsWith(suffix)) return true;
    return false;
  };
}

const defaultIsSecretKey = secretKeyMatcher();

/** True for a key whose value would be a credential (with the built-in rules). */
export function isSecretKey(key: string): boolean {
  return defaultIsSecretKey(key);
}

/** Masks "Bearer ..." / "Basic ..." credentials in a string. */
export function redactString(text: string): string {
  return text.replace(BEARER, `$1 ${REDACTED}`);
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function redactWith(value: unknown, isSecret: (key: string) => boolean): unknown {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return redactString(v);
    if (typeof v !== 'object' || v === null) return v;
    if (seen.has(v)) return '[Circular]';
    if (depth > MAX_DEPTH) return '[Truncated]';
    if (Array.isArray(v)) {
      seen.add(v);
      const out = v.map((item) => walk(item, depth + 1));
      seen.delete(v);
      return out;
    }
    // Errors are left to pino's err serializer (whose output is redacted in turn); other class
    // instances (Date, Buffer, Map, ...) are written as pino would write them.
    if (!isPlainObject(v)) return v;
    seen.add(v);
    const secretObject = v.kind === 'Secret';
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(v)) {
      if (isSecret(key)) out[key] = item === undefined ? undefined : REDACTED;
      else if (secretObject && (key === 'data' || key === 'stringData')) out[key] = maskValues(item);
      else out[key] = walk(item, depth + 1);
    }
    seen.delete(v);
    return out;
  };
  return walk(value, 0);
}

function maskValues(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return REDACTED;
  return Object.fromEntries(Object.keys(data).map((k) => [k, REDACTED]));
}

/**
 * A copy of `value` with credentials replaced by "[REDACTED]" (see the module comment). Plain objects
 * and arrays are copied; other objects are returned as they are. Cycles become "[Circular]".
 */
export function redactSecrets<T>(value: T): T {
  return redactWith(value, defaultIsSecretKey) as T;
}

/** A pino logger writing JSON lines with ISO timestamps, level labels and secret redaction. */
export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const isSecret = opts.redactKeys?.length ? secretKeyMatcher(opts.redactKeys) : defaultIsSecretKey;
  const redact = (obj: Record<string, unknown>): Record<string, unknown> =>
    redactWith(obj, isSecret) as Record<string, unknown>;
  const errSerializer = pino.stdSerializers.err;
  const base = { ...(opts.name !== undefined ? { name: opts.name } : {}), ...opts.base };
  const options: LoggerOptions = {
    level: opts.level ?? envLevel() ?? 'info',
    base: Object.keys(base).length > 0 ? redact(base) : null,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      bindings: (bindings) => redact(bindings),
      log: (obj) => redact(obj),
    },
    serializers: {
      err: (err: unknown) => (err instanceof Error ? redact({ ...errSerializer(err) }) : err),
      error: (err: unknown) => (err instanceof Error ? redact({ ...errSerializer(err) }) : err),
    },
    hooks: {
      logMethod(args, method) {
        const redacted = args.map((a) => (typeof a === 'string' ? redactString(a) : a)) as typeof args;
        method.apply(this, redacted);
      },
    },
  };
  // Asynchronous stdout, in batches (batched-stdout.ts): a synchronous write per line cost about a tenth
  // of the operator's CPU in the benchmarks, an asynchronous write per line about a fifteenth.
  const logger = pino(options, opts.destination ?? batchedStdout());
  // pino applies formatters.bindings to the root's bindings only; children (which inherit these
  // overrides, being created with Object.create(parent)) get theirs redacted here.
  type ChildFn = (this: Logger, bindings: Bindings, options?: ChildLoggerOptions) => Logger;
  type SetBindingsFn = (this: Logger, bindings: Bindings) => void;
  const child = logger.child as unknown as ChildFn;
  const setBindings = logger.setBindings as unknown as SetBindingsFn;
  Object.assign(logger, {
    child(this: Logger, bindings: Bindings, childOptions?: ChildLoggerOptions): Logger {
      return child.call(this, redact(bindings), childOptions);
    },
    setBindings(this: Logger, bindings: Bindings): void {
      setBindings.call(this, redact(bindings));
    },
  });
  return logger;
}

const LEVELS: ReadonlySet<string> = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

function envLevel(): LogLevel | undefined {
  const level = process.env.LOG_LEVEL?.toLowerCase();
  return level && LEVELS.has(level) ? (level as LogLevel) : undefined;
}

/** A logger that writes nothing (tests, libraries used without a logger). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

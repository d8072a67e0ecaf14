/**
 * PodExecutor over WebSocket: the pods/exec subresource with the v5.channel.k8s.io subprotocol (falling
 * back to v4.channel.k8s.io), authenticated like every request of the client: the RestConfig's TLS
 * material, bearer tokens and token files, exec plugins and impersonation, with one retry on 401 when the
 * credentials can be refreshed. One WebSocket per exec; requests count in rest_client_requests_total
 * through `onRequest` (method GET, code 101 once upgraded).
 *
 * Why the `ws` package rather than Node's built-in WebSocket: the built-in one (undici) takes custom
 * headers, but client certificates need an undici dispatcher that Node does not expose, and a refused
 * upgrade surfaces as a bare ErrorEvent without the HTTP status or the API server's Status body, so a
 * 403 or 404 could not become a typed error. `ws` takes Node's https options as they are.
 */
import type WebSocket from 'ws';
import { joinChunks } from '../client/bodies.ts';
import type { RequestAuth, RestConfig } from '../client/config.ts';
import { ConnectionError, errorFromStatus, statusFromBody } from '../client/errors.ts';
import { authenticate, parseBody, type RequestMetric, reauthenticate, USER_AGENT } from '../client/http.ts';
import { abortReason } from '../util/abort.ts';
import { messageOf } from '../util/errors.ts';
import { ExecTimeoutError, execErrorFromStatus, parseExecStatus } from './errors.ts';
import {
  BoundedOutput,
  decodeFrame,
  ERROR,
  EXEC_PROTOCOLS,
  execPath,
  STDERR,
  STDOUT,
  stdinFrames,
} from './protocol.ts';
import type { ExecOptions, ExecResult, ExecTarget, PodExecutor } from './types.ts';

export interface PodExecutorOptions {
  /** Default timeout of each exec in milliseconds (ExecOptions.timeoutMs overrides it); 0: none. 60 s. */
  timeoutMs?: number;
  /** Bytes kept of stdout and of stderr each; the rest is dropped and the result says `truncated`. 4 MiB. */
  maxOutputBytes?: number;
  /** Request metrics hook, e.g. `mgr.metrics.restClientObserver()` for rest_client_requests_total. */
  onRequest?: (metric: RequestMetric) => void;
  userAgent?: string;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;
const STATUS_MAX_BYTES = 64 * 1024;
/** setTimeout's limit (about 24.8 days): longer timeouts mean none. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A PodExecutor that execs through the API server described by `config`. */
export function newPodExecutor(config: RestConfig, opts: PodExecutorOptions = {}): PodExecutor {
  return new WebSocketPodExecutor(config, opts);
}

/** What one WebSocket attempt gave: a result, or a 401 to retry with fresh credentials. */
type Attempt = { result: ExecResult } | { unauthorized: Error };

/** One exec's fixed inputs. */
interface ExecRequest {
  url: string;
  /** "namespace/name", for messages. */
  pod: string;
  namespace: string;
  stdin: Buffer | undefined;
  signal: AbortSignal;
}

class WebSocketPodExecutor implements PodExecutor {
  readonly #config: RestConfig;
  readonly #timeoutMs: number;
  readonly #maxOutputBytes: number;
  readonly #onRequest: ((m: RequestMetric) => void) | undefined;
  readonly #userAgent: string;
  readonly #base: string;

  constructor(config: RestConfig, opts: PodExecutorOptions) {
    this.#config = config;
    this.#timeoutMs = checkTimeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, 'newPodExecutor: opts.timeoutMs');
    this.#maxOutputBytes = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    if (!Number.isSafeInteger(this.#maxOutputBytes) || this.#maxOutputBytes < 0) {
      throw new TypeError(
        `newPodExecutor: opts.maxOutputBytes must be a whole number of bytes >= 0, got ${opts.maxOutputBytes}`,
      );
    }
    this.#onRequest = opts.onRequest;
    this.#userAgent = opts.userAgent ?? USER_AGENT;
    this.#base = config.server.replace(/^http/, 'ws');
  }

  async exec(key: ExecTarget, opts: ExecOptions): Promise<ExecResult> {
    validate(key, opts);
    const namespace = key.namespace || this.#config.namespace;
    const timeoutMs =
      opts.timeoutMs === undefined ? this.#timeoutMs : checkTimeout(opts.timeoutMs, 'exec: opts.timeoutMs');
    const what = `exec of ${JSON.stringify(opts.command.join(' '))} in pod ${namespace}/${key.name}`;
    if (opts.signal?.aborted) throw abortReason(opts.signal);
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(abortReason(opts.signal as AbortSignal));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS
        ? setTimeout(
            () =>
              controller.abort(
                new ExecTimeoutError(
                  `${what}: no exit status after ${timeoutMs}ms (the command may still be running in the ` +
                    'container; raise timeoutMs if it needs longer)',
                ),
              ),
            timeoutMs,
          )
        : undefined;
    const stdin = typeof opts.stdin === 'string' ? Buffer.from(opts.stdin, 'utf8') : opts.stdin;
    const req: ExecRequest = {
      url:
        this.#base +
        execPath(namespace, key.name, {
          ...(opts.container ? { container: opts.container } : {}),
          command: opts.command,
          stdin: stdin !== undefined,
        }),
      pod: `${namespace}/${key.name}`,
      namespace,
      stdin: stdin === undefined ? undefined : Buffer.from(stdin.buffer, stdin.byteOffset, stdin.byteLength),
      signal: controller.signal,
    };
    try {
      const auth = await authenticate(this.#config, controller.signal);
      const first = await this.#attempt(req, auth);
      if ('result' in first) return first.result;
      // 401: the server rejected the credentials before running anything, so retrying is safe.
      const fresh = await reauthenticate(this.#config, auth, controller.signal);
      if (!fresh) throw first.unauthorized;
      const second = await this.#attempt(req, fresh);
      if ('result' in second) return second.result;
      throw second.unauthorized;
    } finally {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  #metric(code: string, start: number): void {
    if (!this.#onRequest) return;
    try {
      this.#onRequest({
        method: 'GET',
        code,
        durationMs: performance.now() - start,
        host: this.#config.host,
      });
    } catch {
      // Metrics must never break requests.
    }
  }

  /** One WebSocket: resolves with the result (or a 401), rejects with a typed error. */
  async #attempt(req: ExecRequest, auth: RequestAuth): Promise<Attempt> {
    return this.#attemptWith(await webSocketClass(), req, auth);
  }

  #attemptWith(WebSocket: WebSocketClass, req: ExecRequest, auth: RequestAuth): Promise<Attempt> {
    const { signal } = req;
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const start = performance.now();
    const stdout = new BoundedOutput(this.#maxOutputBytes);
    const stderr = new BoundedOutput(this.#maxOutputBytes);
    // The exit Status is a small JSON document; bounded all the same.
    const status = new BoundedOutput(STATUS_MAX_BYTES);
    let statusSeen = false;
    const { headers, ...tls } = auth;
    const ws = new WebSocket(req.url, [...EXEC_PROTOCOLS], {
      ...tls,
      headers: { 'User-Agent': this.#userAgent, ...headers },
      ...(this.#config.proxyAgent ? { agent: this.#config.proxyAgent } : {}),
      perMessageDeflate: false,
      followRedirects: false,
    });
    let counted = false;
    const count = (code: string): void => {
      if (counted) return;
      counted = true;
      this.#metric(code, start);
    };
    return new Promise<Attempt>((resolve, reject) => {
      let settled = false;
      const finish = (outcome: { value: Attempt } | { error: Error }): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        if (ws.readyState !== WebSocket.CLOSED) ws.terminate();
        if ('error' in outcome) reject(outcome.error);
        else resolve(outcome.value);
      };
      const onAbort = (): void => {
        const reason = abortReason(signal);
        finish({
          error:
            reason instanceof ExecTimeoutError
              ? new ExecTimeoutError(reason.message, stdout.text(), stderr.text())
              : reason,
        });
      };
      signal.addEventListener('abort', onAbort, { once: true });

      ws.on('upgrade', () => count('101'));
      ws.on('unexpected-response', (httpReq, res) => {
        const code = res.statusCode ?? 0;
        count(String(code));
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const body = statusFromBody(code, parseBody(joinChunks(chunks)));
          finish(
            code === 401
              ? { value: { unauthorized: errorFromStatus(401, body) } }
              : { error: execErrorFromStatus(body, code, req.namespace) },
          );
          httpReq.destroy();
        });
        res.on('error', (err) => finish({ error: this.#connectionError(req, err) }));
      });
      ws.on('open', () => {
        if (req.stdin) for (const frame of stdinFrames(req.stdin, ws.protocol)) ws.send(frame);
      });
      ws.on('message', (data) => {
        const frame = decodeFrame(toBuffer(data));
        if (!frame) return;
        if (frame.channel === STDOUT) stdout.push(frame.data);
        else if (frame.channel === STDERR) stderr.push(frame.data);
        else if (frame.channel === ERROR) {
          statusSeen = true;
          status.push(frame.data);
        }
      });
      ws.on('error', (err) => {
        count('<error>');
        finish({ error: this.#connectionError(req, err) });
      });
      ws.on('close', (code) => {
        if (!statusSeen) {
          finish({
            error: new ConnectionError(
              `exec in pod ${req.pod} via ${this.#config.host}: the stream closed (WebSocket code ${code}) ` +
                "before the command's exit status arrived; the command may or may not have run",
              undefined,
            ),
          });
          return;
        }
        const outcome = parseExecStatus(status.text(), req.namespace);
        if ('error' in outcome) {
          finish({ error: outcome.error });
          return;
        }
        const result: ExecResult = {
          stdout: stdout.text(),
          stderr: stderr.text(),
          exitCode: outcome.exitCode,
        };
        if (stdout.truncated || stderr.truncated) {
          result.truncated = { stdout: stdout.truncated, stderr: stderr.truncated };
        }
        finish({ value: { result } });
      });
    });
  }

  #connectionError(req: ExecRequest, err: Error): ConnectionError {
    return new ConnectionError(
      `exec in pod ${req.pod} via ${this.#config.host} failed: ${messageOf(err)} ` +
        '(check that the API server is reachable)',
      err,
    );
  }
}

/** A timeout in milliseconds: 0 (or Infinity) for none. */
function checkTimeout(ms: number, field: string): number {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < 0) {
    throw new TypeError(`${field} must be a number of milliseconds >= 0 (0: no timeout), got ${ms}`);
  }
  return ms;
}

function validate(key: ExecTarget, opts: ExecOptions): void {
  if (!key || typeof key.name !== 'string' || key.name === '') {
    throw new TypeError('exec: key.name must name the pod');
  }
  const { command } = opts;
  if (!Array.isArray(command) || command.length === 0 || command.some((c) => typeof c !== 'string')) {
    throw new TypeError('exec: opts.command must be a non-empty array of strings, e.g. ["sh", "-c", "..."]');
  }
  if (opts.stdin !== undefined && typeof opts.stdin !== 'string' && !(opts.stdin instanceof Uint8Array)) {
    throw new TypeError('exec: opts.stdin must be a string or a Uint8Array');
  }
}

type WebSocketClass = typeof WebSocket;
let webSocketModule: Promise<{ default: WebSocketClass }> | undefined;

/**
 * The `ws` package, loaded on the first exec: a process does not evaluate its modules (130 KB of the
 * Database operator's bundle) at start-up, nor ever if it never execs.
 */
async function webSocketClass(): Promise<WebSocketClass> {
  webSocketModule ??= import('ws');
  return (await webSocketModule).default;
}

function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

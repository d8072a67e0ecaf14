/**
 * The control plane's own small HTTPS client for the API server (readiness, nodes, storage).
 * It deliberately does not use @opkit/runtime's client: the runtime's tests depend on this package (of
 * the runtime, only its leaf module @opkit/runtime/pki is used here: pki.ts).
 */
import { Agent, request } from 'node:https';

export interface Credentials {
  server: string;
  ca: string;
  cert: string;
  key: string;
}

export class KubeRequestError extends Error {
  readonly code: number;
  readonly body: string;
  constructor(method: string, path: string, code: number, body: string) {
    super(`${method} ${path} failed with HTTP ${code}: ${body.slice(0, 500)}`);
    this.name = 'KubeRequestError';
    this.code = code;
    this.body = body;
  }
}

export class KubeClient {
  private readonly creds: Credentials;
  private readonly agent: Agent;

  constructor(creds: Credentials) {
    this.creds = creds;
    this.agent = new Agent({
      keepAlive: true,
      ca: creds.ca,
      cert: creds.cert,
      key: creds.key,
      maxSockets: 20,
    });
  }

  close(): void {
    this.agent.destroy();
  }

  async raw(
    method: string,
    path: string,
    body?: unknown,
    opts: { contentType?: string; timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<{ code: number; text: string }> {
    const url = new URL(path, this.creds.server);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method,
          agent: this.agent,
          headers: {
            accept: 'application/json',
            ...(payload ? { 'content-type': opts.contentType ?? 'application/json' } : {}),
          },
          timeout: opts.timeoutMs ?? 30_000,
          signal: opts.signal,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () => resolve({ code: res.statusCode ?? 0, text }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  async json<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const { code, text } = await this.raw(method, path, body, { contentType });
    if (code < 200 || code >= 300) throw new KubeRequestError(method, path, code, text);
    return JSON.parse(text) as T;
  }

  /**
   * Streams a watch: calls onEvent per line until the server closes, `signal` aborts, or nothing
   * (not even a bookmark) arrives for `idleTimeoutMs` (a half-open connection). Resolves when the
   * stream ends; rejects on HTTP errors and malformed lines.
   */
  watch(
    path: string,
    onEvent: (event: { type: string; object: unknown }) => void,
    signal: AbortSignal,
    idleTimeoutMs = 90_000,
  ): Promise<void> {
    const url = new URL(path, this.creds.server);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        { method: 'GET', agent: this.agent, headers: { accept: 'application/json' }, signal },
        (res) => {
          if ((res.statusCode ?? 0) >= 300) {
            let text = '';
            res.on('data', (c) => {
              text += c;
            });
            res.on('end', () => reject(new KubeRequestError('WATCH', path, res.statusCode ?? 0, text)));
            return;
          }
          let buffer = '';
          res.setEncoding('utf8');
          res.setTimeout(idleTimeoutMs, () => res.destroy());
          res.on('data', (chunk: string) => {
            buffer += chunk;
            let nl = buffer.indexOf('\n');
            while (nl >= 0) {
              const line = buffer.slice(0, nl).trim();
              buffer = buffer.slice(nl + 1);
              if (line) {
                let event: { type: string; object: unknown };
                try {
                  event = JSON.parse(line) as { type: string; object: unknown };
                } catch {
                  reject(
                    new KubeRequestError('WATCH', path, 200, `malformed watch line: ${line.slice(0, 200)}`),
                  );
                  res.destroy();
                  return;
                }
                onEvent(event);
              }
              nl = buffer.indexOf('\n');
            }
          });
          res.on('end', () => resolve());
          // An abort or idle timeout destroys the response: 'close' without 'end' (and not always 'error').
          res.on('close', () => resolve());
          res.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
        },
      );
      req.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
      req.end();
    });
  }
}

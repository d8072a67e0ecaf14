/**
 * Health and readiness checks, served like Kubernetes' and controller-runtime's healthz:
 *   GET /healthz            200 "ok" when every check passes, else 503 listing the failed checks
 *   GET /healthz?verbose    one "[+]name ok" / "[-]name failed: ..." line per check
 *   GET /healthz/<name>     only that check (404 if there is none)
 *   GET /healthz?exclude=a  skips check "a" (repeatable)
 * and the same for /readyz.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendText } from './server.ts';

/**
 * A check passes unless it throws, rejects or returns `false`. The error message is only shown with
 * ?verbose (never the stack).
 */
export type Checker = () => unknown;

/** Default bound on a single check, so that a stuck check fails the probe instead of hanging it. */
export const CHECK_TIMEOUT_MS = 10_000;

interface CheckResult {
  name: string;
  ok: boolean;
  message?: string;
}

export class HealthChecks {
  readonly kind: 'healthz' | 'readyz';
  readonly #checks = new Map<string, Checker>();

  constructor(kind: 'healthz' | 'readyz') {
    this.kind = kind;
  }

  add(name: string, check: Checker): void {
    if (!name || name.includes('/')) throw new TypeError(`invalid ${this.kind} check name "${name}"`);
    if (this.#checks.has(name)) throw new Error(`${this.kind} check "${name}" already exists`);
    this.#checks.set(name, check);
  }

  names(): string[] {
    return [...this.#checks.keys()];
  }

  /** Runs the checks (all, or only `only`, minus `exclude`) concurrently. */
  async run(only?: string, exclude: readonly string[] = []): Promise<CheckResult[]> {
    const selected = [...this.#checks].filter(
      ([name]) => (only === undefined || name === only) && !exclude.includes(name),
    );
    return Promise.all(selected.map(([name, check]) => runCheck(name, check)));
  }

  /** Serves `/<kind>` and `/<kind>/<name>`; `path` is the request path. */
  async serve(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const rest = url.pathname.slice(`/${this.kind}`.length).replace(/^\/+|\/+$/g, '');
    if (rest && !this.#checks.has(rest)) {
      sendText(req, res, 404, `${this.kind} check "${rest}" not found\n`);
      return;
    }
    const results = await this.run(rest || undefined, url.searchParams.getAll('exclude'));
    const failed = results.some((r) => !r.ok);
    const verbose = url.searchParams.has('verbose');
    if (!failed && !verbose) {
      sendText(req, res, 200, 'ok');
      return;
    }
    const lines = results.map((r) =>
      r.ok
        ? `[+]${r.name} ok`
        : `[-]${r.name} failed: ${verbose ? (r.message ?? 'check failed') : 'reason withheld'}`,
    );
    lines.push(failed ? `${this.kind} check failed` : `${this.kind} check passed`);
    sendText(req, res, failed ? 503 : 200, `${lines.join('\n')}\n`);
  }
}

async function runCheck(name: string, check: Checker): Promise<CheckResult> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
    });
    const result = await Promise.race([Promise.resolve().then(check), timeout]);
    return result === false ? { name, ok: false, message: 'check returned false' } : { name, ok: true };
  } catch (err) {
    return { name, ok: false, message: err instanceof Error ? err.message : String(err) };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

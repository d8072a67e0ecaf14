/**
 * Credentials for one request, and their refresh after a 401 Unauthorized: shared by the HTTP/1.1 and
 * HTTP/2 paths of the transport and by exec (WebSocket) connections.
 */
import { abortReason } from '../util/abort.ts';
import type { RequestAuth, RestConfig } from './config.ts';

/** The configuration's credentials for one request; throws the abort reason if `signal` aborted meanwhile. */
export async function authenticate(
  config: RestConfig,
  signal: AbortSignal | undefined,
): Promise<RequestAuth> {
  const auth = await config.authenticate();
  if (signal?.aborted) throw abortReason(signal);
  return auth;
}

/**
 * After a 401 with `stale`: has the configuration refresh its credentials and returns the new ones, or
 * undefined when it cannot refresh or they did not change (retrying would only fail again).
 */
export async function reauthenticate(
  config: RestConfig,
  stale: RequestAuth,
  signal: AbortSignal | undefined,
): Promise<RequestAuth | undefined> {
  if (!config.refreshCredentials || signal?.aborted) return undefined;
  await config.refreshCredentials(stale);
  const fresh = await authenticate(config, signal);
  return sameCredentials(stale, fresh) ? undefined : fresh;
}

/** True if both carry the same credentials (Authorization header, basic auth, client certificate). */
function sameCredentials(a: RequestAuth, b: RequestAuth): boolean {
  const header = (auth: RequestAuth): string | undefined => {
    for (const [k, v] of Object.entries(auth.headers)) if (k.toLowerCase() === 'authorization') return v;
    return undefined;
  };
  const same = (x: string | Buffer | undefined, y: string | Buffer | undefined): boolean =>
    x === y || (x !== undefined && y !== undefined && Buffer.from(x).equals(Buffer.from(y)));
  return (
    header(a) === header(b) &&
    a.auth === b.auth &&
    same(a.cert, b.cert) &&
    same(a.key, b.key) &&
    same(a.pfx, b.pfx)
  );
}

import type { ControlPlane } from '../../src/index.ts';
import { KubeClient } from '../../src/kube-client.ts';

/** An admin client for the control plane, from the kubeconfig it wrote. */
export function adminClient(cp: ControlPlane): KubeClient {
  const user = cp.kubeconfig.users[0]!.user;
  const cluster = cp.kubeconfig.clusters[0]!.cluster;
  const pem = (b64: string) => Buffer.from(b64, 'base64').toString();
  return new KubeClient({
    server: cp.server,
    ca: pem(cluster['certificate-authority-data']),
    cert: pem(user['client-certificate-data']),
    key: pem(user['client-key-data']),
  });
}

/** Polls until `check` returns a truthy value; fails with the last value or error after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `timed out waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`,
  );
}

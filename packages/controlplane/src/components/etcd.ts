import { join } from 'node:path';
import { freePort } from '../ports.ts';
import { ManagedProcess } from '../process.ts';

export interface EtcdHandle {
  process: ManagedProcess;
  clientUrl: string;
}

/** One etcd member on loopback. Data survives kube-apiserver restarts (it lives in `dataDir`). */
export async function startEtcd(binary: string, dir: string, extraArgs: string[] = []): Promise<EtcdHandle> {
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name=opkit',
    `--data-dir=${join(dir, 'etcd-data')}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=opkit=${peerUrl}`,
    '--initial-cluster-state=new',
    // A local throwaway cluster: durability is not worth the fsync latency.
    '--unsafe-no-fsync=true',
    '--quota-backend-bytes=8589934592',
    '--log-level=warn',
    ...extraArgs,
  ];
  const process = new ManagedProcess('etcd', binary, args, join(dir, 'etcd.log'));
  try {
    await waitFor('etcd', process, async () => {
      const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(2000) });
      return res.ok && ((await res.json()) as { health?: string }).health === 'true';
    });
  } catch (err) {
    // Never leave a half-started etcd behind: the caller has no handle on it yet.
    await process.stop(2000);
    throw err;
  }
  return { process, clientUrl };
}

/** Current etcd revision, through etcd's JSON gateway. */
export async function etcdRevision(clientUrl: string): Promise<number> {
  const res = await fetch(`${clientUrl}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from('opkit-compaction-probe').toString('base64') }),
  });
  const body = (await res.json()) as { header?: { revision?: string } };
  return Number(body.header?.revision ?? 0);
}

/** Compacts etcd at its current revision: watches from older resourceVersions then get 410 Gone. */
export async function compactEtcd(clientUrl: string): Promise<number> {
  const revision = await etcdRevision(clientUrl);
  const res = await fetch(`${clientUrl}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  if (!res.ok) throw new Error(`etcd compaction failed: HTTP ${res.status} ${await res.text()}`);
  return revision;
}

/** Polls `check` until it returns true; fails fast if the process dies, with its log. */
export async function waitFor(
  what: string,
  proc: ManagedProcess | undefined,
  check: () => Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    proc?.assertRunning();
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      const log = proc ? `\nLast lines of its log (${proc.logFile}):\n${proc.logTail()}` : '';
      throw new Error(`${what} did not become ready within ${timeoutMs / 1000}s${detail}${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

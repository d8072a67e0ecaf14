/**
 * A fault run's timeline (--trace): every 2 s, how far convergence got and what the cluster side is doing,
 * to find where the time of a slow fault goes: Databases converged, the operator's log lines so far (is it
 * working?), pods by state, nodes Ready, StatefulSets short of ready replicas. One line per sample.
 */
import { readFileSync } from 'node:fs';
import type { Kube, KubeObject } from '../kube.ts';

interface PodLike extends KubeObject {
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}
interface NodeLike extends KubeObject {
  status?: { conditions?: { type: string; status: string }[] };
}
interface StsLike extends KubeObject {
  spec?: { replicas?: number };
  status?: { readyReplicas?: number; availableReplicas?: number };
}

const cond = (o: { status?: { conditions?: { type: string; status: string }[] } }, type: string) =>
  o.status?.conditions?.find((c) => c.type === type)?.status;

/** One sample as a line: `t=12.0 conv=20/50 oplog=300 pods=80 ready=70 notReady=8 pending=2 nodes=3/3 stsShort=9`. */
export async function sample(
  kube: Kube,
  ns: string,
  t0: number,
  converged: number,
  n: number,
  logFiles: string[],
): Promise<string> {
  const t = ((performance.now() - t0) / 1000).toFixed(1);
  const oplog = logFiles.reduce((k, f) => {
    try {
      return k + readFileSync(f, 'utf8').split('\n').length - 1;
    } catch {
      return k;
    }
  }, 0);
  try {
    const [pods, nodes, sts] = await Promise.all([
      kube.json<{ items: PodLike[] }>('GET', `/api/v1/namespaces/${ns}/pods`),
      kube.json<{ items: NodeLike[] }>('GET', '/api/v1/nodes'),
      kube.json<{ items: StsLike[] }>('GET', `/apis/apps/v1/namespaces/${ns}/statefulsets`),
    ]);
    const ready = pods.items.filter((p) => cond(p, 'Ready') === 'True').length;
    const pending = pods.items.filter((p) => p.status?.phase !== 'Running').length;
    const nodesReady = nodes.items.filter((x) => cond(x, 'Ready') === 'True').length;
    const stsShort = sts.items.filter((s) => (s.status?.readyReplicas ?? 0) < (s.spec?.replicas ?? 1)).length;
    return (
      `t=${t} conv=${converged}/${n} oplog=${oplog} pods=${pods.items.length} ready=${ready} ` +
      `notReady=${pods.items.length - ready - pending} pending=${pending} nodes=${nodesReady}/${nodes.items.length} ` +
      `sts=${sts.items.length} stsShort=${stsShort}`
    );
  } catch (err) {
    return `t=${t} conv=${converged}/${n} oplog=${oplog} (API: ${(err as Error).message.slice(0, 80)})`;
  }
}

/** Samples every 2 s until stop() is called; each line goes to `log`. */
export function startTrace(
  kube: Kube,
  ns: string,
  n: number,
  converged: () => number,
  logFiles: () => string[],
  log: (line: string) => void,
): { stop(): Promise<void> } {
  const t0 = performance.now();
  let on = true;
  const loop = (async () => {
    // Bounded: one sample every 2 s for at most an hour.
    for (let i = 0; on && i < 1800; i++) {
      log(`    trace ${await sample(kube, ns, t0, converged(), n, logFiles())}`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
    },
  };
}

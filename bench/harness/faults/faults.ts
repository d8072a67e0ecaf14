/**
 * The faults, each a bounded script run while the operator converges N Databases. A fault gets the
 * control plane, the proxy between operator and API server, and the operator processes; it returns when
 * the fault is over ("healed"), noting what it did. Every loop has a fixed number of steps.
 */
import type { ControlPlane } from '@opkit/controlplane';
import type { FaultProxy } from './proxy.ts';

export const FAULTS = [
  'baseline',
  'apiserver-restart',
  'compaction',
  'compaction-restart',
  'operator-sigkill',
  'leader-sigkill',
  'leader-sigterm',
  'proxy-cut',
  'proxy-stall',
  'proxy-half-open',
] as const;
/** The faults of real-nodes mode (the operator deployed in the cluster, its pods on a real node). */
export const REAL_NODE_FAULTS = ['baseline', 'operator-pod-and-apiserver'] as const;
export type FaultName = (typeof FAULTS)[number] | (typeof REAL_NODE_FAULTS)[number];
export const FAULT_MODES = ['apiserver', 'cluster', 'real-nodes'] as const;
export type FaultMode = (typeof FAULT_MODES)[number];
/** The faults a mode runs. */
export const faultsOf = (mode: FaultMode): readonly FaultName[] =>
  mode === 'real-nodes' ? REAL_NODE_FAULTS : FAULTS;

/** What a fault can act on. */
export interface FaultContext {
  cp: ControlPlane;
  proxy: FaultProxy;
  /** Kills the current leader (or the only operator) with the signal; resolves when it exited. */
  killOperator(signal: 'SIGKILL' | 'SIGTERM'): Promise<{ killedAt: number }>;
  /** Starts a replacement operator process (after a kill). */
  restartOperator(): Promise<void>;
  /** Resolves once the Lease names a holder other than the one killed; returns when it did. */
  waitNewLeader(timeoutMs: number): Promise<number>;
  /** real-nodes mode: resolves when the manager Deployment's 2 pods are Ready; returns when they were. */
  waitOperatorPods(timeoutMs: number): Promise<number>;
  /** How far convergence got (Databases converged so far). */
  converged(): number;
  sleep(ms: number): Promise<void>;
  note(line: string): void;
}

export interface FaultScale {
  /** API server restarts (apiserver-restart, compaction-restart). */
  restarts: number;
  /** Operator SIGKILLs (operator-sigkill). */
  kills: number;
  /** Seconds of repeated cuts (proxy-cut), one every cutEverySeconds. */
  cutSeconds: number;
  cutEverySeconds: number;
  /** Seconds of the stall (proxy-stall). */
  stallSeconds: number;
}

export const FULL_SCALE: FaultScale = {
  restarts: 3,
  kills: 3,
  cutSeconds: 60,
  cutEverySeconds: 5,
  stallSeconds: 30,
};

/** Waits until `fraction` of the n Databases converged (or 60 s): the fault hits mid-convergence. */
async function midway(ctx: FaultContext, n: number, fraction: number): Promise<void> {
  for (let i = 0; i < 600 && ctx.converged() < n * fraction; i++) await ctx.sleep(100);
}

/** Runs `fault`; resolves when it is over (healed), with the takeover seconds of a leader fault. */
export async function inject(
  fault: FaultName,
  ctx: FaultContext,
  n: number,
  scale: FaultScale,
): Promise<{ takeoverSeconds?: number }> {
  switch (fault) {
    case 'baseline':
      return {};
    case 'apiserver-restart':
      for (let i = 0; i < scale.restarts; i++) {
        await midway(ctx, n, (i + 1) / (scale.restarts + 2));
        await ctx.cp.restartApiServer({ downtimeMs: 2000 });
        ctx.note(`API server restart ${i + 1} at ${ctx.converged()}/${n} converged`);
      }
      return {};
    case 'compaction':
    case 'compaction-restart': {
      await midway(ctx, n, 0.3);
      const rev = await ctx.cp.compact();
      ctx.note(`etcd compacted at revision ${rev} (${ctx.converged()}/${n} converged)`);
      if (fault === 'compaction-restart') {
        await ctx.cp.restartApiServer({ downtimeMs: 2000 });
        const rev2 = await ctx.cp.compact();
        ctx.note(`API server restarted, compacted again at revision ${rev2}`);
      }
      return {};
    }
    case 'operator-sigkill':
      for (let i = 0; i < scale.kills; i++) {
        await midway(ctx, n, (i + 1) / (scale.kills + 2));
        await ctx.killOperator('SIGKILL');
        ctx.note(`operator SIGKILL ${i + 1} at ${ctx.converged()}/${n} converged`);
        await ctx.restartOperator();
      }
      return {};
    case 'leader-sigkill':
    case 'leader-sigterm': {
      await midway(ctx, n, 0.3);
      const { killedAt } = await ctx.killOperator(fault === 'leader-sigkill' ? 'SIGKILL' : 'SIGTERM');
      const t = await ctx.waitNewLeader(120_000);
      const takeoverSeconds = (t - killedAt) / 1000;
      ctx.note(
        `leader ${fault.slice(7).toUpperCase()}: the other replica leads ${takeoverSeconds.toFixed(2)} s later`,
      );
      return { takeoverSeconds };
    }
    case 'proxy-cut': {
      await midway(ctx, n, 0.2);
      const steps = Math.floor(scale.cutSeconds / scale.cutEverySeconds);
      let cut = 0;
      for (let i = 0; i < steps; i++) {
        cut += ctx.proxy.cut();
        await ctx.sleep(scale.cutEverySeconds * 1000);
      }
      ctx.note(`${cut} connections cut in ${steps} cuts every ${scale.cutEverySeconds} s`);
      return {};
    }
    case 'proxy-stall':
      await midway(ctx, n, 0.2);
      ctx.proxy.stall();
      await ctx.sleep(scale.stallSeconds * 1000);
      ctx.proxy.resume();
      ctx.note(`all connections stalled ${scale.stallSeconds} s, then resumed`);
      return {};
    case 'operator-pod-and-apiserver': {
      // The leader pod's container SIGKILLed and, at once, the API server restarted: the kubelet restarts
      // the container while the API server is down; the other replica (or the restarted one) takes over
      // once the API server is back and the killed holder's Lease expired.
      await midway(ctx, n, 0.3);
      const { killedAt } = await ctx.killOperator('SIGKILL');
      await ctx.cp.restartApiServer({ downtimeMs: 2000 });
      const apiBack = (performance.now() - killedAt) / 1000;
      const t = await ctx.waitNewLeader(180_000);
      const takeoverSeconds = (t - killedAt) / 1000;
      const podsBack = ((await ctx.waitOperatorPods(300_000)) - killedAt) / 1000;
      ctx.note(
        `leader container SIGKILLed and API server restarted at ${ctx.converged()}/${n} converged: API server ` +
          `back after ${apiBack.toFixed(1)} s, a new leader after ${takeoverSeconds.toFixed(2)} s, both replicas ` +
          `Ready after ${podsBack.toFixed(1)} s`,
      );
      return { takeoverSeconds };
    }
    case 'proxy-half-open': {
      // Never healed: the open connections stay silent to the end of the run; new ones work. The run
      // measures the reaction from here.
      await midway(ctx, n, 0.2);
      const k = ctx.proxy.halfOpen();
      ctx.note(
        `${k} open connections went half-open at ${ctx.converged()}/${n} converged; new connections work`,
      );
      return {};
    }
  }
}

/** Faults that need two operator processes with leader election. */
export const needsLeaderElection = (f: FaultName): boolean =>
  f === 'leader-sigkill' || f === 'leader-sigterm';

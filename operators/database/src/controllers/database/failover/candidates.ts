/** The candidates' states for a promotion (procedure.ts), through exec: what decide.ts chooses from. */
import { type InstanceState, parseInstanceState, stateCommand } from '../engines/postgres/failover.ts';
import { podOrdinal } from '../roles.ts';
import { type CandidateState, candidatePods, type FailoverInput } from './decide.ts';
import type { Procedure } from './procedure.ts';
import { QUERY_TIMEOUT_MS } from './timing.ts';

/** Each candidate's state, through exec; those that do not answer are left out. */
export async function candidateStates(
  proc: Procedure,
  exclude: string,
): Promise<{ states: CandidateState[]; all: Map<string, InstanceState> }> {
  const input: FailoverInput = {
    statefulSet: proc.name,
    primary: exclude,
    replicas: proc.ctx.spec.spec.replicas,
    pods: proc.ctx.pods,
    nodes: await proc.nodes(proc.ctx.pods.map((p) => p.spec?.nodeName)),
    now: proc.ctx.now(),
    delayMs: proc.delayMs(),
    silentNodes: proc.silentNodes(),
  };
  const states: CandidateState[] = [];
  const all = new Map<string, InstanceState>();
  await Promise.all(
    candidatePods(input).map(async (p) => {
      const pod = p.metadata.name ?? '';
      try {
        const r = await proc.exec(pod, stateCommand(), QUERY_TIMEOUT_MS);
        const st = r.exitCode === 0 ? parseInstanceState(r.stdout) : undefined;
        if (!st) return;
        all.set(pod, st);
        states.push({
          pod,
          ordinal: podOrdinal(proc.name, pod) ?? 0,
          inRecovery: st.inRecovery,
          receivedLsn: st.receivedLsn ?? st.currentLsn,
          replayedLsn: st.replayedLsn,
          timeline: st.timeline,
          systemIdentifier: st.systemIdentifier,
        });
      } catch (err) {
        proc.ctx.log?.info({ pod, err: String(err) }, 'candidate did not answer');
      }
    }),
  );
  return { states, all };
}

/**
 * The failover procedure's start (procedure.ts): decide.ts says whether the primary is lost, or a
 * switchover is asked for; a primary that is only not Ready is asked through exec whether it still
 * answers as the primary. Starting is one status write (status.failover, phase Fencing; primaryEpoch + 1)
 * on top of the version the decision was made on; then the Lease's holder is cleared, so that the former
 * primary's sidecar fences it.
 */
import { ANNOTATION_SWITCHOVER_TO } from '../../../api/v1/database.ts';
import { parseInstanceState, stateCommand } from '../engines/postgres/failover.ts';
import { hadRun } from '../status.ts';
import { decideFailover, FAILOVER_REASONS, type FailoverInput } from './decide.ts';
import { primaryLeaseState } from './lease.ts';
import type { FailoverOutcome, Procedure } from './procedure.ts';
import { CONFIRM_TIMEOUT_MS, isoNow } from './timing.ts';

/** Starts a failover or a switchover when decide.ts says to; otherwise says when to look again. */
export async function maybeStart(proc: Procedure): Promise<FailoverOutcome> {
  // A Database that never ran has no primary to lose: a new one is slow to become ready (initdb, the
  // first clones), and its replicas hold nothing the primary could lose.
  if (!hadRun(proc.status)) return proc.done(false);
  const primaryPod = proc.pod(proc.primary);
  const switchoverTo = proc.db.metadata.annotations?.[ANNOTATION_SWITCHOVER_TO];
  const input: FailoverInput = {
    statefulSet: proc.name,
    primary: proc.primary,
    replicas: proc.ctx.spec.spec.replicas,
    pods: proc.ctx.pods,
    nodes: new Map(),
    now: proc.ctx.now(),
    delayMs: proc.delayMs(),
    switchoverTo,
    silentNodes: proc.silentNodes(),
  };
  input.nodes = await proc.nodes([primaryPod?.spec?.nodeName]);
  let leaseRecheckMs: number | undefined;
  const view = await proc.leaseView();
  if (view) {
    const state = primaryLeaseState({ ...view, primary: proc.primary });
    if (state.kind === 'expired') input.leaseExpired = true;
    if (state.kind === 'held') {
      leaseRecheckMs = state.recheckMs + 100;
      // Its sidecar renews: it fences the primary when the failover clears the holder, so a silent
      // node may count against the primary (decide.ts).
      input.leaseHeld = true;
    }
  }
  let decision = decideFailover(input);
  if (decision.kind === 'start' || decision.kind === 'blocked') {
    // Decide again knowing the candidates' nodes (one read each, only when it matters).
    input.nodes = await proc.nodes(proc.ctx.pods.map((p) => p.spec?.nodeName));
    decision = decideFailover(input);
  }
  switch (decision.kind) {
    case 'none':
      return { ...proc.done(false), ...(leaseRecheckMs !== undefined ? { leaseRecheckMs } : {}) };
    case 'wait':
      proc.ctx.log?.info({ reason: decision.reason, afterMs: decision.afterMs }, decision.message);
      return proc.done(false, decision.afterMs + 100);
    case 'blocked':
      proc.ctx.warning('FailoverBlocked', 'Failover', decision.message);
      return proc.done(false, 5_000);
    case 'refuse':
      proc.ctx.warning('SwitchoverRefused', 'Switchover', decision.message);
      await proc.removeAnnotation();
      return proc.done(false);
  }
  if (decision.reason === FAILOVER_REASONS.notReady) {
    // Not Ready may only mean slow: a probe that timed out on a loaded node. Ask the primary itself
    // (a generous timeout); one that answers as a primary is not failed over (its own probe decides
    // again); one that does not answer, or answers in recovery, is.
    const answer = await proc
      .exec(decision.from, stateCommand(), CONFIRM_TIMEOUT_MS)
      .then((r) => (r.exitCode === 0 ? parseInstanceState(r.stdout) : undefined))
      .catch(() => undefined);
    if (answer && !answer.inRecovery) {
      proc.ctx.log?.info(
        { primary: decision.from },
        `${decision.message}, but it answers as the primary: no failover`,
      );
      return proc.done(false, 5_000);
    }
  }
  const started = isoNow(proc.ctx.now());
  await proc.write((s) => {
    s.failover = {
      reason: decision.reason,
      from: decision.from,
      ...(decision.to ? { to: decision.to } : {}),
      phase: 'Fencing',
      ...(decision.switchover ? { switchover: true } : {}),
      startedAt: started,
    };
    s.primaryEpoch = (s.primaryEpoch ?? 0) + 1;
  });
  if (switchoverTo !== undefined) await proc.removeAnnotation();
  await proc.clearLeaseHolder();
  const labels = { namespace: proc.ns, database: proc.name };
  if (decision.switchover) proc.ctx.metrics?.switchovers.inc(labels);
  else proc.ctx.metrics?.failovers.inc({ ...labels, reason: decision.reason });
  proc.ctx.normal(
    decision.switchover ? 'SwitchoverStarted' : 'FailoverStarted',
    decision.switchover ? 'Switchover' : 'Failover',
    `${decision.message}: fencing ${decision.from}`,
  );
  return proc.done(true, 0);
}

/**
 * The Database's status, computed from what really exists (the StatefulSet's status and the pods'
 * readiness), never assumed. Pure: reconcile.ts gathers the observations and writes the result with
 * patchStatus, which skips the write when nothing changed.
 *
 * Phases:
 *   Pending       nothing exists yet
 *   Provisioning  a new Database whose replicas are not all ready yet
 *   Running       readyReplicas == spec.replicas, the StatefulSet's currentRevision == updateRevision and
 *                 its controller has observed its latest generation
 *   Updating      a Database that ran before is rolling (updateRevision != currentRevision), scaling or
 *                 having its StatefulSet recreated
 *   Degraded      a Database that ran before has replicas that are not ready (and nothing is rolling)
 *   Failed        a terminal error (the message says why and what to do): the API refused a child, an
 *                 object under a child's name is not the operator's, or the credentials Secret of existing
 *                 data is missing
 *   Deleting      metadata.deletionTimestamp is set
 * Conditions Ready, Progressing and Degraded carry a reason and a message; their lastTransitionTime only
 * changes when their status does (setCondition).
 */
import {
  type Condition,
  type ConditionInput,
  type Now,
  type Pod,
  type StatefulSet,
  setCondition,
} from '@opkit/runtime';
import {
  CONDITION_DEGRADED,
  CONDITION_PROGRESSING,
  CONDITION_READY,
  type Database,
  type DatabaseStatus,
  type Phase,
} from '../../api/v1/database.ts';
import type { ClusterObservation } from './engines/types.ts';
import { describeNotReady, type InstanceStatus } from './instances.ts';
import { podOrdinal } from './roles.ts';
import type { StorageReport } from './storage.ts';

export { CONDITION_DEGRADED, CONDITION_PROGRESSING, CONDITION_READY, type DatabaseStatus, type Phase };

/** A reconcile failure that retrying cannot fix; it makes the phase Failed. */
export interface Failure {
  /** CamelCase, e.g. 'InvalidStatefulSet'. */
  reason: string;
  message: string;
}

export interface Observed {
  /** The live StatefulSet (undefined when it does not exist). */
  statefulSet: StatefulSet | undefined;
  /** The StatefulSet's pods. */
  pods: readonly Pod[];
  /** The StatefulSet's name (`<name>`). */
  statefulSetName: string;
  /** The StatefulSet is being recreated with a new volumeClaimTemplate (orphan delete in flight). */
  recreating?: boolean;
  /** The credentials Secret's name, once it exists. */
  secretName?: string;
  endpoints?: DatabaseStatus['endpoints'];
  /** The pod label selector (`k=v,k=v`), for the scale subresource. */
  selector?: string;
  storage?: StorageReport;
  failure?: Failure;
  /** The engine's cluster record and the instances' reports (postgres): recorded in the status. */
  cluster?: ClusterObservation;
  /** postgres: each instance's state (status.instances; instances.ts). */
  instances?: InstanceStatus[];
  /**
   * false when the reconcile stopped before the spec was applied (a step failed): observedGeneration
   * then keeps the generation last applied. Default true.
   */
  applied?: boolean;
}

export function isPodReady(pod: Pod): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/**
 * Ready instances: postgres counts its instances' pods as they are now (status.instances), since the
 * StatefulSet's readyReplicas lags (a pod being deleted still counts there); otherwise the StatefulSet's.
 */
function readyCount(o: Observed): number {
  if (o.instances) return o.instances.filter((i) => i.ready).length;
  return o.statefulSet?.status?.readyReplicas ?? 0;
}

/** Phases in which the Database had been running (so lost replicas are Degraded, not Provisioning). */
export function hadRun(prev: DatabaseStatus | undefined): boolean {
  const phase = prev?.phase as Phase | undefined;
  if (phase === 'Running' || phase === 'Updating' || phase === 'Degraded') return true;
  // A failure after running: remember through the Ready condition's last True.
  return (phase === 'Failed' || phase === 'Deleting') && (prev?.readyReplicas ?? 0) > 0;
}

interface PhaseDecision {
  phase: Phase;
  /** Why (a CamelCase reason) and a sentence. */
  reason: string;
  message: string;
}

/** The phase decision, with the instances that refused to start named in its message. */
function decidePhase(db: Database, prev: DatabaseStatus | undefined, o: Observed): PhaseDecision {
  const d = withInstances(decideBasePhase(db, prev, o), o);
  const problems = o.cluster?.problems ?? [];
  if (problems.length === 0 || d.phase === 'Failed' || d.phase === 'Deleting') return d;
  return {
    ...d,
    reason: d.phase === 'Running' ? d.reason : 'InstanceRefused',
    message: `${d.message}; ${problems.map((p) => `${p.pod} refused to start (${p.reason}): ${p.message}`).join('; ')}`,
  };
}

/** Names the instances that are not ready, and why, unless Running, Failed or Deleting. */
function withInstances(d: PhaseDecision, o: Observed): PhaseDecision {
  if (d.phase === 'Running' || d.phase === 'Failed' || d.phase === 'Deleting') return d;
  const down = describeNotReady(o.instances);
  return down ? { ...d, message: `${d.message}; ${down}` } : d;
}

function decideBasePhase(db: Database, prev: DatabaseStatus | undefined, o: Observed): PhaseDecision {
  const want = db.spec.replicas ?? 1;
  const sts = o.statefulSet;
  const st = sts?.status;
  const ready = readyCount(o);
  if (db.metadata.deletionTimestamp) {
    return { phase: 'Deleting', reason: 'Deleting', message: 'the Database is being deleted' };
  }
  if (o.failure) return { phase: 'Failed', reason: o.failure.reason, message: o.failure.message };
  const ran = hadRun(prev);
  if (!sts || o.recreating || sts.metadata.deletionTimestamp) {
    if (o.recreating || (sts?.metadata.deletionTimestamp && ran)) {
      return {
        phase: ran ? 'Updating' : 'Provisioning',
        reason: 'RecreatingStatefulSet',
        message: 'the StatefulSet is being recreated with a new volume claim template; pods and volumes stay',
      };
    }
    if (ran) {
      return {
        phase: 'Updating',
        reason: 'StatefulSetMissing',
        message: 'the StatefulSet is being recreated',
      };
    }
    return { phase: 'Pending', reason: 'Pending', message: 'the StatefulSet does not exist yet' };
  }
  const observedGen = st?.observedGeneration ?? 0;
  const generation = sts.metadata.generation ?? 0;
  const synced = observedGen >= generation && st !== undefined;
  const current = st?.currentRevision;
  const update = st?.updateRevision;
  // Under OnDelete (postgres: the operator rolls the pods) the StatefulSet controller never moves
  // currentRevision: rolled once every pod runs the update revision.
  const rolled =
    (Boolean(current) && current === update) ||
    (sts.spec?.updateStrategy?.type === 'OnDelete' &&
      Boolean(update) &&
      (st?.updatedReplicas ?? 0) >= want &&
      (st?.replicas ?? 0) === want);
  const count = st?.replicas ?? 0;
  const scaling = (sts.spec?.replicas ?? 1) !== want || count !== want;
  const msg = `${ready}/${want} replicas ready`;
  if (synced && rolled && !scaling && ready >= want && (st?.updatedReplicas ?? want) >= want) {
    return { phase: 'Running', reason: 'AllReplicasReady', message: msg };
  }
  if (!ran) return { phase: 'Provisioning', reason: 'Provisioning', message: msg };
  if (!synced || !rolled) {
    return {
      phase: 'Updating',
      reason: 'RollingUpdate',
      message: `rolling out revision ${update ?? '(unknown)'}: ${st?.updatedReplicas ?? 0}/${want} pods updated; ${msg}`,
    };
  }
  // Pods missing: scaling towards a new spec.replicas, or pods lost after this spec was reached.
  const reached =
    (prev?.phase === 'Running' || prev?.phase === 'Degraded') &&
    prev.observedGeneration !== undefined &&
    prev.observedGeneration === db.metadata.generation;
  if ((sts.spec?.replicas ?? 1) !== want || (scaling && !reached)) {
    return {
      phase: 'Updating',
      reason: 'Scaling',
      message: `scaling from ${count} to ${want} replicas; ${msg}`,
    };
  }
  return {
    phase: 'Degraded',
    reason: 'ReplicasNotReady',
    message: count < want ? `${count}/${want} pods exist; ${msg}` : msg,
  };
}

/**
 * The new status: `prev` (the status as stored) carried forward, everything observable recomputed.
 * Deep-equals `prev` when nothing changed, so the caller's patchStatus writes nothing.
 */
export function computeStatus(
  db: Database,
  prev: DatabaseStatus | undefined,
  o: Observed,
  now?: Now,
): DatabaseStatus {
  const decision = decidePhase(db, prev, o);
  const want = db.spec.replicas ?? 1;
  const st = o.statefulSet?.status;
  const generation = db.metadata.generation;

  const primaryName = o.cluster?.record.primary;
  const primary = o.pods.find((p) =>
    primaryName ? p.metadata.name === primaryName : podOrdinal(o.statefulSetName, p.metadata.name) === 0,
  );
  const status: DatabaseStatus = { ...(prev ?? {}) } as DatabaseStatus;
  const set = (key: string, value: unknown): void => {
    const record = status as Record<string, unknown>;
    if (value === undefined) delete record[key];
    else record[key] = value;
  };
  set('phase', decision.phase);
  set('replicas', st?.replicas ?? 0);
  set('readyReplicas', readyCount(o));
  const fenced = o.cluster?.record.fenced === true;
  set('currentPrimary', primary && !fenced && isPodReady(primary) ? primary.metadata.name : undefined);
  if (o.cluster) {
    set('targetPrimary', o.cluster.record.primary);
    set('systemIdentifier', o.cluster.record.systemIdentifier);
    const sync = db.spec.synchronousReplicas ?? 0;
    set('replicationMode', sync > 0 ? `Synchronous (ANY ${sync})` : 'Asynchronous');
    if (status.timeline === undefined && o.cluster.timeline !== undefined)
      set('timeline', o.cluster.timeline);
  }
  if (o.instances !== undefined) set('instances', o.instances);
  if (o.endpoints !== undefined) set('endpoints', o.endpoints);
  if (o.secretName !== undefined) set('secretName', o.secretName);
  if (o.selector !== undefined) set('selector', o.selector);
  // The generation whose spec the children reflect: only moves when this reconcile applied it.
  if (generation !== undefined && o.applied !== false) set('observedGeneration', generation);

  const storage = o.storage;
  const storageFailed = storage && storage.failed.length > 0;
  const storagePending = storage && storage.pending.length > 0;

  // Ready
  const ready: ConditionInput = {
    type: CONDITION_READY,
    status: decision.phase === 'Running' ? 'True' : 'False',
    reason: decision.reason,
    message: decision.message,
  };
  // Progressing
  let progressing: ConditionInput;
  if (decision.phase === 'Provisioning' || decision.phase === 'Updating' || decision.phase === 'Pending') {
    progressing = {
      type: CONDITION_PROGRESSING,
      status: 'True',
      reason: decision.reason,
      message: decision.message,
    };
  } else if (storagePending && decision.phase !== 'Failed' && decision.phase !== 'Deleting') {
    progressing = {
      type: CONDITION_PROGRESSING,
      status: 'True',
      reason: 'StorageExpanding',
      message: `expanding volumes to ${db.spec.storage}: waiting for ${storage.pending.join(', ')}`,
    };
  } else {
    progressing = {
      type: CONDITION_PROGRESSING,
      status: 'False',
      reason: decision.phase === 'Running' ? 'ReconcileComplete' : decision.reason,
      message:
        decision.phase === 'Running'
          ? `${want} of ${want} replicas ready on the latest revision`
          : decision.message,
    };
  }
  // Degraded
  let degraded: ConditionInput;
  if (decision.phase === 'Failed' || decision.phase === 'Degraded') {
    degraded = {
      type: CONDITION_DEGRADED,
      status: 'True',
      reason: decision.reason,
      message: decision.message,
    };
  } else if (storageFailed && decision.phase !== 'Deleting') {
    degraded = {
      type: CONDITION_DEGRADED,
      status: 'True',
      reason: 'StorageExpansionFailed',
      message: `cannot expand volumes to ${db.spec.storage}: ${storage.failed
        .map((f) => `${f.claim}: ${f.message}`)
        .join('; ')}`,
    };
  } else {
    degraded = {
      type: CONDITION_DEGRADED,
      status: 'False',
      reason: 'AsExpected',
      message: 'no problems found',
    };
  }

  let conditions: Condition[] = (prev?.conditions as Condition[] | undefined) ?? [];
  for (const c of [ready, progressing, degraded]) {
    conditions = setCondition(
      conditions,
      { ...c, ...(generation !== undefined ? { observedGeneration: generation } : {}) },
      now,
    );
  }
  set('conditions', conditions);
  return status;
}

/**
 * One line for logs and the demo: `Running ready 3/3 Ready=True Progressing=False Degraded=False`
 * (ready replicas out of `desired`, the spec's replicas; out of status.replicas without it).
 */
export function describeStatus(status: DatabaseStatus | undefined, desired?: number): string {
  if (!status) return '(no status)';
  const conds = ((status.conditions as Condition[] | undefined) ?? [])
    .map(
      (c) =>
        `${c.type}=${c.status}${c.status === (c.type === 'Ready' ? 'False' : 'True') ? `(${c.reason})` : ''}`,
    )
    .join(' ');
  return `${status.phase ?? '-'} ready ${status.readyReplicas ?? 0}/${desired ?? status.replicas ?? 0} ${conds}`.trim();
}

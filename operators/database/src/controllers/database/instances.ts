/**
 * status.instances (postgres): each instance spec.replicas asks for, from its pod as it is (or its absence)
 * and what its last start reported, and the Events that say when one changed. Pure.
 *   - ready is the pod's Ready condition, so for a replica: streaming from the current primary within the
 *     lag bound (health.sh); when not ready, a reason and a message say why, from the pod: missing,
 *     terminating, not schedulable, bootstrapping, crash-looping (with its start's refusal), starting, or its
 *     readiness probe failing;
 *   - result/resultAt/timeline: what instance.sh did at the pod's last start (initialized, cloned, existing,
 *     rewound, recloned, or a refusal), from its termination message.
 * Events, from the previous status to the new one: InstanceNotReady (Warning) when a ready instance stops
 * being ready, InstanceReady when it is again, and one per start that did something to the data:
 * InstanceInitialized, InstanceCloned, InstanceRepaired (rewound, or cloned again).
 */
import type { Pod } from '@opkit/runtime';
import type { DatabaseStatus } from '../../api/v1/database.ts';
import type { InstanceStart } from './engines/types.ts';

export type InstanceStatus = NonNullable<DatabaseStatus['instances']>[number];

export interface InstanceEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  note: string;
}

type ContainerStatus = NonNullable<NonNullable<Pod['status']>['containerStatuses']>[number];

function lastMessage(c: ContainerStatus | undefined): string | undefined {
  const m = c?.state?.terminated?.message ?? c?.lastState?.terminated?.message;
  const line = m ? /^message=(.*)$/m.exec(m)?.[1] : undefined;
  return line?.trim() || undefined;
}

/** Why a pod that is not Ready is not, from its status (a missing pod: PodMissing). */
export function notReadyReason(
  pod: Pod | undefined,
  container = 'postgres',
  init = 'bootstrap',
): { reason: string; message: string } {
  if (!pod) return { reason: 'PodMissing', message: 'the pod does not exist' };
  const name = pod.metadata.name ?? '';
  if (pod.metadata.deletionTimestamp) return { reason: 'Terminating', message: `${name} is being deleted` };
  const st = pod.status;
  const scheduled = st?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False') {
    return {
      reason: scheduled.reason || 'Unschedulable',
      message: `${name} cannot be scheduled: ${scheduled.message ?? 'no node fits'}`,
    };
  }
  const boot = st?.initContainerStatuses?.find((c) => c.name === init);
  if (boot && !(boot.state?.terminated && boot.state.terminated.exitCode === 0)) {
    if (boot.state?.running)
      return { reason: 'Bootstrapping', message: `${name}: instance.sh is preparing the data directory` };
    const refused = lastMessage(boot);
    return {
      reason: boot.state?.waiting?.reason || 'Bootstrapping',
      message: `${name}: the bootstrap init container has not completed${refused ? `: ${refused}` : ''}`,
    };
  }
  const server = st?.containerStatuses?.find((c) => c.name === container);
  if (!server) return { reason: 'Pending', message: `${name} is ${st?.phase ?? 'Pending'}` };
  if (server.state?.waiting) {
    const refused = lastMessage(server);
    return {
      reason: server.state.waiting.reason || 'Waiting',
      message: `${name}: the ${container} container is waiting${refused ? `: ${refused}` : ''}`,
    };
  }
  if (server.state?.running && server.started === false) {
    return { reason: 'Starting', message: `${name}: the server is starting (startup probe)` };
  }
  if (server.state?.running) {
    return {
      reason: 'ReadinessProbeFailing',
      message:
        `${name}: its readiness probe (health.sh ready) fails: a replica not streaming from the primary ` +
        `within the lag bound, or a primary not accepting writes (kubectl describe pod ${name} shows why)`,
    };
  }
  return { reason: 'NotReady', message: `${name} is not Ready` };
}

function isReady(pod: Pod | undefined): boolean {
  if (!pod || pod.metadata.deletionTimestamp) return false;
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** status.instances: `<sts>-0` .. `<sts>-(replicas-1)`, in ordinal order. */
export function instanceStatuses(
  statefulSetName: string,
  replicas: number,
  primary: string,
  pods: readonly Pod[],
  starts: Readonly<Record<string, InstanceStart>> = {},
): InstanceStatus[] {
  return Array.from({ length: replicas }, (_, i) => {
    const name = `${statefulSetName}-${i}`;
    const pod = pods.find((p) => p.metadata.name === name);
    const ready = isReady(pod);
    const start = pod ? starts[name] : undefined;
    const out: InstanceStatus = { name, role: name === primary ? 'primary' : 'replica', ready };
    if (!ready) Object.assign(out, notReadyReason(pod));
    if (start) {
      out.result = start.result;
      if (start.at !== undefined) out.resultAt = new Date(start.at).toISOString();
      if (start.timeline !== undefined) out.timeline = start.timeline;
    }
    return out;
  });
}

/** What the new start of an instance did, as an Event (none for a start that changed nothing). */
function startEvent(
  i: InstanceStatus,
  primary: string,
  message: string | undefined,
): InstanceEvent | undefined {
  const from = `from the primary ${primary}`;
  switch (i.result) {
    case 'initialized':
      return { type: 'Normal', reason: 'InstanceInitialized', note: `${i.name}: initialized a new cluster` };
    case 'cloned':
      return { type: 'Normal', reason: 'InstanceCloned', note: `${i.name}: cloned ${from}` };
    case 'rewound':
      return {
        type: 'Normal',
        reason: 'InstanceRepaired',
        note: `${i.name}: rewound with pg_rewind to follow the primary ${primary}`,
      };
    case 'recloned':
      return {
        type: 'Normal',
        reason: 'InstanceRepaired',
        note: `${i.name}: cloned again ${from}${message ? `: ${message}` : ''}`,
      };
    default:
      return undefined;
  }
}

/** The Events from the previous status.instances to the new one. */
export function instanceEvents(
  prev: readonly InstanceStatus[] | undefined,
  next: readonly InstanceStatus[],
  primary: string,
  starts: Readonly<Record<string, InstanceStart>> = {},
): InstanceEvent[] {
  const before = new Map((prev ?? []).map((i) => [i.name, i]));
  const out: InstanceEvent[] = [];
  for (const n of next) {
    const p = before.get(n.name);
    if (n.result && (n.result !== p?.result || n.resultAt !== p?.resultAt)) {
      const e = startEvent(n, primary, starts[n.name]?.message);
      if (e) out.push(e);
    }
    if (p?.ready && !n.ready) {
      out.push({
        type: 'Warning',
        reason: 'InstanceNotReady',
        note: `${n.name} (${n.role}) is not ready: ${n.reason}: ${n.message}`,
      });
    } else if (p && !p.ready && n.ready) {
      out.push({
        type: 'Normal',
        reason: 'InstanceReady',
        note:
          n.role === 'replica'
            ? `${n.name} (replica) is ready: streaming from the primary ${primary}`
            : `${n.name} (primary) is ready`,
      });
    }
  }
  return out;
}

/** "pg-2 not ready (Unschedulable: ...)" for each instance that is not ready, or undefined. */
export function describeNotReady(instances: readonly InstanceStatus[] | undefined): string | undefined {
  const down = (instances ?? []).filter((i) => !i.ready);
  if (down.length === 0) return undefined;
  return down.map((i) => `${i.name} not ready (${i.reason}: ${i.message})`).join('; ');
}

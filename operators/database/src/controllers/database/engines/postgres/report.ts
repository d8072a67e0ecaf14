/**
 * What instance.sh reports in its container's termination message (key=value lines, no secret), and how
 * the operator reads it from a pod's status: the bootstrap init container's message, or the server
 * container's last termination (its start refused), whichever is newer.
 */
import type { Pod } from '@opkit/runtime';
import { INSTANCE_RESULTS, type InstanceResult } from './instance.ts';

export interface InstanceReport {
  result: InstanceResult | undefined;
  systemIdentifier: string | undefined;
  timeline: number | undefined;
  message: string | undefined;
  /** When the container that wrote it finished (ms since the epoch), when known. */
  at?: number;
}

const RESULTS: ReadonlySet<string> = new Set(Object.values(INSTANCE_RESULTS));
/** The results that are refusals (the script exited non-zero). */
export const REFUSALS: ReadonlySet<InstanceResult> = new Set([
  INSTANCE_RESULTS.emptyPrimary,
  INSTANCE_RESULTS.foreign,
  INSTANCE_RESULTS.foreignPrimary,
  INSTANCE_RESULTS.standbyAsPrimary,
  INSTANCE_RESULTS.primaryUnreachable,
  INSTANCE_RESULTS.imageVersion,
]);

/** Parses a termination message; unknown keys and malformed lines are ignored. */
export function parseInstanceReport(text: string): InstanceReport {
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) values.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
  }
  const result = values.get('result');
  const id = values.get('system-identifier');
  const tli = Number(values.get('timeline'));
  return {
    result: result && RESULTS.has(result) ? (result as InstanceResult) : undefined,
    systemIdentifier: id && /^\d+$/.test(id) ? id : undefined,
    timeline: Number.isInteger(tli) && tli > 0 ? tli : undefined,
    message: values.get('message') || undefined,
  };
}

type ContainerStatus = NonNullable<NonNullable<Pod['status']>['containerStatuses']>[number];
type Terminated = NonNullable<NonNullable<ContainerStatus['state']>['terminated']>;

function terminations(s: ContainerStatus | undefined): Terminated[] {
  return [s?.state?.terminated, s?.lastState?.terminated].filter((t): t is Terminated => Boolean(t?.message));
}

/** The newest report of a pod's instance.sh, or undefined when none is there (yet). */
export function podReport(
  pod: Pod,
  initContainer = 'bootstrap',
  container = 'postgres',
): InstanceReport | undefined {
  const st = pod.status;
  const candidates = [
    ...terminations(st?.initContainerStatuses?.find((c) => c.name === initContainer)),
    ...terminations(st?.containerStatuses?.find((c) => c.name === container)),
  ];
  let best: InstanceReport | undefined;
  for (const t of candidates) {
    const report = parseInstanceReport(t.message ?? '');
    if (report.result === undefined) continue;
    // The API's RFC 3339 string (a Date in the typed model).
    const ms = t.finishedAt ? new Date(t.finishedAt as unknown as string).getTime() : Number.NaN;
    const at = Number.isNaN(ms) ? undefined : ms;
    if (!best || (at ?? 0) > (best.at ?? 0)) best = { ...report, ...(at !== undefined ? { at } : {}) };
  }
  return best;
}

/**
 * The operator's record of a PostgreSQL cluster, from what it recorded before and what the instances
 * reported (podReport): which instance is the primary and the cluster's system identifier. Pure.
 *   - the system identifier is recorded once, from the designated primary's report of initdb or of its
 *     existing data; from then on it is the cluster's identity, handed to every pod;
 *   - the designated primary reporting an empty data directory in an initialized cluster is a failure
 *     (the volume was lost): PrimaryDataLost when other instances hold the cluster's data, DataLost when
 *     none does. Never silently re-initialized;
 *   - instances that refused to start (another cluster's data, ...) are problems the status names.
 */
import type { Pod } from '@opkit/runtime';
import { initialPrimaryPod } from '../../desired/names.ts';
import { compareStrings } from '../../order.ts';
import type { ClusterObservation, ClusterStatus, InstanceProblem, InstanceStart } from '../types.ts';
import { INSTANCE_RESULTS } from './instance.ts';
import { primaryWithoutTls } from './primary-tls.ts';
import { podReport, REFUSALS } from './report.ts';

export function observePostgres(
  db: { metadata: { name?: string } },
  prev: ClusterStatus | undefined,
  pods: readonly Pod[],
): ClusterObservation {
  const primary = prev?.targetPrimary ?? initialPrimaryPod(db);
  const reports = pods
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => ({ pod: p.metadata.name ?? '', report: podReport(p) }))
    .sort((a, b) => compareStrings(a.pod, b.pod));
  const own = reports.find((r) => r.pod === primary)?.report;
  let systemIdentifier = prev?.systemIdentifier;
  if (
    !systemIdentifier &&
    own?.systemIdentifier &&
    (own.result === INSTANCE_RESULTS.initialized || own.result === INSTANCE_RESULTS.existing)
  ) {
    systemIdentifier = own.systemIdentifier;
  }
  const withoutTls = primaryWithoutTls(pods, primary);
  const record = {
    primary,
    ...(systemIdentifier ? { systemIdentifier } : {}),
    ...(prev?.primaryEpoch ? { epoch: prev.primaryEpoch } : {}),
    ...(withoutTls ? { primaryWithoutTls: withoutTls } : {}),
  };
  const starts: Record<string, InstanceStart> = {};
  for (const { pod, report } of reports) {
    if (!report?.result) continue;
    starts[pod] = {
      result: report.result,
      ...(report.at !== undefined ? { at: report.at } : {}),
      ...(report.timeline !== undefined ? { timeline: report.timeline } : {}),
      ...(report.message !== undefined ? { message: report.message } : {}),
    };
  }
  const problems: InstanceProblem[] = reports.flatMap(({ pod, report }) =>
    report?.result && REFUSALS.has(report.result)
      ? [{ pod, reason: report.result, message: report.message ?? report.result }]
      : [],
  );
  const timeline = own?.timeline !== undefined ? { timeline: own.timeline } : {};
  if (own?.result !== INSTANCE_RESULTS.emptyPrimary || !systemIdentifier)
    return { record, problems, reports: starts, ...timeline };
  const holders = reports
    .filter(
      (r) =>
        r.pod !== primary &&
        r.report?.systemIdentifier === systemIdentifier &&
        r.report.result !== undefined &&
        !REFUSALS.has(r.report.result),
    )
    .map((r) => r.pod);
  const failure =
    holders.length === 0
      ? {
          reason: 'DataLost',
          message:
            `${primary}, the primary, has an empty data directory and no other instance holds this ` +
            `Database's data (system identifier ${systemIdentifier}): every volume was lost. The operator ` +
            'does not initialize a new, empty database in its place. Restore the volumes from a backup, or ' +
            'delete and recreate the Database to start over empty.',
        }
      : {
          reason: 'PrimaryDataLost',
          message:
            `${primary}, the primary, has an empty data directory (its volume was lost or recreated); ` +
            `${holders.join(', ')} hold this Database's data (system identifier ${systemIdentifier}). The ` +
            `operator does not initialize a new, empty primary over it: ${primary} stays down until a ` +
            'replica holding the data is the primary or its volume is restored.',
        };
  return { record, problems, failure, reports: starts, ...timeline };
}

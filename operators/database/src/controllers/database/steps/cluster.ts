/** What runs: the cluster record and the failover procedure (postgres), and the StatefulSet and pods after a failure. */
import { isControlledBy, Pods, StatefulSets } from '@opkit/runtime';
import { selectorString } from '../desired/labels.ts';
import { engineFor } from '../engines/index.ts';
import { PrimaryLeaseAccess } from '../failover/lease-io.ts';
import { liveConfigData, runFailover } from '../failover/procedure.ts';
import type { Run } from '../run.ts';
import { leaseMemory } from './lease.ts';

/**
 * The cluster record (designated primary, system identifier) from the recorded status and the pods'
 * reports: it goes into the ConfigMap the pods read, the role labels and the status.
 */
export async function observeCluster(run: Run): Promise<void> {
  const engine = engineFor(run.spec.spec.engine);
  if (!engine.observe) return;
  run.pods = await run.deps.reader.list(Pods, {
    namespace: run.ns,
    labelSelector: selectorString(run.spec),
  });
  run.cluster = engine.observe(run.spec, run.db.status, run.pods);
  const exec = run.deps.exec;
  if (!engine.failover || !exec || run.spec.spec.replicas < 2) return;
  const outcome = await run.step('Pod', run.db.metadata.name ?? '', async () =>
    runFailover({
      client: run.client,
      exec,
      db: run.db,
      spec: run.spec,
      pods: run.pods,
      configData: await liveConfigData(run.deps.reader, run.db),
      now: run.deps.clock ?? Date.now,
      signal: run.signal,
      log: run.log,
      normal: (reason, action, note) => run.normal(reason, action, note),
      warning: (reason, action, note) => run.warning(reason, action, note),
      metrics: run.deps.failoverMetrics,
      lease: new PrimaryLeaseAccess(run.client, run.db, leaseMemory(run), run.signal),
      heartbeats: run.deps.heartbeats,
    }),
  );
  run.db = outcome.db;
  run.failoverRequeueMs = outcome.requeueMs;
  run.leaseRecheckMs = outcome.leaseRecheckMs;
  run.cluster = engine.observe(run.spec, run.db.status, run.pods);
  if (outcome.fenced) run.cluster.record.fenced = true;
}

/**
 * After a step failed: the StatefulSet and pods as they are (reads only), so the status keeps telling
 * what runs. Best effort.
 */
export async function observeAfterFailure(run: Run, stsName: string): Promise<void> {
  try {
    if (!run.sts) {
      const live = await run.deps.reader.get(StatefulSets, { namespace: run.ns, name: stsName });
      if (live && isControlledBy(live, run.db)) run.sts = live;
    }
    if (run.sts && run.pods.length === 0) {
      run.pods = await run.deps.reader.list(Pods, {
        namespace: run.ns,
        labelSelector: selectorString(run.spec),
      });
    }
  } catch {
    // The status then shows less; the failure is what it reports.
  }
}

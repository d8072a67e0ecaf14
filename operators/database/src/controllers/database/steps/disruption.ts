/** The PodDisruptionBudgets: the pods' (replicas > 1 only) and the primary's. */
import { PodDisruptionBudgets } from '@opkit/runtime';
import { podDisruptionBudget, primaryDisruptionBudget } from '../desired/index.ts';
import type { Run } from '../run.ts';

export async function ensureDisruptionBudgets(run: Run): Promise<void> {
  const desired = podDisruptionBudget(run.spec);
  if (desired) await run.ensure(PodDisruptionBudgets, desired);
  else await run.remove(PodDisruptionBudgets, run.db.metadata.name ?? '');
  const primary = primaryDisruptionBudget(run.spec);
  if (primary) await run.ensure(PodDisruptionBudgets, primary);
  else await run.remove(PodDisruptionBudgets, `${run.db.metadata.name ?? ''}-primary`);
}

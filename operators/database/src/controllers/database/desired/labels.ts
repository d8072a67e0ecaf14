/**
 * Labels: every object the operator builds carries the common labels; the pods also carry the user's
 * podLabels (which can never override the operator's own). The role label is not in the pod template: the
 * operator sets it on the running pods (so a role change never rolls the StatefulSet).
 */
import {
  type Database,
  type DefaultedDatabase,
  LABEL_COMPONENT,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  LABEL_ROLE,
  MANAGED_BY,
  OPERATOR_LABELS,
  ROLE_PRIMARY,
  ROLE_REPLICA,
  type Role,
} from '../../../api/v1/database.ts';
import { compareStrings } from '../order.ts';
import { initialPrimaryPod } from './names.ts';

type AnyDatabase = Database | DefaultedDatabase;

/** The StatefulSet's selector (immutable, so it holds only what never changes: engine and name). */
export function selectorLabels(db: AnyDatabase): Record<string, string> {
  return {
    [LABEL_NAME]: db.spec.engine,
    [LABEL_INSTANCE]: db.metadata.name ?? '',
    [LABEL_MANAGED_BY]: MANAGED_BY,
  };
}

/** Labels of a child object; `component` says what it is ('database', 'credentials', 'config', ...). */
export function commonLabels(db: AnyDatabase, component: string): Record<string, string> {
  return { ...selectorLabels(db), [LABEL_COMPONENT]: component };
}

/** Labels of the pod template: the user's podLabels, then the operator's (which win). */
export function podTemplateLabels(db: AnyDatabase): Record<string, string> {
  const user: Record<string, string> = { ...(db.spec.podLabels ?? {}) };
  for (const key of OPERATOR_LABELS) delete user[key];
  return { ...user, ...commonLabels(db, 'database') };
}

/** The pods' label selector as a string (`k=v,k=v`), for status.selector (scale subresource, HPA). */
export function selectorString(db: AnyDatabase): string {
  return Object.entries(selectorLabels(db))
    .sort(([a], [b]) => compareStrings(a, b))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/** Selector of the read-write Service: the pods labelled primary. */
export function primarySelector(db: AnyDatabase): Record<string, string> {
  return { ...selectorLabels(db), [LABEL_ROLE]: ROLE_PRIMARY };
}

/** Selector of the read-only Service: the pods labelled replica. */
export function replicaSelector(db: AnyDatabase): Record<string, string> {
  return { ...selectorLabels(db), [LABEL_ROLE]: ROLE_REPLICA };
}

/**
 * The role a pod should carry. `primary` is the current primary's pod name (status.currentPrimary);
 * without one, the pod that starts as the primary (`<name>-0`).
 */
export function desiredRole(db: AnyDatabase, pod: string, primary?: string): Role {
  return pod === (primary ?? initialPrimaryPod(db)) ? ROLE_PRIMARY : ROLE_REPLICA;
}

/**
 * metav1.Condition helpers, with the semantics of apimachinery's meta.SetStatusCondition. All of them
 * are pure: they never modify the array or the conditions passed in and return new ones instead.
 */
import type { Condition } from '../api/object.ts';

/** What a controller sets; `lastTransitionTime` is filled in by setCondition. */
export interface ConditionInput {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
  observedGeneration?: number;
  /** Used instead of `now()` when this call is a transition (or adds the condition). */
  lastTransitionTime?: string;
}

/** Returns the current time; inject a fixed one in tests. */
export type Now = () => Date;

const systemNow: Now = () => new Date();

/** RFC 3339 with second precision, the way metav1.Time serialises. */
export function formatTime(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

/**
 * Returns a new array with the condition set:
 * - a new type is appended, with `lastTransitionTime` = `input.lastTransitionTime` or `now()`;
 * - an existing type keeps its position; `lastTransitionTime` changes only when `status` changes;
 *   `reason`, `message` and `observedGeneration` always take the new values (an absent
 *   `observedGeneration` removes it, as in apimachinery).
 * When nothing differs, the result deep-equals the input, so a status write can be skipped.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: Now = systemNow,
): Condition[] {
  const list = conditions ?? [];
  const index = list.findIndex((c) => c.type === input.type);
  const existing = index >= 0 ? list[index] : undefined;
  const transitioned = existing === undefined || existing.status !== input.status;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastTransitionTime:
      !transitioned && existing.lastTransitionTime
        ? existing.lastTransitionTime
        : (input.lastTransitionTime ?? formatTime(now())),
  };
  if (input.observedGeneration !== undefined) next.observedGeneration = input.observedGeneration;
  const result = list.map((c) => ({ ...c }));
  if (index >= 0) result[index] = next;
  else result.push(next);
  return result;
}

/** The condition of that type, if any (the same object that is in the array). */
export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** True when the condition is present with status 'True'. */
export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

/** True when the condition is present with status 'False'. */
export function isConditionFalse(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'False';
}

/** True when the condition is present with that status. */
export function isConditionPresentAndEqual(
  conditions: readonly Condition[] | undefined,
  type: string,
  status: Condition['status'],
): boolean {
  return findCondition(conditions, type)?.status === status;
}

/** Returns a new array without the condition of that type. */
export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type).map((c) => ({ ...c }));
}

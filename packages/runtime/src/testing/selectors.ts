/** Label and field selector parsing and matching for the fake client (the API server's grammar). */
import {
  type LabelRequirement,
  matchesRequirement,
  parseFieldSelector as parseCacheFieldSelector,
  parseLabelSelector as parseCacheLabelSelector,
  SelectorParseError,
} from '../cache/selector.ts';

export class SelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorError';
  }
}

/** The cache's requirements: one label-selector parser for the cache and the fake client. */
export type { LabelRequirement } from '../cache/selector.ts';

/**
 * Parses a label selector with the API server's grammar and validation (cache/selector.ts, the one
 * parser). Throws SelectorError (the fake client answers 400 with its message).
 */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  try {
    return parseCacheLabelSelector(selector);
  } catch (err) {
    if (err instanceof SelectorParseError) throw new SelectorError(err.message);
    throw err;
  }
}

export function matchesLabels(
  requirements: readonly LabelRequirement[],
  labels: Readonly<Record<string, string>> = {},
): boolean {
  return requirements.every((r) => matchesRequirement(labels, r));
}

export interface FieldRequirement {
  /** Dotted path, e.g. 'metadata.name'. */
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Parses a field selector with the API server's grammar (cache/selector.ts, the one parser). */
export function parseFieldSelector(selector: string): FieldRequirement[] {
  try {
    return parseCacheFieldSelector(selector).map((r) => ({
      field: r.path.join('.'),
      op: r.op,
      value: r.value,
    }));
  } catch (err) {
    if (err instanceof SelectorParseError) throw new SelectorError(err.message);
    throw err;
  }
}

function fieldValue(obj: unknown, path: string): string {
  let current: unknown = obj;
  for (const segment of path.split('.')) {
    if (current === null || typeof current !== 'object' || Array.isArray(current)) return '';
    current = (current as Record<string, unknown>)[segment];
  }
  if (current === undefined || current === null) return '';
  return typeof current === 'object' ? JSON.stringify(current) : String(current);
}

/** Absent fields compare as '' (the API server's field sets hold strings). */
export function matchesFields(requirements: FieldRequirement[], obj: unknown): boolean {
  return requirements.every((r) => (fieldValue(obj, r.field) === r.value) === (r.op === '='));
}

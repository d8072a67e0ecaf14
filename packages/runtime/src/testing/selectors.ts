/** Label and field selector parsing and matching for the fake client (the API server's grammar). */

export class SelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorError';
  }
}

export type LabelRequirement =
  | { key: string; op: 'exists' | '!exists' }
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'gt' | 'lt'; value: number };

const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function labelKey(key: string, selector: string): string {
  if (!LABEL_KEY.test(key) || key.length > 316) {
    throw new SelectorError(
      `unable to parse requirement: invalid label key "${key}" in selector "${selector}"`,
    );
  }
  return key;
}

function labelValue(value: string, selector: string): string {
  if (!LABEL_VALUE.test(value) || value.length > 63) {
    throw new SelectorError(
      `unable to parse requirement: invalid label value "${value}" in selector "${selector}"`,
    );
  }
  return value;
}

/** Splits on commas that are not inside parentheses: `a in (x,y),b` -> ['a in (x,y)', 'b']. */
function splitTopLevel(selector: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (depth < 0 || depth > 1) throw new SelectorError(`unbalanced parentheses in selector "${selector}"`);
    if (ch === ',' && depth === 0) {
      parts.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  if (depth !== 0) throw new SelectorError(`unbalanced parentheses in selector "${selector}"`);
  parts.push(current.trim());
  return parts;
}

/**
 * Parses a label selector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k`
 * (does not exist), `k>1`, `k<1`, joined by commas (AND). Throws SelectorError on bad syntax.
 */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  if (selector.trim() === '') return [];
  return splitTopLevel(selector).map((raw) => parseRequirement(raw, selector));
}

function parseRequirement(raw: string, selector: string): LabelRequirement {
  if (raw === '') throw new SelectorError(`empty requirement in selector "${selector}"`);
  let m = /^!\s*([^\s=!<>(),]+)$/.exec(raw);
  if (m) return { key: labelKey(m[1] ?? '', selector), op: '!exists' };
  m = /^([^\s=!<>(),]+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(raw);
  if (m) {
    const values = (m[3] ?? '').split(',').map((v) => labelValue(v.trim(), selector));
    if (values.length === 1 && values[0] === '') {
      throw new SelectorError(
        `for 'in', 'notin' operators, values set can't be empty in selector "${selector}"`,
      );
    }
    return { key: labelKey(m[1] ?? '', selector), op: m[2] === 'in' ? 'in' : 'notin', values };
  }
  m = /^([^\s=!<>(),]+)\s*(==|=|!=|<|>)\s*([^\s=!<>(),]*)$/.exec(raw);
  if (m) {
    const key = labelKey(m[1] ?? '', selector);
    const op = m[2];
    const value = m[3] ?? '';
    if (op === '<' || op === '>') {
      if (!/^-?\d+$/.test(value)) {
        throw new SelectorError(
          `for 'Gt', 'Lt' operators, the value must be an integer in selector "${selector}"`,
        );
      }
      return { key, op: op === '>' ? 'gt' : 'lt', value: Number.parseInt(value, 10) };
    }
    return { key, op: op === '!=' ? 'notin' : 'in', values: [labelValue(value, selector)] };
  }
  m = /^([^\s=!<>(),]+)$/.exec(raw);
  if (m) return { key: labelKey(m[1] ?? '', selector), op: 'exists' };
  throw new SelectorError(`unable to parse requirement "${raw}" in selector "${selector}"`);
}

export function matchesLabels(
  requirements: LabelRequirement[],
  labels: Record<string, string> = {},
): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    const value = labels[r.key] ?? '';
    switch (r.op) {
      case 'exists':
        return has;
      case '!exists':
        return !has;
      case 'in':
        return has && r.values.includes(value);
      case 'notin':
        return !has || !r.values.includes(value);
      case 'gt':
        return has && /^-?\d+$/.test(value) && Number.parseInt(value, 10) > r.value;
      case 'lt':
        return has && /^-?\d+$/.test(value) && Number.parseInt(value, 10) < r.value;
    }
    return false;
  });
}

export interface FieldRequirement {
  /** Dotted path, e.g. 'metadata.name'. */
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Parses a field selector: `path=value`, `path==value`, `path!=value`, joined by commas. */
export function parseFieldSelector(selector: string): FieldRequirement[] {
  if (selector.trim() === '') return [];
  return selector.split(',').map((raw) => {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*(==|=|!=)\s*([^=!]*?)\s*$/.exec(raw);
    if (!m) throw new SelectorError(`invalid field selector requirement "${raw.trim()}" in "${selector}"`);
    return { field: m[1] ?? '', op: m[2] === '!=' ? '!=' : '=', value: m[3] ?? '' };
  });
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

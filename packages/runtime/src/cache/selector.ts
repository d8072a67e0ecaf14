/**
 * Label and field selectors, evaluated in memory (the cache filters its store with them), with the
 * API server's syntax:
 *
 *   labels:  `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>3`, `a<3`, comma = AND
 *   fields:  `path=value`, `path==value`, `path!=value`, comma = AND; path like `metadata.name`
 */
import type { KubeObject } from '../api/object.ts';
import type { DeepReadonly } from './store.ts';

export type LabelRequirement =
  | { key: string; op: 'exists' | 'notExists' }
  | { key: string; op: 'in' | 'notIn'; values: readonly string[] }
  | { key: string; op: 'gt' | 'lt'; value: number };

export type LabelMatcher = (labels: Readonly<Record<string, string>> | undefined) => boolean;

const KEY = /^([A-Za-z0-9][-A-Za-z0-9_.]*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export class SelectorParseError extends Error {
  constructor(selector: string, why: string) {
    super(`invalid selector "${selector}": ${why}`);
    this.name = 'SelectorParseError';
  }
}

/** Splits on commas that are not inside parentheses. */
function splitTop(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts.map((p) => p.trim());
}

export function parseLabelSelector(selector: string): LabelRequirement[] {
  const out: LabelRequirement[] = [];
  if (selector.trim() === '') return out;
  const fail = (why: string): never => {
    throw new SelectorParseError(selector, why);
  };
  const checkKey = (key: string): string => (KEY.test(key) ? key : fail(`bad key "${key}"`));
  const checkValue = (v: string): string => (VALUE.test(v) ? v : fail(`bad value "${v}"`));
  for (const part of splitTop(selector)) {
    if (part === '') fail('empty requirement');
    let m = /^([^\s!=<>]+)\s+(in|notin)\s*\((.*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(',').map((v) => checkValue(v.trim()));
      out.push({ key: checkKey(m[1]!), op: m[2] === 'in' ? 'in' : 'notIn', values });
      continue;
    }
    m = /^([^\s!=<>]+)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (m) {
      const value = checkValue(m[3]!.trim());
      out.push({ key: checkKey(m[1]!), op: m[2] === '!=' ? 'notIn' : 'in', values: [value] });
      continue;
    }
    m = /^([^\s!=<>]+)\s*([<>])\s*(-?\d+)$/.exec(part);
    if (m) {
      out.push({ key: checkKey(m[1]!), op: m[2] === '>' ? 'gt' : 'lt', value: Number(m[3]) });
      continue;
    }
    m = /^(!?)\s*([^\s!=<>()]+)$/.exec(part);
    if (m) {
      out.push({ key: checkKey(m[2]!), op: m[1] ? 'notExists' : 'exists' });
      continue;
    }
    fail(`cannot parse "${part}"`);
  }
  return out;
}

export function matchesRequirement(labels: Readonly<Record<string, string>>, r: LabelRequirement): boolean {
  const has = Object.hasOwn(labels, r.key);
  const v = labels[r.key];
  switch (r.op) {
    case 'exists':
      return has;
    case 'notExists':
      return !has;
    case 'in':
      return has && r.values.includes(v ?? '');
    case 'notIn':
      return !has || !r.values.includes(v ?? '');
    case 'gt':
    case 'lt': {
      if (!has || !/^-?\d+$/.test(v ?? '')) return false;
      const n = Number(v);
      return r.op === 'gt' ? n > r.value : n < r.value;
    }
  }
}

/** Compiles a label selector; an empty selector matches everything. Throws SelectorParseError. */
export function labelMatcher(selector: string | undefined): LabelMatcher {
  const reqs = parseLabelSelector(selector ?? '');
  if (reqs.length === 0) return () => true;
  return (labels) => reqs.every((r) => matchesRequirement(labels ?? {}, r));
}

export interface FieldRequirement {
  path: readonly string[];
  op: '=' | '!=';
  value: string;
}

export function parseFieldSelector(selector: string): FieldRequirement[] {
  const out: FieldRequirement[] = [];
  if (selector.trim() === '') return out;
  for (const part of selector.split(',').map((p) => p.trim())) {
    const m = /^([A-Za-z0-9_.-]+)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!m) throw new SelectorParseError(selector, `cannot parse "${part}"`);
    out.push({ path: m[1]!.split('.'), op: m[2] === '!=' ? '!=' : '=', value: m[3]!.trim() });
  }
  return out;
}

function fieldValue(obj: unknown, path: readonly string[]): string {
  let cur: unknown = obj;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur === undefined || cur === null ? '' : String(cur);
}

/** Compiles a field selector; an empty selector matches everything. Throws SelectorParseError. */
export function fieldMatcher(selector: string | undefined): (obj: DeepReadonly<KubeObject>) => boolean {
  const reqs = parseFieldSelector(selector ?? '');
  if (reqs.length === 0) return () => true;
  return (obj) => reqs.every((r) => (fieldValue(obj, r.path) === r.value) === (r.op === '='));
}

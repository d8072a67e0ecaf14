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

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const INT64_MAX = 2n ** 63n - 1n;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export class SelectorParseError extends Error {
  constructor(selector: string, why: string) {
    super(`invalid selector "${selector}": ${why}`);
    this.name = 'SelectorParseError';
  }
}

/**
 * Why `key` is not a valid label key (the API server's IsQualifiedName: an optional prefix that is a
 * lower-case DNS subdomain of at most 253 characters and a slash, then a name of at most 63
 * characters), or undefined if it is valid.
 */
export function labelKeyError(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return `label key "${key}" has more than one "/"`;
  const name = parts.length === 2 ? parts[1]! : parts[0]!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix === '') return `label key "${key}": the prefix before "/" must not be empty`;
    if (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) {
      return `label key "${key}": the prefix must be a lower-case DNS subdomain of at most 253 characters`;
    }
  }
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    return (
      `label key "${key}": the name must be 1 to 63 characters of [A-Za-z0-9], "-", "_" and ".", ` +
      'beginning and ending with [A-Za-z0-9]'
    );
  }
  return undefined;
}

/** Why `value` is not a valid label value (at most 63 characters, like a key's name, or empty). */
export function labelValueError(value: string): string | undefined {
  if (value.length > 63 || !LABEL_VALUE.test(value)) {
    return (
      `label value "${value}": at most 63 characters of [A-Za-z0-9], "-", "_" and ".", ` +
      'beginning and ending with [A-Za-z0-9], or empty'
    );
  }
  return undefined;
}

// --- the lexer and parser of k8s.io/apimachinery/pkg/labels (labels.Parse), same grammar ---

type Token =
  | { t: 'id'; s: string }
  | { t: 'in' | 'notin' | '!' | '=' | '==' | '!=' | '>' | '<' | '(' | ')' | ',' | 'end'; s: string };

const SYMBOLS = new Set(['!', '=', '==', '!=', '>', '<', '(', ')', ',']);
const isSpecial = (c: string): boolean => '=!(),><'.includes(c);
const isSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\r' || c === '\n';

function lex(selector: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  for (;;) {
    while (i < selector.length && isSpace(selector[i]!)) i++;
    if (i >= selector.length) {
      out.push({ t: 'end', s: '' });
      return out;
    }
    if (isSpecial(selector[i]!)) {
      // The longest operator: "!=" before "!", "==" before "=".
      let sym = selector[i]!;
      i++;
      while (i < selector.length && SYMBOLS.has(sym + selector[i]!)) sym += selector[i++]!;
      out.push({ t: sym, s: sym } as Token);
      continue;
    }
    const start = i;
    while (i < selector.length && !isSpecial(selector[i]!) && !isSpace(selector[i]!)) i++;
    const word = selector.slice(start, i);
    out.push(word === 'in' || word === 'notin' ? { t: word, s: word } : { t: 'id', s: word });
  }
}

/**
 * Parses a label selector with the API server's grammar and validation (labels.Parse): what it
 * rejects, this rejects. `in`/`notin` are keywords only where an operator is expected.
 */
export function parseLabelSelector(selector: string): LabelRequirement[] {
  const tokens = lex(selector);
  let pos = 0;
  const fail = (why: string): never => {
    throw new SelectorParseError(selector, why);
  };
  /** Outside operator position, the keywords are identifiers (labels.Parse's "Values" context). */
  const peek = (): Token => {
    const tok = tokens[pos]!;
    return tok.t === 'in' || tok.t === 'notin' ? { t: 'id', s: tok.s } : tok;
  };
  const next = (): Token => {
    const tok = peek();
    pos++;
    return tok;
  };
  const key = (k: string): string => {
    const why = labelKeyError(k);
    return why ? fail(`unable to parse requirement: ${why}`) : k;
  };
  const value = (v: string): string => {
    const why = labelValueError(v);
    return why ? fail(`unable to parse requirement: ${why}`) : v;
  };
  const requirement = (): LabelRequirement => {
    let tok = next();
    const negated = tok.t === '!';
    if (negated) tok = next();
    if (tok.t !== 'id') return fail(`found '${tok.s}', expected: identifier`);
    const k = key(tok.s);
    const after = peek().t;
    if (negated || after === 'end' || after === ',') return { key: k, op: negated ? 'notExists' : 'exists' };
    const op = tokens[pos++]!;
    if (op.t === 'in' || op.t === 'notin') {
      if (next().t !== '(') return fail(`found '${tokens[pos - 1]!.s}', expected: '('`);
      const values = new Set<string>();
      if (peek().t === ')') {
        next();
        values.add('');
      } else {
        let expectValue = true;
        for (;;) {
          const v = next();
          if (v.t === ')') {
            if (expectValue) values.add('');
            break;
          }
          if (v.t === ',') {
            if (expectValue) values.add('');
            expectValue = true;
          } else if (v.t === 'id' && expectValue) {
            values.add(value(v.s));
            expectValue = false;
          } else return fail(`found '${v.s}', expected: ',', ')' or identifier`);
        }
      }
      if (values.has('')) value('');
      return { key: k, op: op.t === 'in' ? 'in' : 'notIn', values: [...values].sort() };
    }
    if (op.t !== '=' && op.t !== '==' && op.t !== '!=' && op.t !== '>' && op.t !== '<') {
      return fail(`found '${op.s}', expected: in, notin, =, ==, !=, gt, lt`);
    }
    let v = '';
    if (peek().t !== 'end' && peek().t !== ',') {
      const tok2 = next();
      if (tok2.t !== 'id') return fail(`found '${tok2.s}', expected: identifier`);
      v = tok2.s;
    }
    value(v);
    if (op.t === '>' || op.t === '<') {
      // strconv.ParseInt(v, 10, 64): digits only here (a label value cannot start with a sign), int64.
      if (!/^\d+$/.test(v) || BigInt(v) > INT64_MAX)
        return fail(`unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer`);
      return { key: k, op: op.t === '>' ? 'gt' : 'lt', value: Number(v) };
    }
    return { key: k, op: op.t === '!=' ? 'notIn' : 'in', values: [v] };
  };
  const out: LabelRequirement[] = [];
  if (peek().t === 'end') return out;
  for (;;) {
    const tok = peek();
    if (tok.t !== 'id' && tok.t !== '!')
      return fail(`found '${tok.s}', expected: !, identifier, or 'end of string'`);
    out.push(requirement());
    const sep = next();
    if (sep.t === 'end') return out;
    if (sep.t !== ',') return fail(`found '${sep.s}', expected: ',' or 'end of string'`);
    const following = peek().t;
    if (following !== 'id' && following !== '!')
      return fail(`found '${peek().s}', expected: identifier after ','`);
  }
}

function requirementString(r: LabelRequirement): string {
  switch (r.op) {
    case 'exists':
      return r.key;
    case 'notExists':
      return `!${r.key}`;
    case 'gt':
      return `${r.key}>${r.value}`;
    case 'lt':
      return `${r.key}<${r.value}`;
    case 'in':
      return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(',')})`;
    default:
      return r.values.length === 1 ? `${r.key}!=${r.values[0]}` : `${r.key} notin (${r.values.join(',')})`;
  }
}

/**
 * One string per set of requirements (sorted, `==` and one-value `in` written `=`): two selectors
 * that select the same way by construction get the same form. Throws SelectorParseError.
 */
export function canonicalLabelSelector(selector: string): string {
  const parts = parseLabelSelector(selector).map(requirementString);
  return [...new Set(parts)].sort().join(',');
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

/**
 * Parses a field selector with the API server's grammar (fields.ParseSelector): terms split on
 * unescaped commas (empty terms skipped), each `key=value`, `key==value` or `key!=value` at the first
 * operator; in values `\,` `\=` `\\` are escapes and an unescaped `=` is an error. Nothing is trimmed.
 * Keys are dotted paths of [A-Za-z0-9_-] (the API server supports only some per kind, such as
 * `metadata.name`, `metadata.namespace`, `status.phase` for Pods; the cache filters by any).
 * Throws SelectorParseError.
 */
export function parseFieldSelector(selector: string): FieldRequirement[] {
  const out: FieldRequirement[] = [];
  for (const term of splitUnescaped(selector)) {
    if (term === '') continue;
    const m = /^(.*?)(!=|==|=)(.*)$/s.exec(term);
    if (!m)
      throw new SelectorParseError(
        selector,
        `cannot understand "${term}": expected key=value, key==value or key!=value`,
      );
    const key = m[1]!;
    if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(key)) {
      throw new SelectorParseError(selector, `"${key}" is not a field path like metadata.name (no spaces)`);
    }
    out.push({
      path: key.split('.'),
      op: m[2] === '!=' ? '!=' : '=',
      value: unescapeFieldValue(m[3]!, selector),
    });
  }
  return out;
}

/** Splits on commas not escaped by a backslash (fields.splitTerms). */
function splitUnescaped(s: string): string[] {
  if (s === '') return [];
  const terms: string[] = [];
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === ',') {
      terms.push(s.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(s.slice(start));
  return terms;
}

function unescapeFieldValue(raw: string, selector: string): string {
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === '\\') {
      const next = raw[++i];
      if (next !== '\\' && next !== ',' && next !== '=') {
        throw new SelectorParseError(
          selector,
          `invalid escape sequence "\\${next ?? ''}" (escape only \\, , and =)`,
        );
      }
      out += next;
    } else if (c === '=' || c === ',') {
      throw new SelectorParseError(selector, `unescaped "${c}" in the value "${raw}" (write \\${c})`);
    } else out += c;
  }
  return out;
}

/** A field value written so that parseFieldSelector reads it back. */
export function escapeFieldValue(value: string): string {
  return value.replace(/[\\,=]/g, (c) => `\\${c}`);
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

/**
 * Cutting `metadata.managedFields` out of a watch event's JSON text before it is parsed.
 *
 * Informers drop managedFields anyway (the default transform); parsing them first costs CPU and garbage:
 * they are ~25 % of the bytes of the Database operator's objects (48 % of a StatefulSet's), and cutting
 * them from the text is cheaper than parsing and deleting them (its 11 000 objects at N=1000, 55.6 MB:
 * 196 instead of 302 ms CPU, the values kept; `node --expose-gc bench/harness/parse-cost.ts`). Only
 * `object.metadata.managedFields` of the event is cut, found by
 * walking the keys of the event, then of its object, then of its metadata (strings skipped whole, so a
 * key or value elsewhere that spells "managedFields" is never touched). Anything unexpected (not an
 * object, no such field, malformed text around it) leaves the text as it is, for JSON.parse to judge; the
 * inside of the array is only bracket-matched, so a malformed value inside it (which the API server never
 * sends) goes with it unnoticed.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** `line` without `object.metadata.managedFields` (the same text when it has none). */
export function withoutManagedFields(line: string): string {
  // Fast path: the text does not contain the key at all.
  if (line.indexOf('"managedFields"') === -1) return line;
  const start = skipSpace(line, 0);
  if (line.charCodeAt(start) !== OPEN_BRACE) return line;
  const object = findKey(line, start, 'object');
  if (object === undefined || line.charCodeAt(object.value) !== OPEN_BRACE) return line;
  const metadata = findKey(line, object.value, 'metadata');
  if (metadata === undefined || line.charCodeAt(metadata.value) !== OPEN_BRACE) return line;
  const fields = findKey(line, metadata.value, 'managedFields');
  if (fields === undefined || line.charCodeAt(fields.value) !== OPEN_BRACKET) return line;
  const end = skipValue(line, fields.value);
  if (end === -1) return line;
  // Remove the member and one comma next to it: the one after it (another member follows), else the one
  // before it (it ends the object). Anything else after it is malformed: JSON.parse shall say so.
  let from = fields.key;
  let to = skipSpace(line, end);
  const next = line.charCodeAt(to);
  if (next === COMMA && line.charCodeAt(skipSpace(line, to + 1)) === QUOTE) to++;
  else if (next === CLOSE_BRACE) {
    const before = skipSpaceBack(line, from - 1);
    if (line.charCodeAt(before) === COMMA) from = before;
    to = end;
  } else return line;
  return line.slice(0, from) + line.slice(to);
}

/**
 * In the object starting at `open` (its `{`), the member named `name`: where its key starts and where
 * its value starts. Undefined when there is none, or the text is not what JSON would be.
 */
function findKey(s: string, open: number, name: string): { key: number; value: number } | undefined {
  let i = skipSpace(s, open + 1);
  if (s.charCodeAt(i) === CLOSE_BRACE) return undefined;
  for (;;) {
    if (s.charCodeAt(i) !== QUOTE) return undefined;
    const keyStart = i;
    const keyEnd = stringEnd(s, i);
    if (keyEnd === -1) return undefined;
    const matches = keyEnd - keyStart - 2 === name.length && s.startsWith(name, keyStart + 1);
    i = skipSpace(s, keyEnd);
    if (s.charCodeAt(i) !== COLON) return undefined;
    i = skipSpace(s, i + 1);
    if (matches) return { key: keyStart, value: i };
    i = skipValue(s, i);
    if (i === -1) return undefined;
    i = skipSpace(s, i);
    const c = s.charCodeAt(i);
    if (c !== COMMA) return undefined; // '}' (not found) or malformed
    i = skipSpace(s, i + 1);
  }
}

/** The index just after the JSON value starting at `i`, or -1 if it does not end. */
function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === QUOTE) return stringEnd(s, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const d = s.charCodeAt(j);
      if (d === QUOTE) {
        j = stringEnd(s, j) - 1;
        if (j < 0) return -1;
      } else if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  while (j < s.length) {
    const d = s.charCodeAt(j);
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || d <= 0x20) break;
    j++;
  }
  return j === i ? -1 : j;
}

/** The index just after the string whose opening quote is at `i`, or -1 if it does not end. */
function stringEnd(s: string, i: number): number {
  let j = i + 1;
  for (;;) {
    const q = s.indexOf('"', j);
    if (q === -1) return -1;
    // Escaped when preceded by an odd number of backslashes.
    let backslashes = 0;
    for (let k = q - 1; k > i && s.charCodeAt(k) === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    j = q + 1;
  }
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && isSpace(s.charCodeAt(i))) i++;
  return i;
}

function skipSpaceBack(s: string, i: number): number {
  while (i >= 0 && isSpace(s.charCodeAt(i))) i--;
  return i;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

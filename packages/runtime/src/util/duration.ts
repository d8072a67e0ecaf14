/** Durations written the way Kubernetes flags write them (Go's time.ParseDuration): "10h", "1m30s", "250ms". */

const UNITS_MS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  '\u00b5s': 0.001, // micro sign
  '\u03bcs': 0.001, // Greek mu: Go's time.ParseDuration takes both
};

/** Milliseconds of a Go-style duration ("0" is allowed, as in Go). Throws a RangeError naming the text. */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (trimmed === '0') return 0;
  // Escaped: regular expressions reach the bundle as written, and it stays ASCII (validate.ts, DURATION).
  const part = /(\d+(?:\.\d+)?)(ms|us|\u00b5s|\u03bcs|h|m|s)/y;
  let total = 0;
  let at = 0;
  while (at < trimmed.length) {
    part.lastIndex = at;
    const m = part.exec(trimmed);
    if (!m) break;
    total += Number(m[1]) * (UNITS_MS[m[2] as string] as number);
    at = part.lastIndex;
  }
  if (trimmed.length === 0 || at !== trimmed.length) {
    throw new RangeError(`invalid duration "${text}": write it like 10h, 1m30s or 500ms`);
  }
  return total;
}

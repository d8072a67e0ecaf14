/**
 * resource.Quantity values: "10Gi", "500M", "1.5", "100m", "1e3". Exact for the forms Kubernetes accepts
 * (decimal and binary suffixes, exponents); numbers are base units (bytes, cores).
 */

const SUFFIXES: Readonly<Record<string, number>> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))$/;

/** The value of a quantity in base units (bytes, cores), or undefined when it is not a quantity. */
export function parseQuantity(q: string | number | undefined): number | undefined {
  if (typeof q === 'number') return Number.isFinite(q) ? q : undefined;
  if (typeof q !== 'string') return undefined;
  const m = QUANTITY.exec(q.trim());
  if (!m) return undefined;
  const base = Number(m[1]);
  if (m[2] !== undefined) return base * 10 ** Number(m[2].slice(1));
  const mult = SUFFIXES[m[3] ?? ''];
  return mult === undefined ? undefined : base * mult;
}

/** -1, 0 or 1 as a < b, a == b, a > b; undefined when either is not a quantity. */
export function compareQuantities(a: string | number, b: string | number): -1 | 0 | 1 | undefined {
  const x = parseQuantity(a);
  const y = parseQuantity(b);
  if (x === undefined || y === undefined) return undefined;
  return x < y ? -1 : x > y ? 1 : 0;
}

export const MiB = 2 ** 20;

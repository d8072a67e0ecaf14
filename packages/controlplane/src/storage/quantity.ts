/**
 * Parses a Kubernetes resource quantity ("10Gi", "500M", "1.5Ti", "100m") into a number of base units.
 * A small copy of @opkit/runtime's parseQuantity: the control plane must not depend on the runtime,
 * whose tests depend on the control plane.
 */
const SUFFIX: Record<string, number> = {
  '': 1,
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

export function parseQuantity(q: string): number {
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?([a-zA-Z]*)$/.exec(q.trim());
  const multiplier = match ? SUFFIX[match[3] ?? ''] : undefined;
  if (!match || multiplier === undefined) throw new Error(`not a Kubernetes quantity: ${JSON.stringify(q)}`);
  return Number(match[1]) * 10 ** Number(match[2] ?? 0) * multiplier;
}

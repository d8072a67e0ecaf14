/**
 * Whether resourceVersion `a` is newer than `b`. The API server's are etcd revisions (decimal integers)
 * and comparable; anything else (a fake's, an empty one) is never taken as newer, so a caller that keeps
 * its own writes falls back to what its cache says.
 */
export function newerResourceVersion(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

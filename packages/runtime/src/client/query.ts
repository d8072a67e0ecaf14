/** Query strings of API requests. */

export type QueryValue = string | number | boolean | null | undefined;
export type Query = Readonly<Record<string, QueryValue | readonly string[]>>;

/**
 * Builds "?a=1&b=x%20y" from the defined entries (none: ""). Arrays repeat the key. Keys keep their
 * order; values are percent-encoded with encodeURIComponent (so "=", ",", "!" in selectors are safe).
 */
export function buildQuery(query?: Query): string {
  if (!query) return '';
  const parts: string[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    const values: readonly (string | number | boolean)[] = Array.isArray(value)
      ? (value as readonly string[])
      : [value as string | number | boolean];
    for (const v of values) parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length > 0 ? `?${parts.join('&')}` : '';
}

/** A long step's heartbeat: `... still <what> (1m30s)` every 30 s until it settles, so a long step is never silent. */
export async function withProgress<T>(
  what: string,
  say: (line: string) => void,
  fn: () => Promise<T>,
  everyMs = 30_000,
): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => say(`  ... still ${what} (${elapsed(Date.now() - started)})`), everyMs);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}

export function elapsed(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/** Where commands print: results on stdout, progress and diagnostics on stderr. */
export interface Io {
  /** A result line (stdout). */
  out(line: string): void;
  /** A diagnostic or progress line (stderr). */
  err(line: string): void;
}

export const processIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** An Io that keeps the lines, for tests. */
export function memoryIo(): Io & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (l) => stdout.push(l), err: (l) => stderr.push(l) };
}

/** A progress line for a long step: `==> what`. */
export function step(io: Io, what: string): void {
  io.err(`==> ${what}`);
}

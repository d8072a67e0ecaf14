/**
 * Errors the CLI reports as `error: <message>` then `next: <what to do>`. Exit codes scripts can trust:
 * 0 ok, 1 failure, 2 usage error (a flag or an argument is wrong; nothing was changed).
 */
export class CliError extends Error {
  readonly next: string;
  readonly exitCode: number;
  constructor(message: string, next: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.next = next;
    this.exitCode = exitCode;
  }
}

/** A wrong flag, argument or name: exit code 2. */
export class UsageError extends CliError {
  constructor(message: string, next: string) {
    super(message, next, 2);
    this.name = 'UsageError';
  }
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** What every command module exports. */
import type { ParseArgsOptionsConfig } from 'node:util';
import type { Parsed } from '../args.ts';
import type { Io } from '../io.ts';

export interface CommandContext {
  /** The folder the command works in (the project). */
  cwd: string;
  io: Io;
  env: NodeJS.ProcessEnv;
}

export interface Command {
  /** 'init', 'create api', 'cluster' */
  name: string;
  /** One line for `opkit --help`. */
  summary: string;
  /** The command's --help text: usage, flags and examples (the global flags are appended). */
  help: string;
  options: ParseArgsOptionsConfig;
  /** Returns the exit code; throws CliError / UsageError for failures. */
  run(ctx: CommandContext, args: Parsed): Promise<number>;
}

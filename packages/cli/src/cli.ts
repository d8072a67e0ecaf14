/**
 * The opkit command line: finds the command, parses its flags, runs it and turns errors into
 * `error: ...` / `next: ...` lines and exit codes (0 ok, 1 failure, 2 usage error).
 */
import { GLOBAL_HELP, parseCommandArgs } from './args.ts';
import { buildCommand } from './commands/build.ts';
import { clusterCommand } from './commands/cluster.ts';
import type { Command } from './commands/command.ts';
import { createApiCommand } from './commands/create-api.ts';
import { deployCommand, undeployCommand } from './commands/deploy.ts';
import { generateCommand } from './commands/generate.ts';
import { initCommand } from './commands/init.ts';
import { installCommand, uninstallCommand } from './commands/install.ts';
import { runCommand } from './commands/run.ts';
import { CliError, EXIT_FAILURE, EXIT_USAGE } from './errors.ts';
import { type Io, processIo } from './io.ts';

export const COMMANDS: readonly Command[] = [
  initCommand,
  createApiCommand,
  generateCommand,
  installCommand,
  uninstallCommand,
  runCommand,
  buildCommand,
  deployCommand,
  undeployCommand,
  clusterCommand,
];

export const MAIN_HELP = `opkit: build Kubernetes operators in TypeScript (controller-runtime for TypeScript)

Usage: opkit <command> [flags]          opkit <command> --help for its flags and examples

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(12)} ${c.summary}`).join('\n')}

${GLOBAL_HELP}

Examples:
  mkdir database-operator && cd database-operator
  opkit init --domain example.com --repo github.com/me/database-operator
  opkit create api --group myapp --version v1 --kind Database --resource --controller
  npm install && npm test
  opkit cluster up && opkit install --local && opkit run --local
  opkit build --image database-operator:v0.1.0 && opkit deploy --image database-operator:v0.1.0`;

export interface RunOptions {
  cwd?: string;
  io?: Io;
  env?: NodeJS.ProcessEnv;
}

function findCommand(args: readonly string[]): { command: Command; rest: string[] } | undefined {
  const [first, second] = args;
  if (first === 'create') {
    if (second === 'api') return { command: createApiCommand, rest: args.slice(2) };
    return undefined;
  }
  const command = COMMANDS.find((c) => c.name === first);
  return command ? { command, rest: args.slice(1) } : undefined;
}

/** Runs `opkit <args>`; returns the exit code. Never throws for command failures. */
export async function runCli(args: readonly string[], opts: RunOptions = {}): Promise<number> {
  const io = opts.io ?? processIo;
  const cwd = opts.cwd ?? process.cwd();
  const env = opts.env ?? process.env;
  const fail = (err: CliError) => {
    io.err(`error: ${err.message}`);
    io.err(`next: ${err.next}`);
    return err.exitCode;
  };
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h' || args[0] === 'help') {
    const topic = args[0] === 'help' ? args.slice(1) : [];
    if (topic.length > 0) {
      const found = findCommand(topic);
      if (!found)
        return fail(new CliError(`unknown command "${topic.join(' ')}"`, 'see: opkit --help', EXIT_USAGE));
      io.out(`${found.command.help}\n\n${GLOBAL_HELP}`);
      return 0;
    }
    io.out(MAIN_HELP);
    return args.length === 0 ? EXIT_USAGE : 0;
  }
  if (args[0] === '--version' || args[0] === 'version') {
    const { packageVersion } = await import('./packages.ts');
    io.out(`opkit ${packageVersion('@opkit/cli')}`);
    return 0;
  }
  const found = findCommand(args);
  if (!found) {
    const what = args[0] === 'create' ? `create ${args[1] ?? ''}`.trim() : args[0];
    return fail(
      new CliError(
        `unknown command "${what}"`,
        args[0] === 'create' ? 'did you mean: opkit create api ...? (see opkit --help)' : 'see: opkit --help',
        EXIT_USAGE,
      ),
    );
  }
  try {
    const parsed = parseCommandArgs(found.command.name, found.rest, found.command.options);
    if (parsed.help) {
      io.out(`${found.command.help}\n\n${GLOBAL_HELP}`);
      return 0;
    }
    if (found.command.name !== 'cluster' && parsed.positionals.length > 0) {
      return fail(
        new CliError(
          `unexpected argument "${parsed.positionals[0]}"`,
          `see: opkit ${found.command.name} --help`,
          EXIT_USAGE,
        ),
      );
    }
    return await found.command.run({ cwd, io, env }, parsed);
  } catch (err) {
    if (err instanceof CliError) return fail(err);
    const e = err as Error;
    io.err(`error: ${e?.stack ?? String(err)}`);
    io.err("next: this is a bug in opkit or in the project's code; the stack trace above says where");
    return EXIT_FAILURE;
  }
}

/** Flag parsing for every command (node:util parseArgs), with the global flags and clear usage errors. */
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { UsageError } from './errors.ts';
import type { GlobalFlags } from './kube/target.ts';

export const GLOBAL_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  local: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsOptionsConfig;

export const GLOBAL_HELP = `Global flags:
  --kubeconfig <path>   the kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config, then the local cluster)
  --context <name>      the kubeconfig context to use (default: its current context)
  -n, --namespace <ns>  the namespace: where deploy puts the manager, what run watches
  --local               use the local cluster started by \`opkit cluster up\`
  -h, --help            this help

Exit codes: 0 ok, 1 failure, 2 usage error (wrong flag or name; nothing was changed).`;

export type Values = Record<string, string | boolean | undefined>;

export interface Parsed {
  values: Values;
  positionals: string[];
  /** What came after `--`. */
  rest: string[];
  globals: GlobalFlags;
  help: boolean;
}

/**
 * Parses `args` for a command. Boolean flags also take `--flag=false` / `--flag=true` (and `--no-flag`).
 * `command` names the command in error messages.
 */
export function parseCommandArgs(
  command: string,
  args: readonly string[],
  options: ParseArgsOptionsConfig,
): Parsed {
  const all: ParseArgsOptionsConfig = { ...GLOBAL_OPTIONS, ...options };
  const dashDash = args.indexOf('--');
  const own = dashDash >= 0 ? args.slice(0, dashDash) : [...args];
  const rest = dashDash >= 0 ? args.slice(dashDash + 1) : [];
  const normalized = own.map((a) => {
    const m = /^--([^=]+)=(.*)$/.exec(a);
    if (!m || all[m[1]!]?.type !== 'boolean') return a;
    const v = m[2]!.toLowerCase();
    if (v === 'true' || v === '1' || v === 'yes') return `--${m[1]}`;
    if (v === 'false' || v === '0' || v === 'no') return `--no-${m[1]}`;
    throw new UsageError(`--${m[1]} takes true or false, not "${m[2]}"`, `see: opkit ${command} --help`);
  });
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: normalized,
      options: all,
      allowPositionals: true,
      strict: true,
      allowNegative: true,
    });
  } catch (err) {
    const message = (err as Error).message
      .replace(/^Unknown option '([^']+)'.*$/s, 'unknown flag $1')
      .replace(/\. To specify a positional argument.*$/s, '');
    throw new UsageError(`opkit ${command}: ${message}`, `see: opkit ${command} --help`);
  }
  const values = parsed.values as Values;
  const globals: GlobalFlags = {};
  if (typeof values.kubeconfig === 'string') globals.kubeconfig = values.kubeconfig;
  if (typeof values.context === 'string') globals.context = values.context;
  if (typeof values.namespace === 'string') globals.namespace = values.namespace;
  if (values.local === true) globals.local = true;
  return { values, positionals: parsed.positionals, rest, globals, help: values.help === true };
}

export function str(values: Values, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' ? v : undefined;
}

export function bool(values: Values, name: string, fallback: boolean): boolean {
  const v = values[name];
  return typeof v === 'boolean' ? v : fallback;
}

/** A required string flag, or a UsageError naming it with an example. */
export function required(values: Values, name: string, command: string, example: string): string {
  const v = str(values, name);
  if (v === undefined || v === '')
    throw new UsageError(`opkit ${command} needs --${name}`, `e.g. ${example}`);
  return v;
}

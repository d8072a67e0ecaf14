/** opkit run: the operator on this machine (node src/main.ts) against the cluster of the kubeconfig. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../errors.ts';
import { step } from '../io.ts';
import { resolveTarget } from '../kube/target.ts';
import { readProject } from '../project.ts';
import type { Command } from './command.ts';

export const runCommand: Command = {
  name: 'run',
  summary: 'run the operator on this machine against the cluster',
  options: {},
  help: `Usage: opkit run [--kubeconfig <path>] [--context <name>] [--namespace <ns>] [--local] [-- <operator flags>]

Runs src/main.ts with Node (the manager and every controller) against the cluster of the kubeconfig,
until Ctrl-C (the manager then shuts down gracefully). Install the CRDs first: opkit install.
Flags after -- go to the operator: --leader-elect, --health-probe-bind-address, --metrics-bind-address.

Examples:
  opkit run
  opkit run --local                          # against the cluster of opkit cluster up
  opkit run --namespace team-a               # watch one namespace only
  opkit run -- --metrics-bind-address=0      # no metrics server`,

  async run(ctx, { globals, rest }) {
    readProject(ctx.cwd);
    const main = join(ctx.cwd, 'src/main.ts');
    if (!existsSync(main)) throw new CliError('src/main.ts is missing', 'restore it (opkit init writes it)');
    if (!existsSync(join(ctx.cwd, 'node_modules'))) {
      throw new CliError('the project has no node_modules', 'install its dependencies first: npm install');
    }
    const target = resolveTarget(globals, ctx.io, ctx.env);
    const args = [main];
    if (target.kubeconfig) args.push('--kubeconfig', target.kubeconfig);
    if (target.context) args.push('--context', target.context);
    if (globals.namespace) args.push('--namespace', globals.namespace);
    args.push(...rest);
    step(ctx.io, `running the operator against ${target.source} (Ctrl-C stops it)`);
    const child = spawn(process.execPath, args, { cwd: ctx.cwd, stdio: 'inherit', env: ctx.env });
    const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
    const onInt = forward('SIGINT');
    const onTerm = forward('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
    try {
      return await new Promise<number>((resolve, reject) => {
        child.on('error', reject);
        child.on('exit', (code, signal) => {
          if (code !== null) resolve(code);
          // Stopped by the signal we forwarded: a normal end.
          else resolve(signal === 'SIGINT' || signal === 'SIGTERM' ? 0 : 1);
        });
      });
    } finally {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    }
  },
};

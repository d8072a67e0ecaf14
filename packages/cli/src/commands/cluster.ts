/** opkit cluster: the local control plane of @opkit/controlplane (the same as opkit-controlplane). */
import { runClusterCommand } from '@opkit/controlplane';
import { bool, str } from '../args.ts';
import { CliError, UsageError } from '../errors.ts';
import type { Command } from './command.ts';

const SUBCOMMANDS = ['up', 'down', 'status', 'kubeconfig', 'install', 'load-image', 'helm'];

export const clusterCommand: Command = {
  name: 'cluster',
  summary: 'a real local Kubernetes cluster: up, down, status, kubeconfig, install, load-image, helm',
  options: {
    name: { type: 'string' },
    mode: { type: 'string' },
    nodes: { type: 'string' },
    'real-nodes': { type: 'string' },
    print: { type: 'boolean' },
  },
  help: `Usage: opkit cluster <up|down|status|kubeconfig|install|load-image|helm> [flags]

A real local Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes and
a volume provisioner), built from the official sources and kept running in the background.
  up          start it and print its kubeconfig path (the first time builds the binaries: minutes)
  down        stop it and remove its files
  status      whether it runs, its server and nodes (exit code 1 when not running or not ready)
  kubeconfig  print its kubeconfig path (--print: the file)
  install     build the binaries ahead of time
  load-image  import an OCI archive or layout directory into the real nodes (like kind load)
  helm        helm with the cluster's kubeconfig: opkit cluster helm -- <helm arguments> (helm is built
              on first use from the Go module pinned in packages/controlplane/go/helm: minutes)

Flags:
  --name <name>         the cluster's name (default opkit; --local of other commands uses "opkit")
  --mode <mode>         cluster (default: controllers, scheduler, nodes) or apiserver (etcd + kube-apiserver)
  --nodes <n>           fake nodes in cluster mode (default 3)
  --real-nodes <n>      real nodes running real containers (root; see packages/controlplane/REAL-NODES.md)
  --print               with kubeconfig: print the file instead of its path

Examples:
  opkit cluster up && opkit install --local && opkit run --local
  kubectl --kubeconfig "$(opkit cluster kubeconfig)" get nodes
  opkit cluster up --mode apiserver --name ci
  opkit cluster helm -- install db ./chart -n db-system --create-namespace --wait
  opkit cluster down`,

  async run(_ctx, { values, positionals, rest }) {
    // runClusterCommand prints its results on stdout and its progress on stderr itself.
    const sub = positionals[0];
    if (!sub || !SUBCOMMANDS.includes(sub)) {
      throw new UsageError(
        sub ? `unknown cluster command "${sub}"` : 'opkit cluster needs a command',
        `one of: opkit cluster ${SUBCOMMANDS.join(' | ')}`,
      );
    }
    if (sub !== 'helm' && positionals.length > (sub === 'load-image' ? 2 : 1))
      throw new UsageError(`unexpected argument "${positionals[1]}"`, 'see: opkit cluster --help');
    const flags: { name?: string; mode?: string; nodes?: string; 'real-nodes'?: string; print?: boolean } = {
      print: bool(values, 'print', false),
    };
    for (const key of ['name', 'mode', 'nodes', 'real-nodes'] as const) {
      const v = str(values, key);
      if (v !== undefined) flags[key] = v;
    }
    try {
      const args = sub === 'helm' ? [...positionals.slice(1), ...rest] : positionals.slice(1);
      return await runClusterCommand(sub, flags, { args });
    } catch (err) {
      const hint = (err as { hint?: unknown }).hint;
      if (typeof hint === 'string') throw new CliError((err as Error).message, hint);
      throw err;
    }
  },
};

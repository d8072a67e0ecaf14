import { readFileSync } from 'node:fs';
import { clusterDown, clusterStatus, clusterUp, runningCluster } from '../cluster/commands.ts';
import type { Mode } from '../controlplane.ts';
import { install } from '../install/install.ts';

export interface ClusterFlags {
  name?: string;
  mode?: string;
  nodes?: string;
  print?: boolean;
}

export interface ClusterCommandOptions {
  /** How the user runs these commands, for the hints printed: 'opkit cluster' (default) or 'opkit-controlplane'. */
  program?: string;
}

/** Runs one cluster command; returns the exit code. Shared by opkit-controlplane and `opkit cluster`. */
export async function runClusterCommand(
  command: string,
  flags: ClusterFlags,
  opts: ClusterCommandOptions = {},
): Promise<number> {
  const name = flags.name ?? 'opkit';
  // The command that starts this cluster, with the flags that name it.
  const upCommand = `${opts.program ?? 'opkit cluster'} up${name === 'opkit' ? '' : ` --name ${name}`}`;
  switch (command) {
    case 'install': {
      const inst = await install();
      console.log(inst.binDir);
      return 0;
    }
    case 'up': {
      const mode = flags.mode ?? 'cluster';
      if (mode !== 'cluster' && mode !== 'apiserver') {
        console.error(`error: --mode must be "cluster" or "apiserver", not "${mode}"`);
        return 2;
      }
      const nodes = Number(flags.nodes ?? 3);
      if (!Number.isInteger(nodes) || nodes < 0) {
        console.error(`error: --nodes must be a whole number, not "${flags.nodes}"`);
        return 2;
      }
      const state = await clusterUp({ name, mode: mode as Mode, nodes });
      console.error(`cluster "${name}" is up at ${state.server}`);
      console.error(`try: kubectl --kubeconfig ${state.kubeconfigPath} get nodes`);
      console.log(state.kubeconfigPath);
      return 0;
    }
    case 'down': {
      const stopped = await clusterDown(name);
      console.error(stopped ? `cluster "${name}" stopped` : `cluster "${name}" is not running`);
      return 0;
    }
    case 'status': {
      const status = await clusterStatus(name);
      if (!status) {
        console.log(`cluster "${name}" is not running (start it with: ${upCommand})`);
        return 1;
      }
      const readyNodes = status.nodes.filter((n) => n.ready).length;
      console.log(`cluster "${name}": ${status.ready ? 'ready' : 'NOT ready'}`);
      console.log(`  server:     ${status.state.server}`);
      console.log(`  mode:       ${status.state.mode}`);
      console.log(`  nodes:      ${readyNodes}/${status.nodes.length} Ready`);
      console.log(`  kubeconfig: ${status.state.kubeconfigPath}`);
      console.log(`  since:      ${status.state.startedAt} (pid ${status.state.pid})`);
      return status.ready ? 0 : 1;
    }
    case 'kubeconfig': {
      const state = runningCluster(name);
      if (!state) {
        console.error(`error: cluster "${name}" is not running\nnext: ${upCommand}`);
        return 1;
      }
      console.log(flags.print ? readFileSync(state.kubeconfigPath, 'utf8').trimEnd() : state.kubeconfigPath);
      return 0;
    }
    default:
      console.error(`error: unknown command "${command}" (expected install, up, down, status or kubeconfig)`);
      return 2;
  }
}

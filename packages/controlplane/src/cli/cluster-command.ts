import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { clusterDown, clusterStatus, clusterUp, runningCluster } from '../cluster/commands.ts';
import { clusterDir } from '../cluster/state.ts';
import type { Mode } from '../controlplane.ts';
import { RECIPES } from '../images/recipes.ts';
import { install } from '../install/install.ts';
import { installHelm } from '../install/tools.ts';
import { prepareRealNodeHost } from '../node/host.ts';
import { loadImage, nodeSockets } from '../node/load-image.ts';

export interface ClusterFlags {
  name?: string;
  mode?: string;
  nodes?: string;
  'real-nodes'?: string;
  print?: boolean;
}

export interface ClusterCommandOptions {
  /** How the user runs these commands, for the hints printed: 'opkit cluster' (default) or 'opkit-controlplane'. */
  program?: string;
  /** The command's positional arguments after its name (load-image: the archive; helm: helm's arguments). */
  args?: string[];
}

/** Runs one cluster command; returns the exit code. Shared by opkit-controlplane and `opkit cluster`. */
export async function runClusterCommand(
  command: string,
  flags: ClusterFlags,
  opts: ClusterCommandOptions = {},
): Promise<number> {
  const name = flags.name ?? 'opkit';
  const args = opts.args ?? [];
  // The command that starts this cluster, with the flags that name it.
  const upCommand = `${opts.program ?? 'opkit cluster'} up${name === 'opkit' ? '' : ` --name ${name}`}`;
  switch (command) {
    case 'install': {
      const inst = await install();
      // With real nodes: kubelet, kube-proxy, CoreDNS and every opkit image, so later starts only import.
      if (Number(flags['real-nodes'] ?? 0) > 0)
        await prepareRealNodeHost((l) => console.error(l), Object.keys(RECIPES));
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
      const realNodes = Number(flags['real-nodes'] ?? 0);
      if (!Number.isInteger(realNodes) || realNodes < 0 || (realNodes > 0 && mode !== 'cluster')) {
        console.error(
          `error: --real-nodes must be a whole number (cluster mode only), not "${flags['real-nodes']}"`,
        );
        return 2;
      }
      const state = await clusterUp({ name, mode: mode as Mode, nodes, realNodes });
      console.error(`cluster "${name}" is up at ${state.server}`);
      console.error(`try: kubectl --kubeconfig ${state.kubeconfigPath} get nodes`);
      console.log(state.kubeconfigPath);
      return 0;
    }
    case 'load-image': {
      const source = args[0];
      if (!source) {
        console.error('error: load-image needs the path of an OCI archive or OCI layout directory');
        return 2;
      }
      await loadImage(nodeSockets(join(clusterDir(name), 'run')), source);
      console.error(`loaded ${source} into the real nodes of cluster "${name}"`);
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
    case 'helm': {
      // Helm against this cluster: built on first use (pinned in go/helm/go.mod), run with its kubeconfig.
      const state = runningCluster(name);
      if (!state) {
        console.error(`error: cluster "${name}" is not running\nnext: ${upCommand}`);
        return 1;
      }
      const helm = await installHelm();
      return runInherited(helm, ['--kubeconfig', state.kubeconfigPath, ...args]);
    }
    default:
      console.error(
        `error: unknown command "${command}" (expected install, up, down, status, kubeconfig, load-image or helm)`,
      );
      return 2;
  }
}

/** Runs a program with this process's stdio; resolves to its exit code (128 + signal number if killed). */
function runInherited(program: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: 'inherit' });
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve(code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : 1)),
    );
  });
}

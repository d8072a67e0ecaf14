/**
 * Which cluster a command talks to: --local (the running `opkit cluster up` cluster), --kubeconfig,
 * $KUBECONFIG, ~/.kube/config, and when none of these exist, the running local cluster.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { runningCluster } from '@opkit/controlplane';
import { ConfigError, createClient, loadConfig, type RestClient } from '@opkit/runtime';
import { CliError } from '../errors.ts';
import type { Io } from '../io.ts';

export interface GlobalFlags {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  local?: boolean;
}

export interface KubeTarget {
  /** Undefined: $KUBECONFIG (loadConfig reads it). */
  kubeconfig?: string;
  context?: string;
  /** Where the kubeconfig came from, for messages. */
  source: string;
}

export const LOCAL_CLUSTER = 'opkit';

export function resolveTarget(
  g: GlobalFlags,
  io: Io,
  env: NodeJS.ProcessEnv = process.env,
  local: () => { kubeconfigPath: string; server: string } | undefined = () => runningCluster(LOCAL_CLUSTER),
): KubeTarget {
  const context = g.context ? { context: g.context } : {};
  if (g.local) {
    const state = local();
    if (!state) {
      throw new CliError(
        `--local: the local cluster "${LOCAL_CLUSTER}" is not running`,
        'start it with: opkit cluster up',
      );
    }
    return { kubeconfig: state.kubeconfigPath, ...context, source: `the local cluster "${LOCAL_CLUSTER}"` };
  }
  if (g.kubeconfig) {
    if (!existsSync(g.kubeconfig)) {
      throw new CliError(
        `--kubeconfig ${g.kubeconfig}: no such file`,
        'pass the path of an existing kubeconfig',
      );
    }
    return { kubeconfig: g.kubeconfig, ...context, source: g.kubeconfig };
  }
  if (env.KUBECONFIG) return { ...context, source: '$KUBECONFIG' };
  const home = join(env.HOME ?? homedir(), '.kube', 'config');
  if (existsSync(home)) return { kubeconfig: home, ...context, source: home };
  const state = local();
  if (state) {
    io.err(`no kubeconfig configured: using the local cluster "${LOCAL_CLUSTER}" (${state.server})`);
    return { kubeconfig: state.kubeconfigPath, ...context, source: `the local cluster "${LOCAL_CLUSTER}"` };
  }
  throw new CliError(
    'no cluster configured: no --kubeconfig, no $KUBECONFIG, no ~/.kube/config and no local cluster running',
    'start a local cluster with: opkit cluster up (or pass --kubeconfig <path>)',
  );
}

export function connect(target: KubeTarget): RestClient {
  try {
    const config = loadConfig({
      ...(target.kubeconfig ? { kubeconfig: target.kubeconfig } : {}),
      ...(target.context ? { context: target.context } : {}),
    });
    return createClient(config, { fieldManager: 'opkit', timeoutMs: 30_000 });
  } catch (err) {
    if (err instanceof ConfigError) {
      throw new CliError(
        `cannot use the kubeconfig from ${target.source}: ${err.message}`,
        'check it with: kubectl config view (or pass --kubeconfig / --context)',
      );
    }
    throw err;
  }
}

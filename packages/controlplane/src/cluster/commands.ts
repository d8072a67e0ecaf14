/** `cluster up | down | status | kubeconfig`: a local cluster that outlives the command that started it. */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Mode } from '../controlplane.ts';
import { install } from '../install/install.ts';
import { KubeClient } from '../kube-client.ts';
import { prepareRealNodeHost } from '../node/host.ts';
import { isAlive } from '../pid.ts';
import { type ClusterState, clusterDir, readState, statePath } from './state.ts';

export class ClusterCommandError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'ClusterCommandError';
    this.hint = hint;
  }
}

export interface UpOptions {
  name?: string;
  mode?: Mode;
  nodes?: number;
  /** Real nodes (root only): built and imaged here, before the supervisor starts. */
  realNodes?: number;
  log?: (line: string) => void;
  timeoutMs?: number;
}

/** The running cluster's state, clearing a stale record left by a killed supervisor. */
export function runningCluster(name = 'opkit'): ClusterState | undefined {
  const state = readState(name);
  if (state && !isAlive(state.pid)) {
    rmSync(statePath(name), { force: true });
    return undefined;
  }
  return state;
}

export async function clusterUp(opts: UpOptions = {}): Promise<ClusterState> {
  const name = opts.name ?? 'opkit';
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const existing = runningCluster(name);
  if (existing) {
    log(`cluster "${name}" is already running at ${existing.server}`);
    return existing;
  }
  await install({ log });
  if (opts.realNodes) await prepareRealNodeHost(log);
  const dir = clusterDir(name);
  mkdirSync(dir, { recursive: true });
  const logPath = join(dir, 'supervisor.log');
  const fd = openSync(logPath, 'w');
  const supervisor = fileURLToPath(new URL('./supervisor.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    [supervisor, name, opts.mode ?? 'cluster', String(opts.nodes ?? 3), String(opts.realNodes ?? 0)],
    {
      detached: true,
      stdio: ['ignore', fd, fd],
    },
  );
  closeSync(fd);
  child.unref();
  log(`starting local cluster "${name}" (${opts.mode ?? 'cluster'} mode) ...`);
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  let exited: number | null | undefined;
  child.on('exit', (code) => {
    exited = code;
  });
  for (;;) {
    const state = readState(name);
    if (state && state.pid === child.pid) return state;
    if (exited !== undefined || Date.now() > deadline) {
      if (exited === undefined) process.kill(child.pid!, 'SIGTERM');
      const tail = existsSync(logPath)
        ? readFileSync(logPath, 'utf8').trim().split('\n').slice(-20).join('\n')
        : '';
      throw new ClusterCommandError(
        `the local cluster did not start${exited !== undefined ? ` (supervisor exited with ${exited})` : ' in time'}:\n${tail}`,
        `see ${logPath} and the component logs under ${join(dir, 'run')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Stops the cluster's supervisor and removes the cluster's directory (state, supervisor.log, component logs
 * and data). Without a running cluster it only removes what a failed `up` left; resolves whether one ran.
 */
export async function clusterDown(name = 'opkit', timeoutMs = 60_000): Promise<boolean> {
  const state = runningCluster(name);
  if (!state) {
    rmSync(clusterDir(name), { recursive: true, force: true });
    return false;
  }
  process.kill(state.pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (isAlive(state.pid)) {
    if (Date.now() > deadline) {
      process.kill(-state.pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  rmSync(clusterDir(name), { recursive: true, force: true });
  return true;
}

export interface ClusterStatus {
  state: ClusterState;
  ready: boolean;
  nodes: { name: string; ready: boolean }[];
}

export async function clusterStatus(name = 'opkit'): Promise<ClusterStatus | undefined> {
  const state = runningCluster(name);
  if (!state) return undefined;
  const kc = readFileSync(state.kubeconfigPath, 'utf8');
  const field = (key: string) =>
    Buffer.from(new RegExp(`${key}: (\\S+)`).exec(kc)?.[1] ?? '', 'base64').toString();
  const client = new KubeClient({
    server: state.server,
    ca: field('certificate-authority-data'),
    cert: field('client-certificate-data'),
    key: field('client-key-data'),
  });
  try {
    const ready = (await client.raw('GET', '/readyz', undefined, { timeoutMs: 3000 })).code === 200;
    const list = await client.json<{
      items: Array<{
        metadata: { name: string };
        status?: { conditions?: Array<{ type: string; status: string }> };
      }>;
    }>('GET', '/api/v1/nodes');
    const nodes = list.items.map((n) => ({
      name: n.metadata.name,
      ready: n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    }));
    return { state, ready, nodes };
  } catch {
    return { state, ready: false, nodes: [] };
  } finally {
    client.close();
  }
}

/**
 * The background process behind `opkit cluster up`: owns the control plane's child processes and the
 * volume provisioner, writes state.json once ready, and stops everything on SIGTERM/SIGINT.
 * Usage: node supervisor.ts <name> <mode> <nodes> [<real nodes>]
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Mode, start } from '../controlplane.ts';
import { sweepStale } from '../node/teardown.ts';
import { type ClusterState, clusterDir, statePath } from './state.ts';

const [name = 'opkit', mode = 'cluster', nodes = '3', realNodes = '0'] = process.argv.slice(2);
const dir = join(clusterDir(name), 'run');
// A crashed run's real nodes hold mounts under `dir`: take them down before removing it.
sweepStale();
rmSync(dir, { recursive: true, force: true });

const log = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);
const cp = await start({
  mode: mode as Mode,
  nodes: Number(nodes),
  realNodes: Number(realNodes),
  name,
  dir,
  log,
});

const state: ClusterState = {
  name,
  mode: cp.mode,
  pid: process.pid,
  server: cp.server,
  kubeconfigPath: cp.kubeconfigPath,
  startedAt: new Date().toISOString(),
};
writeFileSync(statePath(name), `${JSON.stringify(state, null, 2)}\n`);
log(`ready: ${cp.server}`);

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  log(`${signal}: stopping`);
  await cp.stop();
  rmSync(statePath(name), { force: true });
  rmSync(dir, { recursive: true, force: true });
  log('stopped');
  process.exit(0);
};
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
// Keep the event loop alive until a signal arrives.
setInterval(() => {}, 1 << 30);

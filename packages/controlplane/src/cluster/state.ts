/** A long-running local cluster (`opkit cluster up`) keeps its state under the cache directory. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Mode } from '../controlplane.ts';
import { cacheRoot } from '../install/paths.ts';

export interface ClusterState {
  name: string;
  mode: Mode;
  pid: number;
  server: string;
  kubeconfigPath: string;
  startedAt: string;
}

export function clusterDir(name: string): string {
  return join(cacheRoot(), 'clusters', name);
}

export function statePath(name: string): string {
  return join(clusterDir(name), 'state.json');
}

export function readState(name: string): ClusterState | undefined {
  const path = statePath(name);
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, 'utf8')) as ClusterState;
}

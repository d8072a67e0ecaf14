/**
 * Removes everything a cluster's real nodes created, synchronously (it also runs from exit hooks and
 * for a crashed run's record): processes (kubelet, kube-proxy, containerd, shims, containers), mounts,
 * loop devices of volumes, network namespaces, veths and the bridge (iptables rules live in the namespaces), cgroups,
 * the kubelet's /var/log/containers links, and the node directories.
 */
import { existsSync, readdirSync, rmdirSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive } from '../pid.ts';
import { detachLoopsUnder } from '../storage/loop-volume.ts';
import { cgroupRoot } from './configs.ts';
import { deleteNetwork, type NetworkRecord, readRecords, removeRecord } from './network.ts';
import { killMatching, safeReadlink, unmountAll } from './sys.ts';

const CGROUP_FS = '/sys/fs/cgroup';
const CONTAINER_LOG_LINKS = '/var/log/containers';

function removeCgroupTree(path: string): void {
  if (!existsSync(path)) return;
  for (const entry of readdirSync(path, { withFileTypes: true }))
    if (entry.isDirectory()) removeCgroupTree(join(path, entry.name));
  try {
    rmdirSync(path);
  } catch {
    // a process is still inside: killMatching() ran before, so this is rare; the next sweep retries
  }
}

export function teardown(record: NetworkRecord, opts: { orphans?: boolean } = {}): void {
  const { network, dirs } = record;
  // A crashed run's control plane (etcd, API server...) has no parent left to stop it.
  const orphanDir = opts.orphans && record.clusterDir ? `${record.clusterDir}/` : undefined;
  const cgroupMarks = network.nodes.map((n) => `${cgroupRoot(n.netns)}/`);
  killMatching(
    (p) =>
      dirs.some((d) => p.cmdline.includes(d)) ||
      cgroupMarks.some((m) => p.cgroup.includes(m)) ||
      (!!orphanDir && p.cmdline.includes(orphanDir)),
  );
  // Node directories first: the pods' bind mounts of a volume go before the volume itself.
  const mounted = [...dirs, ...(record.mountDirs ?? [])];
  for (const d of mounted) unmountAll(d);
  // The provisioner's volumes: their loop devices autoclear once unmounted; detach what is left.
  for (const d of mounted) detachLoopsUnder(d);
  deleteNetwork(network);
  if (existsSync(CGROUP_FS)) {
    for (const controller of readdirSync(CGROUP_FS)) {
      for (const n of network.nodes) removeCgroupTree(join(CGROUP_FS, controller, cgroupRoot(n.netns)));
      // The shared /opkit parent goes once no cluster uses it.
      try {
        rmdirSync(join(CGROUP_FS, controller, 'opkit'));
      } catch {
        // still used by another cluster, or absent
      }
    }
  }
  if (existsSync(CONTAINER_LOG_LINKS)) {
    for (const f of readdirSync(CONTAINER_LOG_LINKS)) {
      const target = safeReadlink(join(CONTAINER_LOG_LINKS, f));
      if (target && dirs.some((d) => target.startsWith(d))) unlinkSync(join(CONTAINER_LOG_LINKS, f));
    }
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  removeRecord(network.id);
}

/** Tears down what runs whose owner process is gone left behind. Returns the ids swept. */
export function sweepStale(log: (line: string) => void = () => {}): string[] {
  const swept: string[] = [];
  for (const record of readRecords()) {
    if (isAlive(record.ownerPid)) continue;
    log(`cleaning up real nodes of a crashed run (${record.network.id}, pid ${record.ownerPid})`);
    teardown(record, { orphans: true });
    swept.push(record.network.id);
  }
  return swept;
}

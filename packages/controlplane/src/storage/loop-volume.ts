/**
 * Volumes of a cluster with real nodes: a sparse file formatted XFS and loop-mounted on the host, so a pod
 * sees a filesystem of its claim's size (df), and the kubelet applies fsGroup to it (a `local` PV).
 * Growing one online: grow the file, `losetup -c` (the loop device rereads its size), `xfs_growfs`.
 * XFS because ext4's online resize needs CAP_SYS_RESOURCE, which these machines do not grant; xfs_growfs
 * does not. Every real node shares the host's mounts, so any real node can mount any volume.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { mountsUnder, run, sh, sleepSync } from '../node/sys.ts';

/** mkfs.xfs (xfsprogs >= 5.19) refuses filesystems under 300 MB: smaller claims get a 300 MiB file. */
export const XFS_MIN_BYTES = 300 * 2 ** 20;

/** Pure: the size of a volume's file for a claim of `bytes` (whole MiB, at least XFS_MIN_BYTES). */
export function imageBytes(bytes: number): number {
  return Math.max(Math.ceil(bytes / 2 ** 20) * 2 ** 20, XFS_MIN_BYTES);
}

export interface LoopVolume {
  /** The sparse file holding the filesystem. */
  image: string;
  /** Where it is mounted on the host: the PV's path. */
  mountPoint: string;
}

export const loopVolume = (root: string, name: string): LoopVolume => ({
  image: join(root, `${name}.xfs`),
  mountPoint: join(root, name),
});

const isMounted = (path: string) => mountsUnder(path).includes(path);

/** Creates, formats and mounts a volume (world-writable root, as local-path-provisioner's). Idempotent. */
export async function createLoopVolume(v: LoopVolume, bytes: number): Promise<void> {
  if (isMounted(v.mountPoint)) return;
  if (!existsSync(v.image)) {
    // Formatted under a temporary name: a file with the final name always holds a filesystem.
    const partial = `${v.image}.partial`;
    mkdirSync(dirname(v.image), { recursive: true });
    writeFileSync(partial, '');
    truncateSync(partial, imageBytes(bytes));
    await run('mkfs.xfs', ['-q', '-f', partial]);
    renameSync(partial, v.image);
  }
  mkdirSync(v.mountPoint, { recursive: true });
  // `-o loop` attaches a loop device with autoclear: it goes away with the last unmount.
  await run('mount', ['-t', 'xfs', '-o', 'loop', v.image, v.mountPoint]);
  chmodSync(v.mountPoint, 0o777);
}

/** Grows a mounted volume to hold a claim of `bytes` (never shrinks); the pod sees it at once. */
export async function growLoopVolume(v: LoopVolume, bytes: number): Promise<void> {
  const size = imageBytes(bytes);
  if (statSync(v.image).size < size) truncateSync(v.image, size);
  const device = loopDevices().find((l) => l.backingFile === v.image)?.device;
  if (!device) throw new Error(`${v.image} is not attached to a loop device: is ${v.mountPoint} mounted?`);
  await run('losetup', ['-c', device]);
  await run('xfs_growfs', ['-d', v.mountPoint]);
}

/** Unmounts a volume, detaches its loop device and deletes its file. Never deletes through a mount. */
export async function removeLoopVolume(v: LoopVolume): Promise<void> {
  if (isMounted(v.mountPoint)) {
    try {
      await run('umount', [v.mountPoint]);
    } catch {
      sh('umount', ['-l', v.mountPoint]);
    }
  }
  detachLoopsUnder(v.image);
  rmSync(v.image, { force: true });
  rmSync(`${v.image}.partial`, { force: true });
  // rmdir, not rm -r: if the unmount failed, the data stays and this throws.
  if (existsSync(v.mountPoint)) rmdirSync(v.mountPoint);
}

export interface LoopDevice {
  device: string;
  backingFile: string;
}

/** The host's attached loop devices and their backing files (from sysfs). */
export function loopDevices(): LoopDevice[] {
  const out: LoopDevice[] = [];
  for (const name of readdirSync('/sys/block')) {
    if (!name.startsWith('loop')) continue;
    try {
      const backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
      out.push({ device: `/dev/${name}`, backingFile: backing.replace(/ \(deleted\)$/, '') });
    } catch {
      // not attached
    }
  }
  return out;
}

const under = (path: string, prefix: string) =>
  path === prefix || path.startsWith(`${prefix.replace(/\/+$/, '')}/`);

/** Loop devices whose file is at or under `prefix`. */
export const loopDevicesUnder = (prefix: string) => loopDevices().filter((l) => under(l.backingFile, prefix));

/**
 * Detaches the loop devices backed by files at or under `prefix` (synchronous: teardown runs in exit hooks).
 * A device still open (a lazily unmounted filesystem being released) is marked autoclear by the kernel
 * and goes once closed: waits for that, up to ~5 s.
 */
export function detachLoopsUnder(prefix: string): void {
  for (let round = 0; round < 50; round++) {
    const mine = loopDevicesUnder(prefix);
    if (!mine.length) return;
    if (round % 10 === 0) for (const l of mine) sh('losetup', ['-d', l.device], { allowFail: true });
    sleepSync(100);
  }
}

/**
 * The real-node volumes on their own (root): a loop-mounted XFS file grows online, without
 * CAP_SYS_RESOURCE, keeps its data, and leaves no mount, loop device or file when removed.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mountsUnder, unmountAll } from '../../src/node/sys.ts';
import {
  createLoopVolume,
  detachLoopsUnder,
  growLoopVolume,
  loopDevicesUnder,
  loopVolume,
  removeLoopVolume,
} from '../../src/storage/loop-volume.ts';

const MiB = 2 ** 20;
const sizeMiB = (path: string) => {
  const s = statfsSync(path);
  return (s.blocks * s.bsize) / MiB;
};

test('a loop-mounted XFS volume: sized, grown online, data kept, nothing left after removal', {
  skip: process.getuid?.() === 0 ? false : 'loop devices and mounts need root',
}, async () => {
  const root = mkdtempSync(join(tmpdir(), 'opkit-loopvol-'));
  const v = loopVolume(root, 'pvc-test');
  try {
    await createLoopVolume(v, 400 * MiB);
    await createLoopVolume(v, 400 * MiB); // a retried provision: nothing changes
    assert.equal(mountsUnder(v.mountPoint).length, 1);
    assert.equal(loopDevicesUnder(root).length, 1);
    // XFS keeps a 64 MiB log out of the data blocks.
    const before = sizeMiB(v.mountPoint);
    assert.ok(before > 300 && before <= 400, `${before} MiB`);
    writeFileSync(join(v.mountPoint, 'kept'), 'data');

    await growLoopVolume(v, 1024 * MiB);
    const after = sizeMiB(v.mountPoint);
    assert.ok(after > 900 && after <= 1024, `${after} MiB`);
    assert.equal(readFileSync(join(v.mountPoint, 'kept'), 'utf8'), 'data');

    await removeLoopVolume(v);
    assert.deepEqual(mountsUnder(root), []);
    assert.deepEqual(loopDevicesUnder(root), []);
    assert.equal(existsSync(v.image), false);
    assert.equal(existsSync(v.mountPoint), false);
  } finally {
    unmountAll(root);
    detachLoopsUnder(root);
    rmSync(root, { recursive: true, force: true });
  }
});

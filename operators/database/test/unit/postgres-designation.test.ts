/**
 * designation.ts's shell, run by sh: which primary a pod waiting out a failover follows, from its files (the
 * operator's designation file and the kubelet's copy of the ConfigMap), as instance.sh uses them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  designationShell,
  waitDesignationShell,
} from '../../src/controllers/database/engines/postgres/designation.ts';

const root = mkdtempSync(join(tmpdir(), 'opkit-designation-'));
after(() => rmSync(root, { recursive: true, force: true }));

interface Files {
  /** The operator's designation file: `<pod> <epoch>`. */
  designation?: string;
  /** The ConfigMap's mounted copy: the primary and its epoch. */
  mount?: { primary: string; epoch: string };
}

/** wait_designation as instance.sh calls it (a fenced pod's env says `none`); its output and exit code. */
function waitFor(name: string, files: Files, fenceWaitSeconds = 2) {
  const dir = join(root, name);
  const paths = {
    DESIGNATION_FILE: join(dir, 'run', 'primary'),
    PRIMARY_FILE: join(dir, 'cluster-primary'),
    PRIMARY_EPOCH_FILE: join(dir, 'cluster-primary-epoch'),
  };
  spawnSync('mkdir', ['-p', join(dir, 'run')]);
  // Written a second ago: before the wait begins, as a kubelet's refresh just before the container started.
  const before = new Date(Date.now() - 1000);
  if (files.designation !== undefined) {
    writeFileSync(paths.DESIGNATION_FILE, `${files.designation}\n`);
    utimesSync(paths.DESIGNATION_FILE, before, before);
  }
  if (files.mount) {
    writeFileSync(paths.PRIMARY_FILE, `${files.mount.primary}\n`);
    writeFileSync(paths.PRIMARY_EPOCH_FILE, `${files.mount.epoch}\n`);
    for (const f of [paths.PRIMARY_FILE, paths.PRIMARY_EPOCH_FILE]) utimesSync(f, before, before);
  }
  const script = [
    'set -eu',
    'log() { printf \'instance: %s\\n\' "$*" >&2; }',
    'refuse() { log "$2"; echo "refused $1"; exit 1; }',
    designationShell(),
    waitDesignationShell('fenced'),
    `fence_wait_seconds=${fenceWaitSeconds}`,
    'POD_NAME=pay-0',
    'PRIMARY_HOST=none.pay-headless',
    'wait_designation "a failover is in progress (no primary is designated)"',
    'echo "follows $PRIMARY_POD at $PRIMARY_HOST"',
  ].join('\n');
  return spawnSync('sh', ['-c', script], { env: { PATH: '/usr/bin:/bin', ...paths }, encoding: 'utf8' });
}

describe('wait_designation (a fenced pod waiting for the new primary)', () => {
  test('the mount names the new primary at a higher epoch than the fence, written before the wait began: followed at once', () => {
    const r = waitFor('mount-before', { designation: 'none 3', mount: { primary: 'pay-1', epoch: '4' } });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'follows pay-1 at pay-1.pay-headless\n');
  });

  test('the mount still names the fenced primary (an epoch from before the fence): not followed; refused after the wait', () => {
    const r = waitFor('stale-mount', { designation: 'none 3', mount: { primary: 'pay-0', epoch: '2' } });
    assert.equal(r.status, 1);
    assert.equal(r.stdout, 'refused fenced\n');
    assert.match(r.stderr, /pay-0 is fenced: a failover is in progress and no primary was named within 2s/);
  });

  test('fenced through the Lease (no designation file): only a file newer than the wait counts', () => {
    const r = waitFor('no-fence-file', { mount: { primary: 'pay-1', epoch: '4' } });
    assert.equal(r.status, 1, 'the mount is older than the wait, and there is no fence epoch to compare');
    assert.equal(r.stdout, 'refused fenced\n');
  });

  test('the mount says `none` at the fence epoch: still waiting; refused after the wait', () => {
    const r = waitFor('mount-none', { designation: 'none 3', mount: { primary: 'none', epoch: '3' } });
    assert.equal(r.status, 1);
    assert.equal(r.stdout, 'refused fenced\n');
  });
});

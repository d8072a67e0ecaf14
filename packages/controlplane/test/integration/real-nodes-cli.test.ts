/**
 * `opkit-controlplane up --real-nodes 1`, `load-image`, a crashed supervisor cleaned up by the next `up`,
 * and `down` leaving nothing behind.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { clusterDir } from '../../src/cluster/state.ts';
import { writeOciArchive } from '../../src/images/oci.ts';
import { runningCluster } from '../../src/index.ts';
import { readRecords } from '../../src/node/network.ts';
import { eventually } from './helpers.ts';
import { leftovers } from './real-node-helpers.ts';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const cli = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 600_000 });

/** A user's image: a static binary printing a line, as an OCI archive written without any registry. */
async function helloImage(work: string): Promise<string> {
  const root = join(work, 'root');
  execFileSync('mkdir', ['-p', root]);
  writeFileSync(
    join(work, 'hello.c'),
    '#include <stdio.h>\nint main(void) { puts("hello from a loaded image"); return 0; }\n',
  );
  execFileSync('gcc', ['-static', '-Os', '-o', join(root, 'hello'), join(work, 'hello.c')]);
  execFileSync('tar', ['-C', root, '--numeric-owner', '-cf', join(work, 'rootfs.tar'), 'hello']);
  const out = join(work, 'hello.tar');
  await writeOciArchive(
    join(work, 'rootfs.tar'),
    'opkit.local/hello:1',
    { entrypoint: ['/hello'] },
    join(work, 'oci'),
    out,
  );
  return out;
}

test('up --real-nodes 1, load-image, a crashed supervisor swept by the next up, down leaves nothing', {
  timeout: 900_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, async () => {
  const name = `rn-cli-${process.pid}`;
  const runDir = join(clusterDir(name), 'run');
  const work = mkdtempSync(join(tmpdir(), 'opkit-hello-'));
  const networkId = () => readRecords().find((r) => r.clusterDir === runDir)?.network.id;
  try {
    const up = cli('up', '--name', name, '--nodes', '1', '--real-nodes', '1');
    assert.equal(up.status, 0, up.stderr);
    const kubeconfig = up.stdout.trim();
    const status = cli('status', '--name', name);
    assert.match(status.stdout, /nodes: +2\/2 Ready/);

    const archive = await helloImage(work);
    const load = cli('load-image', '--name', name, archive);
    assert.equal(load.status, 0, load.stderr);
    const kubectl = (...args: string[]) =>
      spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', timeout: 60_000 });
    const run = kubectl(
      'run',
      'hello',
      '--image=opkit.local/hello:1',
      '--image-pull-policy=Never',
      '--restart=Never',
    );
    assert.equal(run.status, 0, run.stderr);
    await eventually(
      'the loaded image ran',
      async () => kubectl('logs', 'hello').stdout.includes('hello from a loaded image'),
      120_000,
    );

    // The supervisor dies without cleaning up: its nodes, containers and control plane stay behind...
    const crashedId = networkId();
    assert.ok(crashedId);
    process.kill(runningCluster(name)!.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(leftovers(runDir, crashedId).length > 0);
    // ...until the next `up`, which sweeps them before starting afresh.
    const again = cli('up', '--name', name, '--nodes', '1', '--real-nodes', '1');
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(leftovers(join(runDir, 'nodes-of-crashed-run-only'), crashedId), []);
    const id = networkId();
    assert.ok(id && id !== crashedId);
    const down = cli('down', '--name', name);
    assert.equal(down.status, 0, down.stderr);
    assert.deepEqual(leftovers(runDir, id), []);
    const procs = spawnSync('pgrep', ['-f', `clusters/${name}/`], { encoding: 'utf8' }).stdout.trim();
    assert.equal(procs, '', `processes left behind: ${procs}`);
  } finally {
    cli('down', '--name', name);
    rmSync(work, { recursive: true, force: true });
  }
});

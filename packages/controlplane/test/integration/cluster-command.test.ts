import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { clusterDir } from '../../src/cluster/state.ts';

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const cli = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 120_000 });

test('cluster up -> kubectl get nodes lists Ready nodes -> down leaves nothing running and no files', () => {
  const name = `cli-test-${process.pid}`;
  const up = cli('up', '--name', name, '--nodes', '2');
  assert.equal(up.status, 0, up.stderr);
  const kubeconfig = up.stdout.trim();
  try {
    const status = cli('status', '--name', name);
    assert.equal(status.status, 0, status.stdout);
    assert.match(status.stdout, /nodes: +2\/2 Ready/);
    assert.equal(cli('kubeconfig', '--name', name).stdout.trim(), kubeconfig);
    const nodes = execFileSync('kubectl', ['--kubeconfig', kubeconfig, 'get', 'nodes', '--no-headers'], {
      encoding: 'utf8',
    });
    const lines = nodes.trim().split('\n');
    assert.equal(lines.length, 2);
    for (const line of lines) assert.match(line, /^kwok-node-\d+\s+Ready\s/);
    // A second `up` finds the running cluster instead of starting another.
    const again = cli('up', '--name', name);
    assert.equal(again.status, 0);
    assert.equal(again.stdout.trim(), kubeconfig);
  } finally {
    const down = cli('down', '--name', name);
    assert.equal(down.status, 0, down.stderr);
  }
  const after = cli('status', '--name', name);
  assert.equal(after.status, 1);
  assert.match(after.stdout, /not running/);
  // No supervisor.log, state or component logs: the cluster's whole directory is gone.
  assert.equal(existsSync(clusterDir(name)), false, `${clusterDir(name)} is left behind`);
  const leftovers = spawnSync('pgrep', ['-f', `clusters/${name}/`], { encoding: 'utf8' }).stdout.trim();
  assert.equal(leftovers, '', `processes left behind: ${leftovers}`);
});

test('unknown commands and bad flags exit non-zero with a plain message', () => {
  const bad = cli('frobnicate');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown command "frobnicate"/);
  const badMode = cli('up', '--mode', 'cloud');
  assert.equal(badMode.status, 2);
  assert.match(badMode.stderr, /--mode must be/);
});

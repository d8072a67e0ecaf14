/** opkit-controlplane without a running cluster: hints that name the cluster, and `down` cleans up leftovers. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

function withCache(
  fn: (cache: string, cli: (...args: string[]) => ReturnType<typeof spawnSync>) => void,
): void {
  const cache = mkdtempSync(join(tmpdir(), 'opkit-cache-'));
  try {
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    fn(cache, (...args) =>
      spawnSync(process.execPath, [MAIN, ...args], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...env, OPKIT_CACHE_DIR: cache },
      }),
    );
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
}

test('status and kubeconfig of a cluster that is not running say how to start that one', () => {
  withCache((_cache, cli) => {
    const status = cli('status', '--name', 'dev');
    assert.equal(status.status, 1);
    assert.match(
      String(status.stdout),
      /cluster "dev" is not running \(start it with: opkit-controlplane up --name dev\)/,
    );
    const kc = cli('kubeconfig', '--name', 'dev');
    assert.equal(kc.status, 1);
    assert.match(String(kc.stderr), /next: opkit-controlplane up --name dev$/m);
    assert.match(String(cli('status').stdout), /\(start it with: opkit-controlplane up\)/);
    // helm needs the cluster before it builds or runs anything.
    const helm = cli('helm', '--name', 'dev', '--', 'list', '-A');
    assert.equal(helm.status, 1);
    assert.match(
      String(helm.stderr),
      /cluster "dev" is not running\nnext: opkit-controlplane up --name dev$/m,
    );
  });
});

test('down without a running cluster removes what a failed up left (supervisor.log, component logs)', () => {
  withCache((cache, cli) => {
    const dir = join(cache, 'clusters', 'dev');
    mkdirSync(join(dir, 'run'), { recursive: true });
    writeFileSync(join(dir, 'supervisor.log'), 'the local cluster did not start\n');
    writeFileSync(join(dir, 'run', 'kube-apiserver.log'), '...\n');
    const down = cli('down', '--name', 'dev');
    assert.equal(down.status, 0, String(down.stderr));
    assert.match(String(down.stderr), /cluster "dev" is not running/);
    assert.equal(existsSync(dir), false, `${dir} is left behind`);
  });
});

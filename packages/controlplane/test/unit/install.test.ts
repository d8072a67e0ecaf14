import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { allModules, COMPONENTS, HELM, pinnedVersion } from '../../src/install/components.ts';
import { withLock } from '../../src/install/lock.ts';
import { binDir, buildFingerprint, cacheRoot, toolDir } from '../../src/install/paths.ts';

test('every component pins one exact upstream version in its go.mod', () => {
  const versions = Object.fromEntries(COMPONENTS.map((c) => [c.upstream, pinnedVersion(c)]));
  assert.match(versions['k8s.io/kubernetes']!, /^v1\.\d+\.\d+$/);
  assert.match(versions['go.etcd.io/etcd/server/v3']!, /^v3\.6\.\d+$/);
  assert.match(versions['sigs.k8s.io/kwok']!, /^v0\.\d+\.\d+$/);
});

test('helm is pinned in go/helm, stamped with its version, cached apart from the control plane', () => {
  assert.match(pinnedVersion(HELM), /^v4\.\d+\.\d+$/);
  assert.deepEqual(HELM.ldflags('v4.3.2'), ['-X helm.sh/helm/v4/internal/version.version=v4.3.2']);
  // Not part of the control plane's fingerprint: adding or bumping helm never rebuilds kube-apiserver & co.
  assert.ok(!allModules().includes('helm'));
  const saved = process.env.OPKIT_CACHE_DIR;
  process.env.OPKIT_CACHE_DIR = '/tmp/opkit-cache-test';
  try {
    assert.match(toolDir('helm'), /^\/tmp\/opkit-cache-test\/tools\/helm-[0-9a-f]{12}$/);
  } finally {
    if (saved === undefined) delete process.env.OPKIT_CACHE_DIR;
    else process.env.OPKIT_CACHE_DIR = saved;
  }
});

test('kubernetes binaries get version ldflags for both version packages', () => {
  const kube = COMPONENTS.find((c) => c.module === 'kubernetes')!;
  const flags = kube.ldflags('v1.34.4').join(' ');
  assert.match(flags, /k8s\.io\/component-base\/version\.gitVersion=v1\.34\.4/);
  assert.match(flags, /k8s\.io\/client-go\/pkg\/version\.gitMinor=34/);
});

test('the cache lives outside the repository, overridable, versioned by the pins', () => {
  const saved = process.env.OPKIT_CACHE_DIR;
  process.env.OPKIT_CACHE_DIR = '/tmp/opkit-cache-test';
  try {
    assert.equal(cacheRoot(), '/tmp/opkit-cache-test');
    assert.equal(binDir(), `/tmp/opkit-cache-test/controlplane/${buildFingerprint()}/bin`);
    assert.match(buildFingerprint(), /^[0-9a-f]{12}$/);
  } finally {
    if (saved === undefined) delete process.env.OPKIT_CACHE_DIR;
    else process.env.OPKIT_CACHE_DIR = saved;
  }
});

test('the install lock serialises concurrent holders and survives a dead owner', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'opkit-lock-'));
  const lock = join(dir, 'install.lock');
  try {
    const order: string[] = [];
    const hold = (id: string) =>
      withLock(
        lock,
        () => {},
        async () => {
          order.push(`${id}+`);
          await new Promise((r) => setTimeout(r, 50));
          order.push(`${id}-`);
        },
      );
    await Promise.all([hold('a'), hold('b')]);
    // Never interleaved: each holder finishes before the next starts.
    assert.ok(order.join(',') === 'a+,a-,b+,b-' || order.join(',') === 'b+,b-,a+,a-', order.join(','));

    // A lock left by a process that died is taken over instead of blocking forever.
    const dead = spawnSync('true').pid!;
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), String(dead));
    let ran = false;
    await withLock(
      lock,
      () => {},
      async () => {
        ran = true;
      },
    );
    assert.ok(ran);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

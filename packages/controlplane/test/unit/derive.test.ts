/** An image on top of another: the base's layers kept, one layer added, the configs merged. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeDerivedImage } from '../../src/images/derive.ts';
import { writeOciArchive } from '../../src/images/oci.ts';

function tarOf(dir: string, file: string, content: string, out: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, file), content);
  execFileSync('tar', ['-C', dir, '-cf', out, file]);
  return out;
}

test('writeDerivedImage: base layers + the new one, ENV merged, ENTRYPOINT without CMD drops the base CMD', async () => {
  const work = mkdtempSync(join(tmpdir(), 'opkit-derive-'));
  try {
    const base = join(work, 'base.tar');
    await writeOciArchive(
      tarOf(join(work, 'b'), 'node', 'base', join(work, 'b.tar')),
      'opkit.local/base:1',
      { env: ['PATH=/usr/bin', 'LANG=C.UTF-8'], cmd: ['node'] },
      join(work, 'oci-b'),
      base,
    );
    const out = join(work, 'app.tar');
    await writeDerivedImage(
      base,
      tarOf(join(work, 'a'), 'main.ts', 'app', join(work, 'a.tar')),
      'opkit.local/app:dev',
      {
        env: ['NODE_ENV=production'],
        entrypoint: ['node', 'main.ts'],
        user: '65532:65532',
        workingDir: '/app',
      },
      join(work, 'derive'),
      out,
    );
    const x = join(work, 'x');
    mkdirSync(x);
    execFileSync('tar', ['-C', x, '-xf', out]);
    const blob = (d: string) => join(x, 'blobs/sha256', d.slice(7));
    const index = JSON.parse(readFileSync(join(x, 'index.json'), 'utf8'));
    assert.equal(index.manifests[0].annotations['io.containerd.image.name'], 'opkit.local/app:dev');
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0].digest), 'utf8'));
    assert.equal(manifest.layers.length, 2);
    const files = manifest.layers.map((l: { digest: string }) =>
      execFileSync('tar', ['-tf', blob(l.digest)], { encoding: 'utf8' }).trim(),
    );
    assert.deepEqual(files, ['node', 'main.ts'], 'the base layer first, then the new one');
    const config = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8'));
    assert.deepEqual(
      config.rootfs.diff_ids,
      manifest.layers.map((l: { digest: string }) => l.digest),
    );
    assert.deepEqual(config.config.Env, ['PATH=/usr/bin', 'LANG=C.UTF-8', 'NODE_ENV=production']);
    assert.deepEqual(config.config.Entrypoint, ['node', 'main.ts']);
    assert.equal(config.config.Cmd, undefined);
    assert.equal(config.config.User, '65532:65532');
    assert.equal(config.config.WorkingDir, '/app');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

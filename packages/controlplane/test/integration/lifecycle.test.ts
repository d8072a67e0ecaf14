import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { start } from '../../src/index.ts';
import { adminClient } from './helpers.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('two control planes run side by side, and stop() leaves no process and no directory behind', async () => {
  const [a, b] = await Promise.all([start({ mode: 'apiserver' }), start({ mode: 'cluster', nodes: 1 })]);
  const pids = [...a.pids(), ...b.pids()];
  assert.equal(pids.length, 2 + 5);
  assert.notEqual(a.server, b.server);
  for (const cp of [a, b]) {
    const client = adminClient(cp);
    const ns = await client.json<{ items: unknown[] }>('GET', '/api/v1/namespaces');
    assert.ok(ns.items.length >= 4);
    client.close();
  }
  for (const pid of pids) assert.ok(alive(pid));
  await Promise.all([a.stop(), b.stop()]);
  for (const pid of pids) assert.equal(alive(pid), false, `process ${pid} still running`);
  assert.equal(existsSync(a.dir), false);
  assert.equal(existsSync(b.dir), false);
});

const childPids = () =>
  spawnSync('pgrep', ['-P', String(process.pid)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);

test('a failed start stops what it started and removes its directory', async () => {
  // A private TMPDIR: other processes on the machine may be starting control planes too.
  const privateTmp = mkdtempSync(join(tmpdir(), 'opkit-lifecycle-'));
  const savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = privateTmp;
  const pidsBefore = new Set(childPids());
  try {
    await assert.rejects(
      start({ mode: 'apiserver', apiServerArgs: ['--no-such-flag'] }),
      /kube-apiserver exited unexpectedly/,
    );
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
  }
  assert.deepEqual(readdirSync(privateTmp), [], 'the failed start left its directory behind');
  rmSync(privateTmp, { recursive: true });
  const leftPids = childPids().filter((p) => !pidsBefore.has(p) && alive(p));
  assert.deepEqual(leftPids, [], 'etcd or another component outlived the failed start');
});

test('SIGTERM to the process that started a control plane stops its components and removes its directory', async () => {
  const script = `
    import { start } from ${JSON.stringify(new URL('../../src/index.ts', import.meta.url).href)};
    const cp = await start({ mode: 'apiserver' });
    console.log(JSON.stringify({ pids: cp.pids(), dir: cp.dir }));
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const { pids, dir } = JSON.parse(line.toString()) as { pids: number[]; dir: string };
  assert.equal(pids.length, 2);
  assert.ok(existsSync(dir));
  child.kill('SIGTERM');
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  assert.ok(code === 143 || signal === 'SIGTERM', `exit ${code} ${signal}`);
  // SIGKILLed components are reaped by init shortly after their parent exits.
  const deadline = Date.now() + 5000;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const pid of pids) assert.equal(alive(pid), false, `component ${pid} survived SIGTERM`);
  assert.equal(existsSync(dir), false);
});

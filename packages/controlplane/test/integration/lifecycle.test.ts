import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
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

test('a failed start cleans up after itself', async () => {
  await assert.rejects(
    start({ mode: 'apiserver', apiServerArgs: ['--no-such-flag'] }),
    /kube-apiserver exited unexpectedly/,
  );
});

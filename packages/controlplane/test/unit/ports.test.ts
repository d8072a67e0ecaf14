/** Ports for local components: outside the ephemeral range, reserved across processes, checked free. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ephemeralPortRange, freePort, PortAllocator } from '../../src/ports.ts';

const work = mkdtempSync(join(tmpdir(), 'opkit-ports-test-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A port range nothing else on the machine uses: a few ports inside the default one, unique per run. */
function smallRange(size: number): { min: number; max: number } {
  const min = 24000 + Math.floor(Math.random() * 4000);
  return { min, max: min + size - 1 };
}

test('freePort: never in the kernel ephemeral range (where outgoing connections take source ports), nor NodePorts', async () => {
  const ephemeral = ephemeralPortRange();
  assert.ok(ephemeral, 'this test runs on Linux');
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  for (const port of ports) {
    assert.ok(
      port < ephemeral.min || port > ephemeral.max,
      `${port} is in ${ephemeral.min}-${ephemeral.max}`,
    );
    assert.ok(port < 30000 || port > 32767, `${port} is a NodePort`);
  }
  assert.equal(new Set(ports).size, ports.length, 'each call hands out another port');
});

test('a reservation held by a live process is skipped; a dead owner’s is reclaimed; a bound port is skipped', async () => {
  const dir = join(work, 'reclaim');
  const range = smallRange(3);
  const [live, dead, bound] = [range.min, range.min + 1, range.min + 2];
  const ports = new PortAllocator({ dir, range, attempts: 100 });
  await ports.take().then((p) => ports.release(p)); // creates the directory
  writeFileSync(join(dir, String(live)), String(process.ppid));
  // A pid above the kernel's pid_max: no process has it.
  writeFileSync(join(dir, String(dead)), '99999999');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(bound, '127.0.0.1', resolve));
  try {
    assert.equal(await ports.take(), dead);
    assert.equal(readFileSync(join(dir, String(dead)), 'utf8'), String(process.pid));
    assert.equal(readFileSync(join(dir, String(live)), 'utf8'), String(process.ppid), 'left alone');
    assert.ok(!existsSync(join(dir, String(bound))), 'a port that failed the bind is not kept reserved');
    await assert.rejects(
      ports.take(),
      /no free port in \d+-\d+ after 100 tries: remove stale reservations in/,
    );
    ports.release(dead);
    assert.ok(!existsSync(join(dir, String(dead))), 'released');
  } finally {
    server.close();
  }
});

test('a reservation without a pid yet is left alone, unless it is older than 10 s', async () => {
  const dir = join(work, 'no-pid');
  const range = smallRange(2);
  const [fresh, old] = [range.min, range.min + 1];
  const ports = new PortAllocator({ dir, range, attempts: 50 });
  await ports.take().then((p) => ports.release(p)); // creates the directory
  // Created, its pid not written yet: another process is reserving it right now.
  writeFileSync(join(dir, String(fresh)), '');
  // Left empty by a process killed between creating and writing it.
  writeFileSync(join(dir, String(old)), '');
  const longAgo = new Date(Date.now() - 60_000);
  utimesSync(join(dir, String(old)), longAgo, longAgo);
  assert.equal(await ports.take(), old);
  await assert.rejects(ports.take(), /no free port/);
  assert.equal(readFileSync(join(dir, String(fresh)), 'utf8'), '', 'left alone');
});

test('two processes taking ports at once never share one; their reservations go when they exit', async () => {
  const dir = join(work, 'shared');
  const range = smallRange(60);
  // Each child takes 25 ports, prints them, and holds them until its stdin closes.
  const script = `
    import { PortAllocator } from ${JSON.stringify(new URL('../../src/ports.ts', import.meta.url).href)};
    const ports = new PortAllocator({ dir: ${JSON.stringify(dir)}, range: ${JSON.stringify(range)}, attempts: 2000 });
    const taken = [];
    for (let i = 0; i < 25; i++) taken.push(await ports.take());
    console.log(JSON.stringify(taken));
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
  `;
  const children = [0, 1].map(() => spawn(process.execPath, ['--input-type=module', '-e', script]));
  const exited = children.map((c) => once(c, 'exit'));
  try {
    const [a, b] = (await Promise.all(
      children.map(async (c) => {
        const [line] = (await once(c.stdout, 'data')) as [Buffer];
        return JSON.parse(line.toString()) as number[];
      }),
    )) as [number[], number[]];
    assert.equal(a.length + b.length, 50);
    assert.equal(new Set([...a, ...b]).size, 50, `shared: ${a.filter((p) => b.includes(p)).join(', ')}`);
    for (const port of [...a, ...b]) assert.ok(existsSync(join(dir, String(port))), `${port} reserved`);
    for (const c of children) c.stdin.end();
    assert.deepEqual(await Promise.all(exited), [
      [0, null],
      [0, null],
    ]);
    for (const port of [...a, ...b])
      assert.ok(!existsSync(join(dir, String(port))), `${port} still reserved`);
  } finally {
    for (const c of children) c.kill();
  }
});

/**
 * bin/launch.cjs: the bins start from an old Node (the machine's /usr/bin/node is often 20) by finding a Node
 * >= 24, or say exactly what to do. Each case runs a real old Node on a copy of the launcher.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const LAUNCHER = fileURLToPath(new URL('../../bin/launch.cjs', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/opkit-controlplane.cjs', import.meta.url));
const major = (v: string) => Number(/^v?(\d+)/.exec(v.trim())?.[1] ?? 0);

/** The first `node` on PATH older than 24 (what `which -a node` shows first), if the machine has one. */
function oldNode(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const r = spawnSync(join(dir, 'node'), ['--version'], { encoding: 'utf8' });
    if (r.status === 0 && major(r.stdout) < 24) return join(dir, 'node');
  }
  return undefined;
}
const OLD = oldNode();
const skip = OLD ? false : 'no Node older than 24 on PATH';

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function run(
  node: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; onSpawn?: (pid: number) => void },
): Promise<Run> {
  const { NODE_TEST_CONTEXT: _, ...env } = opts.env;
  return new Promise((resolve, reject) => {
    const child = spawn(node, args, { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.includes('ready') && child.pid) opts.onSpawn?.(child.pid);
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** A folder outside the repository with a copy of the launcher, a bin using it and a .ts entry. */
function sandbox(entry: string): { dir: string; bin: string; [Symbol.dispose](): void } {
  const dir = mkdtempSync(join(tmpdir(), 'opkit-launcher-'));
  mkdirSync(join(dir, 'pkg', 'bin'), { recursive: true });
  copyFileSync(LAUNCHER, join(dir, 'pkg', 'bin', 'launch.cjs'));
  writeFileSync(join(dir, 'pkg', 'entry.ts'), entry);
  const bin = join(dir, 'pkg', 'bin', 'tool.cjs');
  writeFileSync(
    bin,
    "require('./launch.cjs').launch('tool', require('node:path').join(__dirname, '../entry.ts'));\n",
  );
  return { dir, bin, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

const ECHO = `const n: number = 3;
process.stdout.write(JSON.stringify({ version: process.version, args: process.argv.slice(2) }));
process.exitCode = n;
`;

describe('the bin launcher', { skip }, () => {
  test('the real opkit-controlplane bin runs from an old Node', { timeout: 60_000 }, async () => {
    const r = await run(OLD!, [BIN, '--help'], { cwd: tmpdir(), env: process.env });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Usage: opkit-controlplane <command>/);
  });

  test('from an old Node it re-runs the entry with a Node >= 24 on PATH: arguments and exit code pass through', {
    timeout: 60_000,
  }, async () => {
    using box = sandbox(ECHO);
    mkdirSync(join(box.dir, 'path'));
    symlinkSync(process.execPath, join(box.dir, 'path', 'node'));
    const env = {
      ...process.env,
      PATH: [OLD!.replace(/\/node$/, ''), join(box.dir, 'path')].join(delimiter),
    };
    const r = await run(OLD!, [box.bin, 'a b', '--flag'], { cwd: box.dir, env });
    assert.equal(r.code, 3, r.stderr);
    const out = JSON.parse(r.stdout) as { version: string; args: string[] };
    assert.ok(major(out.version) >= 24, out.version);
    assert.deepEqual(out.args, ['a b', '--flag']);
  });

  test("a project's node_modules/.bin/node (the node npm package) is found from the current folder", {
    timeout: 60_000,
  }, async () => {
    using box = sandbox(ECHO);
    mkdirSync(join(box.dir, 'project', 'node_modules', '.bin'), { recursive: true });
    symlinkSync(process.execPath, join(box.dir, 'project', 'node_modules', '.bin', 'node'));
    const env = { ...process.env, PATH: OLD!.replace(/\/node$/, '') };
    const r = await run(OLD!, [box.bin], { cwd: join(box.dir, 'project'), env });
    assert.equal(r.code, 3, r.stderr);
    assert.ok(major((JSON.parse(r.stdout) as { version: string }).version) >= 24);
  });

  test('SIGTERM to the launcher reaches the program, and its exit code comes back', {
    timeout: 60_000,
  }, async () => {
    using box =
      sandbox(`process.on('SIGTERM', () => { process.stdout.write(' got SIGTERM'); process.exit(7); });
setInterval(() => {}, 1000);
process.stdout.write('ready');
`);
    mkdirSync(join(box.dir, 'path'));
    symlinkSync(process.execPath, join(box.dir, 'path', 'node'));
    const env = {
      ...process.env,
      PATH: [OLD!.replace(/\/node$/, ''), join(box.dir, 'path')].join(delimiter),
    };
    const r = await run(OLD!, [box.bin], {
      cwd: box.dir,
      env,
      onSpawn: (pid) => process.kill(pid, 'SIGTERM'),
    });
    assert.equal(r.stdout, 'ready got SIGTERM');
    assert.equal(r.code, 7, r.stderr);
  });

  test('with no Node >= 24 anywhere it says what to install, and exits 1', { timeout: 60_000 }, async () => {
    using box = sandbox(ECHO);
    const env = { ...process.env, PATH: OLD!.replace(/\/node$/, '') };
    const r = await run(OLD!, [box.bin, 'status'], { cwd: box.dir, env });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /tool needs Node\.js >= 24/);
    assert.match(r.stderr, /npm install/);
    assert.match(r.stderr, /npx -p node@24 tool/);
  });
});

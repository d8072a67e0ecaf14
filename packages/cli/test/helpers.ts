/** Shared by the CLI's tests: temporary folders and running `opkit` in-process or as a process. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { runCli } from '../src/cli.ts';
import { memoryIo } from '../src/io.ts';

export const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs opkit in this process (fast; generate imports the project's modules here). */
export async function opkit(
  cwd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<CliResult> {
  const io = memoryIo();
  const code = await runCli(args, { cwd, io, env });
  return { code, stdout: io.stdout.join('\n'), stderr: io.stderr.join('\n') };
}

/** Asserts that a step exited 0, showing its output otherwise. */
export function expectOk(step: string, r: CliResult): void {
  assert.equal(r.code, 0, `${step} failed (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
}

/**
 * `opkit cluster up --name <name> --nodes 1 --real-nodes 1` run from `cwd` (1 kwok node, 1 real node; root only):
 * its kubeconfig path, and `down()` to stop it.
 */
export async function upRealCluster(
  cwd: string,
  name: string,
): Promise<{ kubeconfig: string; down(): Promise<void> }> {
  const up = await opkitProcess(cwd, ['cluster', 'up', '--name', name, '--nodes', '1', '--real-nodes', '1']);
  expectOk('cluster up', up);
  return {
    kubeconfig: up.stdout.trim().split('\n').at(-1)!,
    async down() {
      await opkitProcess(cwd, ['cluster', 'down', '--name', name]);
    },
  };
}

/** Runs opkit as a child process, as a user's shell would. */
export function opkitProcess(
  cwd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<CliResult> {
  return run(process.execPath, [MAIN, ...args], cwd, env);
}

/**
 * Runs a command. NODE_TEST_CONTEXT is removed from its environment: a `node --test` started from a test
 * would otherwise report to this test runner instead of printing its results.
 */
export function run(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CliResult> {
  const { NODE_TEST_CONTEXT: _, ...clean } = env;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: clean, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

export function tempDir(prefix: string): { dir: string; [Symbol.dispose](): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

export function read(dir: string, path: string): string {
  return readFileSync(join(dir, path), 'utf8');
}

export function readYaml<T = Record<string, unknown>>(dir: string, path: string): T {
  return parse(read(dir, path)) as T;
}

/** opkit init + create api (Database, group myapp), in-process; throws when one fails. */
export async function scaffold(
  dir: string,
  opts: { domain?: string; name?: string; api?: string[]; generate?: boolean } = {},
): Promise<void> {
  const init = await opkit(dir, [
    'init',
    '--domain',
    opts.domain ?? 'example.com',
    '--name',
    opts.name ?? 'db-op',
    '--repo',
    'github.com/me/db-op',
  ]);
  if (init.code !== 0) throw new Error(`init failed: ${init.stderr}`);
  const api = await opkit(dir, [
    'create',
    'api',
    ...(opts.api ?? [
      '--group',
      'myapp',
      '--version',
      'v1',
      '--kind',
      'Database',
      '--resource',
      '--controller',
    ]),
    ...(opts.generate === false ? ['--generate=false'] : []),
  ]);
  if (api.code !== 0) throw new Error(`create api failed: ${api.stderr}`);
}

/**
 * Asserts that importing `entry` in a pod's container (its user, environment and Node, with `nodeFlags`:
 * its ENTRYPOINT's) reads the compile cache the image was built with: Node's NODE_DEBUG_NATIVE log says
 * the code cache of each of `modules` (file URLs) was accepted.
 */
export function assertPodReadsCompileCache(
  kubeconfig: string,
  pod: { namespace: string; target: string; container: string },
  nodeFlags: string[],
  entry: string,
  modules: string[],
): void {
  const r = spawnSync(
    'kubectl',
    [
      ...['--kubeconfig', kubeconfig, '-n', pod.namespace, 'exec', pod.target, '-c', pod.container, '--'],
      ...['env', 'NODE_DEBUG_NATIVE=COMPILE_CACHE', 'node', ...nodeFlags, '--input-type=module'],
      ...['-e', `await import(${JSON.stringify(entry)})`],
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  for (const m of modules)
    assert.ok(r.stderr.includes(`V8 code cache for ESM ${m} was accepted`), `${m}:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /was rejected/);
}

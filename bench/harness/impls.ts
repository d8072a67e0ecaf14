/**
 * The implementations under test and how to start them: each is a child process given a kubeconfig,
 * a metrics port and a health-probe port; it is ready when GET /readyz on the probe port returns 200
 * (after its caches synced).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '@opkit/controlplane';
import { warmCompileCache as warmNodeCompileCache } from '@opkit/runtime/image';
import { MeasuredProcess } from './proc.ts';

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');
export const GO_PEER_DIR = join(REPO_ROOT, 'bench', 'operators', 'controller-runtime');
export const CLIENT_NODE_PEER = join(REPO_ROOT, 'bench', 'operators', 'client-node', 'main.ts');
const OPKIT_DIR = join(REPO_ROOT, 'operators', 'database');

export type OperatorImpl = 'opkit' | 'controller-runtime' | 'client-node';

export interface StartOptions {
  kubeconfigPath: string;
  logFile: string;
  /** node --cpu-prof into this directory (TypeScript implementations only) */
  cpuProfDir?: string;
  /** --max-concurrent-reconciles, when not the implementation's default */
  workers?: number;
  /** Node flags for opkit instead of those of its image's ENTRYPOINT (experiments). */
  opkitNodeFlags?: string[];
  /** --sync-period for the implementations that resync (opkit, controller-runtime), e.g. '60s'. */
  syncPeriod?: string;
  /** More flags, e.g. ['--leader-elect'] (the fault runs). */
  extraArgs?: string[];
  /** opkit's environment (its image's NODE_COMPILE_CACHE, warmed: warmCompileCache). */
  opkitEnv?: NodeJS.ProcessEnv;
  /** The controller-runtime peer talks JSON for built-in kinds too (its default: protobuf for them). */
  peerJson?: boolean;
  /** More flags for the controller-runtime peer only, e.g. ['--zap-log-level=5'] (diagnostics). */
  peerArgs?: string[];
  /** opkit's script instead of the one its image runs (A/B runs of two builds: startup-loop.ts). */
  opkitScript?: string;
}

export const OPKIT_DOCKERFILE = join(REPO_ROOT, 'operators', 'database', 'Dockerfile');

/** Space-separated command-line flags ("--a --b=c") as a list, empty parts dropped. */
export function flagList(text: string): string[] {
  return text.split(' ').filter((f) => f.length > 0);
}

/**
 * The Node flags the operator's image runs it with (between "node" and the script in the Dockerfile's
 * ENTRYPOINT), so that the benchmark runs opkit as it is deployed.
 */
export function deployedNodeFlags(dockerfile = OPKIT_DOCKERFILE): string[] {
  const { argv, script } = deployedEntrypoint(dockerfile);
  return argv.slice(1, script);
}

/** The script the image runs (the ENTRYPOINT's, relative to operators/database): src/main.ts or dist/main.js. */
export function deployedScript(dockerfile = OPKIT_DOCKERFILE): string {
  const { argv, script } = deployedEntrypoint(dockerfile);
  return argv[script] as string;
}

function deployedEntrypoint(dockerfile: string): { argv: string[]; script: number } {
  const line = readFileSync(dockerfile, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('ENTRYPOINT '));
  if (!line) throw new Error(`${dockerfile} has no ENTRYPOINT`);
  const argv = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  const script = argv.findIndex((a) => a.endsWith('.ts') || a.endsWith('.js'));
  if (argv[0] !== 'node' || script < 1) throw new Error(`unexpected ENTRYPOINT in ${dockerfile}: ${line}`);
  return { argv, script };
}

/**
 * The file the benchmark runs opkit from: what the image runs. A bundle (dist/, not in git) is built
 * first with the image's own step (`npm run bundle -w operators/database`), once per process.
 */
let opkitMainPath: string | undefined;
export function opkitMain(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  if (opkitMainPath) return opkitMainPath;
  const script = deployedScript();
  const path = join(OPKIT_DIR, script);
  if (script.startsWith('dist/')) {
    log(`opkit: npm run bundle -w operators/database (the image runs ${script})`);
    execFileSync('npm', ['run', '-s', 'bundle', '-w', 'operators/database'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  opkitMainPath = path;
  return path;
}

/** The `ENV NAME=value` settings of the operator's image (one per line, as its Dockerfile writes them). */
export function deployedEnv(dockerfile = OPKIT_DOCKERFILE): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(dockerfile, 'utf8').split('\n')) {
    const m = /^ENV ([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

/** The image's compile cache settings: the benchmark warms its own cache (warmCompileCache) instead. */
const COMPILE_CACHE_ENV = ['NODE_COMPILE_CACHE', 'NODE_COMPILE_CACHE_PORTABLE'];

/**
 * The environment the image runs opkit with (its `ENV` settings, such as MALLOC_ARENA_MAX) but for the
 * compile cache's, which point into the image; the benchmark runs opkit with these too. A setting in the
 * environment opkit is started with (--opkit-env, or the harness's own) wins over the image's.
 */
export function deployedRunEnv(dockerfile = OPKIT_DOCKERFILE): Record<string, string> {
  const env = deployedEnv(dockerfile);
  for (const key of COMPILE_CACHE_ENV) delete env[key];
  return env;
}

/** opkit's environment: the image's settings (deployedRunEnv) under `given` (default: this process's). */
export function opkitRunEnv(
  given: NodeJS.ProcessEnv = process.env,
  dockerfile = OPKIT_DOCKERFILE,
): NodeJS.ProcessEnv {
  return { ...deployedRunEnv(dockerfile), ...given };
}

/**
 * When the image warms Node's compile cache at build time (ENV NODE_COMPILE_CACHE), the benchmark does the
 * same into its own directory, before any timing, with the image's warm-up (@opkit/runtime/image), for
 * this process's uid: the environment opkit then runs with.
 */
export function warmCompileCache(
  dir: string,
  nodeFlags: string[],
  dockerfile = OPKIT_DOCKERFILE,
  entry: string = opkitMain(),
  baseEnv: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv | undefined {
  const image = deployedEnv(dockerfile);
  if (image.NODE_COMPILE_CACHE === undefined) return undefined;
  const portable = image.NODE_COMPILE_CACHE_PORTABLE;
  // With the flags opkit will run with: code-affecting V8 flags are part of the cache's key.
  warmNodeCompileCache({ entry, cacheDir: dir, nodeFlags });
  return {
    ...baseEnv,
    NODE_COMPILE_CACHE: dir,
    ...(portable === undefined ? {} : { NODE_COMPILE_CACHE_PORTABLE: portable }),
  };
}

export function benchCacheDir(): string {
  const dir = join(process.env.OPKIT_CACHE_DIR ?? join(homedir(), '.cache', 'opkit'), 'bench');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Builds the controller-runtime peer through the Go module proxy into the cache (keyed by its sources). */
export function buildGoPeer(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  const files = readdirSync(GO_PEER_DIR)
    .filter((f) => f.endsWith('.go') || ['go.mod', 'go.sum', 'templates.json'].includes(f))
    .sort();
  const hash = createHash('sha256');
  for (const f of files) hash.update(f).update(readFileSync(join(GO_PEER_DIR, f)));
  const out = join(benchCacheDir(), `database-operator-go-${hash.digest('hex').slice(0, 12)}`);
  if (existsSync(out)) return out;
  log(
    `building the controller-runtime peer (go build through the module proxy; minutes the first time) -> ${out}`,
  );
  const t = performance.now();
  const res = spawnSync('go', ['build', '-trimpath', '-o', out, '.'], {
    cwd: GO_PEER_DIR,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, CGO_ENABLED: '0' },
  });
  if (res.status !== 0)
    throw new Error(`go build of the controller-runtime peer failed (exit ${res.status})`);
  log(`built the controller-runtime peer in ${((performance.now() - t) / 1000).toFixed(0)} s`);
  return out;
}

export function goVersionOf(binary: string): string {
  try {
    return execFileSync('go', ['version', binary], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

export interface RunningOperator {
  impl: OperatorImpl;
  proc: MeasuredProcess;
  healthPort: number;
  metricsPort: number;
  startedAt: number;
}

export async function startOperator(impl: OperatorImpl, opts: StartOptions): Promise<RunningOperator> {
  const metricsPort = await freePort();
  const healthPort = await freePort();
  const common = [
    '--kubeconfig',
    opts.kubeconfigPath,
    '--metrics-bind-address',
    `127.0.0.1:${metricsPort}`,
    '--health-probe-bind-address',
    `127.0.0.1:${healthPort}`,
    ...(opts.workers ? ['--max-concurrent-reconciles', String(opts.workers)] : []),
    ...(opts.extraArgs ?? []),
  ];
  const resync = opts.syncPeriod ? ['--sync-period', opts.syncPeriod] : [];
  const nodeFlags = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [];
  let command: string;
  let args: string[];
  switch (impl) {
    case 'opkit':
      command = process.execPath;
      args = [
        ...(opts.opkitNodeFlags ?? deployedNodeFlags()),
        ...nodeFlags,
        opts.opkitScript ?? opkitMain(),
        ...common,
        ...resync,
      ];
      break;
    case 'client-node':
      command = process.execPath;
      args = [...nodeFlags, CLIENT_NODE_PEER, ...common];
      break;
    case 'controller-runtime':
      command = buildGoPeer();
      args = [
        ...common,
        ...resync,
        ...(opts.peerJson ? ['--content-type=application/json'] : []),
        ...(opts.peerArgs ?? []),
      ];
      break;
  }
  const startedAt = performance.now();
  const proc = new MeasuredProcess(
    impl,
    command,
    args,
    opts.logFile,
    impl === 'opkit' ? opkitRunEnv(opts.opkitEnv) : undefined,
  );
  return { impl, proc, healthPort, metricsPort, startedAt };
}

/**
 * GET http://127.0.0.1:<port><path>: the status code and body, or code 0 when the operator does not
 * answer (not listening yet, or gone).
 */
export function localGet(
  port: number,
  path: string,
  timeoutMs = 5000,
): Promise<{ code: number; text: string }> {
  return new Promise((resolveGet) => {
    const req = request({ host: '127.0.0.1', port, path, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolveGet({ code: res.statusCode ?? 0, text }));
    });
    req.on('error', () => resolveGet({ code: 0, text: '' }));
    req.on('timeout', () => {
      req.destroy();
      resolveGet({ code: 0, text: '' });
    });
    req.end();
  });
}

/** Polls /readyz every 20 ms; returns the time it first answered 200. */
export async function waitReady(op: RunningOperator, timeoutMs = 120_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (!op.proc.running) {
      throw new Error(`${op.impl} exited before it was ready:\n${op.proc.logTail()}`);
    }
    if ((await localGet(op.healthPort, '/readyz', 2000)).code === 200) return performance.now();
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${op.impl} was not ready within ${timeoutMs / 1000} s:\n${op.proc.logTail()}`);
}
